//! The packed payload of a prepared acquisition (decision 0044): each block is a packed
//! segment of the compressed resident's layout (`wgsl/packed.wgsl`, decision 0025), stand-
//! alone: per group of 8 pixels of a tile two words (where the group's data starts, from
//! the block's first word; the 4-bit width codes of its 8 sectors), then the groups' data,
//! each sector's samples at the bit length of its largest one and each group padded to a
//! whole word. A block is a quarter to a half of its raw tiles for counting data, and a
//! reopen expands it on the GPU (`upload::prepared`).
//!
//! This is the host's codec: the writer's encoder, the CPU reader's decoder and the
//! structural check of a block's index. It shares no code with the GPU's encoder or
//! decoder, so that the test comparing their bytes (`tests/gpu_parity/packed.rs`) can
//! catch either.

use super::Layout;

/// Groups of 8 pixels per tile of a `det_len`-pixel detector.
pub fn groups_per_tile(det_len: usize) -> usize {
    det_len.div_ceil(8)
}

/// Bytes of the index of a block of `tiles` tiles: two words per group.
pub fn index_bytes(tiles: u64, det_len: usize) -> u64 {
    tiles * groups_per_tile(det_len) as u64 * 8
}

/// Samples of one sector (a pixel at a tile's positions).
fn per_sector(bits: u32) -> usize {
    256 / bits as usize
}

/// The width of code `code` for `bits`-bit samples: 0–14, or 15 for all `bits`.
fn width(code: u32, bits: u32) -> u32 {
    if code == 15 {
        bits
    } else {
        code
    }
}

/// Whether `code` is a width `bits`-bit samples can have (an 8-bit sample has none of
/// 8–14 bits: the encoder writes 15).
fn fits(code: u32, bits: u32) -> bool {
    code == 15 || code < bits
}

/// The code of a sector whose samples OR to `ored`: the bit length of its largest sample,
/// 15 where that is 15 bits or more, or the sample's whole width.
fn code_of(ored: u32, bits: u32) -> u32 {
    let w = 32 - ored.leading_zeros();
    if w >= 15 || w >= bits {
        15
    } else {
        w
    }
}

/// Data words of a group whose codes are `codes` (its samples' bits, padded to a word).
fn group_words(codes: u32, bits: u32) -> u64 {
    let widths: u64 = (0..8)
        .map(|i| width((codes >> (4 * i)) & 15, bits) as u64)
        .sum();
    (widths * per_sector(bits) as u64).div_ceil(32)
}

/// Sample `p` of the 32-byte sector `sector` (little-endian, `bits` wide).
fn sample(sector: &[u8], p: usize, bits: u32) -> u32 {
    match bits {
        8 => sector[p] as u32,
        16 => u16::from_le_bytes([sector[2 * p], sector[2 * p + 1]]) as u32,
        _ => u32::from_le_bytes([
            sector[4 * p],
            sector[4 * p + 1],
            sector[4 * p + 2],
            sector[4 * p + 3],
        ]),
    }
}

/// The codes of each group of the tiles `raw` (whole tiles of `layout`), in group order.
fn codes_of(layout: &Layout, det_len: usize, raw: &[u8]) -> Vec<u32> {
    let gpt = groups_per_tile(det_len);
    let tb = layout.tile_bytes as usize;
    let bits = layout.bits;
    let mut codes = vec![0u32; raw.len() / tb * gpt];
    let tile_codes = |(tile, codes): (&[u8], &mut [u32])| {
        for (k, sector) in tile.chunks_exact(32).take(det_len).enumerate() {
            let ored = (0..per_sector(bits)).fold(0, |o, p| o | sample(sector, p, bits));
            codes[k / 8] |= code_of(ored, bits) << (4 * (k % 8));
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        raw.par_chunks_exact(tb)
            .zip(codes.par_chunks_exact_mut(gpt))
            .for_each(tile_codes);
    }
    #[cfg(target_arch = "wasm32")]
    raw.chunks_exact(tb)
        .zip(codes.chunks_exact_mut(gpt))
        .for_each(tile_codes);
    codes
}

/// Bits appended to little-endian words, the first bit of each word its lowest.
struct BitWriter<'a> {
    out: &'a mut [u8],
    word: usize,
    acc: u64,
    n: u32,
}

impl BitWriter<'_> {
    fn push(&mut self, v: u32, w: u32) {
        self.acc |= (v as u64) << self.n;
        self.n += w;
        if self.n >= 32 {
            self.flush_word();
        }
    }

    fn flush_word(&mut self) {
        self.out[4 * self.word..4 * self.word + 4]
            .copy_from_slice(&(self.acc as u32).to_le_bytes());
        self.word += 1;
        self.acc >>= 32;
        self.n = self.n.saturating_sub(32);
    }
}

/// Encode `raw`, whole tiles of `layout` of a `det_len`-pixel detector, into one packed
/// block: the same words the GPU's encoder makes of a segment of those tiles.
pub fn encode(layout: &Layout, det_len: usize, raw: &[u8]) -> Vec<u8> {
    let bits = layout.bits;
    let tb = layout.tile_bytes as usize;
    let gpt = groups_per_tile(det_len);
    let codes = codes_of(layout, det_len, raw);
    let index_words = codes.len() * 2;
    let mut starts = Vec::with_capacity(codes.len());
    let mut at = index_words as u64;
    for &c in &codes {
        starts.push(at);
        at += group_words(c, bits);
    }
    let mut out = vec![0u8; at as usize * 4];
    for (g, (&start, &c)) in starts.iter().zip(&codes).enumerate() {
        out[8 * g..8 * g + 4].copy_from_slice(&(start as u32).to_le_bytes());
        out[8 * g + 4..8 * g + 8].copy_from_slice(&c.to_le_bytes());
    }
    // Each tile's groups fill their own words: tiles are written in turn, or on every core.
    let write_tile = |(t, data): (usize, &mut [u8])| {
        let tile = &raw[t * tb..(t + 1) * tb];
        let mut wr = BitWriter {
            out: data,
            word: 0,
            acc: 0,
            n: 0,
        };
        for g in 0..gpt {
            let c = codes[t * gpt + g];
            for i in 0..8 {
                let (k, w) = (g * 8 + i, width((c >> (4 * i)) & 15, bits));
                if w == 0 || k >= det_len {
                    continue;
                }
                let sector = &tile[k * 32..k * 32 + 32];
                for p in 0..per_sector(bits) {
                    wr.push(sample(sector, p, bits), w);
                }
            }
            if wr.n > 0 {
                wr.flush_word();
            }
        }
    };
    // Where each tile's data starts and ends.
    let tiles = codes.len() / gpt.max(1);
    let tile_start = |t: usize| 4 * starts.get(t * gpt).copied().unwrap_or(at) as usize;
    let mut pieces = Vec::with_capacity(tiles);
    let mut rest = &mut out[4 * index_words..];
    let mut from = 4 * index_words;
    for t in 0..tiles {
        let len = tile_start(t + 1) - from;
        let (piece, tail) = std::mem::take(&mut rest).split_at_mut(len);
        pieces.push((t, piece));
        rest = tail;
        from += len;
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        pieces.into_par_iter().for_each(write_tile);
    }
    #[cfg(target_arch = "wasm32")]
    pieces.into_iter().for_each(write_tile);
    out
}

/// Why a packed block's index is not one the encoder makes.
#[derive(Debug)]
pub struct Malformed(pub String);

/// The structural check of a packed block's index, fed its bytes in order (any split):
/// every group's data starts where the previous group's ends, the first after the index,
/// its codes are widths the samples can have (none for pixels past the detector), and the
/// last group ends at the block's end. A block that passes decodes within its bounds on
/// the CPU and the GPU alike; its samples are then whatever its bits say.
pub struct IndexCheck {
    bits: u32,
    det_len: usize,
    gpt: usize,
    groups: u64,
    block_words: u64,
    /// Groups checked, where the next group's data must start, and the bytes of a word
    /// pair not yet whole.
    seen: u64,
    next: u64,
    carry: Vec<u8>,
    fed: u64,
}

impl IndexCheck {
    pub fn new(layout: &Layout, det_len: usize, tiles: u64, block_bytes: u64) -> IndexCheck {
        IndexCheck::of_block(layout.bits, det_len, tiles, block_bytes)
    }

    /// The check of a block of `bits`-bit samples, `tiles` tiles of `det_len` pixels and
    /// `block_bytes` bytes (what the page's pool Workers are told: decision 0045).
    pub fn of_block(bits: u32, det_len: usize, tiles: u64, block_bytes: u64) -> IndexCheck {
        let gpt = groups_per_tile(det_len);
        let groups = tiles * gpt as u64;
        IndexCheck {
            bits,
            det_len,
            gpt,
            groups,
            block_words: block_bytes / 4,
            seen: 0,
            next: groups * 2,
            carry: Vec::with_capacity(8),
            fed: 0,
        }
    }

    /// Bytes of the block from its start, after those fed before.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), Malformed> {
        let index_end = self.groups * 8;
        let take = index_end.saturating_sub(self.fed).min(bytes.len() as u64) as usize;
        self.fed += bytes.len() as u64;
        let mut rest = &bytes[..take];
        // A pair split by the piece before is completed first.
        if !self.carry.is_empty() {
            let n = (8 - self.carry.len()).min(rest.len());
            self.carry.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            if self.carry.len() < 8 {
                return Ok(());
            }
            let pair = std::mem::take(&mut self.carry);
            self.group(word_at(&pair, 0), word_at(&pair, 1))?;
        }
        let mut pairs = rest.chunks_exact(8);
        for pair in &mut pairs {
            self.group(word_at(pair, 0), word_at(pair, 1))?;
        }
        self.carry.extend_from_slice(pairs.remainder());
        Ok(())
    }

    fn group(&mut self, start: u32, codes: u32) -> Result<(), Malformed> {
        let g = self.seen;
        if start as u64 != self.next {
            return Err(Malformed(format!(
                "group {g} of its index starts at word {start}, not {}",
                self.next
            )));
        }
        let k0 = (g % self.gpt as u64) as usize * 8;
        // Only 8-bit samples have codes past their width, only a tile's last group pixels
        // past the detector.
        if self.bits < 15 || k0 + 8 > self.det_len {
            for i in 0..8 {
                let c = (codes >> (4 * i)) & 15;
                let past = k0 + i >= self.det_len;
                if (past && c != 0) || !fits(c, self.bits) {
                    return Err(Malformed(format!(
                        "group {g} of its index has width code {c} for pixel {}",
                        k0 + i
                    )));
                }
            }
        }
        self.next += group_words(codes, self.bits);
        self.seen += 1;
        Ok(())
    }

    /// After the whole block was fed: its index whole and its data as long as it says.
    pub fn finish(&self) -> Result<(), Malformed> {
        if self.seen != self.groups || self.next != self.block_words {
            return Err(Malformed(format!(
                "its index ({} of {} groups) says {} words, the block has {}",
                self.seen, self.groups, self.next, self.block_words
            )));
        }
        Ok(())
    }
}

/// Little-endian word `i` of `bytes`.
fn word_at(bytes: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([
        bytes[4 * i],
        bytes[4 * i + 1],
        bytes[4 * i + 2],
        bytes[4 * i + 3],
    ])
}

/// The raw tiles `[t0, t1)` (counted in the block) of a packed block: `index` holds the
/// groups of those tiles (the block's index words from group `t0 · groups_per_tile` on) and
/// `data` the block's words from word `data_word` on, through the last of those groups. An
/// index that points outside `data` or holds a width the samples cannot have is refused
/// (a block changed on disk after it was checked), never read out of bounds.
pub fn decode(
    layout: &Layout,
    det_len: usize,
    index: &[u8],
    data: &[u8],
    data_word: u64,
    tiles: u64,
) -> Result<Vec<u8>, Malformed> {
    let bits = layout.bits;
    let gpt = groups_per_tile(det_len);
    let tb = layout.tile_bytes as usize;
    if index.len() < tiles as usize * gpt * 8 {
        return Err(Malformed(format!(
            "an index of {} bytes for {tiles} tiles",
            index.len()
        )));
    }
    let mut out = vec![0u8; tiles as usize * tb];
    let sb = bits as usize / 8;
    let data_words = data.len() as u64 / 4;
    for (t, tile) in out.chunks_exact_mut(tb).enumerate() {
        for g in 0..gpt {
            let i = t * gpt + g;
            let (start, codes) = (word_at(index, 2 * i) as u64, word_at(index, 2 * i + 1));
            let bad_code = (0..8).any(|s| !fits((codes >> (4 * s)) & 15, bits));
            if bad_code
                || start < data_word
                || start - data_word + group_words(codes, bits) > data_words
            {
                return Err(Malformed(format!(
                    "group {i} of the tiles read lies outside their data"
                )));
            }
            let mut bit = (start - data_word) * 32;
            for s in 0..8 {
                let (k, w) = (g * 8 + s, width((codes >> (4 * s)) & 15, bits));
                if w == 0 || k >= det_len {
                    continue;
                }
                for p in 0..per_sector(bits) {
                    let (word, sh) = ((bit / 32) as usize, (bit % 32) as u32);
                    let lo = word_at(data, word) as u64;
                    // Within the group's words: a sample reaches into the next word only
                    // where the group's bits go on there.
                    let hi = if sh + w > 32 {
                        word_at(data, word + 1) as u64
                    } else {
                        0
                    };
                    let v = (((hi << 32) | lo) >> sh) & ((1u64 << w) - 1);
                    let at = k * 32 + p * sb;
                    tile[at..at + sb].copy_from_slice(&(v as u32).to_le_bytes()[..sb]);
                    bit += w as u64;
                }
            }
        }
    }
    Ok(out)
}

/// The data words of groups `[g0, g1)` of a block of `groups` groups and `block_words`
/// words whose index is `index` (whole, or from group 0 through group `g1` at least): group
/// `g0`'s first word, and the word after group `g1 − 1`'s data.
pub fn data_words(
    index: &[u8],
    groups: usize,
    block_words: u64,
    g0: usize,
    g1: usize,
) -> (u64, u64) {
    let start = |g: usize| {
        if g < groups {
            word_at(index, 2 * g) as u64
        } else {
            block_words
        }
    };
    (start(g0), start(g1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Dtype;

    /// Tiles of pseudo-random samples of every bit length, zeros and full-width ones.
    fn tiles(dtype: Dtype, det_len: usize, frames: usize) -> (Layout, Vec<u8>) {
        let l = Layout::of(dtype, det_len, frames);
        let mut x = 0x9e3779b9u32;
        let mut raw = vec![0u8; (l.tiles * l.tile_bytes) as usize];
        for (k, sector) in raw.chunks_exact_mut(32).enumerate() {
            let width = (k * 7 % 34) as u32;
            for b in sector.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            // Cut every sample to `width` bits of its type.
            let sb = l.sample_bytes();
            for s in sector.chunks_exact_mut(sb) {
                let mut v = 0u32;
                for (i, b) in s.iter().enumerate() {
                    v |= (*b as u32) << (8 * i);
                }
                let w = width.min(l.bits);
                v &= if w >= 32 { u32::MAX } else { (1 << w) - 1 };
                s.copy_from_slice(&v.to_le_bytes()[..sb]);
            }
        }
        (l, raw)
    }

    #[test]
    fn a_block_decodes_to_its_tiles() {
        for (dtype, det_len, frames) in [
            (Dtype::U8, 13, 70),
            (Dtype::U16, 21, 33),
            (Dtype::U32, 9, 17),
        ] {
            let (l, raw) = tiles(dtype, det_len, frames);
            let block = encode(&l, det_len, &raw);
            assert!(block.len() < raw.len() + index_bytes(l.tiles, det_len) as usize);
            let mut check = IndexCheck::new(&l, det_len, l.tiles, block.len() as u64);
            // Fed in odd pieces, as reads split it.
            for piece in block.chunks(13) {
                check.feed(piece).unwrap();
            }
            check.finish().unwrap();
            let ib = index_bytes(l.tiles, det_len) as usize;
            let words = ib as u64 / 4;
            let back = decode(&l, det_len, &block[..ib], &block[ib..], words, l.tiles).unwrap();
            assert!(back == raw, "{dtype:?}");
            // Tiles from the middle, through their own index and data only.
            let gpt = groups_per_tile(det_len);
            let (t0, t1) = (1usize, 3usize);
            let (a, z) = data_words(
                &block[..ib],
                l.tiles as usize * gpt,
                block.len() as u64 / 4,
                t0 * gpt,
                t1 * gpt,
            );
            let part = decode(
                &l,
                det_len,
                &block[8 * t0 * gpt..8 * t1 * gpt],
                &block[4 * a as usize..4 * z as usize],
                a,
                2,
            )
            .unwrap();
            let tb = l.tile_bytes as usize;
            assert!(part == raw[t0 * tb..t1 * tb], "{dtype:?} tiles 1..3");
        }
    }

    #[test]
    fn a_malformed_index_is_refused() {
        let (l, raw) = tiles(Dtype::U8, 13, 64);
        let block = encode(&l, 13, &raw);
        let check = |b: &[u8]| {
            let mut c = IndexCheck::new(&l, 13, l.tiles, b.len() as u64);
            c.feed(b).and_then(|_| c.finish())
        };
        assert!(check(&block).is_ok());
        // A start moved, a width past the sample's bits, a code for a pixel past the
        // detector, and a block cut short.
        for (at, value) in [(8usize, 1u8), (4, 0x09), (12, 0x00)] {
            let mut b = block.clone();
            b[at] ^= value.max(1);
            if at == 12 {
                b[at + 3] |= 0x10;
            }
            assert!(check(&b).is_err(), "byte {at}");
        }
        assert!(check(&block[..block.len() - 4]).is_err());
    }
}
