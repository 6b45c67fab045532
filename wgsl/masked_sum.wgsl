// Virtual image: per scan position, the exact 64-bit sum of the resident samples at a
// sparse list of detector pixels (BF disk, annulus, rectangle, point, boolean mask, or all
// pixels for the cached total). A workgroup serves 4 positions with 64 invocations each;
// invocations sum in u32 and fold into 64 bits only every `flush` samples (set by the host
// so a u32 partial can never wrap), which keeps the inner loop at one load and one add.

struct MaskedSumParams {
    frames: u32,
    frame_words: u32,
    bits: u32,
    n_idx: u32,
    first_frame: u32,
    groups_x: u32,
    flush: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> params: MaskedSumParams;
@group(0) @binding(1) var<storage, read> resident: array<u32>;
@group(0) @binding(2) var<storage, read> pixels: array<u32>;
@group(0) @binding(3) var<storage, read_write> sums: array<vec2<u32>>;

const TPP: u32 = 64u;
const PPW: u32 = 4u;
var<workgroup> partial: array<vec2<u32>, 256>;

@compute @workgroup_size(256)
fn masked_sum(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let slot = lid / TPP;
    let t = lid % TPP;
    let f = (wg.x + wg.y * params.groups_x) * PPW + slot;
    var acc = vec2<u32>(0u, 0u);
    // No early return: every invocation must reach the barriers below.
    if (f < params.frames) {
        let base = f * params.frame_words;
        let per_word = 32u / params.bits;
        var run = 0u;
        var left = params.flush;
        for (var i = t; i < params.n_idx; i += TPP) {
            let k = pixels[i];
            run += sample_at(resident[base + k / per_word], k, params.bits);
            left -= 1u;
            if (left == 0u) {
                acc = add64(acc, vec2<u32>(run, 0u));
                run = 0u;
                left = params.flush;
            }
        }
        acc = add64(acc, vec2<u32>(run, 0u));
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var s = TPP / 2u; s > 0u; s >>= 1u) {
        if (t < s) {
            partial[lid] = add64(partial[lid], partial[lid + s]);
        }
        workgroupBarrier();
    }
    if (t == 0u && f < params.frames) {
        sums[params.first_frame + f] = partial[lid];
    }
}
