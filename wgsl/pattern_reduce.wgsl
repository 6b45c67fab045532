// Sum and maximum pattern over the scan positions of a scan ROI (per scan row, the columns
// [c0, c1) inside it: a rectangle or a drawn disk, decided on the host). The positions are
// cut into chunks; an invocation takes one 16-byte unit of the frame (4–16 detector pixels)
// over one chunk of positions, two loads in flight, summing each pixel in a u32 lane (a
// chunk of 256 positions cannot wrap 8/16-bit sums; 32-bit samples carry into a high lane),
// and adds its exact partial into the output with 32-bit atomics (carry propagated into the
// high word), so the whole GPU works however small the detector is. The output is cleared
// before the first segment; samples are unsigned, so max starts at 0.

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
    // Float32 residents: the power of two all samples are integer multiples of.
    lsb: i32,
    _pad1: u32,
    _pad2: u32,
    _pad3: u32,
}

@group(0) @binding(0) var<uniform> params: PatternParams;
@group(0) @binding(1) var<storage, read> resident: array<vec4<u32>>;
// Per detector pixel: sum lo, sum hi, max, 1 once a position was seen.
@group(0) @binding(2) var<storage, read_write> sum_max: array<atomic<u32>>;
// Per scan row: the columns [c0, c1) inside the ROI.
@group(0) @binding(3) var<storage, read> roi_rows: array<vec2<u32>>;
// Float32 residents, per detector pixel: the exact sum as four limbs (a 128-bit integer in
// units of 2^lsb), the order key of the maximum (`float_key`), 1 once seen, a pad word.
@group(0) @binding(4) var<storage, read_write> wide_sum_max: array<atomic<u32>>;

fn add_exact(k: u32, v: vec2<u32>) {
    let old = atomicAdd(&sum_max[4u * k], v.x);
    let carry = select(0u, 1u, old + v.x < old);
    if (v.y + carry != 0u) {
        atomicAdd(&sum_max[4u * k + 1u], v.y + carry);
    }
}

// Per-pixel partials of one invocation: lane l of word w holds sample l of that word.
struct Lanes {
    sum0: vec4<u32>,
    sum1: vec4<u32>,
    sum2: vec4<u32>,
    sum3: vec4<u32>,
    // High words of 32-bit sample sums (lane 0 only).
    high0: vec4<u32>,
    max0: vec4<u32>,
    max1: vec4<u32>,
    max2: vec4<u32>,
    max3: vec4<u32>,
}

fn take(acc: ptr<function, Lanes>, v: vec4<u32>, bits: u32) {
    if (bits == 32u) {
        let s = (*acc).sum0 + v;
        (*acc).high0 += select(vec4<u32>(0u), vec4<u32>(1u), s < v);
        (*acc).sum0 = s;
        (*acc).max0 = max((*acc).max0, v);
    } else if (bits == 16u) {
        let lo = v & vec4<u32>(0xffffu);
        let hi = v >> vec4<u32>(16u);
        (*acc).sum0 += lo;
        (*acc).sum1 += hi;
        (*acc).max0 = max((*acc).max0, lo);
        (*acc).max1 = max((*acc).max1, hi);
    } else {
        let b0 = v & vec4<u32>(0xffu);
        let b1 = (v >> vec4<u32>(8u)) & vec4<u32>(0xffu);
        let b2 = (v >> vec4<u32>(16u)) & vec4<u32>(0xffu);
        let b3 = v >> vec4<u32>(24u);
        (*acc).sum0 += b0;
        (*acc).sum1 += b1;
        (*acc).sum2 += b2;
        (*acc).sum3 += b3;
        (*acc).max0 = max((*acc).max0, b0);
        (*acc).max1 = max((*acc).max1, b1);
        (*acc).max2 = max((*acc).max2, b2);
        (*acc).max3 = max((*acc).max3, b3);
    }
}

fn inside(f: u32) -> bool {
    let pos = params.first_frame + f;
    let span = roi_rows[pos / params.scan_cols];
    let c = pos % params.scan_cols;
    return c >= span.x && c < span.y;
}

@compute @workgroup_size(64)
fn pattern_reduce(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let flat = wg.x + wg.y * params.groups_x;
    let chunk = flat / params.word_groups;
    let q = (flat % params.word_groups) * 64u + lid;
    let nq = params.frame_words / 4u;
    let f0 = chunk * params.chunk_len;
    if (q >= nq || f0 >= params.frames) {
        return;
    }
    let f1 = min(f0 + params.chunk_len, params.frames);
    let bits = params.bits;
    var acc: Lanes;
    var seen = false;
    var f = f0;
    // Two loads in flight; a position outside the ROI reads nothing and adds zeros.
    for (; f + 1u < f1; f += 2u) {
        let in0 = inside(f);
        let in1 = inside(f + 1u);
        var v0 = vec4<u32>(0u);
        var v1 = vec4<u32>(0u);
        if (in0) {
            v0 = resident[f * nq + q];
        }
        if (in1) {
            v1 = resident[(f + 1u) * nq + q];
        }
        seen = seen || in0 || in1;
        take(&acc, v0, bits);
        take(&acc, v1, bits);
    }
    if (f < f1 && inside(f)) {
        seen = true;
        take(&acc, resident[f * nq + q], bits);
    }
    if (!seen) {
        return;
    }
    let per_word = 32u / bits;
    for (var w = 0u; w < 4u; w += 1u) {
        for (var l = 0u; l < per_word; l += 1u) {
            let k = (4u * q + w) * per_word + l;
            if (k >= params.det_len) {
                return;
            }
            var s = vec2<u32>(acc.sum0[w], acc.high0[w]);
            var m = acc.max0[w];
            if (l == 1u) {
                s = vec2<u32>(acc.sum1[w], 0u);
                m = acc.max1[w];
            } else if (l == 2u) {
                s = vec2<u32>(acc.sum2[w], 0u);
                m = acc.max2[w];
            } else if (l == 3u) {
                s = vec2<u32>(acc.sum3[w], 0u);
                m = acc.max3[w];
            }
            add_exact(k, s);
            atomicMax(&sum_max[4u * k + 2u], m);
            atomicStore(&sum_max[4u * k + 3u], 1u);
        }
    }
}

// Add a 128-bit partial into pixel k's limbs: each limb atomically, carries passed upward,
// so concurrent additions still total exactly (mod 2^128, as two's complement wants).
fn add_wide(k: u32, v: vec4<u32>) {
    var carry = 0u;
    for (var l = 0u; l < 4u; l += 1u) {
        let x = v[l] + carry;
        let wrapped = select(0u, 1u, x < carry);
        let old = atomicAdd(&wide_sum_max[8u * k + l], x);
        carry = wrapped + select(0u, 1u, old + x < old);
    }
}

// The same reduction over float32 residents: exact 128-bit sums, maximum by order key.
@compute @workgroup_size(64)
fn pattern_reduce_f32(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let flat = wg.x + wg.y * params.groups_x;
    let chunk = flat / params.word_groups;
    let q = (flat % params.word_groups) * 64u + lid;
    let nq = params.frame_words / 4u;
    let f0 = chunk * params.chunk_len;
    if (q >= nq || f0 >= params.frames) {
        return;
    }
    let f1 = min(f0 + params.chunk_len, params.frames);
    var s0 = vec4<u32>(0u);
    var s1 = vec4<u32>(0u);
    var s2 = vec4<u32>(0u);
    var s3 = vec4<u32>(0u);
    var keys = vec4<u32>(0u);
    var seen = false;
    for (var f = f0; f < f1; f += 1u) {
        if (!inside(f)) {
            continue;
        }
        seen = true;
        let v = resident[f * nq + q];
        s0 = add128(s0, fixed128(v.x, 1u, params.lsb));
        s1 = add128(s1, fixed128(v.y, 1u, params.lsb));
        s2 = add128(s2, fixed128(v.z, 1u, params.lsb));
        s3 = add128(s3, fixed128(v.w, 1u, params.lsb));
        keys = max(keys, vec4<u32>(float_key(v.x), float_key(v.y), float_key(v.z), float_key(v.w)));
    }
    if (!seen) {
        return;
    }
    for (var w = 0u; w < 4u; w += 1u) {
        let k = 4u * q + w;
        if (k >= params.det_len) {
            return;
        }
        var s = s0;
        if (w == 1u) {
            s = s1;
        } else if (w == 2u) {
            s = s2;
        } else if (w == 3u) {
            s = s3;
        }
        add_wide(k, s);
        atomicMax(&wide_sum_max[8u * k + 4u], keys[w]);
        atomicStore(&wide_sum_max[8u * k + 5u], 1u);
    }
}
