// Display limits computed where the plane lives, so dragging a detector never waits on a
// readback: min/max of the finite values, a 2048-bin histogram of their shown values (the
// display scale, `shown`), then percentile, absolute or symmetric (diverging) limits;
// `src/display/limits.rs` mirrors it on the CPU and parses what it writes. Three passes
// after the stats buffer is cleared: min/max and the histogram over many workgroups (decision
// 0010),
// then the limits in one. Min and max do not depend on the order they are taken in, nor
// then do the bins, so the result is the serial walk's bit for bit.
//
// Units: min/max are of the data values; the histogram spans their shown values; limits
// are found (percentile, symmetric) or given (absolute: in data units, with their shown
// values from the host, one Rust function for GPU and mirror) in shown units, which the
// renderer maps to the ends of the colour map. Limits that cannot apply as asked set a
// note flag instead of failing silently (C-DISPLAY).

struct StatsParams {
    n: u32,
    mode: u32,
    scale: u32,
    _pad0: u32,
    p_lo: f32,
    p_hi: f32,
    // Absolute limits in data units and their shown values.
    abs_lo: f32,
    abs_hi: f32,
    shown_lo: f32,
    shown_hi: f32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> sp: StatsParams;
@group(0) @binding(1) var<storage, read> plane: array<f32>;
// HEADER words (`display::limits::word`), then NB histogram bins: shown lo, hi, min, max
// (f32 bits), finite count, data min, max, notes, the absolute limits asked for, scale,
// mode, 4 spare. Cleared (all zero) before the passes; until the limits pass, word 2 holds
// the complement of an ordered key (`key`) of the smallest data value, word 3 the key of
// the largest, so that zero means none yet for both.
@group(0) @binding(2) var<storage, read_write> stats: array<atomic<u32>>;

const NB: u32 = 2048u;
const WG: u32 = 256u;
const HEADER: u32 = 16u;
const MODE_PERCENTILE: u32 = 0u;
const MODE_ABSOLUTE: u32 = 1u;
const MODE_SYMMETRIC: u32 = 2u;
// Note flags (`display::limits::note`).
const NOTE_NO_FINITE: u32 = 1u;
const NOTE_COLLAPSED: u32 = 2u;
const NOTE_ABOVE_DATA: u32 = 4u;
const NOTE_BELOW_DATA: u32 = 8u;

var<workgroup> hist: array<atomic<u32>, 2048>;
var<workgroup> bins: array<u32, 2048>;
var<workgroup> red_min: array<f32, 256>;
var<workgroup> red_max: array<f32, 256>;
var<workgroup> red_n: array<u32, 256>;

// Four loads in flight per invocation (indices past the end read the last value, which the
// caller skips): a workgroup walks blocks of IN_FLIGHT · WG values.
const IN_FLIGHT: u32 = 4u;
const BLOCK: u32 = IN_FLIGHT * WG;

// u32 keys in the order of the f32 values (NaN aside), so that atomics can take min/max.
fn key(v: f32) -> u32 {
    let u = bitcast<u32>(v);
    return select(u | 0x80000000u, ~u, (u & 0x80000000u) != 0u);
}

fn unkey(k: u32) -> f32 {
    return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

// The serial walk's min and max of the data values, which start from ±3e38 (the CPU
// mirror's rule).
fn lo_all() -> f32 {
    let k = atomicLoad(&stats[2]);
    return select(min(unkey(~k), 3.0e38), 3.0e38, k == 0u);
}

fn hi_all() -> f32 {
    let k = atomicLoad(&stats[3]);
    return select(max(unkey(k), -3.0e38), -3.0e38, k == 0u);
}

// The data values at i0, i0 + WG, i0 + 2·WG, i0 + 3·WG, and which of them count (inside
// the plane and finite).
struct Values4 {
    v: vec4<f32>,
    ok: vec4<bool>,
}

fn values4(i0: u32) -> Values4 {
    let i = i0 + vec4<u32>(0u, WG, 2u * WG, 3u * WG);
    let j = min(i, vec4<u32>(sp.n - 1u));
    var out: Values4;
    out.v = vec4<f32>(plane[j.x], plane[j.y], plane[j.z], plane[j.w]);
    for (var k = 0u; k < IN_FLIGHT; k += 1u) {
        out.ok[k] = i[k] < sp.n && is_finite_f32(out.v[k]);
    }
    return out;
}

@compute @workgroup_size(256)
fn display_stats(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    var mn = 3.0e38;
    var mx = -3.0e38;
    var cnt = 0u;
    for (var blk = wg.x; blk * BLOCK < sp.n; blk += nwg.x) {
        let s4 = values4(blk * BLOCK + lid);
        for (var k = 0u; k < IN_FLIGHT; k += 1u) {
            if (s4.ok[k]) {
                mn = min(mn, s4.v[k]);
                mx = max(mx, s4.v[k]);
                cnt += 1u;
            }
        }
    }
    red_min[lid] = mn;
    red_max[lid] = mx;
    red_n[lid] = cnt;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red_min[lid] = min(red_min[lid], red_min[lid + s]);
            red_max[lid] = max(red_max[lid], red_max[lid + s]);
            red_n[lid] += red_n[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u && red_n[0] > 0u) {
        atomicMax(&stats[2], ~key(red_min[0]));
        atomicMax(&stats[3], key(red_max[0]));
        atomicAdd(&stats[4], red_n[0]);
    }
}

@compute @workgroup_size(256)
fn display_hist(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    for (var b = lid; b < NB; b += WG) {
        atomicStore(&hist[b], 0u);
    }
    workgroupBarrier();
    let lo = shown(lo_all(), sp.scale);
    let per_unit = f32(NB) / max(shown(hi_all(), sp.scale) - lo, 1.0e-30);
    for (var blk = wg.x; blk * BLOCK < sp.n; blk += nwg.x) {
        let s4 = values4(blk * BLOCK + lid);
        for (var k = 0u; k < IN_FLIGHT; k += 1u) {
            if (s4.ok[k]) {
                let v = shown(s4.v[k], sp.scale);
                atomicAdd(&hist[min(u32(max(v - lo, 0.0) * per_unit), NB - 1u)], 1u);
            }
        }
    }
    workgroupBarrier();
    for (var b = lid; b < NB; b += WG) {
        let h = atomicLoad(&hist[b]);
        if (h != 0u) {
            atomicAdd(&stats[HEADER + b], h);
        }
    }
}

@compute @workgroup_size(256)
fn display_limits(@builtin(local_invocation_index) lid: u32) {
    // The bins into workgroup memory, all hands at once, for the serial scan below.
    for (var b = lid; b < NB; b += WG) {
        bins[b] = atomicLoad(&stats[HEADER + b]);
    }
    workgroupBarrier();
    if (lid != 0u) {
        return;
    }
    let lo_v = lo_all();
    let hi_v = hi_all();
    let slo_v = shown(lo_v, sp.scale);
    let shi_v = shown(hi_v, sp.scale);
    let n_fin = atomicLoad(&stats[4]);
    var notes = 0u;
    var lo = slo_v;
    var hi = shi_v;
    if (n_fin == 0u) {
        notes |= NOTE_NO_FINITE;
        lo = 0.0;
        hi = 1.0;
    } else if (sp.mode == MODE_ABSOLUTE) {
        if (sp.abs_lo >= hi_v) {
            notes |= NOTE_ABOVE_DATA;
        }
        if (sp.abs_hi <= lo_v) {
            notes |= NOTE_BELOW_DATA;
        }
        lo = sp.shown_lo;
        hi = sp.shown_hi;
    } else {
        let width = (shi_v - slo_v) / f32(NB);
        let want_lo = sp.p_lo * 0.01 * f32(n_fin);
        let want_hi = sp.p_hi * 0.01 * f32(n_fin);
        var cum = 0u;
        var b_lo = 0u;
        var b_hi = NB - 1u;
        var found_lo = false;
        var found_hi = false;
        for (var b = 0u; b < NB; b += 1u) {
            cum += bins[b];
            if (!found_lo && f32(cum) > want_lo) {
                b_lo = b;
                found_lo = true;
            }
            if (!found_hi && f32(cum) >= want_hi) {
                b_hi = b;
                found_hi = true;
            }
        }
        lo = slo_v + f32(b_lo) * width;
        hi = min(slo_v + f32(b_hi + 1u) * width, shi_v);
        if (sp.mode == MODE_SYMMETRIC) {
            let m = max(abs(lo), abs(hi));
            lo = -m;
            hi = m;
        }
    }
    if (!(hi > lo)) {
        hi = lo + 1.0;
        notes |= NOTE_COLLAPSED;
    }
    atomicStore(&stats[0], bitcast<u32>(lo));
    atomicStore(&stats[1], bitcast<u32>(hi));
    atomicStore(&stats[2], bitcast<u32>(slo_v));
    atomicStore(&stats[3], bitcast<u32>(shi_v));
    atomicStore(&stats[5], bitcast<u32>(lo_v));
    atomicStore(&stats[6], bitcast<u32>(hi_v));
    atomicStore(&stats[7], notes);
    atomicStore(&stats[8], bitcast<u32>(sp.abs_lo));
    atomicStore(&stats[9], bitcast<u32>(sp.abs_hi));
    atomicStore(&stats[10], sp.scale);
    atomicStore(&stats[11], sp.mode);
}
