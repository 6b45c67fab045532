// stem4d:after decode_common.wgsl
// The unshuffle and pack of the GPU decode (after `decode_common.wgsl`): the inflated bit
// planes or bytes of a window's frames into the resident buffer, bad pixels zeroed, binned
// (C-DECODE-GPU).

// Element `e` of a chunk (scratch byte `base`, `be` elements per full block, `n` elements;
// `plain`: stored as bytes, not bit planes).
fn element(base: u32, be: u32, n: u32, plain: u32, e: u32) -> u32 {
    let elem = dp.elem;
    let comp = n - n % 8u;
    if (plain != 0u || e >= comp) {
        var v = 0u;
        for (var y = 0u; y < elem; y += 1u) {
            v |= dst_byte(base + e * elem + y) << (8u * y);
        }
        return v;
    }
    let blk = e / be;
    let kk = e % be;
    let nb = min(be, comp - blk * be);
    let row = nb / 8u;
    let boff = base + blk * be * elem + kk / 8u;
    let bit = kk % 8u;
    var v = planes8(boff, row, bit);
    for (var p = 8u; p < 8u * elem; p += 8u) {
        v |= planes8(boff + p * row, row, bit) << p;
    }
    return v;
}

// Bit `bit` of the bytes at `at`, `at + row`, … (eight bit planes): the element's next eight
// bits. The eight loads are written out so that all are in flight at once: a loop over the
// planes waited for each load in turn (unshuffle + pack on the H200, 232 MB of output: 2.9 ms
// with the loop, 1.56 ms written out).
fn planes8(at: u32, row: u32, bit: u32) -> u32 {
    let b0 = dst_byte(at);
    let b1 = dst_byte(at + row);
    let b2 = dst_byte(at + 2u * row);
    let b3 = dst_byte(at + 3u * row);
    let b4 = dst_byte(at + 4u * row);
    let b5 = dst_byte(at + 5u * row);
    let b6 = dst_byte(at + 6u * row);
    let b7 = dst_byte(at + 7u * row);
    let lo = ((b0 >> bit) & 1u) | (((b1 >> bit) & 1u) << 1u) | (((b2 >> bit) & 1u) << 2u)
        | (((b3 >> bit) & 1u) << 3u);
    let hi = ((b4 >> bit) & 1u) | (((b5 >> bit) & 1u) << 1u) | (((b6 >> bit) & 1u) << 2u)
        | (((b7 >> bit) & 1u) << 3u);
    return lo | (hi << 4u);
}

// Whether detector pixel `k` is marked bad.
fn is_bad(k: u32) -> bool {
    return ((bad[k >> 5u] >> (k & 31u)) & 1u) != 0u;
}

// The stored samples' saturation value (a bad-pixel sentinel when masking is on).
fn stored_sentinel() -> u32 {
    return select((1u << (8u * dp.elem)) - 1u, 0xffffffffu, dp.elem == 4u);
}

// The tiles of the resident segment the window's frames touch: positions per tile and per
// word, the window's frames as positions `rel0 .. rel1` of the segment, its first tile
// and how many.
struct WindowTiles {
    tile_len: u32,
    per_word: u32,
    rel0: u32,
    rel1: u32,
    t0: u32,
    tiles: u32,
}

fn window_tiles() -> WindowTiles {
    let tile_len = 256u / dp.bits;
    let rel0 = dp.first_frame - dp.seg_first_frame;
    let rel1 = rel0 + dp.frames;
    let t0 = rel0 / tile_len;
    return WindowTiles(tile_len, 32u / dp.bits, rel0, rel1, t0, (rel1 + tile_len - 1u) / tile_len - t0);
}

// Sample `k` of frame `fi` of chunk `c`, zeroed when bad and masking is on (C-BAD: the
// file's mask and the saturation sentinel).
fn sample(c: vec4<u32>, fi: u32, k: u32, sentinel: u32) -> u32 {
    let v = element(c.x, c.y, c.z, c.w, fi * dp.det_len + k);
    if (dp.mask_bad != 0u && (v == sentinel || is_bad(k))) {
        return 0u;
    }
    return v;
}

// The count-preserving sum of binned pixel `w`'s b×b block (partial at the edges), bad
// pixels zeroed first (C-BIN); an overflow past u32 is reported (C-BIN-COMPOSE).
fn binned(c: vec4<u32>, fi: u32, w: u32, sentinel: u32) -> u32 {
    let i0 = (w / dp.out_cols) * dp.bin;
    let j0 = (w % dp.out_cols) * dp.bin;
    var acc = vec2<u32>(0u, 0u);
    for (var i = i0; i < min(i0 + dp.bin, dp.det_rows); i += 1u) {
        for (var j = j0; j < min(j0 + dp.bin, dp.det_cols); j += 1u) {
            acc = add64(acc, vec2<u32>(sample(c, fi, i * dp.det_cols + j, sentinel), 0u));
        }
    }
    if (acc.y != 0u) {
        atomicMax(&status[1], 1u);
    }
    return acc.x;
}

// One pixel's sector per invocation, over the tiles the window's frames touch: its
// `tile_len` samples, word after word, each from its frame in the window. Neighbouring
// invocations take neighbouring pixels of one frame at a time, so the bit-plane words they
// read are the same few (one load serves the subgroup); with a word per invocation (the
// pixel's positions spread over a subgroup) every load touched as many frames as lanes.
@compute @workgroup_size(64)
fn unshuffle_pack(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = gid.x + gid.y * dp.groups_x * 64u;
    let wt = window_tiles();
    let tile_len = wt.tile_len;
    let per_word = wt.per_word;
    let rel0 = wt.rel0;
    let rel1 = wt.rel1;
    let out_len = select(dp.det_len, ((dp.det_rows + dp.bin - 1u) / dp.bin) * dp.out_cols, dp.bin > 1u);
    if (id >= wt.tiles * out_len) {
        return;
    }
    let tile = wt.t0 + id / out_len;
    let k = id % out_len;
    let sentinel = stored_sentinel();
    let sector = tile * dp.tile_words + k * 8u;
    for (var w = 0u; w < 8u; w += 1u) {
        let p0 = tile * tile_len + w * per_word;
        var word = 0u;
        var lanes = 0u;
        for (var s = 0u; s < per_word; s += 1u) {
            let pos = p0 + s;
            if (pos < rel0 || pos >= rel1) {
                continue;
            }
            let f = pos - rel0;
            let c = table[src[2u * f]];
            let fi = src[2u * f + 1u];
            var v = 0u;
            if (dp.bin > 1u) {
                v = binned(c, fi, k, sentinel);
            } else {
                v = sample(c, fi, k, sentinel);
            }
            word |= v << (s * dp.bits);
            lanes += 1u;
        }
        // A word the window fills only partly shares its other samples with the next window.
        if (lanes == per_word) {
            atomicStore(&resident[sector + w], word);
        } else if (lanes != 0u) {
            atomicOr(&resident[sector + w], word);
        }
    }
}

// Bits `bit .. bit + 32` of the decoded planes, whatever their alignment.
fn scratch_bits(bit: u32) -> u32 {
    let w = bit >> 5u;
    let sh = bit & 31u;
    let lo = scratch[w];
    if (sh == 0u) {
        return lo;
    }
    return (lo >> sh) | (scratch[w + 1u] << (32u - sh));
}

// The unbinned bit-shuffled path. An invocation makes one word `w` of the sectors of 32
// neighbouring pixels in a tile: that word holds, for each pixel, 32 bits — `32 / bits`
// samples of `bits` planes — which the bit planes hold as 32 words of 32 pixels each. So
// the invocation reads those 32 plane words (a word per frame, plane and 32 pixels), turns
// the 32×32 bit matrix over in its registers, and stores the 32 words. A workgroup covers a
// tile and PACK_PIXELS pixels: 32 groups of 32 pixels times the 8 words of a sector, a
// group's 8 words in neighbouring invocations so that their stores fill whole 32-byte
// sectors of memory. On the H200 (232 MB of output a window): 0.84 ms when each pixel picked
// its bits one by one out of plane words shared through workgroup memory; 0.65 ms with the
// matrix as an array (kept in local memory: its loops did not unroll); 0.43 ms as eight
// vectors; 0.33 ms with the frames whose planes do not lie in one bit-shuffled block (block
// edges, raw tails) on a path of their own, not inlined into every plane read.
const PACK_PIXELS: u32 = 1024u;
// The resident segment: within a window each word is made by one invocation, and windows
// are decoded in order, so a word the window fills only partly is or-ed into with a plain
// load and store.
@group(0) @binding(10) var<storage, read_write> resident_words: array<u32>;

// Where the bit planes of 32 pixels of one frame lie: `fast` when every plane is one 32-bit
// read from bit `bit0`, planes `row_bits` apart (the pixels lie in one bit-shuffled block);
// else the samples are read element by element from chunk `c`, elements `e0 ..`.
struct FramePlanes {
    present: bool,
    fast: bool,
    bit0: u32,
    row_bits: u32,
    c: vec4<u32>,
    e0: u32,
    count: u32,
}

// The planes of pixels `k0 ..` of the segment's position `pos` (none outside the window).
fn frame_planes(pos: u32, rel0: u32, rel1: u32, k0: u32) -> FramePlanes {
    var fp = FramePlanes(false, false, 0u, 0u, vec4<u32>(0u), 0u, 0u);
    if (pos < rel0 || pos >= rel1) {
        return fp;
    }
    let f = pos - rel0;
    let c = table[src[2u * f]];
    let e0 = src[2u * f + 1u] * dp.det_len + k0;
    let count = min(32u, dp.det_len - k0);
    let be = max(c.y, 1u);
    let comp = c.z - c.z % 8u;
    let blk = e0 / be;
    let kk = e0 % be;
    let nb = min(be, comp - min(comp, blk * be));
    fp.present = true;
    fp.fast = c.w == 0u && e0 + count <= comp && kk + count <= nb;
    fp.bit0 = (c.x + blk * be * dp.elem) * 8u + kk;
    fp.row_bits = nb;
    fp.c = c;
    fp.e0 = e0;
    fp.count = count;
    return fp;
}

// Plane `plane` of those pixels, pixel j at bit j, where they are `fast` (or absent).
fn frame_plane(fp: FramePlanes, plane: u32) -> u32 {
    if (!fp.present) {
        return 0u;
    }
    let v = scratch_bits(fp.bit0 + plane * fp.row_bits);
    return select(v & ((1u << fp.count) - 1u), v, fp.count == 32u);
}

// Whether a frame's planes are one read each (or it is absent).
fn planes_fast(fp: FramePlanes) -> bool {
    return fp.fast || !fp.present;
}

// Sample `i` of a frame's pixels, read element by element (block edges, raw tails).
fn frame_sample(fp: FramePlanes, i: u32) -> u32 {
    if (!fp.present) {
        return 0u;
    }
    return element(fp.c.x, fp.c.y, fp.c.z, fp.c.w, fp.e0 + i);
}

// Planes `p0 .. p0 + 4` of a frame's pixels.
fn plane_quad(fp: FramePlanes, p0: u32) -> vec4<u32> {
    return vec4<u32>(frame_plane(fp, p0), frame_plane(fp, p0 + 1u), frame_plane(fp, p0 + 2u), frame_plane(fp, p0 + 3u));
}

// Rows k of `a` and k + j of `b` (k without bit j) of a 32×32 bit matrix, four rows to a
// vector, swap the bits of columns with bit j set in the first against those without it in
// the second: one step of turning the matrix over.
fn swap_rows(a: ptr<function, vec4<u32>>, b: ptr<function, vec4<u32>>, j: u32, m: u32) {
    let t = ((*a >> vec4<u32>(j)) ^ *b) & vec4<u32>(m);
    *b ^= t;
    *a ^= t << vec4<u32>(j);
}

// The last two steps, between the rows of one vector: (x, z) and (y, w) two columns apart,
// then (x, y) and (z, w) one apart.
fn swap_within(a: vec4<u32>) -> vec4<u32> {
    let t2 = ((a.xy >> vec2<u32>(2u)) ^ a.zw) & vec2<u32>(0x33333333u);
    let b = vec4<u32>(a.xy ^ (t2 << vec2<u32>(2u)), a.zw ^ t2);
    let t1 = ((b.xz >> vec2<u32>(1u)) ^ b.yw) & vec2<u32>(0x55555555u);
    let lo = b.xz ^ (t1 << vec2<u32>(1u));
    let hi = b.yw ^ t1;
    return vec4<u32>(lo.x, hi.x, lo.y, hi.y);
}

// What packing the tile's words needs besides the rows.
struct TileWords {
    base: u32,
    k0: u32,
    whole: bool,
    bad_bits: u32,
    bits: u32,
    sentinel: u32,
}

// Pixel k0 + i's word: bad pixels and stored sentinels zeroed when masking (C-BAD), or-ed
// into a word the window fills only partly.
fn store_word(t: TileWords, word: u32, i: u32) {
    if (t.k0 + i >= dp.det_len) {
        return;
    }
    let per_word = 32u / t.bits;
    let sample_mask = 0xffffffffu >> (32u - t.bits);
    var v = word;
    if (dp.mask_bad != 0u) {
        if (((t.bad_bits >> i) & 1u) != 0u) {
            v = 0u;
        }
        for (var s = 0u; s < per_word; s += 1u) {
            if (((v >> (s * t.bits)) & sample_mask) == t.sentinel) {
                v &= ~(sample_mask << (s * t.bits));
            }
        }
    }
    let at = t.base + i * 8u;
    if (!t.whole) {
        v |= resident_words[at];
    }
    resident_words[at] = v;
}

// Rows i0 .. i0 + 4 of the turned matrix.
fn store_rows(t: TileWords, v: vec4<u32>, i0: u32) {
    store_word(t, v.x, i0);
    store_word(t, v.y, i0 + 1u);
    store_word(t, v.z, i0 + 2u);
    store_word(t, v.w, i0 + 3u);
}

// The tiles of one sample width (`bits`: a constant at each call, so that the matrix is
// eight vectors in registers).
fn unshuffle_tiles_of(bits: u32, id: u32, lid: u32) {
    let wt = window_tiles();
    let per_word = 32u / bits;
    let parts = (dp.det_len + PACK_PIXELS - 1u) / PACK_PIXELS;
    if (id >= wt.tiles * parts) {
        return;
    }
    let tile = wt.t0 + id / parts;
    let w = lid % 8u;
    let k0 = (id % parts) * PACK_PIXELS + (lid / 8u) * 32u;
    if (k0 >= dp.det_len) {
        return;
    }
    let pos0 = tile * wt.tile_len + w * per_word;
    // Row-vector i's frame: the word's sample 4i / bits, at position pos0 + 4i / bits.
    let fp_a = frame_planes(pos0, wt.rel0, wt.rel1, k0);
    let fp_b = frame_planes(pos0 + 8u / bits, wt.rel0, wt.rel1, k0);
    let fp_c = frame_planes(pos0 + 16u / bits, wt.rel0, wt.rel1, k0);
    let fp_d = frame_planes(pos0 + 24u / bits, wt.rel0, wt.rel1, k0);
    let t = TileWords(
        tile * dp.tile_words + k0 * 8u + w,
        k0,
        tile * wt.tile_len >= wt.rel0 && (tile + 1u) * wt.tile_len <= wt.rel1,
        select(0u, bad[k0 >> 5u], dp.mask_bad != 0u),
        bits,
        stored_sentinel(),
    );
    if (!(planes_fast(fp_a) && planes_fast(fp_b) && planes_fast(fp_c) && planes_fast(fp_d))) {
        // Rare (block edges, raw tails): whole samples, element by element.
        let sample_mask = 0xffffffffu >> (32u - bits);
        for (var i = 0u; i < 32u; i += 1u) {
            var v = frame_sample(fp_a, i) & sample_mask;
            if (bits == 16u) {
                v |= (frame_sample(fp_c, i) & sample_mask) << 16u;
            } else if (bits == 8u) {
                v |= ((frame_sample(fp_b, i) & 0xffu) << 8u) | ((frame_sample(fp_c, i) & 0xffu) << 16u)
                    | ((frame_sample(fp_d, i) & 0xffu) << 24u);
            }
            store_word(t, v, i);
        }
        return;
    }
    // Row r = 4i + c (component c of a_i): plane r % bits of sample r / bits.
    var a0 = plane_quad(fp_a, 0u);
    var a1 = plane_quad(fp_a, 4u % bits);
    var a2 = plane_quad(fp_b, 8u % bits);
    var a3 = plane_quad(fp_b, 12u % bits);
    var a4 = plane_quad(fp_c, 16u % bits);
    var a5 = plane_quad(fp_c, 20u % bits);
    var a6 = plane_quad(fp_d, 24u % bits);
    var a7 = plane_quad(fp_d, 28u % bits);
    swap_rows(&a0, &a4, 16u, 0x0000ffffu);
    swap_rows(&a1, &a5, 16u, 0x0000ffffu);
    swap_rows(&a2, &a6, 16u, 0x0000ffffu);
    swap_rows(&a3, &a7, 16u, 0x0000ffffu);
    swap_rows(&a0, &a2, 8u, 0x00ff00ffu);
    swap_rows(&a1, &a3, 8u, 0x00ff00ffu);
    swap_rows(&a4, &a6, 8u, 0x00ff00ffu);
    swap_rows(&a5, &a7, 8u, 0x00ff00ffu);
    swap_rows(&a0, &a1, 4u, 0x0f0f0f0fu);
    swap_rows(&a2, &a3, 4u, 0x0f0f0f0fu);
    swap_rows(&a4, &a5, 4u, 0x0f0f0f0fu);
    swap_rows(&a6, &a7, 4u, 0x0f0f0f0fu);
    a0 = swap_within(a0);
    a1 = swap_within(a1);
    a2 = swap_within(a2);
    a3 = swap_within(a3);
    a4 = swap_within(a4);
    a5 = swap_within(a5);
    a6 = swap_within(a6);
    a7 = swap_within(a7);
    // Row i is now pixel k0 + i's word, sample s in bits s · bits ...
    store_rows(t, a0, 0u);
    store_rows(t, a1, 4u);
    store_rows(t, a2, 8u);
    store_rows(t, a3, 12u);
    store_rows(t, a4, 16u);
    store_rows(t, a5, 20u);
    store_rows(t, a6, 24u);
    store_rows(t, a7, 28u);
}

@compute @workgroup_size(256)
fn unshuffle(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let id = wg.x + wg.y * dp.groups_x;
    switch dp.bits {
        case 8u: {
            unshuffle_tiles_of(8u, id, lid);
        }
        case 16u: {
            unshuffle_tiles_of(16u, id, lid);
        }
        default: {
            unshuffle_tiles_of(32u, id, lid);
        }
    }
}
