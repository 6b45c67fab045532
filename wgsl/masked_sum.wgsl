// Virtual image: per scan position, the exact 64-bit sum of the resident samples at a
// sparse list of detector pixels (BF disk, annulus, rectangle, point, boolean mask, or all
// pixels for the cached total). One workgroup per position; threads stride over the list.

struct MaskedSumParams {
    frames: u32,
    frame_words: u32,
    bits: u32,
    n_idx: u32,
    first_frame: u32,
    groups_x: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: MaskedSumParams;
@group(0) @binding(1) var<storage, read> resident: array<u32>;
@group(0) @binding(2) var<storage, read> pixels: array<u32>;
@group(0) @binding(3) var<storage, read_write> sums: array<vec2<u32>>;

const WG: u32 = 256u;
var<workgroup> partial: array<vec2<u32>, 256>;

@compute @workgroup_size(256)
fn masked_sum(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let f = wg.x + wg.y * params.groups_x;
    // Uniform per workgroup: either every invocation returns or none does.
    if (f >= params.frames) {
        return;
    }
    let base = f * params.frame_words;
    let per_word = 32u / params.bits;
    var acc = vec2<u32>(0u, 0u);
    for (var i = lid; i < params.n_idx; i += WG) {
        let k = pixels[i];
        let v = sample_at(resident[base + k / per_word], k, params.bits);
        acc = add64(acc, vec2<u32>(v, 0u));
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            partial[lid] = add64(partial[lid], partial[lid + s]);
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        sums[params.first_frame + f] = partial[0];
    }
}
