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

// A u64 (lo, hi) as f32 (display and FFT inputs only; exact values stay in u64).
fn u64_f32(lo: u32, hi: u32) -> f32 {
    return f32(hi) * 4294967296.0 + f32(lo);
}

// CoM (row, col) from the six words (t, Σi·I, Σj·I as u64 pairs) of one position; 0 when empty.
fn com_from_words(w: array<u32, 6>) -> vec2<f32> {
    let t = u64_f32(w[0], w[1]);
    if (t == 0.0) {
        return vec2<f32>(0.0, 0.0);
    }
    return vec2<f32>(u64_f32(w[2], w[3]) / t, u64_f32(w[4], w[5]) / t);
}

// DPC of the contract: subtract the scan mean, swap the axes when flipped, then rotate by
// (cos, sin).
fn dpc_from_com(com: vec2<f32>, mean: vec2<f32>, cos_t: f32, sin_t: f32, flip: u32) -> vec2<f32> {
    var d = com - mean;
    if (flip != 0u) {
        d = d.yx;
    }
    return vec2<f32>(cos_t * d.x - sin_t * d.y, sin_t * d.x + cos_t * d.y);
}
