// Centre of mass, fused: per scan position the exact 64-bit total, row moment Σ i·I and
// column moment Σ j·I in one pass over the frame. The single division happens at readout.
// Invocations walk whole words (coalesced), track (row, col) incrementally instead of
// dividing per pixel, and sum in u32, folding into 64 bits every `flush` words (chosen by the
// host so no u32 partial can wrap; 32-bit samples take the 64-bit path per sample).

struct ComParams {
    frames: u32,
    frame_words: u32,
    bits: u32,
    det_rows: u32,
    det_cols: u32,
    first_frame: u32,
    groups_x: u32,
    flush: u32,
}

@group(0) @binding(0) var<uniform> params: ComParams;
@group(0) @binding(1) var<storage, read> resident: array<u32>;
// Per position: total, row moment, column moment, each a (lo, hi) pair.
@group(0) @binding(2) var<storage, read_write> moments: array<vec2<u32>>;

const WG: u32 = 256u;
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
    let cols = params.det_cols;
    var t = vec2<u32>(0u, 0u);
    var mr = vec2<u32>(0u, 0u);
    var mc = vec2<u32>(0u, 0u);
    if (params.bits == 32u || params.flush == 0u) {
        let n = params.det_rows * cols;
        for (var k = lid; k < n; k += WG) {
            let v = sample_at(resident[base + k / per_word], k, params.bits);
            t = add64(t, vec2<u32>(v, 0u));
            mr = add64(mr, mul64(v, k / cols));
            mc = add64(mc, mul64(v, k % cols));
        }
    } else {
        // Pixel of the first sample of word `w`, advanced by WG words per step.
        let k0 = lid * per_word;
        var ij = vec2<u32>(k0 / cols, k0 % cols);
        let step = WG * per_word;
        let dij = vec2<u32>(step / cols, step % cols);
        let mask = (1u << params.bits) - 1u;
        // u32 partials (Σv, Σi·v, Σj·v), folded into the 64-bit sums by `fold`.
        var part = vec3<u32>(0u, 0u, 0u);
        var left = params.flush;
        var w = lid;
        // Two words in flight per invocation (latency-bound otherwise), in named values
        // (indexed arrays spill), when two words cannot wrap the u32 partials.
        if (params.flush >= 2u) {
            for (; w + WG < params.frame_words; w += 2u * WG) {
                let q0 = resident[base + w];
                let q1 = resident[base + w + WG];
                if (left < 2u) {
                    fold(&t, &mr, &mc, &part);
                    left = params.flush;
                }
                let m0 = word_moments(q0, ij, cols, params.bits, per_word, mask);
                ij = advance(ij, dij, cols);
                let m1 = word_moments(q1, ij, cols, params.bits, per_word, mask);
                ij = advance(ij, dij, cols);
                part += m0 + m1;
                left -= 2u;
            }
        }
        for (; w < params.frame_words; w += WG) {
            if (left == 0u) {
                fold(&t, &mr, &mc, &part);
                left = params.flush;
            }
            part += word_moments(resident[base + w], ij, cols, params.bits, per_word, mask);
            ij = advance(ij, dij, cols);
            left -= 1u;
        }
        fold(&t, &mr, &mc, &part);
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
