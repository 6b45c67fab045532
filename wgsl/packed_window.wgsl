// Decoding whole sectors of the compressed resident (the layout is `packed.wgsl`'s) in the
// product kernels: a prelude after `packed_read.wgsl`, for kernels of at most 64
// invocations a workgroup (the masked sum, the pattern reduction; decision 0041).
//
// A sector is fetched first: its words are loaded into registers, only those it reaches
// into (one or two for a narrow sector, nine for a full one), each load issued before any
// is used, so that a kernel fetching several sectors before decoding them has all their
// loads in flight together. Decoding then copies the words into the invocation's window in
// workgroup memory, where any bit can be read, and cuts each raw word's samples out of it
// as one field of at most 32 bits.

// Words a window holds: a sector is at most 256 bits, starting at bit 0–31 of its first.
const WINDOW: u32 = 9u;
// One window per invocation, and one word more so that a field's upper word is never
// outside the array. The stride is odd, so invocations reading the same word of their
// windows meet in no bank.
var<workgroup> window: array<u32, 577>;

// A sector's packed words as loaded (`a`, `b`, `c`: words 0–8 from the one holding its
// first sample; those past the sector are 0), that sample's bit in the first (`r0`) and
// the width (`w`; 0: nothing was loaded and the sector reads as zeros).
struct Fetched {
    a: vec4<u32>,
    b: vec4<u32>,
    c: u32,
    r0: u32,
    w: u32,
}

// The words of sector `s` read at width `w` (its own, or 0 to read it as zeros).
fn fetch_sector(s: PackedSector, w: u32, bits: u32) -> Fetched {
    let at = s.word + s.bit / 32u;
    let r0 = s.bit % 32u;
    let n = select((r0 + (256u / bits) * w + 31u) / 32u, 0u, w == 0u);
    var f = Fetched(vec4<u32>(0u), vec4<u32>(0u), 0u, r0, w);
    if (n > 0u) { f.a.x = packed_in[at]; }
    if (n > 1u) { f.a.y = packed_in[at + 1u]; }
    if (n > 2u) { f.a.z = packed_in[at + 2u]; }
    if (n > 3u) { f.a.w = packed_in[at + 3u]; }
    if (n > 4u) { f.b.x = packed_in[at + 4u]; }
    if (n > 5u) { f.b.y = packed_in[at + 5u]; }
    if (n > 6u) { f.b.z = packed_in[at + 6u]; }
    if (n > 7u) { f.b.w = packed_in[at + 7u]; }
    if (n > 8u) { f.c = packed_in[at + 8u]; }
    return f;
}

// Field `j` (0–7) of a sector in the window at `slot` whose samples start at bit `r0`:
// raw word j's 32 / bits samples, one after another, `fw` bits together (at most 32).
fn window_field(slot: u32, r0: u32, fw: u32, j: u32) -> u32 {
    let bit = r0 + j * fw;
    let q = slot + bit / 32u;
    return funnel_bits(window[q], window[q + 1u], bit % 32u, low_mask(fw));
}

// A fetched sector's words copied into the window of the invocation whose slot is `slot`
// (`lid · WINDOW`).
fn fill_window(f: Fetched, slot: u32) {
    window[slot] = f.a.x;
    window[slot + 1u] = f.a.y;
    window[slot + 2u] = f.a.z;
    window[slot + 3u] = f.a.w;
    window[slot + 4u] = f.b.x;
    window[slot + 5u] = f.b.y;
    window[slot + 6u] = f.b.z;
    window[slot + 7u] = f.b.w;
    window[slot + 8u] = f.c;
}

// Eight words of a sector, `lo` 0–3 and `hi` 4–7: its fields (`sector_fields`) or its raw
// words as the raw resident holds them (`decode_sector`).
struct SectorWords {
    lo: vec4<u32>,
    hi: vec4<u32>,
}

// A fetched sector's eight fields through the window at `slot`, each holding its raw
// word's samples at the sector's width.
fn sector_fields(f: Fetched, slot: u32, bits: u32) -> SectorWords {
    fill_window(f, slot);
    let fw = (32u / bits) * f.w;
    return SectorWords(
        vec4<u32>(
            window_field(slot, f.r0, fw, 0u),
            window_field(slot, f.r0, fw, 1u),
            window_field(slot, f.r0, fw, 2u),
            window_field(slot, f.r0, fw, 3u),
        ),
        vec4<u32>(
            window_field(slot, f.r0, fw, 4u),
            window_field(slot, f.r0, fw, 5u),
            window_field(slot, f.r0, fw, 6u),
            window_field(slot, f.r0, fw, 7u),
        ),
    );
}

// A fetched sector decoded through the window at `slot` into its raw words: each field's
// samples moved to their places in the raw word.
fn decode_sector(f: Fetched, slot: u32, bits: u32) -> SectorWords {
    let x = sector_fields(f, slot, bits);
    return SectorWords(
        vec4<u32>(
            spread_field(x.lo.x, f.w, bits),
            spread_field(x.lo.y, f.w, bits),
            spread_field(x.lo.z, f.w, bits),
            spread_field(x.lo.w, f.w, bits),
        ),
        vec4<u32>(
            spread_field(x.hi.x, f.w, bits),
            spread_field(x.hi.y, f.w, bits),
            spread_field(x.hi.z, f.w, bits),
            spread_field(x.hi.w, f.w, bits),
        ),
    );
}
