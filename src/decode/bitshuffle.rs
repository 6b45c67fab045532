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

/// `src` and `dst` are both `n·elem` bytes; `n % 8 == 0`.
pub fn unshuffle_block(src: &[u8], dst: &mut [u8], elem: usize) {
    let n = dst.len() / elem;
    debug_assert_eq!(n % 8, 0);
    debug_assert_eq!(src.len(), dst.len());
    let row = n / 8;
    for byte in 0..elem {
        let planes = &src[byte * 8 * row..(byte + 1) * 8 * row];
        for m in 0..row {
            // Gather bit b of elements 8m..8m+8 (one byte per plane) into row b.
            let mut x = 0u64;
            for b in 0..8 {
                x |= (planes[b * row + m] as u64) << (8 * b);
            }
            let t = transpose8(x).to_le_bytes();
            // After the transpose, byte k holds element 8m+k's bits 0..8 of this byte.
            for (k, v) in t.iter().enumerate() {
                dst[(8 * m + k) * elem + byte] = *v;
            }
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
            for n in [8usize, 16, 64, 136] {
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
