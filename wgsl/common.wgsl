// Shared helpers, prepended to every kernel (one text on web and native).
// Resident samples are packed `bits` per u32 word (8, 16 or 32), frame after frame,
// each frame starting on a word boundary (`frame_words` words apart).

fn sample_at(word: u32, k: u32, bits: u32) -> u32 {
    if (bits == 32u) {
        return word;
    }
    let shift = (k % (32u / bits)) * bits;
    return (word >> shift) & ((1u << bits) - 1u);
}

// 64-bit unsigned arithmetic on (lo, hi) pairs: portable WGSL has no u64.
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    let carry = select(0u, 1u, lo < a.x);
    return vec2<u32>(lo, a.y + b.y + carry);
}

// Full 32 × 32 → 64-bit product through 16-bit limbs.
fn mul64(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = vec2<u32>(p01 << 16u, p01 >> 16u);
    let mid2 = vec2<u32>(p10 << 16u, p10 >> 16u);
    return add64(add64(vec2<u32>(p00, p11), mid), mid2);
}

// Display transform (linear, or signed log10(1 + |v|)), shared by the limits kernel and the
// renderer so the colour bar and the pixels agree.
fn shown(v: f32, log_scale: u32) -> f32 {
    if (log_scale == 0u) {
        return v;
    }
    return sign(v) * log2(1.0 + abs(v)) * 0.30102999566398120;
}
