// stem4d:after pattern_reduce.wgsl packed_read.wgsl packed_window.wgsl
// The sum and maximum pattern over a compressed resident (decision 0025's layout), decoded
// where it is read: the same workgroups, chunks of tiles, pixels and atomic adds as
// `pattern_reduce`, but a pixel's two invocations take alternate tiles of the chunk, each
// decoding whole sectors (`packed_window.wgsl`), two tiles fetched before either is
// decoded. A whole sector decodes its group's index once for both halves, which is what
// the half-sectors spent most of their arithmetic on (decision 0041). The unpacked
// acquisition is never written; the sums carry into a high word as the raw kernel's do.

// The segment's packed buffer: its index, then its data.
@group(0) @binding(5) var<storage, read> packed_in: array<u32>;
// One bit per detector pixel: found bad after the upload, read as 0.
@group(0) @binding(6) var<storage, read> zeroed: array<u32>;

// Pixel `k`'s sector in tile `t`, fetched; read as zeros, with nothing loaded, where no
// position of the tile is inside the ROI or the pixel was found bad (`cleared`).
fn fetch_tile(t: u32, k: u32, cleared: bool, per_word: u32, bits: u32) -> Fetched {
    let inside = tile_masks[params.first_frame / (8u * per_word) + t] != 0u;
    let s = packed_sector(t, k, params.packed_groups, bits);
    return fetch_sector(s, select(0u, s.width, inside && !cleared), bits);
}

// Take a fetched sector's samples at the positions of tile `t` inside the ROI.
fn take_fetched(acc: ptr<function, Acc>, f: Fetched, t: u32, slot: u32, per_word: u32, bits: u32) {
    if (f.w == 0u) {
        return;
    }
    let r = decode_sector(f, slot, bits);
    take(acc, keep_in_roi(r.lo, half_mask(t, 0u, per_word), per_word, bits), bits);
    take(acc, keep_in_roi(r.hi, half_mask(t, 1u, per_word), per_word, bits), bits);
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
        let cleared = pixel_cleared(wk.k);
        let slot = lid * WINDOW;
        var t = wk.t0 + wk.h;
        for (; t + 2u < wk.t1; t += 4u) {
            let f0 = fetch_tile(t, wk.k, cleared, per_word, bits);
            let f1 = fetch_tile(t + 2u, wk.k, cleared, per_word, bits);
            take_fetched(&acc, f0, t, slot, per_word, bits);
            take_fetched(&acc, f1, t + 2u, slot, per_word, bits);
        }
        if (t < wk.t1) {
            take_fetched(&acc, fetch_tile(t, wk.k, cleared, per_word, bits), t, slot, per_word, bits);
        }
        seen = tiles_seen(wk, per_word);
    }
    add_pixel(lid, wk, acc, seen);
}
