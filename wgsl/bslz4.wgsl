// stem4d:after decode_common.wgsl
// The LZ4 inflate of the GPU decode (after `decode_common.wgsl`): every block of an uploaded
// window into the scratch buffer's decoded bit planes or bytes.

// Blocks of up to LOCAL_BYTES (all Dectris blocks: 8 KiB) are inflated in two passes.
// `bslz4_parse` walks each block's sequences, one invocation per block, so every block of the
// window is parsed at once (the walk is serial: each token's place depends on the lengths
// before it), checks them and writes them to the block's region of `seqs`. `bslz4`
// then gives the block one subgroup's width of invocations, which make its output straight
// in the scratch buffer, STEP_SEQS sequences at a time: first all their literals (they
// depend on nothing), an invocation an output word, then their matches one after another,
// a barrier after each. A match copies only bytes made before it starts — within its
// period `off` it repeats the `off` bytes before it — so every byte of it is made at once,
// a word an invocation. `bslz4_serial` inflates in place, one invocation a block, the blocks
// over LOCAL_BYTES and those with more sequences than their region holds.
//
// Every invocation reads a match's first word before the barrier that precedes the stores:
// a store to that word while others read its bytes before the match would be a data race,
// however harmless the bytes read. On Vulkan this module is built from SPIR-V with its
// storage barriers workgroup-scoped (`src/gpu/spirv.rs`). Why this shape, and the variants
// measured: decision 0007 (the barriers' scope: decision 0009).
const LOCAL_BYTES: u32 = 8192u;
// Invocations of a `bslz4` workgroup: one subgroup on NVIDIA (any width is correct:
// the barriers are the workgroup's).
const LANES: u32 = 32u;
// Sequences a block's region holds at most (the host sizes each region by the block's
// own bounds: a sequence other than the last takes 3 source bytes and makes 4 output bytes).
const SEQ_CAP: u32 = 512u;
// The count word of a region whose block did not fit it, or was corrupt.
const SEQ_OVERFLOW: u32 = 0xfffffffeu;
const SEQ_CORRUPT: u32 = 0xffffffffu;

// Region of block `b`: `seq_at[b]` is its count word (sequences, 0), its sequences
// follow; a region ends where the next block's begins. A sequence is (output byte |
// literals << 16, literal source byte - block start | match offset << 16).
@group(0) @binding(7) var<storage, read_write> seqs_out: array<vec2<u32>>;
@group(0) @binding(8) var<storage, read> seqs_in: array<vec2<u32>>;
@group(0) @binding(9) var<storage, read> seq_at: array<u32>;

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
// after it. `ok` is false when the sequence is corrupt or leaves its ranges: each sequence
// is checked as it is parsed, before any byte is copied (C-DECODE-GPU).
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

// Fields of a sequence entry's first word (see `seqs_out`).
fn entry_d(x: u32) -> u32 {
    return x & 0x3fffu;
}

fn entry_lit(x: u32) -> u32 {
    return (x >> 16u) & 0x3fffu;
}

// Where a sequence's literals start among its block's stored bytes, and its match offset
// (second entry word).
fn entry_src(y: u32) -> u32 {
    return y & 0xffffu;
}

fn entry_off(y: u32) -> u32 {
    return y >> 16u;
}

// The checked block table entry of block `b`: (source start, source end, output start,
// output length | raw << 31), or none when its ranges leave the window.
struct Block {
    s0: u32,
    s_end: u32,
    d0: u32,
    len: u32,
    raw: bool,
    ok: bool,
}

fn block_at(b: u32) -> Block {
    let e = table[b];
    let raw = (e.w >> 31u) != 0u;
    let len = e.w & 0x7fffffffu;
    let s_end = e.x + e.y;
    let d_end = e.z + len;
    let ok = !(s_end > dp.src_bytes || s_end < e.x || d_end > dp.dst_bytes || d_end < e.z
        || (raw && e.y != len));
    return Block(e.x, s_end, e.z, len, raw, ok);
}

// The block of an invocation-per-block kernel (64-wide workgroups on a 2-D grid).
fn block_of(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * dp.groups_x * 64u;
}

// One invocation per block: its sequences, checked, into its region of `seqs_out`.
@compute @workgroup_size(64)
fn bslz4_parse(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = block_of(gid);
    if (b >= dp.blocks) {
        return;
    }
    let k = block_at(b);
    if (!k.ok || k.raw || k.len > LOCAL_BYTES) {
        return;
    }
    let at = seq_at[b];
    let cap = seq_at[b + 1u] - at - 1u;
    var s = k.s0;
    var d = 0u;
    var n = 0u;
    loop {
        let q = next_seq(s, k.s_end, d, 0u, k.len);
        // A sound block of at most 8 KiB keeps its literals within 64 KiB of its start.
        if (!q.ok || q.lit_src - k.s0 > 0xffffu) {
            fail(b);
            seqs_out[at] = vec2<u32>(SEQ_CORRUPT, 0u);
            return;
        }
        if (n == cap) {
            seqs_out[at] = vec2<u32>(SEQ_OVERFLOW, 0u);
            return;
        }
        seqs_out[at + 1u + n] = vec2<u32>(d | (q.lit << 16u), (q.lit_src - k.s0) | (q.off << 16u));
        n += 1u;
        d += q.lit + q.ml;
        s = q.next;
        if (q.ml == 0u) {
            break;
        }
    }
    seqs_out[at] = vec2<u32>(n, 0u);
}

// One invocation per block: the blocks `bslz4` leaves, larger than LOCAL_BYTES or with
// more sequences than their region held, inflated in place — all such blocks at once, where
// inside `bslz4` each would hold a workgroup while one invocation works.
@compute @workgroup_size(64)
fn bslz4_serial(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = block_of(gid);
    if (b >= dp.blocks) {
        return;
    }
    let k = block_at(b);
    if (!k.ok || k.raw) {
        return;
    }
    if (k.len > LOCAL_BYTES || seqs_in[seq_at[b]].x == SEQ_OVERFLOW) {
        atomicAdd(&status[2], 1u);
        if (!inflate_in_place(k.s0, k.s_end, k.d0, k.d0 + k.len)) {
            fail(b);
        }
    }
}

// The block `bslz4` is making: where its sequence entries start, how many, its length.
var<private> blk_seqs: u32;
var<private> blk_n: u32;
var<private> blk_len: u32;

// Entry `i` of the block's sequences; for `i` = n, one whose output byte is the block's
// length and whose literals start past every stored byte.
fn seq_entry(i: u32) -> vec2<u32> {
    return select(seqs_in[blk_seqs + min(i, blk_n - 1u)], vec2<u32>(blk_len, 0xffffu), i >= blk_n);
}

// The entries of the STEP_SEQS sequences being made, and the one after (whose output byte
// ends the last one's match): an entry an invocation loads.
const STEP_SEQS: u32 = LANES;
var<workgroup> ents: array<vec2<u32>, 33>;

// Four stored bytes from byte `x` on.
fn src_bytes4(x: u32) -> u32 {
    let sh = (x & 3u) * 8u;
    let lo = src[x >> 2u];
    if (sh == 0u) {
        return lo;
    }
    return (lo >> sh) | (src[(x >> 2u) + 1u] << (32u - sh));
}

// The match being made: its block's first scratch word, the match's first word, and that
// word as it stood before the match (read by every invocation before any writes it). The
// match's bytes come only from before it, so a read of the block's words stops at that
// word: the others of the match are being written and no invocation reads them (no race).
struct Made {
    dw: u32,
    first: u32,
    pre: u32,
}

fn made_word(mk: Made, i: u32) -> u32 {
    if (i >= mk.first) {
        return mk.pre;
    }
    return scratch[mk.dw + i];
}

// Four bytes from block byte `x` on, as they stood before the match (bytes from the
// match's first word on: those of `pre`, the rest unknown).
fn made_bytes4(mk: Made, x: u32) -> u32 {
    let sh = (x & 3u) * 8u;
    let lo = made_word(mk, x >> 2u);
    if (sh == 0u) {
        return lo;
    }
    return (lo >> sh) | (made_word(mk, (x >> 2u) + 1u) << (32u - sh));
}

// `t % off` for t < 2^16 from a float quotient (one off either way, corrected): the
// integer remainder is a long instruction sequence on GPUs.
fn rem(t: u32, off: u32) -> u32 {
    let q = u32(f32(t) / f32(off));
    var r = i32(t) - i32(q * off);
    if (r < 0) {
        r += i32(off);
    }
    if (r >= i32(off)) {
        r -= i32(off);
    }
    return u32(r);
}

// Bytes [lo, hi) of a word (0 ≤ lo ≤ hi ≤ 4) set.
fn byte_mask(lo: u32, hi: u32) -> u32 {
    let upto_hi = select(0xffffffffu, (1u << (8u * hi)) - 1u, hi < 4u);
    let from_lo = select(0u, 0xffffffffu << (8u * lo), lo < 4u);
    return upto_hi & from_lo;
}

// The last sequence among ents[0 .. m] whose output starts at or before byte `p`.
fn ents_by_d(p: u32, m: u32) -> u32 {
    var l = 0u;
    var h = m;
    while (h - l > 1u) {
        let c = (l + h) / 2u;
        if (entry_d(ents[c].x) <= p) {
            l = c;
        } else {
            h = c;
        }
    }
    return l;
}

// The four bytes a match copying `off` back makes from its byte `t` on, the match starting
// at block byte `m0`: the match repeats the `off` bytes before it, so these are that
// period's bytes from phase r = t mod off on. `off` is the same for every invocation of a
// step, so its branches cost no divergence; the remainder is worked out only past the
// first period. A period of 4 bytes or more: the bytes at the phase, then (across the
// period's end) its first bytes; under 4: the period laid out twice over 8 bytes, read at
// its phase.
fn match_bytes4(mk: Made, m0: u32, t: u32, off: u32) -> u32 {
    var r = t;
    if (t >= off) {
        r = rem(t, off);
    }
    if (off >= 4u) {
        let at_phase = made_bytes4(mk, m0 - off + r);
        if (r + 4u <= off) {
            return at_phase;
        }
        let c = off - r;
        return (at_phase & byte_mask(0u, c)) | (made_bytes4(mk, m0 - off) << (8u * c));
    }
    let head = made_bytes4(mk, m0 - off);
    let b0 = head & 0xffu;
    var lo = b0 * 0x01010101u;
    var hi = lo;
    if (off == 2u) {
        lo = (head & 0xffffu) * 0x00010001u;
        hi = lo;
    } else if (off == 3u) {
        let b1 = (head >> 8u) & 0xffu;
        let b2 = (head >> 16u) & 0xffu;
        lo = (head & 0xffffffu) | (b0 << 24u);
        hi = b1 | (b2 << 8u) | (b0 << 16u) | (b1 << 24u);
    }
    return select((lo >> (8u * r)) | (hi << (32u - 8u * r)), lo, r == 0u);
}

// One workgroup (a subgroup's width) per block. Raw blocks are copied word by word. Parsed
// LZ4 blocks are made straight in the scratch buffer, STEP_SEQS sequences at a time: first
// the literals of all of them, an invocation an output word (they depend on nothing), then
// their matches one after another (a match copies only bytes made before it, so all its
// bytes are made at once), each between two barriers: one after every invocation has read
// the match's first word as it stood, one after the match is made.
@compute @workgroup_size(LANES)
fn bslz4(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let b = wg.x + wg.y * dp.groups_x;
    if (b >= dp.blocks) {
        return;
    }
    let k = block_at(b);
    if (!k.ok) {
        if (lid == 0u) {
            fail(b);
        }
        return;
    }
    let words = (k.len + 3u) / 4u;
    let dw = k.d0 / 4u;
    if (k.raw) {
        for (var w = lid; w < words; w += LANES) {
            var v = 0u;
            for (var j = 0u; j < 4u && 4u * w + j < k.len; j += 1u) {
                v |= src_byte(k.s0 + 4u * w + j) << (8u * j);
            }
            scratch[dw + w] = v;
        }
        return;
    }
    let at = seq_at[b];
    let n = seqs_in[at].x;
    // Large and overflowing blocks are `bslz4_serial`'s, corrupt ones failed in the parse.
    if (k.len > LOCAL_BYTES || n == 0u || n > SEQ_CAP) {
        return;
    }
    blk_seqs = at + 1u;
    blk_n = n;
    blk_len = k.len;
    for (var g = 0u; g < n; g += STEP_SEQS) {
        workgroupBarrier();
        ents[lid] = seq_entry(g + lid);
        if (lid == 0u) {
            ents[STEP_SEQS] = seq_entry(g + STEP_SEQS);
        }
        workgroupBarrier();
        let m = min(STEP_SEQS, n - g);
        let span0 = entry_d(ents[0].x);
        let span1 = entry_d(ents[m].x);
        // The literals: a word holds those of one sequence at most (a match of 4 bytes or
        // more lies between two sequences' literals); every word of the span is written,
        // a word the group before began keeping its bytes.
        for (var w = span0 / 4u + lid; 4u * w < span1; w += LANES) {
            let p = 4u * w;
            let e = ents[ents_by_d(p + 3u, m)];
            let d = entry_d(e.x);
            let lo = max(p, d);
            let hi = min(p + 4u, d + entry_lit(e.x));
            var v = 0u;
            if (lo < hi) {
                let x = src_bytes4(k.s0 + entry_src(e.y) + lo - d) << (8u * (lo - p));
                v = x & byte_mask(lo - p, hi - p);
            }
            if (p < span0) {
                v |= scratch[dw + w];
            }
            scratch[dw + w] = v;
        }
        storageBarrier();
        for (var j = 0u; j < m; j += 1u) {
            let e = ents[j];
            let m0 = entry_d(e.x) + entry_lit(e.x);
            let end = entry_d(ents[j + 1u].x);
            let off = entry_off(e.y);
            let mk = Made(dw, m0 / 4u, scratch[dw + m0 / 4u]);
            storageBarrier();
            for (var w = m0 / 4u + lid; 4u * w < end; w += LANES) {
                let p = 4u * w;
                let lo = max(p, m0);
                let hi = min(p + 4u, end);
                let x = match_bytes4(mk, m0, lo - m0, off) << (8u * (lo - p));
                scratch[dw + w] = scratch[dw + w] | (x & byte_mask(lo - p, hi - p));
            }
            storageBarrier();
        }
    }
}
