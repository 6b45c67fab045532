// Display limits computed where the plane lives, so dragging a detector never waits on a
// readback: the range of the finite values and a 2048-bin histogram over the whole GPU
// (`stats_range`, `stats_hist`: 4096 values per workgroup, folded with 32-bit atomics), then
// percentile, absolute or symmetric (diverging) limits (`stats_limits`, one workgroup).
// `src/display/mod.rs` mirrors the rule on the CPU.

struct StatsParams {
    n: u32,
    mode: u32,
    log_scale: u32,
    groups_x: u32,
    p_lo: f32,
    p_hi: f32,
    abs_lo: f32,
    abs_hi: f32,
}

@group(0) @binding(0) var<uniform> sp: StatsParams;
@group(0) @binding(1) var<storage, read> plane: array<f32>;
// [lo, hi, min, max] as f32 bits, finite count, 3 spare, then NB histogram bins. While the
// passes run, [2] and [3] hold order-preserving encodings (max of ~ord(v), max of ord(v)).
@group(0) @binding(2) var<storage, read_write> stats: array<atomic<u32>>;

const NB: u32 = 2048u;
const WG: u32 = 256u;
const PER_GROUP: u32 = 4096u;
const MODE_ABSOLUTE: u32 = 1u;
const MODE_SYMMETRIC: u32 = 2u;

var<workgroup> hist: array<atomic<u32>, 2048>;
var<workgroup> red_min: array<u32, 256>;
var<workgroup> red_max: array<u32, 256>;
var<workgroup> red_n: array<u32, 256>;

// Finite test on the bits: WGSL lets compilers assume NaN never occurs in comparisons.
fn finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u;
}

// f32 → u32 with the same order, so atomicMax finds float extremes.
fn ord(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn unord(u: u32) -> f32 {
    return bitcast<f32>(select(~u, u & 0x7fffffffu, (u & 0x80000000u) != 0u));
}

fn group_span(wg: vec3<u32>) -> vec2<u32> {
    let g = wg.x + wg.y * sp.groups_x;
    let start = g * PER_GROUP;
    return vec2<u32>(start, min(start + PER_GROUP, sp.n));
}

@compute @workgroup_size(256)
fn stats_range(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let span = group_span(wg);
    var mn = 0u;
    var mx = 0u;
    var cnt = 0u;
    for (var i = span.x + lid; i < span.y; i += WG) {
        let v = shown(plane[i], sp.log_scale);
        if (finite(v)) {
            mn = max(mn, ~ord(v));
            mx = max(mx, ord(v));
            cnt += 1u;
        }
    }
    red_min[lid] = mn;
    red_max[lid] = mx;
    red_n[lid] = cnt;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red_min[lid] = max(red_min[lid], red_min[lid + s]);
            red_max[lid] = max(red_max[lid], red_max[lid + s]);
            red_n[lid] += red_n[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u && red_n[0] > 0u) {
        atomicMax(&stats[2], red_min[0]);
        atomicMax(&stats[3], red_max[0]);
        atomicAdd(&stats[4], red_n[0]);
    }
}

@compute @workgroup_size(256)
fn stats_hist(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    for (var b = lid; b < NB; b += WG) {
        atomicStore(&hist[b], 0u);
    }
    workgroupBarrier();
    let lo = unord(~atomicLoad(&stats[2]));
    let hi = unord(atomicLoad(&stats[3]));
    let scale = f32(NB) / max(hi - lo, 1.0e-30);
    let span = group_span(wg);
    for (var i = span.x + lid; i < span.y; i += WG) {
        let v = shown(plane[i], sp.log_scale);
        if (finite(v)) {
            atomicAdd(&hist[min(u32(max(v - lo, 0.0) * scale), NB - 1u)], 1u);
        }
    }
    workgroupBarrier();
    for (var b = lid; b < NB; b += WG) {
        let h = atomicLoad(&hist[b]);
        if (h != 0u) {
            atomicAdd(&stats[8u + b], h);
        }
    }
}

@compute @workgroup_size(1)
fn stats_limits() {
    let n_fin = atomicLoad(&stats[4]);
    let lo_all = unord(~atomicLoad(&stats[2]));
    let hi_all = unord(atomicLoad(&stats[3]));
    var lo = lo_all;
    var hi = hi_all;
    if (n_fin == 0u) {
        lo = 0.0;
        hi = 1.0;
    } else if (sp.mode == MODE_ABSOLUTE) {
        lo = sp.abs_lo;
        hi = sp.abs_hi;
    } else {
        let width = (hi_all - lo_all) / f32(NB);
        let want_lo = sp.p_lo * 0.01 * f32(n_fin);
        let want_hi = sp.p_hi * 0.01 * f32(n_fin);
        var cum = 0u;
        var b_lo = 0u;
        var b_hi = NB - 1u;
        var found_lo = false;
        var found_hi = false;
        for (var b = 0u; b < NB; b += 1u) {
            cum += atomicLoad(&stats[8u + b]);
            if (!found_lo && f32(cum) > want_lo) {
                b_lo = b;
                found_lo = true;
            }
            if (!found_hi && f32(cum) >= want_hi) {
                b_hi = b;
                found_hi = true;
            }
        }
        lo = lo_all + f32(b_lo) * width;
        hi = min(lo_all + f32(b_hi + 1u) * width, hi_all);
        if (sp.mode == MODE_SYMMETRIC) {
            let m = max(abs(lo), abs(hi));
            lo = -m;
            hi = m;
        }
    }
    if (!(hi > lo)) {
        hi = lo + 1.0;
    }
    atomicStore(&stats[0], bitcast<u32>(lo));
    atomicStore(&stats[1], bitcast<u32>(hi));
    atomicStore(&stats[2], bitcast<u32>(select(lo_all, 3.0e38, n_fin == 0u)));
    atomicStore(&stats[3], bitcast<u32>(select(hi_all, -3.0e38, n_fin == 0u)));
}
