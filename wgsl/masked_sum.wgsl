// Virtual image: per scan position, the exact 64-bit sum of the resident samples of a
// detector mask (BF disk, annulus, rectangle, point, boolean mask, or every pixel for the
// cached total). The resident is position-tiled (`src/resident.rs`): a tile keeps each
// detector pixel's samples at its 8–32 positions in one 32-byte sector. A workgroup takes
// one part of the mask's pixels in one tile (`parts` per tile keep a large GPU busy), a
// pair of invocations one selected pixel's sector (a vec4 each), so the kernel reads the
// mask's own bytes and nothing around it; pixels are listed ascending, so neighbouring
// invocations read neighbouring sectors.
// Each invocation sums its positions in u32 lanes (the host sizes the parts so that no lane
// can wrap); 32-bit samples carry into a high lane instead. The slots' sums meet in
// workgroup memory (or through subgroups: `masked_sum_subgroup.wgsl`) and are summed in 64
// bits, and a part's per-position totals are added into the output with 32-bit atomics
// (the carry into the high word passed on); the host clears it first.

struct MaskedSumParams {
    frames: u32,
    tile_words: u32,
    bits: u32,
    n_idx: u32,
    first_frame: u32,
    groups_x: u32,
    // Float32 residents: the power of two all samples are integer multiples of.
    lsb: i32,
    // Workgroups per tile, each a contiguous part of the pixel list.
    parts: u32,
}

@group(0) @binding(0) var<uniform> params: MaskedSumParams;
@group(0) @binding(1) var<storage, read> resident: array<vec4<u32>>;
// The selected detector pixels, ascending.
@group(0) @binding(2) var<storage, read> pixels: array<u32>;
// Per position (lo, hi), added into.
@group(0) @binding(3) var<storage, read_write> sums: array<atomic<u32>>;
// Float32 residents: per position the exact sum, a 128-bit integer in units of 2^lsb
// (four limbs, least significant first), added into.
@group(0) @binding(4) var<storage, read_write> wide_sums: array<atomic<u32>>;

const WG: u32 = 64u;
const SLOTS: u32 = 32u;
// Where the high words of 32-bit samples' sums start in `part` (32 slots × 8 positions
// before it).
const HIGH: u32 = 512u;
// Per (slot, position of the tile): the slot's sum, u32 (the lanes cannot wrap); 32-bit
// samples keep the high words 512 entries on. 4 KiB, so that workgroup memory does not
// limit how many workgroups a GPU core holds.
var<workgroup> part: array<u32, 1024>;
var<workgroup> wide: array<vec4<u32>, 256>;

// This workgroup's tile and its part [i0, i1) of the pixel list.
struct Part {
    tile: u32,
    i0: u32,
    i1: u32,
}

fn part_of(wg: vec3<u32>) -> Part {
    let flat = wg.x + wg.y * params.groups_x;
    let part = flat % params.parts;
    let per = (params.n_idx + params.parts - 1u) / params.parts;
    let i0 = min(params.n_idx, part * per);
    return Part(flat / params.parts, i0, min(params.n_idx, i0 + per));
}

fn add_sum(f: u32, v: vec2<u32>) {
    if (v.x == 0u && v.y == 0u) {
        return;
    }
    let old = atomicAdd(&sums[2u * f], v.x);
    let carry = select(0u, 1u, old + v.x < old);
    if (v.y + carry != 0u) {
        atomicAdd(&sums[2u * f + 1u], v.y + carry);
    }
}

// Add a 128-bit sum into position f's limbs, each atomically, carries passed upward.
fn add_wide_sum(f: u32, v: vec4<u32>) {
    var carry = 0u;
    for (var l = 0u; l < 4u; l += 1u) {
        let x = v[l] + carry;
        let wrapped = select(0u, 1u, x < carry);
        let old = atomicAdd(&wide_sums[4u * f + l], x);
        carry = wrapped + select(0u, 1u, old + x < old);
    }
}

// Four consecutive positions' u32 sums from `o` on.
fn put4(o: u32, x: u32, y: u32, z: u32, w: u32) {
    part[o] = x;
    part[o + 1u] = y;
    part[o + 2u] = z;
    part[o + 3u] = w;
}

// Invocation `lid`'s u32 lanes per position over its pixels of the part (every SLOTS-th
// of the list from its slot on), read from its half-sector of each: for 16-bit samples the
// low and high samples of each word in a and b, for 8-bit samples bytes 0–3 in a–d; 32-bit
// samples keep the low word in a and the carries in b. Each width has its own loop, so the
// others' lanes hold no registers, and the lanes are named vectors (indexed ones would
// leave registers).
struct Lanes {
    a: vec4<u32>,
    b: vec4<u32>,
    c: vec4<u32>,
    d: vec4<u32>,
}

fn sum_lanes(pt: Part, lid: u32, bits: u32) -> Lanes {
    let base = pt.tile * (params.tile_words / 4u) + lid % 2u;
    let n = pt.i1;
    var a = vec4<u32>(0u);
    var b = vec4<u32>(0u);
    var c = vec4<u32>(0u);
    var d = vec4<u32>(0u);
    var i = pt.i0 + lid / 2u;
    if (bits == 16u) {
        let lo = vec4<u32>(0xffffu);
        let sh = vec4<u32>(16u);
        // Four loads in flight.
        for (; i + 3u * SLOTS < n; i += 4u * SLOTS) {
            let v0 = resident[base + 2u * pixels[i]];
            let v1 = resident[base + 2u * pixels[i + SLOTS]];
            let v2 = resident[base + 2u * pixels[i + 2u * SLOTS]];
            let v3 = resident[base + 2u * pixels[i + 3u * SLOTS]];
            a += (v0 & lo) + (v1 & lo) + (v2 & lo) + (v3 & lo);
            b += (v0 >> sh) + (v1 >> sh) + (v2 >> sh) + (v3 >> sh);
        }
        for (; i < n; i += SLOTS) {
            let v = resident[base + 2u * pixels[i]];
            a += v & lo;
            b += v >> sh;
        }
    } else if (bits == 8u) {
        let m = vec4<u32>(0xffu);
        for (; i + SLOTS < n; i += 2u * SLOTS) {
            let v0 = resident[base + 2u * pixels[i]];
            let v1 = resident[base + 2u * pixels[i + SLOTS]];
            a += (v0 & m) + (v1 & m);
            b += ((v0 >> vec4<u32>(8u)) & m) + ((v1 >> vec4<u32>(8u)) & m);
            c += ((v0 >> vec4<u32>(16u)) & m) + ((v1 >> vec4<u32>(16u)) & m);
            d += (v0 >> vec4<u32>(24u)) + (v1 >> vec4<u32>(24u));
        }
        for (; i < n; i += SLOTS) {
            let v = resident[base + 2u * pixels[i]];
            a += v & m;
            b += (v >> vec4<u32>(8u)) & m;
            c += (v >> vec4<u32>(16u)) & m;
            d += v >> vec4<u32>(24u);
        }
    } else {
        for (; i < n; i += SLOTS) {
            let v = resident[base + 2u * pixels[i]];
            let s = a + v;
            b += select(vec4<u32>(0u), vec4<u32>(1u), s < v);
            a = s;
        }
    }
    return Lanes(a, b, c, d);
}

@compute @workgroup_size(64)
fn masked_sum(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let bits = params.bits;
    let tile_len = 256u / bits;
    let pt = part_of(wg);
    // The whole workgroup shares the tile: a uniform exit.
    if (pt.tile * tile_len >= params.frames) {
        return;
    }
    let l = sum_lanes(pt, lid, bits);
    // Position p of the invocation's half-sector goes to [slot · tile_len + half · held + p]:
    // word w holds positions w · per_word + lane.
    let o = (lid / 2u) * tile_len + (lid % 2u) * (tile_len / 2u);
    if (bits == 16u) {
        put4(o, l.a.x, l.b.x, l.a.y, l.b.y);
        put4(o + 4u, l.a.z, l.b.z, l.a.w, l.b.w);
    } else if (bits == 8u) {
        put4(o, l.a.x, l.b.x, l.c.x, l.d.x);
        put4(o + 4u, l.a.y, l.b.y, l.c.y, l.d.y);
        put4(o + 8u, l.a.z, l.b.z, l.c.z, l.d.z);
        put4(o + 12u, l.a.w, l.b.w, l.c.w, l.d.w);
    } else {
        put4(o, l.a.x, l.a.y, l.a.z, l.a.w);
        put4(HIGH + o, l.b.x, l.b.y, l.b.z, l.b.w);
    }
    // The 32 slots' sums of position q (= lid mod tile_len, which divides 64) in two steps:
    // eight entries per invocation, then the tile_len invocations of position q.
    workgroupBarrier();
    let wide32 = bits == 32u;
    var s = vec2<u32>(0u, 0u);
    for (var e = lid; e < SLOTS * tile_len; e += WG) {
        var hi = 0u;
        if (wide32) {
            hi = part[HIGH + e];
        }
        s = add64(s, vec2<u32>(part[e], hi));
    }
    workgroupBarrier();
    part[lid] = s.x;
    part[WG + lid] = s.y;
    workgroupBarrier();
    if (lid < tile_len) {
        var total = vec2<u32>(0u, 0u);
        for (var e = lid; e < WG; e += tile_len) {
            total = add64(total, vec2<u32>(part[e], part[WG + e]));
        }
        let f = pt.tile * tile_len + lid;
        if (f < params.frames) {
            add_sum(params.first_frame + f, total);
        }
    }
}

// The same sum over float32 residents (one sample per word, four positions a vec4), exact
// in 128-bit integers.
@compute @workgroup_size(64)
fn masked_sum_f32(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let pt = part_of(wg);
    let tile = pt.tile;
    if (tile * 8u >= params.frames) {
        return;
    }
    let half = lid % 2u;
    let base = tile * (params.tile_words / 4u) + half;
    var s0 = vec4<u32>(0u);
    var s1 = vec4<u32>(0u);
    var s2 = vec4<u32>(0u);
    var s3 = vec4<u32>(0u);
    for (var i = pt.i0 + lid / 2u; i < pt.i1; i += SLOTS) {
        let v = resident[base + 2u * pixels[i]];
        s0 = add128(s0, fixed128(v.x, 1u, params.lsb));
        s1 = add128(s1, fixed128(v.y, 1u, params.lsb));
        s2 = add128(s2, fixed128(v.z, 1u, params.lsb));
        s3 = add128(s3, fixed128(v.w, 1u, params.lsb));
    }
    wide[4u * lid] = s0;
    wide[4u * lid + 1u] = s1;
    wide[4u * lid + 2u] = s2;
    wide[4u * lid + 3u] = s3;
    workgroupBarrier();
    if (lid < 8u) {
        let f = tile * 8u + lid;
        let h = lid / 4u;
        var s = vec4<u32>(0u);
        for (var slot = 0u; slot < SLOTS; slot += 1u) {
            s = add128(s, wide[4u * (2u * slot + h) + lid % 4u]);
        }
        if (f < params.frames) {
            add_wide_sum(params.first_frame + f, s);
        }
    }
}
