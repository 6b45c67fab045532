// Bitshuffle+LZ4 (HDF5 filter 32008) and plain LZ4 (32004) decoded on the GPU from the
// compressed bytes the host uploaded: `lz4_blocks` inflates every LZ4 block (a workgroup
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
    tile_words: u32,
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
    // The window's first block among all blocks of the upload.
    block_base: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> dp: DecodeParams;
// lz4_blocks: the compressed window; unshuffle_pack: per frame (chunk entry, frame in chunk).
@group(0) @binding(1) var<storage, read> src: array<u32>;
// lz4_blocks: per block (source byte, source length, output byte, output length | raw << 31);
// unshuffle_pack: per chunk (scratch byte, block elements, elements, 1 when not bitshuffled).
@group(0) @binding(2) var<storage, read> table: array<vec4<u32>>;
// Decoded bit planes: written by lz4_blocks, read by unshuffle_pack.
@group(0) @binding(3) var<storage, read_write> scratch: array<u32>;
// [0]: lowest failing block of the upload (0xffffffff when none); [1]: 1 when a binned sum
// passed u32. Read once the upload is done.
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;
// unshuffle_pack: bad-pixel bits, one per detector pixel.
@group(0) @binding(5) var<storage, read> bad: array<u32>;
// unshuffle_pack: the resident segment the frames go to.
// Position-tiled (`src/resident.rs`): a word holds one pixel at neighbouring positions,
// which may come from two windows, so a word the window fills only partly is or-ed in.
@group(0) @binding(6) var<storage, read_write> resident: array<atomic<u32>>;

fn src_byte(i: u32) -> u32 {
    return (src[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

fn dst_byte(i: u32) -> u32 {
    return (scratch[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

// Blocks of up to LOCAL_BYTES (all Dectris blocks: 8 KiB) are inflated by a workgroup in
// workgroup memory: one invocation parses a batch of sequences, then every invocation copies
// bytes (each output byte is written once, by `atomicOr` into zeroed words). Larger blocks
// are inflated in place in `scratch` by one invocation. Batches of 32 sequences (512 bytes
// of workgroup memory) inflated 20 % faster on the H200 than batches of 128 (2 KiB), and
// 8–64 ran the same. Skipping the match's modulo where it cannot wrap gained nothing;
// copying a word per invocation instead of a byte lost (10.2 against 6.3 ms a window).
const LOCAL_BYTES: u32 = 8192u;
const LANES: u32 = 32u;
const BATCH: u32 = 32u;
var<workgroup> local_out: array<atomic<u32>, 2048>;
// Per sequence of the batch: (literal source byte, output byte, match offset, lit | ml << 16).
var<workgroup> seqs: array<vec4<u32>, 32>;
// (sequences in the batch, 0: more follow / 1: block done / 2: block corrupt).
var<workgroup> batch: vec2<u32>;

fn local_byte(i: u32) -> u32 {
    return (atomicLoad(&local_out[i >> 2u]) >> ((i & 3u) * 8u)) & 0xffu;
}

fn local_put(i: u32, v: u32) {
    atomicOr(&local_out[i >> 2u], v << ((i & 3u) * 8u));
}

// Only this invocation writes its block's output range (ranges are 8-byte aligned by the
// host), so a plain read-modify-write is safe.
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
    atomicMin(&status[0], dp.block_base + block);
}

// One LZ4 sequence at source byte `start`, producing output from byte `d` of the block
// [d0, d_end): literals [lit_src, lit_src + lit), then `ml` bytes copied from `off` back
// (ml = 0 only for the last sequence, which must end the block). `next`: the source byte
// after it. `ok` is false when the sequence is corrupt or leaves its ranges.
struct Seq {
    lit_src: u32,
    lit: u32,
    off: u32,
    ml: u32,
    next: u32,
    ok: bool,
}

fn next_seq(start: u32, s_end: u32, d: u32, d0: u32, d_end: u32) -> Seq {
    var q = Seq(0u, 0u, 0u, 0u, 0u, false);
    var s = start;
    if (s >= s_end) {
        return q;
    }
    let token = src_byte(s);
    s += 1u;
    let le = extended(token >> 4u, s, s_end);
    if (le.y == BAD) {
        return q;
    }
    let lit = le.x;
    s = le.y;
    if (lit > s_end - s || lit > d_end - d) {
        return q;
    }
    q.lit_src = s;
    q.lit = lit;
    s += lit;
    if (s == s_end) {
        q.next = s;
        q.ok = d + lit == d_end;
        return q;
    }
    if (s_end - s < 2u) {
        return q;
    }
    let off = src_byte(s) | (src_byte(s + 1u) << 8u);
    s += 2u;
    if (off == 0u || off > d + lit - d0) {
        return q;
    }
    let me = extended(token & 15u, s, s_end);
    if (me.y == BAD) {
        return q;
    }
    let ml = me.x + 4u;
    if (ml > d_end - d - lit) {
        return q;
    }
    q.off = off;
    q.ml = ml;
    q.next = me.y;
    q.ok = true;
    return q;
}

// Inflate a large block in place in `scratch`, byte by byte (a match may overlap the bytes
// it produces); false when it is corrupt.
fn inflate_in_place(start: u32, s_end: u32, d0: u32, d_end: u32) -> bool {
    var s = start;
    var d = d0;
    loop {
        let q = next_seq(s, s_end, d, d0, d_end);
        if (!q.ok) {
            return false;
        }
        for (var k = 0u; k < q.lit; k += 1u) {
            put_byte(d + k, src_byte(q.lit_src + k));
        }
        d += q.lit;
        if (q.ml == 0u) {
            return true;
        }
        for (var k = 0u; k < q.ml; k += 1u) {
            put_byte(d + k, dst_byte(d + k - q.off));
        }
        d += q.ml;
        s = q.next;
    }
    return false;
}

// One workgroup per block. Raw blocks are copied word by word by every invocation; LZ4
// blocks as described above. Every output range owns the words it touches.
@compute @workgroup_size(32)
fn lz4_blocks(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let b = wg.x + wg.y * dp.groups_x;
    if (b >= dp.blocks) {
        return;
    }
    let e = table[b];
    let s0 = e.x;
    let s_end = e.x + e.y;
    let d0 = e.z;
    let raw = (e.w >> 31u) != 0u;
    let len = e.w & 0x7fffffffu;
    let d_end = d0 + len;
    if (s_end > dp.src_bytes || s_end < s0 || d_end > dp.dst_bytes || d_end < d0 || (raw && e.y != len)) {
        if (lid == 0u) {
            fail(b);
        }
        return;
    }
    let words = (len + 3u) / 4u;
    if (raw) {
        for (var w = lid; w < words; w += LANES) {
            var v = 0u;
            for (var k = 0u; k < 4u && 4u * w + k < len; k += 1u) {
                v |= src_byte(s0 + 4u * w + k) << (8u * k);
            }
            scratch[d0 / 4u + w] = v;
        }
        return;
    }
    if (len > LOCAL_BYTES) {
        if (lid == 0u && !inflate_in_place(s0, s_end, d0, d_end)) {
            fail(b);
        }
        return;
    }
    // The parser's position (used by invocation 0 only).
    var s = s0;
    var d = 0u;
    loop {
        if (lid == 0u) {
            var n = 0u;
            var state = 0u;
            loop {
                if (n == BATCH) {
                    break;
                }
                let q = next_seq(s, s_end, d, 0u, len);
                if (!q.ok) {
                    state = 2u;
                    break;
                }
                seqs[n] = vec4<u32>(q.lit_src, d, q.off, q.lit | (q.ml << 16u));
                n += 1u;
                d += q.lit + q.ml;
                s = q.next;
                if (q.ml == 0u) {
                    state = 1u;
                    break;
                }
            }
            batch = vec2<u32>(n, state);
        }
        let info = workgroupUniformLoad(&batch);
        // Literals come from the source: all of the batch's at once.
        for (var i = 0u; i < info.x; i += 1u) {
            let q = seqs[i];
            for (var k = lid; k < (q.w & 0xffffu); k += LANES) {
                local_put(q.y + k, src_byte(q.x + k));
            }
        }
        workgroupBarrier();
        // Matches in order: each reads only bytes before its start (period `off`).
        for (var i = 0u; i < info.x; i += 1u) {
            let q = seqs[i];
            let m0 = q.y + (q.w & 0xffffu);
            for (var k = lid; k < (q.w >> 16u); k += LANES) {
                local_put(m0 + k, local_byte(m0 - q.z + k % q.z));
            }
            workgroupBarrier();
        }
        if (info.y != 0u) {
            if (info.y == 2u) {
                if (lid == 0u) {
                    fail(b);
                }
                return;
            }
            break;
        }
    }
    for (var w = lid; w < words; w += LANES) {
        scratch[d0 / 4u + w] = atomicLoad(&local_out[w]);
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

// Sample `k` of frame `fi` of chunk `c`, zeroed when bad and masking is on.
fn sample(c: vec4<u32>, fi: u32, k: u32, sentinel: u32) -> u32 {
    let v = element(c.x, c.y, c.z, c.w, fi * dp.det_len + k);
    if (dp.mask_bad != 0u && (v == sentinel || ((bad[k >> 5u] >> (k & 31u)) & 1u) != 0u)) {
        return 0u;
    }
    return v;
}

// The count-preserving sum of binned pixel `w`'s b×b block (partial at the edges), bad
// pixels zeroed first; an overflow past u32 is reported.
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
    let tile_len = 256u / dp.bits;
    let per_word = 32u / dp.bits;
    // The window's frames as positions of the segment.
    let rel0 = dp.first_frame - dp.seg_first_frame;
    let rel1 = rel0 + dp.frames;
    let t0 = rel0 / tile_len;
    let tiles = (rel1 + tile_len - 1u) / tile_len - t0;
    let out_len = select(dp.det_len, ((dp.det_rows + dp.bin - 1u) / dp.bin) * dp.out_cols, dp.bin > 1u);
    if (id >= tiles * out_len) {
        return;
    }
    let tile = t0 + id / out_len;
    let k = id % out_len;
    let sentinel = select((1u << (8u * dp.elem)) - 1u, 0xffffffffu, dp.elem == 4u);
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
