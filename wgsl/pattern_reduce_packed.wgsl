// stem4d:after pattern_reduce.wgsl packed_read.wgsl
// The sum and maximum pattern over a compressed resident (decision 0025's layout), decoded
// where it is read: the same workgroups, chunks of tiles, half-sectors and atomic adds as
// `pattern_reduce`, but each invocation reads its half of a pixel's sector (its four raw
// words) from the packed bits, four tiles at a time, so the unpacked acquisition is never
// written (decisions 0031 and 0041). The chunks' u32 sums are the raw kernel's: a decoded
// sample is the stored one.

// The segment's packed buffer: its index, then its data.
@group(0) @binding(5) var<storage, read> packed_in: array<u32>;
// One bit per detector pixel: found bad after the upload, read as 0.
@group(0) @binding(6) var<storage, read> zeroed: array<u32>;

// Half `h` of a pixel's sector in one tile as loaded: the five packed words from the one
// holding its first sample (`p`, `p4`; words past the half left 0), that sample's bit in
// the first (`sh`), the sector's width (`w`; 0 for zeros, a pixel found bad, or no
// position of the half inside the ROI) and the half's ROI bits (`m`).
struct HalfFetched {
    p: vec4<u32>,
    p4: u32,
    sh: u32,
    w: u32,
    m: u32,
}

// Only the words the half reaches into are loaded, each load issued before any is used, so
// that the tiles fetched before decoding have all their loads in flight (decision 0041).
fn fetch_half(t: u32, k: u32, h: u32, per_word: u32, bits: u32) -> HalfFetched {
    let m = half_mask(t, h, per_word);
    let s = packed_sector(t, k, params.packed_groups, bits);
    let w = select(s.width, 0u, m == 0u || pixel_cleared(k));
    // The first half's four words come first: 4 · per_word samples of `w` bits each.
    let b0 = s.bit + h * 4u * per_word * w;
    let at = s.word + b0 / 32u;
    let sh = b0 % 32u;
    let n = select((sh + 4u * per_word * w + 31u) / 32u, 0u, w == 0u);
    var f = HalfFetched(vec4<u32>(0u), 0u, sh, w, m);
    if (n > 0u) { f.p.x = packed_in[at]; }
    if (n > 1u) { f.p.y = packed_in[at + 1u]; }
    if (n > 2u) { f.p.z = packed_in[at + 2u]; }
    if (n > 3u) { f.p.w = packed_in[at + 3u]; }
    if (n > 4u) { f.p4 = packed_in[at + 4u]; }
    return f;
}

// The kept samples of a fetched half, as `kept` reads them from the raw resident: each raw
// word cut out of the loaded words as one field.
fn kept_fetched(f: HalfFetched, per_word: u32, bits: u32) -> vec4<u32> {
    let fw = per_word * f.w;
    let fm = low_mask(fw);
    var x = vec4<u32>(0u);
    for (var j = 0u; j < 4u; j += 1u) {
        let bit = f.sh + j * fw;
        let q = bit / 32u;
        let hi = select(f.p[min(q + 1u, 3u)], f.p4, q == 3u);
        x[j] = spread_field(funnel_bits(f.p[q], hi, bit % 32u, fm), f.w, bits);
    }
    return keep_in_roi(x, f.m, per_word, bits);
}

@compute @workgroup_size(64)
fn pattern_reduce_packed(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let bits = params.bits;
    let per_word = 32u / bits;
    let wk = work_of(wg.x + wg.y * params.groups_x, lid, 8u * per_word);
    var acc = Acc(0u, 0u, 0u);
    var seen = 0u;
    if (wk.k < params.det_len) {
        var t = wk.t0;
        // Four tiles fetched, then decoded: their loads in flight together.
        for (; t + 3u < wk.t1; t += 4u) {
            let f0 = fetch_half(t, wk.k, wk.h, per_word, bits);
            let f1 = fetch_half(t + 1u, wk.k, wk.h, per_word, bits);
            let f2 = fetch_half(t + 2u, wk.k, wk.h, per_word, bits);
            let f3 = fetch_half(t + 3u, wk.k, wk.h, per_word, bits);
            take(&acc, kept_fetched(f0, per_word, bits), bits);
            take(&acc, kept_fetched(f1, per_word, bits), bits);
            take(&acc, kept_fetched(f2, per_word, bits), bits);
            take(&acc, kept_fetched(f3, per_word, bits), bits);
        }
        for (; t < wk.t1; t += 1u) {
            take(&acc, kept_fetched(fetch_half(t, wk.k, wk.h, per_word, bits), per_word, bits), bits);
        }
        seen = tiles_seen(wk, per_word);
    }
    add_pixel(lid, wk, acc, seen);
}
