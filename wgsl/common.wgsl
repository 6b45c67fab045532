// Shared helpers, prepended to every kernel (one text on web and native).
// Resident samples are packed `bits` per u32 word (8, 16 or 32) in position tiles
// (`src/upload/plan.rs`); sample `k` of a word is its `k % (32 / bits)`-th.

fn sample_at(word: u32, k: u32, bits: u32) -> u32 {
    if (bits == 32u) {
        return word;
    }
    let shift = (k % (32u / bits)) * bits;
    return (word >> shift) & ((1u << bits) - 1u);
}

// The compressed resident's sector widths (`wgsl/packed.wgsl`, decision 0025): a 4-bit
// code is a width of 0–14 bits, or 15 for the sample's full `bits`.
fn packed_width(code: u32, bits: u32) -> u32 {
    return select(code, bits, code == 15u);
}

// Sum of the widths of the first `n` (0–8) sectors of a group whose codes are `codes`:
// the nibbles summed in parallel, each code 15 (the full `bits`) counted apart. The
// arithmetic wraps, so `bits` − 15 is right for 8-bit samples too.
fn packed_widths_before(codes: u32, n: u32, bits: u32) -> u32 {
    let m = select(codes & ((1u << (4u * n)) - 1u), codes, n >= 8u);
    let pairs = (m & 0x0f0f0f0fu) + ((m >> 4u) & 0x0f0f0f0fu);
    let sum = (pairs * 0x01010101u) >> 24u;
    let full = countOneBits(m & (m >> 1u) & (m >> 2u) & (m >> 3u) & 0x11111111u);
    return sum + full * (bits - 15u);
}

// `w` bits (1–32) from bit `s` (0–31) of `lo` on, the rest from `hi`.
fn packed_bits(lo: u32, hi: u32, s: u32, w: u32) -> u32 {
    var v = lo >> s;
    if (s + w > 32u) {
        v |= hi << (32u - s);
    }
    return select(v & ((1u << w) - 1u), v, w == 32u);
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

// Display scales (`src/display/scale.rs`): linear, signed log10(1 + |v|), signed sqrt(|v|).
// Shared by the limits kernel and the renderer so the colour bar and the pixels agree
// (C-DISPLAY).
const SCALE_LOG: u32 = 1u;
const SCALE_SQRT: u32 = 2u;

fn shown(v: f32, scale: u32) -> f32 {
    if (scale == SCALE_LOG) {
        return sign(v) * log2(1.0 + abs(v)) * 0.30102999566398120;
    }
    if (scale == SCALE_SQRT) {
        return sign(v) * sqrt(abs(v));
    }
    return v;
}

// Finite test on the bits: WGSL lets compilers assume NaN never occurs in comparisons.
fn is_finite_f32(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u;
}

// atan(x) for 0 ≤ x ≤ 1 from +, ×, ÷ alone (Cephes' atanf: one reduction at tan(π/8), then
// an odd polynomial; ~2e-7 relative), so that its accuracy does not hang on the adapter's
// atan2, which WGSL only bounds to 4096 ulp.
fn atan_unit(x: f32) -> f32 {
    var base = 0.0;
    var z = x;
    if (x > 0.41421356237309503) {
        base = 0.78539816339744831;
        z = (x - 1.0) / (x + 1.0);
    }
    let zz = z * z;
    let p = (((0.0805374449538 * zz - 0.138776856032) * zz + 0.199777106478) * zz - 0.333329491539) * zz;
    return base + (p * z + z);
}

// Direction of a DPC vector g = (g_r, g_c): atan2(g_c, g_r) in (−π, π], 0 along +row, +π/2
// along +col; 0 for the zero vector (`contract::dpc_polar`, C-DPC-POLAR).
fn dpc_angle(g: vec2<f32>) -> f32 {
    let ar = abs(g.x);
    let ac = abs(g.y);
    if (ar == 0.0 && ac == 0.0) {
        return 0.0;
    }
    var a = 0.0;
    if (ac <= ar) {
        a = atan_unit(ac / ar);
    } else {
        a = 1.5707963267948966 - atan_unit(ar / ac);
    }
    if (g.x < 0.0) {
        a = 3.14159265358979323 - a;
    }
    return select(a, -a, g.y < 0.0);
}

// A u64 (lo, hi) as f32 (display and FFT inputs only; exact values stay in u64: C-DISPLAY).
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

// DPC of the contract (C-DPC): subtract the scan mean, swap the axes when flipped, then
// rotate by (cos, sin).
fn dpc_from_com(com: vec2<f32>, mean: vec2<f32>, cos_t: f32, sin_t: f32, flip: u32) -> vec2<f32> {
    var d = com - mean;
    if (flip != 0u) {
        d = d.yx;
    }
    return vec2<f32>(cos_t * d.x - sin_t * d.y, sin_t * d.x + cos_t * d.y);
}

// Float32 data summed exactly: every sample is an integer multiple of 2^lsb (the host audits
// the resident values and proves the sums fit), so sums are 128-bit two's-complement
// integers (four u32 limbs, least significant first) and the order of addition cannot
// change a bit (C-FLOAT-GPU).
fn add128(a: vec4<u32>, b: vec4<u32>) -> vec4<u32> {
    let s = a + b;
    let c0 = select(0u, 1u, s.x < a.x);
    let y = s.y + c0;
    let c1 = select(0u, 1u, s.y < a.y || y < c0);
    let z = s.z + c1;
    let c2 = select(0u, 1u, s.z < a.z || z < c1);
    return vec4<u32>(s.x, y, z, s.w + c2);
}

// `factor · x` (x: float32 bits, finite) as a 128-bit integer in units of 2^lsb.
fn fixed128(x: u32, factor: u32, lsb: i32) -> vec4<u32> {
    let e = (x >> 23u) & 0xffu;
    var m = x & 0x7fffffu;
    if (e != 0u) {
        m |= 0x800000u;
    }
    if (m == 0u || factor == 0u) {
        return vec4<u32>(0u);
    }
    let p = mul64(m, factor);
    let s = u32(i32(max(e, 1u)) - 150 - lsb);
    let w = s / 32u;
    let b = s % 32u;
    // p << b as three limbs; a shift by 32 would be taken mod 32, hence the select.
    let x0 = p.x << b;
    let x1 = (p.y << b) | select(p.x >> (32u - b), 0u, b == 0u);
    let x2 = select(p.y >> (32u - b), 0u, b == 0u);
    var v = vec4<u32>(0u);
    v[w] = x0;
    if (w + 1u < 4u) {
        v[w + 1u] = x1;
    }
    if (w + 2u < 4u) {
        v[w + 2u] = x2;
    }
    if ((x >> 31u) != 0u) {
        return add128(~v, vec4<u32>(1u, 0u, 0u, 0u));
    }
    return v;
}

// Order-preserving key of float32 bits for atomicMax (negative values reverse): IEEE total
// order, +0 above −0 (C-FLOAT-GPU).
fn float_key(x: u32) -> u32 {
    return select(x | 0x80000000u, ~x, (x >> 31u) != 0u);
}
