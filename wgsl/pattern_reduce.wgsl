// Sum and maximum pattern over the scan positions of a half-open scan ROI: one invocation
// per detector pixel walks the positions; neighbouring invocations read neighbouring words.
// Segments accumulate into the same output (`accumulate` = 1 after the first segment).

struct PatternParams {
    frames: u32,
    frame_words: u32,
    bits: u32,
    det_len: u32,
    first_frame: u32,
    scan_cols: u32,
    roi_r0: u32,
    roi_r1: u32,
    roi_c0: u32,
    roi_c1: u32,
    accumulate: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> params: PatternParams;
@group(0) @binding(1) var<storage, read> resident: array<u32>;
// Per detector pixel: (sum lo, sum hi, max, 1 once a position was seen).
@group(0) @binding(2) var<storage, read_write> sum_max: array<vec4<u32>>;

@compute @workgroup_size(64)
fn pattern_reduce(@builtin(global_invocation_id) gid: vec3<u32>) {
    let k = gid.x;
    if (k >= params.det_len) {
        return;
    }
    let per_word = 32u / params.bits;
    var acc = vec2<u32>(0u, 0u);
    var mx = 0u;
    var seen = 0u;
    if (params.accumulate != 0u) {
        let prev = sum_max[k];
        acc = prev.xy;
        mx = prev.z;
        seen = prev.w;
    }
    for (var f = 0u; f < params.frames; f++) {
        let pos = params.first_frame + f;
        let r = pos / params.scan_cols;
        let c = pos % params.scan_cols;
        if (r < params.roi_r0 || r >= params.roi_r1 || c < params.roi_c0 || c >= params.roi_c1) {
            continue;
        }
        let v = sample_at(resident[f * params.frame_words + k / per_word], k, params.bits);
        acc = add64(acc, vec2<u32>(v, 0u));
        mx = select(max(mx, v), v, seen == 0u);
        seen = 1u;
    }
    sum_max[k] = vec4<u32>(acc, mx, seen);
}
