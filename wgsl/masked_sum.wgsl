// Virtual image: per scan position, the exact 64-bit sum of the resident samples of a
// detector mask (BF disk, annulus, rectangle, point, boolean mask, or every pixel for the
// cached total). Frames are 16 bytes aligned, so the mask arrives as 16-byte entries
// `vec4_index << 16 | selection` (bit s = sample s of those 16 bytes) and every load is a
// whole vec4: bandwidth, not load count, bounds the kernel. A warp's 32 invocations take 32
// neighbouring entries of one position (contiguous runs of detector rows in one request);
// the workgroup's 8 positions share the entries, staged in workgroup memory.
// Invocations sum in u32 and fold into 64 bits every `flush` entries (host-proven not to
// wrap); 32-bit samples add in 64 bits directly.

struct MaskedSumParams {
    frames: u32,
    frame_words: u32,
    bits: u32,
    n_idx: u32,
    first_frame: u32,
    groups_x: u32,
    flush: u32,
    // Float32 residents: the power of two all samples are integer multiples of.
    lsb: i32,
}

@group(0) @binding(0) var<uniform> params: MaskedSumParams;
@group(0) @binding(1) var<storage, read> resident: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> entries: array<u32>;
@group(0) @binding(3) var<storage, read_write> sums: array<vec2<u32>>;
// Float32 residents: per position the exact sum, a 128-bit integer in units of 2^lsb.
@group(0) @binding(4) var<storage, read_write> wide_sums: array<vec4<u32>>;

const WG: u32 = 256u;
const TPP: u32 = 32u;
const PPW: u32 = 8u;
const STAGE: u32 = 2048u;
var<workgroup> partial: array<vec2<u32>, 256>;
var<workgroup> staged: array<u32, 2048>;
var<workgroup> partial_wide: array<vec4<u32>, 256>;

// Entries [c0, c0 + n) into workgroup memory; called by every invocation (uniform control).
fn stage(c0: u32, n: u32, lid: u32) {
    workgroupBarrier();
    for (var i = lid; i < n; i += WG) {
        staged[i] = entries[c0 + i];
    }
    workgroupBarrier();
}

// Bit mask of the selected samples of word `k` (0..3) of a vec4: the selection bits of the
// word spread to one bit per sample (carry-free multiplications), widened to the sample.
fn word_mask(sel: u32, k: u32, bits: u32) -> u32 {
    if (bits == 16u) {
        return ((((sel >> (2u * k)) & 3u) * 0x8001u) & 0x00010001u) * 0xffffu;
    }
    if (bits == 8u) {
        return ((((sel >> (4u * k)) & 15u) * 0x00204081u) & 0x01010101u) * 0xffu;
    }
    return 0u - ((sel >> k) & 1u);
}

fn selected(v: vec4<u32>, sel: u32, bits: u32, full: u32) -> vec4<u32> {
    if (sel == full) {
        return v;
    }
    return v & vec4<u32>(word_mask(sel, 0u, bits), word_mask(sel, 1u, bits), word_mask(sel, 2u, bits), word_mask(sel, 3u, bits));
}

// Sum of the 8- or 16-bit samples of a vec4 (at most 16·255 or 8·65535).
fn lanes_sum(x: vec4<u32>, bits: u32) -> u32 {
    if (bits == 16u) {
        let s = (x & vec4<u32>(0xffffu)) + (x >> vec4<u32>(16u));
        return s.x + s.y + s.z + s.w;
    }
    // Byte pairs first: each 16-bit half stays below 4·510, so no carry crosses halves.
    let y = (x & vec4<u32>(0x00ff00ffu)) + ((x >> vec4<u32>(8u)) & vec4<u32>(0x00ff00ffu));
    let z = y.x + y.y + y.z + y.w;
    return (z & 0xffffu) + (z >> 16u);
}

fn entry_sum(e: u32, base: u32, bits: u32, full: u32) -> u32 {
    return lanes_sum(selected(resident[base + (e >> 16u)], e & 0xffffu, bits, full), bits);
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
    let base = f * (params.frame_words / 4u);
    let bits = params.bits;
    let full = (1u << (128u / bits)) - 1u;
    var acc = vec2<u32>(0u, 0u);
    var run = 0u;
    var left = params.flush;
    // Every invocation walks the same chunks: the barriers stay in uniform control flow.
    for (var c0 = 0u; c0 < params.n_idx; c0 += STAGE) {
        let cn = min(STAGE, params.n_idx - c0);
        stage(c0, cn, lid);
        if (live && bits == 32u) {
            for (var i = t; i < cn; i += TPP) {
                let e = staged[i];
                let x = selected(resident[base + (e >> 16u)], e & 0xffffu, bits, full);
                acc = add64(add64(acc, vec2<u32>(x.x, 0u)), vec2<u32>(x.y, 0u));
                acc = add64(add64(acc, vec2<u32>(x.z, 0u)), vec2<u32>(x.w, 0u));
            }
        } else if (live) {
            var i = t;
            // Four independent loads in flight per invocation, in named values (indexed
            // arrays would spill), when four entries cannot wrap the u32 partial.
            if (params.flush >= 4u) {
                for (; i + 3u * TPP < cn; i += 4u * TPP) {
                    let s0 = entry_sum(staged[i], base, bits, full);
                    let s1 = entry_sum(staged[i + TPP], base, bits, full);
                    let s2 = entry_sum(staged[i + 2u * TPP], base, bits, full);
                    let s3 = entry_sum(staged[i + 3u * TPP], base, bits, full);
                    // `run` holds flush − left entries: fold before it could pass flush.
                    if (left < 4u) {
                        acc = add64(acc, vec2<u32>(run, 0u));
                        run = 0u;
                        left = params.flush;
                    }
                    run += s0 + s1 + s2 + s3;
                    left -= 4u;
                }
            }
            for (; i < cn; i += TPP) {
                if (left == 0u) {
                    acc = add64(acc, vec2<u32>(run, 0u));
                    run = 0u;
                    left = params.flush;
                }
                run += entry_sum(staged[i], base, bits, full);
                left -= 1u;
            }
        }
    }
    partial[lid] = add64(acc, vec2<u32>(run, 0u));
    workgroupBarrier();
    // TPP → 8 → 1 per position.
    if (t < 8u) {
        for (var k = lid + 8u; k < lid - t + TPP; k += 8u) {
            partial[lid] = add64(partial[lid], partial[k]);
        }
    }
    workgroupBarrier();
    if (t == 0u && live) {
        var s = partial[lid];
        for (var k = 1u; k < 8u; k += 1u) {
            s = add64(s, partial[lid + k]);
        }
        sums[params.first_frame + f] = s;
    }
}

// The same sum over float32 residents (one sample per word), exact in 128-bit integers.
@compute @workgroup_size(256)
fn masked_sum_f32(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let slot = lid / TPP;
    let t = lid % TPP;
    let f = (wg.x + wg.y * params.groups_x) * PPW + slot;
    let live = f < params.frames;
    let base = f * (params.frame_words / 4u);
    var acc = vec4<u32>(0u);
    for (var c0 = 0u; c0 < params.n_idx; c0 += STAGE) {
        let cn = min(STAGE, params.n_idx - c0);
        stage(c0, cn, lid);
        if (live) {
            for (var i = t; i < cn; i += TPP) {
                let e = staged[i];
                let v = resident[base + (e >> 16u)];
                for (var w = 0u; w < 4u; w += 1u) {
                    if (((e >> w) & 1u) != 0u) {
                        acc = add128(acc, fixed128(v[w], 1u, params.lsb));
                    }
                }
            }
        }
    }
    partial_wide[lid] = acc;
    workgroupBarrier();
    if (t == 0u && live) {
        var s = partial_wide[lid];
        for (var k = 1u; k < TPP; k += 1u) {
            s = add128(s, partial_wide[lid + k]);
        }
        wide_sums[params.first_frame + f] = s;
    }
}
