// Reading the compressed resident's packed bits (the layout is `packed.wgsl`'s): a prelude
// of the kernels that decode whole sectors, or halves of them, where they read them (the
// unpack, the masked sum, the pattern reduction; the CoM moments take its `pixel_cleared`).
// Each file that takes it binds `packed_in`, the segment's index then its data, and
// `zeroed`, one bit per detector pixel found bad after the upload.
//
// A sector's samples lie one after another at its width. The unpack reads them in order
// with one load per 32 bits consumed, the word holding the next bit kept in a register.
// The product kernels load the words they need up front, all loads in flight at once, and
// cut each raw word's samples out of them as one field (`funnel_bits`, `spread_field`):
// reading in order stalls on every load (decisions 0031 and 0041).

// Where the next sample starts: word `at` of `packed_in`, already loaded as `cur`, from its
// bit `sh` (0–32; 32: the next read loads the word after).
struct BitReader {
    at: u32,
    sh: u32,
    cur: u32,
}

fn bit_reader(word: u32, bit: u32) -> BitReader {
    let at = word + bit / 32u;
    return BitReader(at, bit % 32u, packed_in[at]);
}

// The next `w` bits (1–32), and the reader moved past them. A word is loaded only where
// the sample reaches into it, so the last sector of a buffer reads nothing past it.
fn read_bits(r: ptr<function, BitReader>, w: u32) -> u32 {
    if ((*r).sh == 32u) {
        (*r).at += 1u;
        (*r).cur = packed_in[(*r).at];
        (*r).sh = 0u;
    }
    let sh = (*r).sh;
    var v = (*r).cur >> sh;
    let end = sh + w;
    if (end > 32u) {
        (*r).at += 1u;
        let next = packed_in[(*r).at];
        v |= next << (32u - sh);
        (*r).cur = next;
        (*r).sh = end - 32u;
    } else {
        (*r).sh = end;
    }
    return select(v & ((1u << w) - 1u), v, w == 32u);
}

// Whether detector pixel `k` was found bad after the upload: its samples read as 0.
fn pixel_cleared(k: u32) -> bool {
    return ((zeroed[k / 32u] >> (k % 32u)) & 1u) != 0u;
}

// Pixel `k`'s sector in tile `tile` of a segment of `groups_per_tile` groups of 8 pixels a
// tile: its samples start at bit `bit` from word `word` of `packed_in`; `width` 0 is a
// sector of zeros (its `word` and `bit` then point nowhere useful). The group's two index
// words are loaded together, with no branch between them, so that neither waits for the
// other (decision 0031).
struct PackedSector {
    word: u32,
    bit: u32,
    width: u32,
}

fn packed_sector(tile: u32, k: u32, groups_per_tile: u32, bits: u32) -> PackedSector {
    let g = tile * groups_per_tile + k / 8u;
    let start = packed_in[2u * g];
    let codes = packed_in[2u * g + 1u];
    let w = packed_width((codes >> (4u * (k % 8u))) & 15u, bits);
    return PackedSector(start, packed_widths_before(codes, k % 8u, bits) * (256u / bits), w);
}

// The next raw word of a sector of width `w` (1–`bits`): 32 / bits samples, each at its
// place in the raw resident's word.
fn read_raw_word(r: ptr<function, BitReader>, w: u32, bits: u32) -> u32 {
    var word = 0u;
    for (var s = 0u; s < 32u; s += bits) {
        word |= read_bits(r, w) << s;
    }
    return word;
}

// The mask of the low `n` bits (0–32): a shift by 32 would be a shift by 0.
fn low_mask(n: u32) -> u32 {
    return select((1u << n) - 1u, 0xffffffffu, n >= 32u);
}

// The bits from bit `r` (0–31) of `lo` on, continued from `hi`, masked by `fm`. The
// upper word moves in two steps so that r = 0 takes none of its bits.
fn funnel_bits(lo: u32, hi: u32, r: u32, fm: u32) -> u32 {
    return ((lo >> r) | ((hi << 1u) << (31u - r))) & fm;
}

// A raw word from the field of its 32 / bits samples of width `w` (≤ bits), packed one
// after another: each sample moved to its place in the raw resident's word.
fn spread_field(x: u32, w: u32, bits: u32) -> u32 {
    let m = low_mask(w);
    if (bits == 16u) {
        return (x & m) | ((x >> w) << 16u);
    }
    if (bits == 8u) {
        return (x & m) | (((x >> w) & m) << 8u) | (((x >> (2u * w)) & m) << 16u)
            | ((x >> (3u * w)) << 24u);
    }
    return x;
}
