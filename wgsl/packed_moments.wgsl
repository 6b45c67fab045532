// stem4d:after com_moments.wgsl packed_read.wgsl
// The fused CoM moments over a compressed resident (decision 0025's layout), decoded where
// they are read: the same workgroups, bands, slots and reductions as `com_moments` and
// `com_moments_wide`, but each invocation reads its positions of a pixel's sector from the
// packed bits (its `hold` consecutive samples, from bit `hold · sub · width` of the sector)
// instead of a word of the raw resident, so the unpacked acquisition is never written
// (decision 0031). A decoded sample is the stored one. The prelude of the kernels that walk
// detector rows (`com_moments_packed_rows`, decision 0061) or columns (`packed_columns.wgsl`).

// The segment's packed buffer: its index, then its data.
@group(0) @binding(4) var<storage, read> packed_in: array<u32>;
// One bit per detector pixel: found bad after the upload, read as 0.
@group(0) @binding(5) var<storage, read> zeroed: array<u32>;

// An invocation's words of a pixel's sector: the three packed words from the one holding
// its first sample (four samples of up to 16 bits, or two of up to 32, from any bit of the
// first, end within them), that bit, and the sector's width (0: zeros, or a pixel found
// bad). Every load is issued before any sample is taken, and several pixels' at once:
// reading the bits in order, a load at a time, took 20.0 ms against 12.9 ms on the H200
// (decision 0031).
struct Words3 {
    x: u32,
    y: u32,
    z: u32,
    sh: u32,
    w: u32,
}

// Four pixels' words, of rows i to i + 3 of a column.
struct Four {
    a: Words3,
    b: Words3,
    c: Words3,
    d: Words3,
}

// Pixel `k`'s sector, as a quad passes it on: the word holding its first sample, and that
// bit (low 8 bits) with the width above it (0 for a pixel found bad).
fn sector_at(w: Work, k: u32) -> vec2<u32> {
    let s = packed_sector(w.tile, k, params.packed_groups, params.bits);
    let width = select(s.width, 0u, pixel_cleared(k));
    return vec2<u32>(s.word + s.bit / 32u, (s.bit % 32u) | (width << 8u));
}

// The invocation's words of the sector `sector_at` gives, past the samples of the
// invocations before this one. All three are loaded: loading only those its samples reach
// was slower (decision 0060).
fn words_of(w: Work, a: vec2<u32>) -> Words3 {
    let width = a.y >> 8u;
    let bit = (a.y & 0xffu) + w.sub * w.hold * width;
    let at = a.x + bit / 32u;
    return Words3(packed_in[at], packed_in[at + 1u], packed_in[at + 2u], bit % 32u, width);
}

fn load_words(w: Work, k: u32) -> Words3 {
    return words_of(w, sector_at(w, k));
}

// The field of `fm`-masked bits from bit `b` (0–63) of the invocation's words.
fn field_of(f: Words3, b: u32, fm: u32) -> u32 {
    let first = b < 32u;
    return funnel_bits(select(f.y, f.x, first), select(f.z, f.y, first), b % 32u, fm);
}

// The invocation's positions of the pixel, as `unpack` gives them from the raw resident:
// its samples cut out as whole fields of at most 32 bits (four 8-bit samples, two 16-bit
// ones, or one 32-bit one), not one at a time (decision 0041). A width of 0 reads zeros.
fn samples_of(w: Work, f: Words3) -> vec4<u32> {
    let bits = params.bits;
    let m = low_mask(f.w);
    if (bits == 8u) {
        let x = field_of(f, f.sh, low_mask(4u * f.w));
        return vec4<u32>(x & m, (x >> f.w) & m, (x >> (2u * f.w)) & m, x >> (3u * f.w));
    }
    if (bits == 16u) {
        let fm = low_mask(2u * f.w);
        let x = field_of(f, f.sh, fm);
        let y = field_of(f, f.sh + 2u * f.w, fm);
        return vec4<u32>(x & m, x >> f.w, y & m, y >> f.w);
    }
    return vec4<u32>(field_of(f, f.sh, m), field_of(f, f.sh + f.w, m), 0u, 0u);
}
