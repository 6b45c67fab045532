// SHA-256 of prepared payload blocks on the GPU (`src/kernels/sha256.rs`, decision 0056):
// each block's "pieces SHA-256" as `formats::prepared::pieces_sha256` computes it on the CPU:
// the SHA-256 of each piece of `PIECE_BYTES` (the last shorter), of each run of
// `RUN_DIGESTS` consecutive piece digests, and of those runs' digests, the root. A group of
// blocks lying in one buffer is hashed together, one dispatch a level, one invocation a
// piece, a run or a block (decision 0057): a block's pieces are far too few to fill the GPU
// alone. Each block is whole words; its first `head_words` words lie from word `head_at`
// of `src`, the rest from `tail_at` (a packed block kept in a compressed resident's
// segment: its index, then its data). The root is compared with the block's expected digest.

struct HashParams {
    // 0: the blocks' pieces; 1: runs of their piece digests; 2: each block's root.
    level: u32,
    // Invocations of this level: the group's pieces, runs or blocks.
    items: u32,
    // Blocks in `table`.
    blocks: u32,
    // Word of `digests` where the runs' digests start (after every piece digest's).
    runs_at: u32,
    // Words of a piece, and digests of a run (`PIECE_BYTES` / 4, `RUN_DIGESTS`).
    piece_words: u32,
    run_digests: u32,
    groups_x: u32,
    _pad0: u32,
}

// One block of the group: where its words lie, and where its pieces' and runs' digests go
// (counted in digests, from the group's first).
struct Entry {
    block: u32,
    words: u32,
    head_words: u32,
    head_at: u32,
    tail_at: u32,
    first_piece: u32,
    first_run: u32,
    pieces: u32,
}

@group(0) @binding(0) var<uniform> hp: HashParams;
@group(0) @binding(1) var<storage, read> src: array<u32>;
// The digests of the group's pieces, then of its runs, 8 words each.
@group(0) @binding(2) var<storage, read_write> digests: array<u32>;
// Per block: the expected digest, 8 words (big-endian words, as SHA-256 states them).
@group(0) @binding(3) var<storage, read> expected: array<u32>;
// Per block: the digest computed, and 1 where it is the expected one (else 2).
@group(0) @binding(4) var<storage, read_write> roots: array<u32>;
@group(0) @binding(5) var<storage, read_write> verdicts: array<u32>;
@group(0) @binding(6) var<storage, read> table: array<Entry>;

var<private> K: array<u32, 64> = array<u32, 64>(
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
);

fn rotr(x: u32, n: u32) -> u32 {
    return (x >> n) | (x << (32u - n));
}

// The initial state.
fn sha_start() -> array<u32, 8> {
    return array<u32, 8>(
        0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
        0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u,
    );
}

// One 64-byte chunk `w` (message words, big-endian) into `h`.
fn sha_chunk(h: ptr<function, array<u32, 8>>, w_in: array<u32, 16>) {
    var w = w_in;
    var a = (*h)[0];
    var b = (*h)[1];
    var c = (*h)[2];
    var d = (*h)[3];
    var e = (*h)[4];
    var f = (*h)[5];
    var g = (*h)[6];
    var hh = (*h)[7];
    for (var t = 0u; t < 64u; t += 1u) {
        var wt = w[t & 15u];
        if (t >= 16u) {
            let w15 = w[(t + 1u) & 15u];
            let w2 = w[(t + 14u) & 15u];
            let s0 = rotr(w15, 7u) ^ rotr(w15, 18u) ^ (w15 >> 3u);
            let s1 = rotr(w2, 17u) ^ rotr(w2, 19u) ^ (w2 >> 10u);
            wt = wt + s0 + w[(t + 9u) & 15u] + s1;
            w[t & 15u] = wt;
        }
        let t1 = hh + (rotr(e, 6u) ^ rotr(e, 11u) ^ rotr(e, 25u)) + ((e & f) ^ (~e & g)) + K[t] + wt;
        let t2 = (rotr(a, 2u) ^ rotr(a, 13u) ^ rotr(a, 22u)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    (*h)[0] += a;
    (*h)[1] += b;
    (*h)[2] += c;
    (*h)[3] += d;
    (*h)[4] += e;
    (*h)[5] += f;
    (*h)[6] += g;
    (*h)[7] += hh;
}

// A little-endian word of the file's bytes as SHA-256 reads it (big-endian).
fn be(x: u32) -> u32 {
    return (x >> 24u) | ((x >> 8u) & 0xff00u) | ((x << 8u) & 0xff0000u) | (x << 24u);
}

// Message word `i` of a message of `n` words (`word` where `i` < `n`), padded: 0x80 after
// the last byte, then zeros, then the length in bits in the last two words of the last of
// its `chunks` chunks.
fn padded_word(i: u32, n: u32, chunks: u32, word: u32) -> u32 {
    if (i < n) {
        return word;
    }
    if (i == n) {
        return 0x80000000u;
    }
    let last = chunks * 16u;
    if (i == last - 2u) {
        return n >> 27u;
    }
    if (i == last - 1u) {
        return n << 5u;
    }
    return 0u;
}

// The block's word `i` as SHA-256 reads it (the file's bytes, little-endian words).
fn block_word(e: Entry, i: u32) -> u32 {
    if (i < e.head_words) {
        return be(src[e.head_at + i]);
    }
    return be(src[e.tail_at + i - e.head_words]);
}

// The SHA-256 of `n` words: of block `e` from its word `at` (`from_block`), else of
// `digests` from word `at` (a digest's bytes are its words big-endian: as they are).
fn sha_words(e: Entry, from_block: bool, at: u32, n: u32) -> array<u32, 8> {
    // Chunks of the padded message: its words, the 0x80 word and the two length words.
    let chunks = (n + 1u + 2u + 15u) / 16u;
    var h = sha_start();
    for (var c = 0u; c < chunks; c += 1u) {
        var w: array<u32, 16>;
        for (var j = 0u; j < 16u; j += 1u) {
            let i = c * 16u + j;
            var word = 0u;
            if (i < n) {
                if (from_block) {
                    word = block_word(e, at + i);
                } else {
                    word = digests[at + i];
                }
            }
            w[j] = padded_word(i, n, chunks, word);
        }
        sha_chunk(&h, w);
    }
    return h;
}

// The entry whose items (pieces at level 0, runs at level 1) hold item `i`.
fn entry_of(i: u32) -> Entry {
    var k = 0u;
    for (var j = 1u; j < hp.blocks; j += 1u) {
        let first = select(table[j].first_run, table[j].first_piece, hp.level == 0u);
        if (first <= i) {
            k = j;
        }
    }
    return table[k];
}

@compute @workgroup_size(64)
fn sha256_runs(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * hp.groups_x * 64u;
    if (i >= hp.items) {
        return;
    }
    if (hp.level == 0u) {
        let e = entry_of(i);
        let first = (i - e.first_piece) * hp.piece_words;
        let h = sha_words(e, true, first, min(hp.piece_words, e.words - first));
        for (var j = 0u; j < 8u; j += 1u) {
            digests[i * 8u + j] = h[j];
        }
        return;
    }
    if (hp.level == 1u) {
        let e = entry_of(i);
        let piece = (i - e.first_run) * hp.run_digests;
        let at = (e.first_piece + piece) * 8u;
        let h = sha_words(e, false, at, min(hp.run_digests, e.pieces - piece) * 8u);
        for (var j = 0u; j < 8u; j += 1u) {
            digests[hp.runs_at + i * 8u + j] = h[j];
        }
        return;
    }
    let e = table[i];
    let runs = (e.pieces + hp.run_digests - 1u) / hp.run_digests;
    let h = sha_words(e, false, hp.runs_at + e.first_run * 8u, runs * 8u);
    var same = true;
    for (var j = 0u; j < 8u; j += 1u) {
        roots[e.block * 8u + j] = h[j];
        same = same && h[j] == expected[e.block * 8u + j];
    }
    verdicts[e.block] = select(2u, 1u, same);
}
