// Centre of mass, fused: per scan position the exact 64-bit total, row moment Σ i·I and
// column moment Σ j·I in one pass. The single division happens at readout (C-COM).
// The resident is position-tiled (`src/upload/plan.rs`): a tile is one contiguous block (a
// 32-byte sector per detector pixel); `parts` workgroups per tile each take a band of
// detector rows. Each invocation holds four positions (two for 32-bit samples) and a fixed
// set of columns j ≡ slot (mod slots), walking their rows, so the workgroup reads whole
// runs of neighbouring sectors, the column moment is j · (column sum), and the row moment
// comes from running sums: Σ v and Σ of the running Σ v, two u32 additions a sample.
// `com_moments` keeps every sum in u32 lanes (the host picks bands small enough that no
// lane can wrap) and folds the running sums every `flush` rows; `com_moments_wide` takes
// the 64-bit path per sample (32-bit samples, or detectors too large for u32 lanes).
// A part's sums are added into the output with 32-bit atomics (carries passed upward); the
// host clears it first.

struct ComParams {
    frames: u32,
    tile_words: u32,
    bits: u32,
    det_rows: u32,
    det_cols: u32,
    first_frame: u32,
    groups_x: u32,
    flush: u32,
    // Float32 residents: the power of two all samples are integer multiples of.
    lsb: i32,
    // Workgroups per tile, each a contiguous part of the detector.
    parts: u32,
    // Compressed residents: groups of 8 pixels a tile in the packed index.
    packed_groups: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: ComParams;
@group(0) @binding(1) var<storage, read> resident: array<vec2<u32>>;
// Per position: total, row moment, column moment, each a (lo, hi) pair, added into.
@group(0) @binding(2) var<storage, read_write> moments: array<atomic<u32>>;
// Float32 residents: the same three sums, each a 128-bit integer in units of 2^lsb (four
// limbs, least significant first), added into (C-FLOAT-GPU).
@group(0) @binding(3) var<storage, read_write> wide_moments: array<atomic<u32>>;

const WG: u32 = 256u;
var<workgroup> part: array<vec2<u32>, 1024>;
var<workgroup> wide_part: array<vec4<u32>, 512>;

// 64-bit lanes: low words and high words of four sums.
struct Wide4 {
    lo: vec4<u32>,
    hi: vec4<u32>,
}

fn add_lanes(a: Wide4, x: vec4<u32>) -> Wide4 {
    let lo = a.lo + x;
    return Wide4(lo, a.hi + select(vec4<u32>(0u), vec4<u32>(1u), lo < x));
}

// i · x added per lane, exactly (named components: indexed ones would leave registers).
fn add_scaled(a: Wide4, x: vec4<u32>, i: u32) -> Wide4 {
    let p0 = mul64(x.x, i);
    let p1 = mul64(x.y, i);
    let p2 = mul64(x.z, i);
    let p3 = mul64(x.w, i);
    let lo = a.lo + vec4<u32>(p0.x, p1.x, p2.x, p3.x);
    let carry = select(vec4<u32>(0u), vec4<u32>(1u), lo < a.lo);
    return Wide4(lo, a.hi + vec4<u32>(p0.y, p1.y, p2.y, p3.y) + carry);
}

// The vec2 holding the invocation's positions at pixel k (`off`: its vec2 in the sector).
// Loads stay free of branches so that several are in flight.
fn load_at(tile_base: u32, k: u32, off: u32) -> vec2<u32> {
    return resident[tile_base + 4u * k + off];
}

// The invocation's samples in a loaded vec2: u8 takes one of its words (four positions,
// `odd` picks which), u16 both (four), u32 both (two).
fn unpack(q: vec2<u32>, bits: u32, odd: bool) -> vec4<u32> {
    if (bits == 8u) {
        let x = select(q.x, q.y, odd);
        return vec4<u32>(x & 0xffu, (x >> 8u) & 0xffu, (x >> 16u) & 0xffu, x >> 24u);
    }
    if (bits == 16u) {
        return vec4<u32>(q.x & 0xffffu, q.x >> 16u, q.y & 0xffffu, q.y >> 16u);
    }
    return vec4<u32>(q.x, q.y, 0u, 0u);
}

// Whether workgroup `flat`'s tile lies past the segment: decided from workgroup values
// only, so the exit stays in uniform control flow (barriers follow).
fn past_end(flat: u32) -> bool {
    return (flat / params.parts) * (256u / params.bits) >= params.frames;
}

// This workgroup's tile and its band [i0, i1) of detector rows, and this invocation's slot,
// sector offset and positions.
struct Work {
    tile: u32,
    i0: u32,
    i1: u32,
    slot: u32,
    slots: u32,
    sub: u32,
    off: u32,
    odd: bool,
    hold: u32,
    tile_len: u32,
}

fn work_of(flat: u32, lid: u32) -> Work {
    let part = flat % params.parts;
    let rows = params.det_rows;
    let per = (rows + params.parts - 1u) / params.parts;
    let i0 = min(rows, part * per);
    let bits = params.bits;
    // u8: eight invocations a sector (a word each); u16 and u32: four (a vec2 each).
    let ips = select(4u, 8u, bits == 8u);
    let sub = lid % ips;
    return Work(
        flat / params.parts,
        i0,
        min(rows, i0 + per),
        lid / ips,
        WG / ips,
        sub,
        select(sub, sub / 2u, bits == 8u),
        bits == 8u && (sub & 1u) != 0u,
        select(4u, 2u, bits == 32u),
        256u / bits,
    );
}

// Sum every slot's lanes into the tile's positions (position `sub · hold + l` is lane l):
// all invocations sum four entries of one position (tile_len divides 256), then the
// tile_len invocations of each position sum theirs.
fn reduce_round(value: Wide4, lid: u32, w: Work) -> vec2<u32> {
    workgroupBarrier();
    let o = w.slot * w.tile_len + w.sub * w.hold;
    part[o] = vec2<u32>(value.lo.x, value.hi.x);
    part[o + 1u] = vec2<u32>(value.lo.y, value.hi.y);
    if (w.hold == 4u) {
        part[o + 2u] = vec2<u32>(value.lo.z, value.hi.z);
        part[o + 3u] = vec2<u32>(value.lo.w, value.hi.w);
    }
    workgroupBarrier();
    var s = vec2<u32>(0u, 0u);
    for (var e = lid; e < w.slots * w.tile_len; e += WG) {
        s = add64(s, part[e]);
    }
    workgroupBarrier();
    part[lid] = s;
    workgroupBarrier();
    var total = vec2<u32>(0u, 0u);
    if (lid < w.tile_len) {
        for (var e = lid; e < WG; e += w.tile_len) {
            total = add64(total, part[e]);
        }
    }
    return total;
}

// Add a 64-bit value into words (o, o + 1) of the moments.
fn add_moment(o: u32, v: vec2<u32>) {
    if (v.x == 0u && v.y == 0u) {
        return;
    }
    let old = atomicAdd(&moments[o], v.x);
    let carry = select(0u, 1u, old + v.x < old);
    if (v.y + carry != 0u) {
        atomicAdd(&moments[o + 1u], v.y + carry);
    }
}

// Add a 128-bit value into limbs [o, o + 4) of the float moments, carries passed upward.
fn add_wide_moment(o: u32, v: vec4<u32>) {
    var carry = 0u;
    for (var l = 0u; l < 4u; l += 1u) {
        let x = v[l] + carry;
        let wrapped = select(0u, 1u, x < carry);
        let old = atomicAdd(&wide_moments[o + l], x);
        carry = wrapped + select(0u, 1u, old + x < old);
    }
}

// Reduce the three sums over the workgroup and add them into the tile's positions.
fn finish(t: Wide4, mr: Wide4, mc: Wide4, lid: u32, w: Work) {
    let st = reduce_round(t, lid, w);
    let sr = reduce_round(mr, lid, w);
    let sc = reduce_round(mc, lid, w);
    let f = w.tile * w.tile_len + lid;
    if (lid < w.tile_len && f < params.frames) {
        let o = 6u * (params.first_frame + f);
        add_moment(o, st);
        add_moment(o + 2u, sr);
        add_moment(o + 4u, sc);
    }
}

@compute @workgroup_size(256)
fn com_moments(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let flat = wg.x + wg.y * params.groups_x;
    if (past_end(flat)) {
        return;
    }
    let w = work_of(flat, lid);
    let bits = params.bits;
    let cols = params.det_cols;
    let tile_base = w.tile * (params.tile_words / 2u);
    var t = vec4<u32>(0u);
    var mr = vec4<u32>(0u);
    var mc = vec4<u32>(0u);
    for (var j = w.slot; j < cols; j += w.slots) {
        var i = w.i0;
        while (i < w.i1) {
            // Over rows [i, stop): S = Σ v and Q = Σ of S before each row, so that
            // Σ row · v = (stop − 1) · S − Q.
            let stop = min(w.i1, i + params.flush);
            var s = vec4<u32>(0u);
            var q = vec4<u32>(0u);
            var k = i * cols + j;
            // Four loads in flight.
            for (; i + 3u < stop; i += 4u) {
                let q0 = load_at(tile_base, k, w.off);
                let q1 = load_at(tile_base, k + cols, w.off);
                let q2 = load_at(tile_base, k + 2u * cols, w.off);
                let q3 = load_at(tile_base, k + 3u * cols, w.off);
                k += 4u * cols;
                q += s;
                s += unpack(q0, bits, w.odd);
                q += s;
                s += unpack(q1, bits, w.odd);
                q += s;
                s += unpack(q2, bits, w.odd);
                q += s;
                s += unpack(q3, bits, w.odd);
            }
            for (; i < stop; i += 1u) {
                q += s;
                s += unpack(load_at(tile_base, k, w.off), bits, w.odd);
                k += cols;
            }
            // u32 lanes: the host's bands keep every true sum below 2^32, so the
            // wrapping arithmetic is exact.
            t += s;
            mr += (stop - 1u) * s - q;
            mc += j * s;
        }
    }
    let zero = vec4<u32>(0u);
    finish(Wide4(t, zero), Wide4(mr, zero), Wide4(mc, zero), lid, w);
}

// The same moments with 64-bit sums per sample: 32-bit samples, and detectors whose sums
// would not fit the u32 lanes.
@compute @workgroup_size(256)
fn com_moments_wide(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let flat = wg.x + wg.y * params.groups_x;
    if (past_end(flat)) {
        return;
    }
    let w = work_of(flat, lid);
    let cols = params.det_cols;
    let tile_base = w.tile * (params.tile_words / 2u);
    let zero = Wide4(vec4<u32>(0u), vec4<u32>(0u));
    var t = zero;
    var mr = zero;
    var mc = zero;
    for (var j = w.slot; j < cols; j += w.slots) {
        for (var i = w.i0; i < w.i1; i += 1u) {
            let v = unpack(load_at(tile_base, i * cols + j, w.off), params.bits, w.odd);
            t = add_lanes(t, v);
            mr = add_scaled(mr, v, i);
            mc = add_scaled(mc, v, j);
        }
    }
    finish(t, mr, mc, lid, w);
}

// One round of the float32 reduction: 128-bit sums of positions 2·sub and 2·sub + 1.
fn reduce_wide(a: vec4<u32>, b: vec4<u32>, lid: u32, slot: u32, sub: u32) -> vec4<u32> {
    workgroupBarrier();
    wide_part[slot * 8u + 2u * sub] = a;
    wide_part[slot * 8u + 2u * sub + 1u] = b;
    workgroupBarrier();
    var s = vec4<u32>(0u);
    if (lid < 8u) {
        for (var k = 0u; k < 64u; k += 1u) {
            s = add128(s, wide_part[k * 8u + lid]);
        }
    }
    return s;
}

// The same moments over float32 residents (one sample per word, two positions an
// invocation), exact in 128-bit integers.
@compute @workgroup_size(256)
fn com_moments_f32(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let cols = params.det_cols;
    let flat = wg.x + wg.y * params.groups_x;
    if (past_end(flat)) {
        return;
    }
    let pt = work_of(flat, lid);
    let tile = pt.tile;
    let slot = lid / 4u;
    let sub = lid % 4u;
    let tile_base = tile * (params.tile_words / 2u);
    var t0 = vec4<u32>(0u);
    var t1 = vec4<u32>(0u);
    var r0 = vec4<u32>(0u);
    var r1 = vec4<u32>(0u);
    var c0 = vec4<u32>(0u);
    var c1 = vec4<u32>(0u);
    for (var k = pt.i0 * cols + slot; k < pt.i1 * cols; k += 64u) {
        let q = resident[tile_base + 4u * k + sub];
        let i = k / cols;
        let j = k % cols;
        t0 = add128(t0, fixed128(q.x, 1u, params.lsb));
        t1 = add128(t1, fixed128(q.y, 1u, params.lsb));
        r0 = add128(r0, fixed128(q.x, i, params.lsb));
        r1 = add128(r1, fixed128(q.y, i, params.lsb));
        c0 = add128(c0, fixed128(q.x, j, params.lsb));
        c1 = add128(c1, fixed128(q.y, j, params.lsb));
    }
    let st = reduce_wide(t0, t1, lid, slot, sub);
    let sr = reduce_wide(r0, r1, lid, slot, sub);
    let sc = reduce_wide(c0, c1, lid, slot, sub);
    let f = tile * 8u + lid;
    if (lid < 8u && f < params.frames) {
        let o = 12u * (params.first_frame + f);
        add_wide_moment(o, st);
        add_wide_moment(o + 4u, sr);
        add_wide_moment(o + 8u, sc);
    }
}
