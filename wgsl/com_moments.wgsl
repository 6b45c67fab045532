// Centre of mass, fused: per scan position the exact 64-bit total, row moment Σ i·I and
// column moment Σ j·I in one pass over the frame. The single division happens at readout.
// Frames are 16 bytes aligned: 64 invocations walk one frame in whole vec4s (coalesced, two
// in flight each), track (row, col) incrementally instead of dividing per pixel, and sum in
// u32, folding into 64 bits every `flush` vec4s (chosen by the host so no u32 partial can
// wrap; 32-bit samples take the 64-bit path per sample). When a detector row holds a whole
// number of vec4s, a vec4 lies in one row: its moments come from two sums (Σv, Σ s·v).

struct ComParams {
    frames: u32,
    frame_words: u32,
    bits: u32,
    det_rows: u32,
    det_cols: u32,
    first_frame: u32,
    groups_x: u32,
    flush: u32,
    // Float32 residents: the power of two all samples are integer multiples of.
    lsb: i32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: ComParams;
@group(0) @binding(1) var<storage, read> resident: array<vec4<u32>>;
// Per position: total, row moment, column moment, each a (lo, hi) pair.
@group(0) @binding(2) var<storage, read_write> moments: array<vec2<u32>>;
// Float32 residents: the same three sums, each a 128-bit integer in units of 2^lsb.
@group(0) @binding(3) var<storage, read_write> wide_moments: array<vec4<u32>>;

const WG: u32 = 256u;
const TPF: u32 = 64u;
const FPW: u32 = 4u;
var<workgroup> part_t: array<vec2<u32>, 256>;
var<workgroup> part_r: array<vec2<u32>, 256>;
var<workgroup> part_c: array<vec2<u32>, 256>;

// (row, col) moved on by `d` (d.y < cols) in row-major order.
fn advance(ij: vec2<u32>, d: vec2<u32>, cols: u32) -> vec2<u32> {
    var r = ij + d;
    if (r.y >= cols) {
        r = vec2<u32>(r.x + 1u, r.y - cols);
    }
    return r;
}

// Add the u32 partials into the 64-bit sums and clear them.
fn fold(t: ptr<function, vec2<u32>>, mr: ptr<function, vec2<u32>>, mc: ptr<function, vec2<u32>>, part: ptr<function, vec3<u32>>) {
    *t = add64(*t, vec2<u32>((*part).x, 0u));
    *mr = add64(*mr, vec2<u32>((*part).y, 0u));
    *mc = add64(*mc, vec2<u32>((*part).z, 0u));
    *part = vec3<u32>(0u, 0u, 0u);
}

// (Σ v, Σ i·v, Σ j·v) over the samples of one word whose first sample is pixel (i, j).
fn word_moments(word: u32, ij: vec2<u32>, cols: u32, bits: u32, per_word: u32, mask: u32) -> vec3<u32> {
    var ii = ij.x;
    var jj = ij.y;
    var m = vec3<u32>(0u, 0u, 0u);
    for (var s = 0u; s < per_word; s += 1u) {
        let v = (word >> (s * bits)) & mask;
        m += vec3<u32>(v, v * ii, v * jj);
        jj += 1u;
        if (jj == cols) {
            jj = 0u;
            ii += 1u;
        }
    }
    return m;
}

// Moments of a vec4 starting at pixel (i, j), its samples in one row: with S = Σ v_s and
// W = Σ s·v_s, they are (S, i·S, j·S + W).
fn row_moments(q: vec4<u32>, ij: vec2<u32>, bits: u32) -> vec3<u32> {
    var s = 0u;
    var w = 0u;
    if (bits == 16u) {
        let lo = q & vec4<u32>(0xffffu);
        let hi = q >> vec4<u32>(16u);
        let p = lo + hi;
        s = p.x + p.y + p.z + p.w;
        w = 2u * (p.y + 2u * p.z + 3u * p.w) + hi.x + hi.y + hi.z + hi.w;
    } else {
        let b0 = q & vec4<u32>(0xffu);
        let b1 = (q >> vec4<u32>(8u)) & vec4<u32>(0xffu);
        let b2 = (q >> vec4<u32>(16u)) & vec4<u32>(0xffu);
        let b3 = q >> vec4<u32>(24u);
        let p = b0 + b1 + b2 + b3;
        let o = b1 + 2u * b2 + 3u * b3;
        s = p.x + p.y + p.z + p.w;
        w = 4u * (p.y + 2u * p.z + 3u * p.w) + o.x + o.y + o.z + o.w;
    }
    return vec3<u32>(s, ij.x * s, ij.y * s + w);
}

// Moments of a vec4 whose samples may cross rows: word by word.
fn any_moments(q: vec4<u32>, k0: u32, cols: u32, bits: u32, per_word: u32, mask: u32) -> vec3<u32> {
    var m = vec3<u32>(0u, 0u, 0u);
    for (var w = 0u; w < 4u; w += 1u) {
        let k = k0 + w * per_word;
        m += word_moments(q[w], vec2<u32>(k / cols, k % cols), cols, bits, per_word, mask);
    }
    return m;
}

fn vec4_moments(q: vec4<u32>, ij: vec2<u32>, k0: u32, in_row: bool, cols: u32, bits: u32, per_word: u32, mask: u32) -> vec3<u32> {
    if (in_row) {
        return row_moments(q, ij, bits);
    }
    return any_moments(q, k0, cols, bits, per_word, mask);
}

@compute @workgroup_size(256)
fn com_moments(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let slot = lid / TPF;
    let lane = lid % TPF;
    let f = (wg.x + wg.y * params.groups_x) * FPW + slot;
    let live = f < params.frames;
    let nq = params.frame_words / 4u;
    let base = f * nq;
    let per_word = 32u / params.bits;
    let spq = 4u * per_word;
    let cols = params.det_cols;
    var t = vec2<u32>(0u, 0u);
    var mr = vec2<u32>(0u, 0u);
    var mc = vec2<u32>(0u, 0u);
    if (live && (params.bits == 32u || params.flush == 0u)) {
        let n = params.det_rows * cols;
        for (var k = lane; k < n; k += TPF) {
            let w = k / per_word;
            let v = sample_at(resident[base + w / 4u][w % 4u], k, params.bits);
            t = add64(t, vec2<u32>(v, 0u));
            mr = add64(mr, mul64(v, k / cols));
            mc = add64(mc, mul64(v, k % cols));
        }
    } else if (live) {
        // Pixel of the first sample of vec4 `q`, advanced by TPF vec4s per step.
        let in_row = cols % spq == 0u;
        var k0 = lane * spq;
        var ij = vec2<u32>(k0 / cols, k0 % cols);
        let step = TPF * spq;
        let dij = vec2<u32>(step / cols, step % cols);
        let mask = (1u << params.bits) - 1u;
        // u32 partials (Σv, Σi·v, Σj·v), folded into the 64-bit sums by `fold`.
        var part = vec3<u32>(0u, 0u, 0u);
        var left = params.flush;
        var q = lane;
        // Two vec4s in flight per invocation, when two cannot wrap the u32 partials.
        if (params.flush >= 2u) {
            for (; q + TPF < nq; q += 2u * TPF) {
                let q0 = resident[base + q];
                let q1 = resident[base + q + TPF];
                if (left < 2u) {
                    fold(&t, &mr, &mc, &part);
                    left = params.flush;
                }
                let m0 = vec4_moments(q0, ij, k0, in_row, cols, params.bits, per_word, mask);
                ij = advance(ij, dij, cols);
                let m1 = vec4_moments(q1, ij, k0 + step, in_row, cols, params.bits, per_word, mask);
                ij = advance(ij, dij, cols);
                k0 += 2u * step;
                part += m0 + m1;
                left -= 2u;
            }
        }
        for (; q < nq; q += TPF) {
            if (left == 0u) {
                fold(&t, &mr, &mc, &part);
                left = params.flush;
            }
            part += vec4_moments(resident[base + q], ij, k0, in_row, cols, params.bits, per_word, mask);
            ij = advance(ij, dij, cols);
            k0 += step;
            left -= 1u;
        }
        fold(&t, &mr, &mc, &part);
    }
    part_t[lid] = t;
    part_r[lid] = mr;
    part_c[lid] = mc;
    workgroupBarrier();
    // 64 → 8 → 1 per frame: two barriers instead of a six-level tree.
    if (lane < 8u) {
        for (var k = lid + 8u; k < lid + TPF; k += 8u) {
            part_t[lid] = add64(part_t[lid], part_t[k]);
            part_r[lid] = add64(part_r[lid], part_r[k]);
            part_c[lid] = add64(part_c[lid], part_c[k]);
        }
    }
    workgroupBarrier();
    if (lane == 0u && live) {
        var st = part_t[lid];
        var sr = part_r[lid];
        var sc = part_c[lid];
        for (var k = lid + 1u; k < lid + 8u; k += 1u) {
            st = add64(st, part_t[k]);
            sr = add64(sr, part_r[k]);
            sc = add64(sc, part_c[k]);
        }
        let o = 3u * (params.first_frame + f);
        moments[o] = st;
        moments[o + 1u] = sr;
        moments[o + 2u] = sc;
    }
}

var<workgroup> wide_t: array<vec4<u32>, 256>;
var<workgroup> wide_r: array<vec4<u32>, 256>;
var<workgroup> wide_c: array<vec4<u32>, 256>;

// The same moments over float32 residents (one sample per word), exact in 128-bit integers.
@compute @workgroup_size(256)
fn com_moments_f32(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let slot = lid / TPF;
    let lane = lid % TPF;
    let f = (wg.x + wg.y * params.groups_x) * FPW + slot;
    let live = f < params.frames;
    let base = f * params.frame_words;
    var t = vec4<u32>(0u);
    var mr = vec4<u32>(0u);
    var mc = vec4<u32>(0u);
    if (live) {
        let cols = params.det_cols;
        for (var k = lane; k < params.det_rows * cols; k += TPF) {
            let q = resident[(base + k) / 4u];
            let x = q[(base + k) % 4u];
            t = add128(t, fixed128(x, 1u, params.lsb));
            mr = add128(mr, fixed128(x, k / cols, params.lsb));
            mc = add128(mc, fixed128(x, k % cols, params.lsb));
        }
    }
    wide_t[lid] = t;
    wide_r[lid] = mr;
    wide_c[lid] = mc;
    workgroupBarrier();
    if (lane < 8u) {
        for (var k = lid + 8u; k < lid + TPF; k += 8u) {
            wide_t[lid] = add128(wide_t[lid], wide_t[k]);
            wide_r[lid] = add128(wide_r[lid], wide_r[k]);
            wide_c[lid] = add128(wide_c[lid], wide_c[k]);
        }
    }
    workgroupBarrier();
    if (lane == 0u && live) {
        var st = wide_t[lid];
        var sr = wide_r[lid];
        var sc = wide_c[lid];
        for (var k = lid + 1u; k < lid + 8u; k += 1u) {
            st = add128(st, wide_t[k]);
            sr = add128(sr, wide_r[k]);
            sc = add128(sc, wide_c[k]);
        }
        let o = 3u * (params.first_frame + f);
        wide_moments[o] = st;
        wide_moments[o + 1u] = sr;
        wide_moments[o + 2u] = sc;
    }
}
