// Bitshuffle+LZ4 (HDF5 filter 32008) and plain LZ4 (32004) decoded on the GPU from the
// compressed bytes the host uploaded: `lz4_blocks` inflates every LZ4 block (one invocation
// per block, each writing only its own word-aligned output range; raw blocks and tails are
// copied), then `unshuffle_pack` gathers each element (from its block's bit planes, or plain
// bytes), zeroes bad pixels, bins (count-preserving, u32 sums, overflow reported), and packs
// the samples into the resident buffer. Every read and write is bounds-checked against the
// block's own ranges: a corrupt block records its index in `status[0]` and stops.

struct DecodeParams {
    blocks: u32,
    groups_x: u32,
    // unshuffle_pack
    frames: u32,
    first_frame: u32,
    seg_first_frame: u32,
    frame_words: u32,
    bits: u32,
    det_len: u32,
    elem: u32,
    bin: u32,
    det_cols: u32,
    mask_bad: u32,
    src_bytes: u32,
    dst_bytes: u32,
    out_cols: u32,
    det_rows: u32,
}

@group(0) @binding(0) var<uniform> dp: DecodeParams;
// lz4_blocks: the compressed window; unshuffle_pack: per frame (chunk entry, frame in chunk).
@group(0) @binding(1) var<storage, read> src: array<u32>;
// lz4_blocks: per block (source byte, source length, output byte, output length | raw << 31);
// unshuffle_pack: per chunk (scratch byte, block elements, elements, 1 when not bitshuffled).
@group(0) @binding(2) var<storage, read> table: array<vec4<u32>>;
// Decoded bit planes: written by lz4_blocks, read by unshuffle_pack.
@group(0) @binding(3) var<storage, read_write> scratch: array<u32>;
// [0]: lowest failing block (0xffffffff when none); [1]: 1 when a binned sum passed u32.
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;
// unshuffle_pack: bad-pixel bits, one per detector pixel.
@group(0) @binding(5) var<storage, read> bad: array<u32>;
// unshuffle_pack: the resident segment the frames go to.
@group(0) @binding(6) var<storage, read_write> resident: array<u32>;

fn src_byte(i: u32) -> u32 {
    return (src[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

fn dst_byte(i: u32) -> u32 {
    return (scratch[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

// Only this invocation writes the words of its block's output range (ranges are 8-byte
// aligned by the host), so a plain read-modify-write is safe.
fn put_byte(i: u32, v: u32) {
    let w = i >> 2u;
    let sh = (i & 3u) * 8u;
    scratch[w] = (scratch[w] & ~(0xffu << sh)) | (v << sh);
}

const BAD: u32 = 0xffffffffu;

// An LZ4 length: the token's 4-bit field, extended by 255-bytes while it reads 15. Returns
// (length, next source byte), or next = BAD when the bytes run out.
fn extended(field: u32, start: u32, s_end: u32) -> vec2<u32> {
    var len = field;
    var s = start;
    if (field == 15u) {
        loop {
            if (s >= s_end) {
                return vec2<u32>(0u, BAD);
            }
            let x = src_byte(s);
            s += 1u;
            len += x;
            if (x != 255u) {
                break;
            }
        }
    }
    return vec2<u32>(len, s);
}

fn fail(block: u32) {
    atomicMin(&status[0], block);
}

@compute @workgroup_size(64)
fn lz4_blocks(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = gid.x + gid.y * dp.groups_x * 64u;
    if (b >= dp.blocks) {
        return;
    }
    let e = table[b];
    var s = e.x;
    let s_end = e.x + e.y;
    let d0 = e.z;
    var d = e.z;
    let raw = (e.w >> 31u) != 0u;
    let d_end = e.z + (e.w & 0x7fffffffu);
    if (s_end > dp.src_bytes || s_end < s || d_end > dp.dst_bytes || d_end < d) {
        fail(b);
        return;
    }
    if (raw) {
        if (e.y != d_end - d) {
            fail(b);
            return;
        }
        for (; d < d_end; d += 1u) {
            put_byte(d, src_byte(s));
            s += 1u;
        }
        return;
    }
    loop {
        if (s >= s_end) {
            fail(b);
            return;
        }
        let token = src_byte(s);
        s += 1u;
        let le = extended(token >> 4u, s, s_end);
        if (le.y == BAD) {
            fail(b);
            return;
        }
        let lit = le.x;
        s = le.y;
        if (lit > s_end - s || lit > d_end - d) {
            fail(b);
            return;
        }
        for (var k = 0u; k < lit; k += 1u) {
            put_byte(d + k, src_byte(s + k));
        }
        s += lit;
        d += lit;
        if (s == s_end) {
            // The last sequence has literals only, and must fill the block exactly.
            if (d != d_end) {
                fail(b);
            }
            return;
        }
        if (s_end - s < 2u) {
            fail(b);
            return;
        }
        let off = src_byte(s) | (src_byte(s + 1u) << 8u);
        s += 2u;
        if (off == 0u || off > d - d0) {
            fail(b);
            return;
        }
        let me = extended(token & 15u, s, s_end);
        if (me.y == BAD) {
            fail(b);
            return;
        }
        let ml = me.x + 4u;
        s = me.y;
        if (ml > d_end - d) {
            fail(b);
            return;
        }
        // Byte by byte: a match may overlap the bytes it produces.
        for (var k = 0u; k < ml; k += 1u) {
            put_byte(d + k, dst_byte(d + k - off));
        }
        d += ml;
    }
}

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
    var v = 0u;
    for (var p = 0u; p < 8u * elem; p += 1u) {
        v |= ((dst_byte(boff + p * row) >> bit) & 1u) << p;
    }
    return v;
}

// Sample `k` of frame `fi` of chunk `c`, zeroed when bad and masking is on.
fn sample(c: vec4<u32>, fi: u32, k: u32, sentinel: u32) -> u32 {
    let v = element(c.x, c.y, c.z, c.w, fi * dp.det_len + k);
    if (dp.mask_bad != 0u && (v == sentinel || ((bad[k >> 5u] >> (k & 31u)) & 1u) != 0u)) {
        return 0u;
    }
    return v;
}

@compute @workgroup_size(64)
fn unshuffle_pack(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = gid.x + gid.y * dp.groups_x * 64u;
    if (id >= dp.frames * dp.frame_words) {
        return;
    }
    let f = id / dp.frame_words;
    let w = id % dp.frame_words;
    let gf = dp.first_frame + f;
    let c = table[src[2u * f]];
    let fi = src[2u * f + 1u];
    let sentinel = select((1u << (8u * dp.elem)) - 1u, 0xffffffffu, dp.elem == 4u);
    var word = 0u;
    if (dp.bin > 1u) {
        // One binned pixel per word: the count-preserving sum of its b×b block (partial at
        // the edges), bad pixels zeroed first.
        let out_rows = (dp.det_rows + dp.bin - 1u) / dp.bin;
        if (w < out_rows * dp.out_cols) {
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
            word = acc.x;
        }
    } else {
        let per_word = 32u / dp.bits;
        for (var s = 0u; s < per_word; s += 1u) {
            let k = w * per_word + s;
            if (k >= dp.det_len) {
                break;
            }
            word |= sample(c, fi, k, sentinel) << (s * dp.bits);
        }
    }
    resident[(gf - dp.seg_first_frame) * dp.frame_words + w] = word;
}
