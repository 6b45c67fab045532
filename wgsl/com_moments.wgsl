// Centre of mass, fused: per scan position the exact 64-bit total, row moment Σ i·I and
// column moment Σ j·I in one pass over the frame. The single division happens at readout.

struct ComParams {
    frames: u32,
    frame_words: u32,
    bits: u32,
    det_rows: u32,
    det_cols: u32,
    first_frame: u32,
    groups_x: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> params: ComParams;
@group(0) @binding(1) var<storage, read> resident: array<u32>;
// Per position: total, row moment, column moment, each a (lo, hi) pair.
@group(0) @binding(2) var<storage, read_write> moments: array<vec2<u32>>;

const WG: u32 = 256u;
var<workgroup> part_t: array<vec2<u32>, 256>;
var<workgroup> part_r: array<vec2<u32>, 256>;
var<workgroup> part_c: array<vec2<u32>, 256>;

@compute @workgroup_size(256)
fn com_moments(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let f = wg.x + wg.y * params.groups_x;
    if (f >= params.frames) {
        return;
    }
    let base = f * params.frame_words;
    let per_word = 32u / params.bits;
    let n = params.det_rows * params.det_cols;
    var t = vec2<u32>(0u, 0u);
    var mr = vec2<u32>(0u, 0u);
    var mc = vec2<u32>(0u, 0u);
    for (var k = lid; k < n; k += WG) {
        let v = sample_at(resident[base + k / per_word], k, params.bits);
        t = add64(t, vec2<u32>(v, 0u));
        mr = add64(mr, mul64(v, k / params.det_cols));
        mc = add64(mc, mul64(v, k % params.det_cols));
    }
    part_t[lid] = t;
    part_r[lid] = mr;
    part_c[lid] = mc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            part_t[lid] = add64(part_t[lid], part_t[lid + s]);
            part_r[lid] = add64(part_r[lid], part_r[lid + s]);
            part_c[lid] = add64(part_c[lid], part_c[lid + s]);
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        let o = 3u * (params.first_frame + f);
        moments[o] = part_t[0];
        moments[o + 1u] = part_r[0];
        moments[o + 2u] = part_c[0];
    }
}
