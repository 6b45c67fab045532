// Virtual image: per scan position, the exact 64-bit sum of the resident samples of a
// detector mask (BF disk, annulus, rectangle, point, boolean mask, or every pixel for the
// cached total). The mask arrives as word entries `word | selection << 28`: each resident
// word is loaded once, whatever number of its samples is selected. The workgroup stages the
// entries in workgroup memory (shared by its 4 positions, 64 invocations each, each with four
// loads in flight); invocations sum in u32 and fold into 64 bits every `flush` entries (host-proven not to wrap).

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
@group(0) @binding(2) var<storage, read> entries: array<u32>;
@group(0) @binding(3) var<storage, read_write> sums: array<vec2<u32>>;

const WG: u32 = 256u;
const TPP: u32 = 64u;
const PPW: u32 = 4u;
const STAGE: u32 = 2048u;
var<workgroup> partial: array<vec2<u32>, 256>;
var<workgroup> staged: array<u32, 2048>;

// The selected samples of one word, summed.
fn picked(word: u32, sel: u32, bits: u32, per_word: u32, low: u32) -> u32 {
    var sum = 0u;
    for (var s = 0u; s < per_word; s += 1u) {
        if (((sel >> s) & 1u) != 0u) {
            sum += (word >> (s * bits)) & low;
        }
    }
    return sum;
}

@compute @workgroup_size(256)
fn masked_sum(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let slot = lid / TPP;
    let t = lid % TPP;
    let f = (wg.x + wg.y * params.groups_x) * PPW + slot;
    let live = f < params.frames;
    let base = f * params.frame_words;
    let bits = params.bits;
    let per_word = 32u / bits;
    let low = select((1u << bits) - 1u, 0xffffffffu, bits == 32u);
    var acc = vec2<u32>(0u, 0u);
    var run = 0u;
    var left = params.flush;
    // Every invocation walks the same chunks: the barriers stay in uniform control flow.
    for (var c0 = 0u; c0 < params.n_idx; c0 += STAGE) {
        let cn = min(STAGE, params.n_idx - c0);
        workgroupBarrier();
        for (var i = lid; i < cn; i += WG) {
            staged[i] = entries[c0 + i];
        }
        workgroupBarrier();
        if (live) {
            var i = t;
            // Four independent loads in flight per invocation (the kernel is latency-bound
            // otherwise), in named values: indexed arrays would spill to slow memory. Only
            // when four entries cannot wrap the u32 partial.
            if (params.flush >= 4u) {
                for (; i + 3u * TPP < cn; i += 4u * TPP) {
                    let e0 = staged[i];
                    let e1 = staged[i + TPP];
                    let e2 = staged[i + 2u * TPP];
                    let e3 = staged[i + 3u * TPP];
                    let w0 = resident[base + (e0 & 0x0fffffffu)];
                    let w1 = resident[base + (e1 & 0x0fffffffu)];
                    let w2 = resident[base + (e2 & 0x0fffffffu)];
                    let w3 = resident[base + (e3 & 0x0fffffffu)];
                    // `run` holds flush − left entries: fold before it could pass flush.
                    if (left < 4u) {
                        acc = add64(acc, vec2<u32>(run, 0u));
                        run = 0u;
                        left = params.flush;
                    }
                    run += picked(w0, e0 >> 28u, bits, per_word, low) + picked(w1, e1 >> 28u, bits, per_word, low)
                        + picked(w2, e2 >> 28u, bits, per_word, low) + picked(w3, e3 >> 28u, bits, per_word, low);
                    left -= 4u;
                }
            }
            for (; i < cn; i += TPP) {
                let e = staged[i];
                if (left == 0u) {
                    acc = add64(acc, vec2<u32>(run, 0u));
                    run = 0u;
                    left = params.flush;
                }
                run += picked(resident[base + (e & 0x0fffffffu)], e >> 28u, bits, per_word, low);
                left -= 1u;
            }
        }
    }
    acc = add64(acc, vec2<u32>(run, 0u));
    partial[lid] = acc;
    workgroupBarrier();
    for (var s = TPP / 2u; s > 0u; s >>= 1u) {
        if (t < s) {
            partial[lid] = add64(partial[lid], partial[lid + s]);
        }
        workgroupBarrier();
    }
    if (t == 0u && live) {
        sums[params.first_frame + f] = partial[lid];
    }
}
