// Sum and maximum pattern over the scan positions of a scan ROI (per scan row, the columns
// [c0, c1) inside it: a rectangle or a drawn disk, decided on the host). The positions are
// cut into chunks; an invocation takes one resident word (1–4 detector pixels) over one
// chunk of positions and adds its exact partial into the output with 32-bit atomics (carry
// propagated into the high word), so the whole GPU works however small the detector is.
// The output is cleared before the first segment; samples are unsigned, so max starts at 0.

struct PatternParams {
    frames: u32,
    frame_words: u32,
    bits: u32,
    det_len: u32,
    first_frame: u32,
    scan_cols: u32,
    chunk_len: u32,
    groups_x: u32,
    word_groups: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
    _pad3: u32,
}

@group(0) @binding(0) var<uniform> params: PatternParams;
@group(0) @binding(1) var<storage, read> resident: array<u32>;
// Per detector pixel: sum lo, sum hi, max, 1 once a position was seen.
@group(0) @binding(2) var<storage, read_write> sum_max: array<atomic<u32>>;
// Per scan row: the columns [c0, c1) inside the ROI.
@group(0) @binding(3) var<storage, read> roi_rows: array<vec2<u32>>;

fn add_exact(k: u32, v: vec2<u32>) {
    let old = atomicAdd(&sum_max[4u * k], v.x);
    let carry = select(0u, 1u, old + v.x < old);
    if (v.y + carry != 0u) {
        atomicAdd(&sum_max[4u * k + 1u], v.y + carry);
    }
}

@compute @workgroup_size(64)
fn pattern_reduce(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let flat = wg.x + wg.y * params.groups_x;
    let chunk = flat / params.word_groups;
    let w = (flat % params.word_groups) * 64u + lid;
    let f0 = chunk * params.chunk_len;
    if (w >= params.frame_words || f0 >= params.frames) {
        return;
    }
    let f1 = min(f0 + params.chunk_len, params.frames);
    let bits = params.bits;
    let per_word = 32u / bits;
    let low = select((1u << bits) - 1u, 0xffffffffu, bits == 32u);
    var acc: array<vec2<u32>, 4>;
    var mx: array<u32, 4>;
    var seen = false;
    for (var f = f0; f < f1; f += 1u) {
        let pos = params.first_frame + f;
        let r = pos / params.scan_cols;
        let c = pos % params.scan_cols;
        let span = roi_rows[r];
        if (c < span.x || c >= span.y) {
            continue;
        }
        seen = true;
        let word = resident[f * params.frame_words + w];
        for (var s = 0u; s < per_word; s += 1u) {
            let v = (word >> (s * bits)) & low;
            acc[s] = add64(acc[s], vec2<u32>(v, 0u));
            mx[s] = max(mx[s], v);
        }
    }
    if (!seen) {
        return;
    }
    for (var s = 0u; s < per_word; s += 1u) {
        let k = w * per_word + s;
        if (k < params.det_len) {
            add_exact(k, acc[s]);
            atomicMax(&sum_max[4u * k + 2u], mx[s]);
            atomicStore(&sum_max[4u * k + 3u], 1u);
        }
    }
}
