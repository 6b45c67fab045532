// Virtual image: per scan position, the exact 64-bit sum of the resident samples of a
// detector mask (BF disk, annulus, rectangle, point, boolean mask, or every pixel for the
// cached total). The resident is position-tiled (`src/upload/plan.rs`): a tile keeps each
// detector pixel's samples at its 8–32 positions in one 32-byte sector. A workgroup takes
// one part of the mask's pixels in one tile (`parts` per tile keep a large GPU busy), an
// invocation whole sectors of every SLOTS-th pixel of the part, four in flight; pixels are
// listed ascending, so a workgroup streams the mask's own bytes in runs of up to 4 KiB and
// reads nothing around them (decision 0005). The sums are C-MASK's `V[s]`, exact.
// Each invocation sums its positions in u32 lanes (the host sizes the parts so that no lane
// can wrap); 32-bit samples carry into a high lane instead. The slots' sums meet in
// workgroup memory (`masked_sum`), through subgroups (`masked_sum_subgroup.wgsl`), or not
// at all (`masked_sum_atomic`: each invocation adds its own), and are added into the output
// with 32-bit atomics (the carry into the high word passed on); the host clears it first.
// A compressed resident's sectors are decoded in the summing kernel (`masked_sum_packed.wgsl`).
// Parts come from a table (`part_starts`): even cuts of one mask adding into one image, or
// the rings of `src/kernels/ring_sum.rs`, each writing an image of its own (`part_stride`:
// C-RING).

struct MaskedSumParams {
    frames: u32,
    tile_words: u32,
    bits: u32,
    n_idx: u32,
    first_frame: u32,
    groups_x: u32,
    // Float32 residents: the power of two all samples are integer multiples of.
    lsb: i32,
    // Workgroups per tile, each a contiguous part of the pixel list (`part_starts`).
    parts: u32,
    // Positions between the outputs of neighbouring parts: 0 when all parts add into one
    // image, the scan's positions when each part is an image of its own (ring sums).
    part_stride: u32,
    // Compressed residents (`masked_sum_packed.wgsl`): groups of 8 pixels per tile.
    packed_groups: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: MaskedSumParams;
@group(0) @binding(1) var<storage, read> resident: array<vec4<u32>>;
// The selected detector pixels, ascending.
@group(0) @binding(2) var<storage, read> pixels: array<u32>;
// Per position (lo, hi), added into.
@group(0) @binding(3) var<storage, read_write> sums: array<atomic<u32>>;
// Float32 residents: per position the exact sum, a 128-bit integer in units of 2^lsb
// (four limbs, least significant first), added into (C-FLOAT-GPU).
@group(0) @binding(4) var<storage, read_write> wide_sums: array<atomic<u32>>;
// Part k of the pixel list is [part_starts[k], part_starts[k + 1]).
@group(0) @binding(5) var<storage, read> part_starts: array<u32>;

// Invocations of the integer entry points, each a slot of the part's pixel list.
const SLOTS: u32 = 32u;
// Per (position of the tile, slot): the slot's u32 sum, rows padded to 33 words so that
// neither the slots' writes nor a position's reads meet in one bank; 32-bit samples keep
// their carries from HIGH (row 8) on.
const ROW: u32 = 33u;
const HIGH: u32 = 264u;
var<workgroup> part: array<u32, 1056>;
var<workgroup> wide: array<vec4<u32>, 256>;

// This workgroup's tile, its part [i0, i1) of the pixel list, and where the part's image
// starts in the output.
struct Part {
    tile: u32,
    i0: u32,
    i1: u32,
    out: u32,
}

fn part_of(wg: vec3<u32>) -> Part {
    let flat = wg.x + wg.y * params.groups_x;
    let part = flat % params.parts;
    let i0 = min(params.n_idx, part_starts[part]);
    let i1 = min(params.n_idx, part_starts[part + 1u]);
    return Part(flat / params.parts, i0, i1, params.first_frame + part * params.part_stride);
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

// An invocation's u32 lanes over its pixels of the part, each a vector over the four words
// of a half-sector. Lane k = half · per_word + sample in the word: 16-bit samples use a–d
// (low and high samples of the first half, then of the second), 8-bit samples a–h; 32-bit
// samples keep each half's sums in a and b and their carries in c and d. Each width has its
// own loop, so the others' lanes hold no registers, and the lanes are named vectors
// (indexed ones would leave registers).
struct Lanes {
    a: vec4<u32>,
    b: vec4<u32>,
    c: vec4<u32>,
    d: vec4<u32>,
    e: vec4<u32>,
    f: vec4<u32>,
    g: vec4<u32>,
    h: vec4<u32>,
}

fn sum_lanes(pt: Part, lid: u32, bits: u32) -> Lanes {
    let base = pt.tile * (params.tile_words / 4u);
    let n = pt.i1;
    let z = vec4<u32>(0u);
    var l = Lanes(z, z, z, z, z, z, z, z);
    var i = pt.i0 + lid;
    if (bits == 16u) {
        let lo = vec4<u32>(0xffffu);
        let sh = vec4<u32>(16u);
        for (; i + 3u * SLOTS < n; i += 4u * SLOTS) {
            let k0 = base + 2u * pixels[i];
            let k1 = base + 2u * pixels[i + SLOTS];
            let k2 = base + 2u * pixels[i + 2u * SLOTS];
            let k3 = base + 2u * pixels[i + 3u * SLOTS];
            let v0 = resident[k0];
            let w0 = resident[k0 + 1u];
            let v1 = resident[k1];
            let w1 = resident[k1 + 1u];
            let v2 = resident[k2];
            let w2 = resident[k2 + 1u];
            let v3 = resident[k3];
            let w3 = resident[k3 + 1u];
            l.a += (v0 & lo) + (v1 & lo) + (v2 & lo) + (v3 & lo);
            l.b += (v0 >> sh) + (v1 >> sh) + (v2 >> sh) + (v3 >> sh);
            l.c += (w0 & lo) + (w1 & lo) + (w2 & lo) + (w3 & lo);
            l.d += (w0 >> sh) + (w1 >> sh) + (w2 >> sh) + (w3 >> sh);
        }
        for (; i < n; i += SLOTS) {
            let k = base + 2u * pixels[i];
            let v = resident[k];
            let w = resident[k + 1u];
            l.a += v & lo;
            l.b += v >> sh;
            l.c += w & lo;
            l.d += w >> sh;
        }
    } else if (bits == 8u) {
        let m = vec4<u32>(0xffu);
        let s8 = vec4<u32>(8u);
        let s16 = vec4<u32>(16u);
        let s24 = vec4<u32>(24u);
        for (; i < n; i += SLOTS) {
            let k = base + 2u * pixels[i];
            let v = resident[k];
            let w = resident[k + 1u];
            l.a += v & m;
            l.b += (v >> s8) & m;
            l.c += (v >> s16) & m;
            l.d += v >> s24;
            l.e += w & m;
            l.f += (w >> s8) & m;
            l.g += (w >> s16) & m;
            l.h += w >> s24;
        }
    } else {
        let one = vec4<u32>(1u);
        for (; i < n; i += SLOTS) {
            let k = base + 2u * pixels[i];
            let v = resident[k];
            let w = resident[k + 1u];
            let s = l.a + v;
            let t = l.b + w;
            l.c += select(z, one, s < v);
            l.d += select(z, one, t < w);
            l.a = s;
            l.b = t;
        }
    }
    return l;
}

// Eight positions' u32 sums from position `p` on, a half-sector's four words of two samples.
fn put_pairs(p: u32, lid: u32, lo: vec4<u32>, hi: vec4<u32>) {
    let o = p * ROW + lid;
    part[o] = lo.x;
    part[o + ROW] = hi.x;
    part[o + 2u * ROW] = lo.y;
    part[o + 3u * ROW] = hi.y;
    part[o + 4u * ROW] = lo.z;
    part[o + 5u * ROW] = hi.z;
    part[o + 6u * ROW] = lo.w;
    part[o + 7u * ROW] = hi.w;
}

// Sixteen positions' u32 sums from position `p` on, a half-sector's four words of four
// samples.
fn put_quads(p: u32, lid: u32, a: vec4<u32>, b: vec4<u32>, c: vec4<u32>, d: vec4<u32>) {
    for (var w = 0u; w < 4u; w += 1u) {
        let o = (p + 4u * w) * ROW + lid;
        part[o] = a[w];
        part[o + ROW] = b[w];
        part[o + 2u * ROW] = c[w];
        part[o + 3u * ROW] = d[w];
    }
}

// Four positions' u32 sums from position `p` on, one word each.
fn put_words(p: u32, lid: u32, v: vec4<u32>) {
    let o = p * ROW + lid;
    part[o] = v.x;
    part[o + ROW] = v.y;
    part[o + 2u * ROW] = v.z;
    part[o + 3u * ROW] = v.w;
}

@compute @workgroup_size(32)
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
    meet(pt, lid, bits, sum_lanes(pt, lid, bits));
}

// The slots' lanes meet in workgroup memory, and each position's sum is added into the
// output once.
fn meet(pt: Part, lid: u32, bits: u32, l: Lanes) {
    let tile_len = 256u / bits;
    // Written out per width: a position loop indexing the lanes would leave them in memory.
    if (bits == 16u) {
        put_pairs(0u, lid, l.a, l.b);
        put_pairs(8u, lid, l.c, l.d);
    } else if (bits == 8u) {
        put_quads(0u, lid, l.a, l.b, l.c, l.d);
        put_quads(16u, lid, l.e, l.f, l.g, l.h);
    } else {
        put_words(0u, lid, l.a);
        put_words(4u, lid, l.b);
        put_words(HIGH / ROW, lid, l.c);
        put_words(HIGH / ROW + 4u, lid, l.d);
    }
    workgroupBarrier();
    // Every invocation adds up one position over a share of the slots, in 64 bits.
    let q = lid % tile_len;
    let shares = SLOTS / tile_len;
    var total = vec2<u32>(0u, 0u);
    for (var s = lid / tile_len; s < SLOTS; s += shares) {
        var hi = 0u;
        if (bits == 32u) {
            hi = part[HIGH + q * ROW + s];
        }
        total = add64(total, vec2<u32>(part[q * ROW + s], hi));
    }
    add_at(pt, tile_len, q, total);
}

// Position p of the part's tile (in the segment's frames) gets v, a (lo, hi) sum.
fn add_at(pt: Part, tile_len: u32, p: u32, v: vec2<u32>) {
    let f = pt.tile * tile_len + p;
    if (f < params.frames) {
        add_sum(pt.out + f, v);
    }
}

// The same sum with no meeting of the slots: every invocation adds its own lanes into the
// output. Sixteen times the atomics of `masked_sum`, but no workgroup memory, which on the
// H200 cost this kernel more than the atomics do (BF r=30: 0.56 against 0.83 ms; subgroups,
// where they exist, 0.50 ms). The engine picks it by adapter (`Engine::atomic_sums`).
@compute @workgroup_size(32)
fn masked_sum_atomic(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let bits = params.bits;
    let tile_len = 256u / bits;
    let pt = part_of(wg);
    if (pt.tile * tile_len >= params.frames) {
        return;
    }
    let l = sum_lanes(pt, lid, bits);
    for (var w = 0u; w < 4u; w += 1u) {
        if (bits == 16u) {
            add_at(pt, 16u, 2u * w, vec2<u32>(l.a[w], 0u));
            add_at(pt, 16u, 2u * w + 1u, vec2<u32>(l.b[w], 0u));
            add_at(pt, 16u, 8u + 2u * w, vec2<u32>(l.c[w], 0u));
            add_at(pt, 16u, 9u + 2u * w, vec2<u32>(l.d[w], 0u));
        } else if (bits == 8u) {
            add_at(pt, 32u, 4u * w, vec2<u32>(l.a[w], 0u));
            add_at(pt, 32u, 4u * w + 1u, vec2<u32>(l.b[w], 0u));
            add_at(pt, 32u, 4u * w + 2u, vec2<u32>(l.c[w], 0u));
            add_at(pt, 32u, 4u * w + 3u, vec2<u32>(l.d[w], 0u));
            add_at(pt, 32u, 16u + 4u * w, vec2<u32>(l.e[w], 0u));
            add_at(pt, 32u, 17u + 4u * w, vec2<u32>(l.f[w], 0u));
            add_at(pt, 32u, 18u + 4u * w, vec2<u32>(l.g[w], 0u));
            add_at(pt, 32u, 19u + 4u * w, vec2<u32>(l.h[w], 0u));
        } else {
            add_at(pt, 8u, w, vec2<u32>(l.a[w], l.c[w]));
            add_at(pt, 8u, 4u + w, vec2<u32>(l.b[w], l.d[w]));
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
            add_wide_sum(pt.out + f, s);
        }
    }
}
