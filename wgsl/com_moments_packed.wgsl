// stem4d:after com_moments.wgsl packed_read.wgsl packed_moments.wgsl packed_columns.wgsl
// The CoM moments over a compressed resident (`packed_moments.wgsl`) where every
// invocation finds each sector it reads itself; `com_moments_packed_quad` shares that work
// on adapters with subgroups.

// Each invocation finds every sector it reads.
fn four_words(w: Work, k: u32, cols: u32, lane: u32) -> Four {
    return four_found(w, k, cols);
}

@compute @workgroup_size(256)
fn com_moments_packed(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let flat = wg.x + wg.y * params.groups_x;
    if (past_end(flat)) {
        return;
    }
    packed_moments(work_of(flat, lid), lid, 4u);
}

// The same moments with 64-bit sums per sample (as `com_moments_wide`).
@compute @workgroup_size(256)
fn com_moments_packed_wide(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let flat = wg.x + wg.y * params.groups_x;
    if (past_end(flat)) {
        return;
    }
    let w = work_of(flat, lid);
    let cols = params.det_cols;
    let zero = Wide4(vec4<u32>(0u), vec4<u32>(0u));
    var t = zero;
    var mr = zero;
    var mc = zero;
    for (var j = w.slot; j < cols; j += w.slots) {
        for (var i = w.i0; i < w.i1; i += 1u) {
            let v = samples_of(w, load_words(w, i * cols + j));
            t = add_lanes(t, v);
            mr = add_scaled(mr, v, i);
            mc = add_scaled(mc, v, j);
        }
    }
    finish(t, mr, mc, lid, w);
}
