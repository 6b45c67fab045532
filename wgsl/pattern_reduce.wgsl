// Sum and maximum pattern over the scan positions of a scan ROI (a rectangle or a drawn
// disk, decided on the host as one bit per position of each tile). The resident is
// position-tiled (`src/upload/plan.rs`): a pixel's samples at a tile's positions are one
// 32-byte sector, so an invocation takes half of one pixel's sector (a vec4: 4–16
// positions; a warp reads 512 contiguous bytes) over a chunk of tiles, two loads in flight,
// keeping only the positions inside the ROI (a half-tile with none is not read at all). A
// pixel's two invocations are summed in workgroup memory, then added into the output with
// 32-bit atomics (carry propagated into the high word), so the whole GPU works however
// small the detector is. The output is cleared before the first segment; samples are
// unsigned, so max starts at 0 (C-REDUCE).

struct PatternParams {
    frames: u32,
    tile_words: u32,
    bits: u32,
    det_len: u32,
    first_frame: u32,
    // Tiles per chunk (the host keeps a chunk's u32 sums from wrapping).
    chunk_tiles: u32,
    groups_x: u32,
    // Workgroups (32 pixels each) covering the detector.
    pixel_groups: u32,
    // Float32 residents: the power of two all samples are integer multiples of.
    lsb: i32,
    // Compressed residents: groups of 8 pixels a tile in the packed index.
    packed_groups: u32,
    _pad2: u32,
    _pad3: u32,
}

@group(0) @binding(0) var<uniform> params: PatternParams;
@group(0) @binding(1) var<storage, read> resident: array<vec4<u32>>;
// Per detector pixel: sum lo, sum hi, max, 1 once a position was seen.
@group(0) @binding(2) var<storage, read_write> sum_max: array<atomic<u32>>;
// Per tile of the whole scan: bit p set when the tile's position p is inside the ROI.
@group(0) @binding(3) var<storage, read> tile_masks: array<u32>;
// Float32 residents, per detector pixel: the exact sum as four limbs (a 128-bit integer in
// units of 2^lsb), the order key of the maximum (`float_key`), 1 once seen, a pad word.
@group(0) @binding(4) var<storage, read_write> wide_sum_max: array<atomic<u32>>;

var<workgroup> part_sum: array<vec2<u32>, 64>;
var<workgroup> part_max: array<u32, 64>;
var<workgroup> part_seen: array<u32, 64>;
var<workgroup> part_wide: array<vec4<u32>, 64>;

// Bits of the word's samples whose positions are in `lanes` (bit l = sample l).
fn lane_bits(lanes: u32, bits: u32) -> u32 {
    if (bits == 16u) {
        return ((lanes * 0x8001u) & 0x00010001u) * 0xffffu;
    }
    if (bits == 8u) {
        return ((lanes * 0x00204081u) & 0x01010101u) * 0xffu;
    }
    return 0u - (lanes & 1u);
}

// Sum (u32, with a carry for 32-bit samples) and maximum of the kept samples.
struct Acc {
    sum: u32,
    high: u32,
    top: u32,
}

fn take_word(acc: ptr<function, Acc>, x: u32, bits: u32) {
    var s = x;
    var m = x;
    if (bits == 16u) {
        s = (x & 0xffffu) + (x >> 16u);
        m = max(x & 0xffffu, x >> 16u);
    } else if (bits == 8u) {
        let pairs = (x & 0x00ff00ffu) + ((x >> 8u) & 0x00ff00ffu);
        s = (pairs & 0xffffu) + (pairs >> 16u);
        m = max(max(x & 0xffu, (x >> 8u) & 0xffu), max((x >> 16u) & 0xffu, x >> 24u));
    }
    let sum = (*acc).sum + s;
    (*acc).high += select(0u, 1u, sum < s);
    (*acc).sum = sum;
    (*acc).top = max((*acc).top, m);
}

fn take(acc: ptr<function, Acc>, v: vec4<u32>, bits: u32) {
    take_word(acc, v.x, bits);
    take_word(acc, v.y, bits);
    take_word(acc, v.z, bits);
    take_word(acc, v.w, bits);
}

// The ROI bits of the positions the invocation's half-sector holds, in tile `t`.
fn half_mask(t: u32, h: u32, per_word: u32) -> u32 {
    let m = tile_masks[params.first_frame / (8u * per_word) + t];
    let n = 4u * per_word;
    return (m >> (h * n)) & select((1u << n) - 1u, 0xffffffffu, n == 32u);
}

// The kept samples of tile `t`'s vec4 `q` (zeros when none is inside the ROI, unread).
fn kept(t: u32, q: u32, h: u32, per_word: u32, bits: u32) -> vec4<u32> {
    let m = half_mask(t, h, per_word);
    if (m == 0u) {
        return vec4<u32>(0u);
    }
    return keep_in_roi(resident[t * (params.tile_words / 4u) + q], m, per_word, bits);
}

// A half-sector's four words `x` with the samples of positions outside the ROI (bits of
// `m` clear) zeroed.
fn keep_in_roi(x: vec4<u32>, m: u32, per_word: u32, bits: u32) -> vec4<u32> {
    let full = (1u << per_word) - 1u;
    return x & vec4<u32>(
        lane_bits(m & full, bits),
        lane_bits((m >> per_word) & full, bits),
        lane_bits((m >> (2u * per_word)) & full, bits),
        lane_bits((m >> (3u * per_word)) & full, bits),
    );
}

fn add_exact(k: u32, v: vec2<u32>) {
    let old = atomicAdd(&sum_max[4u * k], v.x);
    let carry = select(0u, 1u, old + v.x < old);
    if (v.y + carry != 0u) {
        atomicAdd(&sum_max[4u * k + 1u], v.y + carry);
    }
}

// This workgroup's chunk of tiles and this invocation's pixel and half-sector.
struct Work {
    t0: u32,
    t1: u32,
    k: u32,
    h: u32,
}

fn work_of(flat: u32, lid: u32, tile_len: u32) -> Work {
    let chunk = flat / params.pixel_groups;
    let q = (flat % params.pixel_groups) * 64u + lid;
    let tiles = (params.frames + tile_len - 1u) / tile_len;
    let t0 = min(tiles, chunk * params.chunk_tiles);
    return Work(t0, min(tiles, t0 + params.chunk_tiles), q / 2u, q % 2u);
}

@compute @workgroup_size(64)
fn pattern_reduce(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let bits = params.bits;
    let per_word = 32u / bits;
    let wk = work_of(wg.x + wg.y * params.groups_x, lid, 8u * per_word);
    var acc = Acc(0u, 0u, 0u);
    var seen = 0u;
    if (wk.k < params.det_len) {
        let q = 2u * wk.k + wk.h;
        var t = wk.t0;
        // Two loads in flight.
        for (; t + 1u < wk.t1; t += 2u) {
            let x0 = kept(t, q, wk.h, per_word, bits);
            let x1 = kept(t + 1u, q, wk.h, per_word, bits);
            take(&acc, x0, bits);
            take(&acc, x1, bits);
        }
        if (t < wk.t1) {
            take(&acc, kept(t, q, wk.h, per_word, bits), bits);
        }
        seen = tiles_seen(wk, per_word);
    }
    add_pixel(lid, wk, acc, seen);
}

// Whether any position of the invocation's chunk of tiles is inside the ROI.
fn tiles_seen(wk: Work, per_word: u32) -> u32 {
    var seen = 0u;
    for (var u = wk.t0; u < wk.t1; u += 1u) {
        seen |= tile_masks[params.first_frame / (8u * per_word) + u];
    }
    return seen;
}

// Sum a pixel's two half-sectors in workgroup memory and add them into the output.
fn add_pixel(lid: u32, wk: Work, acc: Acc, seen: u32) {
    part_sum[lid] = vec2<u32>(acc.sum, acc.high);
    part_max[lid] = acc.top;
    part_seen[lid] = select(0u, 1u, seen != 0u);
    workgroupBarrier();
    if (wk.h == 0u && wk.k < params.det_len && part_seen[lid] != 0u) {
        add_exact(wk.k, add64(part_sum[lid], part_sum[lid + 1u]));
        atomicMax(&sum_max[4u * wk.k + 2u], max(part_max[lid], part_max[lid + 1u]));
        atomicStore(&sum_max[4u * wk.k + 3u], 1u);
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

// The same reduction over float32 residents (four positions a vec4): exact 128-bit sums,
// maximum by order key (C-FLOAT-GPU: IEEE total order, +0 above −0).
@compute @workgroup_size(64)
fn pattern_reduce_f32(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let wk = work_of(wg.x + wg.y * params.groups_x, lid, 8u);
    var s = vec4<u32>(0u);
    var key = 0u;
    var seen = 0u;
    if (wk.k < params.det_len) {
        let q = 2u * wk.k + wk.h;
        for (var t = wk.t0; t < wk.t1; t += 1u) {
            seen |= tile_masks[params.first_frame / 8u + t];
            let m = half_mask(t, wk.h, 1u);
            if (m == 0u) {
                continue;
            }
            let x = resident[t * (params.tile_words / 4u) + q];
            for (var l = 0u; l < 4u; l += 1u) {
                if (((m >> l) & 1u) != 0u) {
                    s = add128(s, fixed128(x[l], 1u, params.lsb));
                    key = max(key, float_key(x[l]));
                }
            }
        }
    }
    part_wide[lid] = s;
    part_max[lid] = key;
    part_seen[lid] = select(0u, 1u, seen != 0u);
    workgroupBarrier();
    if (wk.h == 0u && wk.k < params.det_len && part_seen[lid] != 0u) {
        add_wide(wk.k, add128(part_wide[lid], part_wide[lid + 1u]));
        atomicMax(&wide_sum_max[8u * wk.k + 4u], max(part_max[lid], part_max[lid + 1u]));
        atomicStore(&wide_sum_max[8u * wk.k + 5u], 1u);
    }
}
