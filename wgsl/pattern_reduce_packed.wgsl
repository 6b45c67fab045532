// stem4d:after pattern_reduce.wgsl packed_read.wgsl
// The sum and maximum pattern over a compressed resident (decision 0025's layout), decoded
// where it is read: the same workgroups, chunks of tiles, half-sectors and atomic adds as
// `pattern_reduce`, but each invocation reads its half of a pixel's sector (its four raw
// words) from the packed bits, so the unpacked acquisition is never written (decision
// 0031). The chunks' u32 sums are the raw kernel's: a decoded sample is the stored one.

// The segment's packed buffer: its index, then its data.
@group(0) @binding(5) var<storage, read> packed_in: array<u32>;
// One bit per detector pixel: found bad after the upload, read as 0.
@group(0) @binding(6) var<storage, read> zeroed: array<u32>;

// The kept samples of half `h` of pixel `k`'s sector in tile `t`, as `kept` reads them from
// the raw resident (zeros when no position is inside the ROI, unread).
fn kept_packed(t: u32, k: u32, h: u32, per_word: u32, bits: u32) -> vec4<u32> {
    let m = half_mask(t, h, per_word);
    if (m == 0u || pixel_cleared(k)) {
        return vec4<u32>(0u);
    }
    let s = packed_sector(t, k, params.packed_groups, bits);
    if (s.width == 0u) {
        return vec4<u32>(0u);
    }
    // The first half's four words come first.
    var r = bit_reader(s.word, s.bit + h * 4u * per_word * s.width);
    let x = vec4<u32>(
        read_raw_word(&r, s.width, bits),
        read_raw_word(&r, s.width, bits),
        read_raw_word(&r, s.width, bits),
        read_raw_word(&r, s.width, bits),
    );
    return keep_in_roi(x, m, per_word, bits);
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
        for (var t = wk.t0; t < wk.t1; t += 1u) {
            take(&acc, kept_packed(t, wk.k, wk.h, per_word, bits), bits);
        }
        seen = tiles_seen(wk, per_word);
    }
    add_pixel(lid, wk, acc, seen);
}
