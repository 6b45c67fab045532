//! Bit-unshuffle of one bitshuffle block. The block holds `n` elements (a multiple of 8) of
//! `elem` bytes stored as `8·elem` bit planes, plane `p = 8·byte + bit`, each `n/8` bytes,
//! element `k` at bit `k % 8` (LSB first) of byte `k / 8` of its plane.

/// Transpose an 8×8 bit matrix packed in a u64 (row `i` = byte `i`), Hacker's Delight 7-3.
#[inline]
fn transpose8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x ^= t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x ^= t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^= t ^ (t << 28);
    x
}

#[inline]
fn load8(s: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&s[i..i + 8]);
    u64::from_le_bytes(b)
}

/// Transpose an 8×8 byte matrix held as 8 little-endian rows, in place.
#[inline]
fn transpose_bytes(r: &mut [u64; 8]) {
    for i in 0..4 {
        let (a, b) = (r[i], r[i + 4]);
        r[i] = (a & 0xFFFF_FFFF) | (b << 32);
        r[i + 4] = (a >> 32) | (b & 0xFFFF_FFFF_0000_0000);
    }
    for i in [0, 1, 4, 5] {
        let (a, b) = (r[i], r[i + 2]);
        r[i] = (a & 0x0000_FFFF_0000_FFFF) | ((b & 0x0000_FFFF_0000_FFFF) << 16);
        r[i + 2] = ((a >> 16) & 0x0000_FFFF_0000_FFFF) | (b & 0xFFFF_0000_FFFF_0000);
    }
    for i in [0, 2, 4, 6] {
        let (a, b) = (r[i], r[i + 1]);
        r[i] = (a & 0x00FF_00FF_00FF_00FF) | ((b & 0x00FF_00FF_00FF_00FF) << 8);
        r[i + 1] = ((a >> 8) & 0x00FF_00FF_00FF_00FF) | (b & 0xFF00_FF00_FF00_FF00);
    }
}

/// Write the 8 bytes of `t` (byte `byte` of 8 consecutive elements from `first`) into `dst`.
#[inline]
fn scatter(dst: &mut [u8], first: usize, elem: usize, byte: usize, t: u64) {
    let t = t.to_le_bytes();
    if elem == 1 {
        dst[first..first + 8].copy_from_slice(&t);
    } else {
        let base = first * elem + byte;
        for (k, v) in t.iter().enumerate() {
            dst[base + k * elem] = *v;
        }
    }
}

/// Spread the 4 bytes of `x` to the even bytes of a u64 (byte i → byte 2i).
#[inline(always)]
fn spread_bytes(x: u64) -> u64 {
    let x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    (x | (x << 8)) & 0x00FF_00FF_00FF_00FF
}

/// 16-bit samples, both byte planes at once: 64 elements per step, written as 128
/// contiguous bytes. Plain array code so the compiler can vectorise it.
#[inline(always)]
fn unshuffle_u16_body(src: &[u8], dst: &mut [u8]) -> usize {
    let row = dst.len() / 16;
    let wide = row - row % 8;
    let (lo_planes, hi_planes) = src.split_at(8 * row);
    for m in (0..wide).step_by(8) {
        let mut lo = [0u64; 8];
        let mut hi = [0u64; 8];
        for b in 0..8 {
            lo[b] = load8(lo_planes, b * row + m);
            hi[b] = load8(hi_planes, b * row + m);
        }
        transpose_bytes(&mut lo);
        transpose_bytes(&mut hi);
        for g in 0..8 {
            lo[g] = transpose8(lo[g]);
            hi[g] = transpose8(hi[g]);
        }
        let out = &mut dst[16 * m..16 * m + 128];
        for g in 0..8 {
            let a = spread_bytes(lo[g] & 0xFFFF_FFFF) | spread_bytes(hi[g] & 0xFFFF_FFFF) << 8;
            let b = spread_bytes(lo[g] >> 32) | spread_bytes(hi[g] >> 32) << 8;
            out[16 * g..16 * g + 8].copy_from_slice(&a.to_le_bytes());
            out[16 * g + 8..16 * g + 16].copy_from_slice(&b.to_le_bytes());
        }
    }
    wide
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn unshuffle_u16_avx2(src: &[u8], dst: &mut [u8]) -> usize {
    unshuffle_u16_body(src, dst)
}

/// The 16-bit fast path: the widest vector unit the CPU has (checked at run time).
fn unshuffle_u16(src: &[u8], dst: &mut [u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { unshuffle_u16_avx2(src, dst) };
        }
    }
    unshuffle_u16_body(src, dst)
}

/// `src` and `dst` are both `n·elem` bytes; `n % 8 == 0`. Eight plane bytes (64 elements)
/// are loaded as words and byte-transposed at once, then bit-transposed 8×8 at a time.
pub fn unshuffle_block(src: &[u8], dst: &mut [u8], elem: usize) {
    if elem == 2 {
        let done = unshuffle_u16(src, dst);
        let row = dst.len() / 16;
        // The columns past the last whole 64-element step.
        for byte in 0..2 {
            let planes = &src[byte * 8 * row..(byte + 1) * 8 * row];
            for m in done..row {
                let mut x = 0u64;
                for b in 0..8 {
                    x |= (planes[b * row + m] as u64) << (8 * b);
                }
                scatter(dst, 8 * m, 2, byte, transpose8(x));
            }
        }
        return;
    }
    let n = dst.len() / elem;
    debug_assert_eq!(n % 8, 0);
    debug_assert_eq!(src.len(), dst.len());
    let row = n / 8;
    let wide = row - row % 8;
    for byte in 0..elem {
        let planes = &src[byte * 8 * row..(byte + 1) * 8 * row];
        for m in (0..wide).step_by(8) {
            let mut r = [0u64; 8];
            for (b, w) in r.iter_mut().enumerate() {
                *w = load8(planes, b * row + m);
            }
            // Now word g gathers bit b of elements 8(m+g)..8(m+g)+8 in its byte b.
            transpose_bytes(&mut r);
            for (g, &x) in r.iter().enumerate() {
                scatter(dst, 8 * (m + g), elem, byte, transpose8(x));
            }
        }
        for m in wide..row {
            let mut x = 0u64;
            for b in 0..8 {
                x |= (planes[b * row + m] as u64) << (8 * b);
            }
            scatter(dst, 8 * m, elem, byte, transpose8(x));
        }
    }
}

/// The inverse, used by tests and the fuzzers' round trips.
pub fn shuffle_block(src: &[u8], dst: &mut [u8], elem: usize) {
    let n = src.len() / elem;
    let row = n / 8;
    for byte in 0..elem {
        for m in 0..row {
            let mut x = 0u64;
            for k in 0..8 {
                x |= (src[(8 * m + k) * elem + byte] as u64) << (8 * k);
            }
            let t = transpose8(x).to_le_bytes();
            for (b, v) in t.iter().enumerate() {
                dst[byte * 8 * row + b * row + m] = *v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Straight from the definition, bit by bit.
    fn unshuffle_naive(src: &[u8], elem: usize) -> Vec<u8> {
        let n = src.len() / elem;
        let mut dst = vec![0u8; src.len()];
        for k in 0..n {
            for byte in 0..elem {
                for bit in 0..8 {
                    let plane = byte * 8 + bit;
                    let pos = plane * n + k;
                    let v = (src[pos / 8] >> (pos % 8)) & 1;
                    dst[k * elem + byte] |= v << bit;
                }
            }
        }
        dst
    }

    #[test]
    fn matches_definition_and_round_trips() {
        for elem in [1usize, 2, 4] {
            for n in [8usize, 16, 64, 136, 1024, 4104] {
                let src: Vec<u8> = (0..n * elem)
                    .map(|i| (i * 37 + 11) as u8 ^ (i >> 3) as u8)
                    .collect();
                let mut dst = vec![0u8; src.len()];
                unshuffle_block(&src, &mut dst, elem);
                assert_eq!(dst, unshuffle_naive(&src, elem), "elem {elem} n {n}");
                let mut back = vec![0u8; src.len()];
                shuffle_block(&dst, &mut back, elem);
                assert_eq!(back, src);
            }
        }
    }
}
