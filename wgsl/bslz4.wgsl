// The LZ4 inflate of the GPU decode (after `decode_common.wgsl`): every block of an uploaded
// window into the scratch buffer's decoded bit planes or bytes.

// Blocks of up to LOCAL_BYTES (all Dectris blocks: 8 KiB) are inflated in two passes.
// `lz4_parse` walks each block's sequences, one invocation per block, so every block of the
// window is parsed at once (the walk is serial: each token's place depends on the lengths
// before it), checks them, writes them to the block's region of `seqs`, and cuts them into
// runs. `lz4_blocks` then gives the block a workgroup that first puts every literal byte in
// place at once (literals depend on nothing), then makes a run's match bytes all at once, a
// barrier between runs: a match byte copies a literal, a byte made before its run, or — a
// byte of another match of its run — is followed back through the run's matches to one of
// those. Any cut is correct; the parse starts a run where a match would be more than
// MAX_DEPTH steps deep, trading steps a byte against barriers (the synthetic benchmark's
// blocks: 2–325 sequences). `lz4_serial` inflates in place, one invocation a block, the
// blocks over LOCAL_BYTES and those with more sequences than their region holds.
// Measured on the H200 (one 64 MB window, 232 MB decoded): the parse 0.41 ms, the copies
// 2.98 ms. The copies are the chain of runs of each block, and the driver gives this kernel
// a multiprocessor's worth of workgroup memory of about 64 KiB (`stem4d bench
// kernel-stats`: 37 registers, so registers are not what limits it): with 14.4 KB a
// workgroup only four were resident at once (dispatching the first 132·m blocks alone took
// as long for m = 1, 2 and 4; padded to 16.3 KB, three: +0.12 ms), so workgroup memory is
// kept to the block's output, a stretch table and the run bits (9.3 KB), and each run's
// waits are what counts: a byte's sequence is one load from its 32-byte stretch's, not a
// walk from the run's start, and an entry is loaded with its neighbour. Literals are put in
// place before the runs so that a run reads no stored bytes. Copies, session by session:
// 3.9 ms; stretches of 16 bytes with the entries in workgroup memory 3.46; entries in
// pairs 3.25; entries read from memory 3.1 (16-byte stretches) and 2.98 (32; packed two to
// a word, 3.05). Tried and dropped: 32 or 64 invocations a block (10.3 / 6.8 ms: each
// invocation's bytes wait in turn), whole words where a match copies bytes already made
// (+0.5 ms), runs 1, 2, 5 or 7 steps deep (+1.4, +0.3, the same, +0.15 ms), matches that
// copy an earlier match's bytes pointed at that match's source (the parse 0.42 → 1.5 ms for
// copies 0.1 ms faster), two bytes an invocation with their chases interleaved (+0.7 ms),
// and, in earlier sessions, bytes traced to their literals with no runs (14–44 ms: sparse
// bit planes chain hundreds of matches).
const LOCAL_BYTES: u32 = 8192u;
// Invocations of a `lz4_blocks` workgroup (WebGPU's guaranteed maximum).
const LANES: u32 = 256u;
// Sequences a block's region holds at most (the host sizes each region by the block's
// own bounds: a sequence other than the last takes 3 source bytes and makes 4 output bytes).
const SEQ_CAP: u32 = 512u;
// The count word of a region whose block did not fit it, or was corrupt.
const SEQ_OVERFLOW: u32 = 0xfffffffeu;
const SEQ_CORRUPT: u32 = 0xffffffffu;

// Region of block `b`: `seq_at[b]` is its count word (sequences, runs), its sequences
// follow; a region ends where the next block's begins. A sequence is (output byte |
// match depth << 14 | literals << 16 | starts a run << 31, literal source byte - block
// start | match offset << 16).
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

// Fields of a sequence entry's first word (see `seqs_out`).
fn entry_d(x: u32) -> u32 {
    return x & 0x3fffu;
}

fn entry_lit(x: u32) -> u32 {
    return (x >> 16u) & 0x3fffu;
}

fn entry_depth(x: u32) -> u32 {
    return (x >> 14u) & 3u;
}

// Where a sequence's literals start among its block's stored bytes, and its match offset
// (second entry word).
fn entry_src(y: u32) -> u32 {
    return y & 0xffffu;
}

fn entry_off(y: u32) -> u32 {
    return y >> 16u;
}

// Whether the sequence starts a run (first entry word).
fn entry_starts_run(x: u32) -> bool {
    return (x >> 31u) != 0u;
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

// Steps a run's byte may take back through the run's matches before it reaches a literal or
// a byte made before the run (`lz4_blocks` follows them; more steps, fewer runs). At most 3:
// a depth has two bits.
const MAX_DEPTH: u32 = 3u;

// The steps a match takes to reach a literal or a byte before `run` (the output byte of
// sequence `first`, the run's first), copying `len` bytes from `lo` within its period, for
// the sequence `j` at output byte `d` (its own literals `d ..` count as literals): one more
// than the deepest match it copies from. The run's sequences are looked at from `j - 1`
// down (whose entry `last` the caller holds), as matches mostly copy what just came before.
fn match_depth(base: u32, first: u32, j: u32, last: u32, run: u32, d: u32, lo: u32, len: u32) -> u32 {
    let a0 = max(lo, run);
    let a1 = min(lo + len, d);
    if (a0 >= a1) {
        return 1u;
    }
    var deepest = 0u;
    var end = d;
    var e = last;
    var i = j - 1u;
    loop {
        let di = entry_d(e);
        let m0 = di + entry_lit(e);
        if (a1 > m0 && a0 < end) {
            deepest = max(deepest, entry_depth(e));
        }
        if (di <= a0 || i == first) {
            break;
        }
        end = di;
        i -= 1u;
        e = seqs_out[base + i].x;
    }
    return deepest + 1u;
}

// One invocation per block: its sequences, checked, into its region of `seqs_out`.
@compute @workgroup_size(64)
fn lz4_parse(@builtin(global_invocation_id) gid: vec3<u32>) {
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
    // Output byte and first sequence of the current run, and the runs.
    var run = 0u;
    var first = 0u;
    var runs = 0u;
    // The entry of the sequence before.
    var last = 0u;
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
        // A sequence joins the run while its match bytes are at most MAX_DEPTH steps from a
        // literal or a byte made before the run; otherwise it starts the next run (flag in
        // bit 31). Its depth goes in bits 14–15 for the matches after it.
        var depth = 0u;
        if (q.ml > 0u) {
            depth = match_depth(at + 1u, first, n, last, run, d, d + q.lit - q.off, min(q.ml, q.off));
        }
        let starts = n == 0u || depth > MAX_DEPTH;
        if (starts) {
            run = d;
            first = n;
            runs += 1u;
            depth = select(0u, 1u, q.ml > 0u);
        }
        let x = d | (depth << 14u) | (q.lit << 16u) | (select(0u, 1u, starts) << 31u);
        seqs_out[at + 1u + n] = vec2<u32>(x, (q.lit_src - k.s0) | (q.off << 16u));
        last = x;
        n += 1u;
        d += q.lit + q.ml;
        s = q.next;
        if (q.ml == 0u) {
            break;
        }
    }
    seqs_out[at] = vec2<u32>(n, runs);
}

// One invocation per block: the blocks `lz4_blocks` leaves, larger than LOCAL_BYTES or with
// more sequences than their region held, inflated in place — all such blocks at once, where
// inside `lz4_blocks` each would hold a 256-wide workgroup while one invocation works.
@compute @workgroup_size(64)
fn lz4_serial(@builtin(global_invocation_id) gid: vec3<u32>) {
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

// The block `lz4_blocks` is making: where its sequence entries start, how many, its length.
// The entries are read from memory where they lie (they stay cached): in workgroup memory
// they had cost a fifth of the multiprocessor's room for these workgroups (see above).
var<private> blk_seqs: u32;
var<private> blk_n: u32;
var<private> blk_len: u32;

// Entry `i` of the block's sequences; for `i` = n, one whose output byte is the block's
// length and whose literals start past every stored byte.
fn seq_entry(i: u32) -> vec2<u32> {
    return select(seqs_in[blk_seqs + min(i, blk_n - 1u)], vec2<u32>(blk_len, 0xffffu), i >= blk_n);
}

// The block's output as far as it is made (zeroed on entry, as all workgroup memory).
var<workgroup> made: array<atomic<u32>, 2048>;
// The sequence holding the first byte of each stretch of the block's output, so that a
// byte's sequence is a load and a step or two away.
const STRETCH: u32 = 32u;
var<workgroup> stretch_seq: array<u32, 256>;
// A bit a sequence, set where a run starts.
var<workgroup> run_bits: array<atomic<u32>, 16>;

fn seq_d(i: u32) -> u32 {
    return entry_d(seq_entry(i).x);
}

// The last sequence among `lo .. hi` whose first output byte — or, `by_src`, whose
// literals' first stored byte (of the block's) — is at most `key` (`lo`'s is): the one
// holding that output byte, or those stored bytes' sequence.
fn seq_search(key: u32, lo: u32, hi: u32, by_src: bool) -> u32 {
    var l = lo;
    var h = hi;
    while (h - l > 1u) {
        let m = (l + h) / 2u;
        let e = seq_entry(m);
        if (select(entry_d(e.x), entry_src(e.y), by_src) <= key) {
            l = m;
        } else {
            h = m;
        }
    }
    return l;
}

// Where sequence `i`'s literals start in the block's stored bytes.
fn seq_src(i: u32) -> u32 {
    return entry_src(seq_entry(i).y);
}

// The entry of the sequence holding output byte `p`, from its stretch's on: each entry is
// loaded with the next one's, so a step costs one wait.
fn entry_holding(p: u32) -> vec2<u32> {
    var j = stretch_seq[p / STRETCH];
    var e = seq_entry(j);
    var next = seq_entry(j + 1u);
    while (entry_d(next.x) <= p) {
        j += 1u;
        e = next;
        next = seq_entry(j + 1u);
    }
    return e;
}

// The first run start after sequence `a`, or `n`.
fn next_run(a: u32, n: u32) -> u32 {
    var i = a + 1u;
    loop {
        if (i >= n) {
            return n;
        }
        let w = atomicLoad(&run_bits[i / 32u]) >> (i % 32u);
        if (w != 0u) {
            return min(i + firstTrailingBit(w), n);
        }
        i = (i | 31u) + 1u;
    }
    return n;
}

fn made_byte(i: u32) -> u32 {
    return (atomicLoad(&made[i >> 2u]) >> ((i & 3u) * 8u)) & 0xffu;
}

fn put_made(p: u32, v: u32) {
    atomicOr(&made[p >> 2u], v << ((p & 3u) * 8u));
}

// Match byte `p0` of the sequence with entry `e0`, in the run starting at output byte
// `d0`: the byte `off` before it (wrapped into the period before the match starts),
// followed back through the run's matches (at most MAX_DEPTH steps, each to an earlier
// byte) to a literal (all made first) or a byte made before the run.
fn run_byte(p0: u32, e0: vec2<u32>, d0: u32) -> u32 {
    var p = p0;
    var e = e0;
    loop {
        let m0 = entry_d(e.x) + entry_lit(e.x);
        let off = entry_off(e.y);
        let t = p - m0;
        var q = m0 - off + t;
        if (t >= off) {
            // Wrapped into the period before the match (a run of one byte repeated: its last).
            q = select(m0 - off + t % off, m0 - 1u, off == 1u);
        }
        // Loaded while its sequence is looked up: it is the answer unless a match made it.
        let v = made_byte(q);
        if (q < d0) {
            return v;
        }
        e = entry_holding(q);
        if (q - entry_d(e.x) < entry_lit(e.x)) {
            return v;
        }
        p = q;
    }
    return 0u;
}

// One workgroup per block. Raw blocks are copied word by word by every invocation. Parsed
// LZ4 blocks are made in `made`: first every literal byte at once (they depend on nothing:
// an invocation a stored word, finding its sequence by the literals' source bytes), then the
// match bytes run by run, then all out as whole words. Every output range owns the words it
// touches.
@compute @workgroup_size(256)
fn lz4_blocks(
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
    // Large and overflowing blocks are `lz4_serial`'s, corrupt ones failed in the parse.
    if (k.len > LOCAL_BYTES || n == 0u || n > SEQ_CAP) {
        return;
    }
    blk_seqs = at + 1u;
    blk_n = n;
    blk_len = k.len;
    for (var m = lid; m * STRETCH < k.len; m += LANES) {
        stretch_seq[m] = seq_search(m * STRETCH, 0u, n, false);
    }
    for (var i = lid; i < n; i += LANES) {
        if (entry_starts_run(seq_entry(i).x)) {
            atomicOr(&run_bits[i / 32u], 1u << (i % 32u));
        }
    }
    // The literals: each stored byte of a sequence's literals goes to its output byte.
    for (var x = k.s0 / 4u + lid; x < (k.s_end + 3u) / 4u; x += LANES) {
        let v = src[x];
        let r0 = max(4u * x, k.s0) - k.s0;
        let r1 = min(4u * x + 4u, k.s_end) - k.s0;
        var i = seq_search(r0, 0u, n, true);
        var e = seq_entry(i);
        var next_src = seq_src(i + 1u);
        for (var r = r0; r < r1; r += 1u) {
            if (r >= next_src) {
                i += 1u;
                e = seq_entry(i);
                next_src = seq_src(i + 1u);
            }
            let c = r - entry_src(e.y);
            if (c < entry_lit(e.x)) {
                put_made(entry_d(e.x) + c, (v >> (((k.s0 + r) & 3u) * 8u)) & 0xffu);
            }
        }
    }
    workgroupBarrier();
    let runs = seqs_in[at].y;
    var a = 0u;
    for (var r = 0u; r < runs; r += 1u) {
        let e = next_run(a, n);
        let d0 = seq_d(a);
        let d1 = seq_d(e);
        for (var p = d0 + lid; p < d1; p += LANES) {
            let e = entry_holding(p);
            if (p - entry_d(e.x) >= entry_lit(e.x)) {
                put_made(p, run_byte(p, e, d0));
            }
        }
        workgroupBarrier();
        a = e;
    }
    for (var w = lid; w < words; w += LANES) {
        scratch[dw + w] = atomicLoad(&made[w]);
    }
}
