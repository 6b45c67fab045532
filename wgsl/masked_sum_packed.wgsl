// stem4d:after masked_sum.wgsl packed_read.wgsl
// The masked sum over a compressed resident (decision 0025; the layout is `packed.wgsl`'s),
// decoded where it is read: the same workgroups, parts and slots as `masked_sum`, but each
// invocation reads its pixels' width codes from the segment's index (`packed_sector`),
// copies each sector's packed words into its window in workgroup memory, and rebuilds the
// sector's eight raw words from there before adding them into the same lanes. Nothing is unpacked into memory, so a mask reads
// only its own pixels' packed bits and the index words of their groups (decision 0028).
// The lanes' limits are the raw kernel's: a decoded sample is the stored one.

// The segment's packed buffer: its index, then its data.
@group(0) @binding(6) var<storage, read> packed_in: array<u32>;
// One bit per detector pixel: found bad after the upload, read as 0.
@group(0) @binding(7) var<storage, read> zeroed: array<u32>;

// Each invocation's window: the nine words that hold a sector (at most 256 bits, starting
// at bit 0–31 of the first), copied from `packed_in` by nine independent loads and read
// back at any bit; one word more so that a field's upper word is never outside the array.
// The stride is odd, so the slots reading the same word of their windows meet in no bank.
// Decoding from registers instead needs the word's index known when the kernel is
// compiled, and a loop over the samples reading `packed_in` itself stalls on each load
// (decision 0041).
const WINDOW: u32 = 9u;
var<workgroup> window: array<u32, 289>;

// Raw word `j` (0–7) of a sector of width `w` whose samples start at bit `r0` of the
// window at `slot`: its 32 / bits samples are one field of at most 32 bits.
fn window_word(slot: u32, r0: u32, w: u32, j: u32, bits: u32) -> u32 {
    let fw = (32u / bits) * w;
    let bit = r0 + j * fw;
    let q = slot + bit / 32u;
    let x = funnel_bits(window[q], window[q + 1u], bit % 32u, low_mask(fw));
    return spread_field(x, w, bits);
}

// A sector's packed words as loaded (`a`, `b`, `c`: words 0–8 from `at`, those past the
// sector left 0), where its samples start in them (`r0`) and its width (`w`; 0 for a sector
// of zeros or a pixel found bad).
struct Fetched {
    a: vec4<u32>,
    b: vec4<u32>,
    c: u32,
    r0: u32,
    w: u32,
}

// Pixel `k`'s sector in tile `tile`: only the words it reaches into are loaded (a narrow
// sector one or two), each load issued before any is used, so that the sectors fetched
// before decoding have all their loads in flight together.
fn fetch(tile: u32, k: u32, bits: u32) -> Fetched {
    let s = packed_sector(tile, k, params.packed_groups, bits);
    let w = select(s.width, 0u, pixel_cleared(k));
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

// Add a fetched sector into the lanes: its words go through the invocation's window, where
// any bit can be read, and come back as the sector's eight raw words.
fn add_fetched(l: ptr<function, Lanes>, f: Fetched, slot: u32, bits: u32) {
    window[slot] = f.a.x;
    window[slot + 1u] = f.a.y;
    window[slot + 2u] = f.a.z;
    window[slot + 3u] = f.a.w;
    window[slot + 4u] = f.b.x;
    window[slot + 5u] = f.b.y;
    window[slot + 6u] = f.b.z;
    window[slot + 7u] = f.b.w;
    window[slot + 8u] = f.c;
    let lo = vec4<u32>(
        window_word(slot, f.r0, f.w, 0u, bits),
        window_word(slot, f.r0, f.w, 1u, bits),
        window_word(slot, f.r0, f.w, 2u, bits),
        window_word(slot, f.r0, f.w, 3u, bits),
    );
    let hi = vec4<u32>(
        window_word(slot, f.r0, f.w, 4u, bits),
        window_word(slot, f.r0, f.w, 5u, bits),
        window_word(slot, f.r0, f.w, 6u, bits),
        window_word(slot, f.r0, f.w, 7u, bits),
    );
    add_sector(l, lo, hi, bits);
}

// Add a sector's eight raw words (`lo`: words 0–3, `hi`: 4–7) into the lanes (`Lanes`).
fn add_sector(l: ptr<function, Lanes>, lo: vec4<u32>, hi: vec4<u32>, bits: u32) {
    if (bits == 16u) {
        let m = vec4<u32>(0xffffu);
        let sh = vec4<u32>(16u);
        (*l).a += lo & m;
        (*l).b += lo >> sh;
        (*l).c += hi & m;
        (*l).d += hi >> sh;
    } else if (bits == 8u) {
        let m = vec4<u32>(0xffu);
        (*l).a += lo & m;
        (*l).b += (lo >> vec4<u32>(8u)) & m;
        (*l).c += (lo >> vec4<u32>(16u)) & m;
        (*l).d += lo >> vec4<u32>(24u);
        (*l).e += hi & m;
        (*l).f += (hi >> vec4<u32>(8u)) & m;
        (*l).g += (hi >> vec4<u32>(16u)) & m;
        (*l).h += hi >> vec4<u32>(24u);
    } else {
        let s = (*l).a + lo;
        let t = (*l).b + hi;
        (*l).c += select(vec4<u32>(0u), vec4<u32>(1u), s < lo);
        (*l).d += select(vec4<u32>(0u), vec4<u32>(1u), t < hi);
        (*l).a = s;
        (*l).b = t;
    }
}

@compute @workgroup_size(32)
fn masked_sum_packed(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let bits = params.bits;
    let tile_len = 256u / bits;
    let pt = part_of(wg);
    // The whole workgroup shares the tile: a uniform exit.
    if (pt.tile * tile_len >= params.frames) {
        return;
    }
    let z = vec4<u32>(0u);
    var l = Lanes(z, z, z, z, z, z, z, z);
    let slot = lid * WINDOW;
    var i = pt.i0 + lid;
    // Four sectors fetched, then decoded: their loads in flight together.
    for (; i + 3u * SLOTS < pt.i1; i += 4u * SLOTS) {
        let f0 = fetch(pt.tile, pixels[i], bits);
        let f1 = fetch(pt.tile, pixels[i + SLOTS], bits);
        let f2 = fetch(pt.tile, pixels[i + 2u * SLOTS], bits);
        let f3 = fetch(pt.tile, pixels[i + 3u * SLOTS], bits);
        add_fetched(&l, f0, slot, bits);
        add_fetched(&l, f1, slot, bits);
        add_fetched(&l, f2, slot, bits);
        add_fetched(&l, f3, slot, bits);
    }
    for (; i < pt.i1; i += SLOTS) {
        add_fetched(&l, fetch(pt.tile, pixels[i], bits), slot, bits);
    }
    meet(pt, lid, bits, l);
}
