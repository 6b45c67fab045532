// Complex FFTs of any length for iDPC, in batches of rows: Stockham radix-2 passes for
// powers of two (natural order out, twiddles from a host float64 table), Bluestein's chirp-z
// for other lengths (its chirp and the transform of its kernel also come from the host),
// transposes for the second axis, and the iDPC steps: pack the two DPC planes as one complex
// signal, and the Fourier integration filter. Complex values are vec2<f32> (re, im).
// C-IDPC-GPU: float32 FFTs around float64 host tables, the DPC centred in exact integers.

struct FftParams {
    n: u32,
    p: u32,
    rows: u32,
    inverse: u32,
    width: u32,
    height: u32,
    groups_x: u32,
    flip: u32,
    scale: f32,
    mean_r: f32,
    mean_c: f32,
    cos_t: f32,
    sin_t: f32,
    // idpc_pack: the scan mean's fixed-point reference (ref / 2^ref_shift per axis; mean_r
    // and mean_c then hold the rest of the mean).
    ref_r: u32,
    ref_c: u32,
    ref_shift: u32,
}

@group(0) @binding(0) var<uniform> fp: FftParams;
@group(0) @binding(1) var<storage, read> src: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> dst: array<vec2<f32>>;

fn cmul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

fn conj(a: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a.x, -a.y);
}

fn flat_id(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * fp.groups_x * 256u;
}

// One radix-2 Stockham pass of span p over `rows` transforms of length n (table: the n/2
// twiddles exp(-2πi m/n)); `inverse` conjugates them.
@compute @workgroup_size(256)
fn fft(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = flat_id(gid);
    let half = fp.n / 2u;
    if (id >= fp.rows * half) {
        return;
    }
    let row = id / half;
    let j = id % half;
    let k = j & (fp.p - 1u);
    let base = row * fp.n;
    var w = table[k * (half / fp.p)];
    if (fp.inverse != 0u) {
        w = conj(w);
    }
    let u = src[base + j];
    let v = cmul(w, src[base + j + half]);
    let o = base + 2u * j - k;
    dst[o] = (u + v) * select(1.0, fp.scale, fp.p == half);
    dst[o + fp.p] = (u - v) * select(1.0, fp.scale, fp.p == half);
}

// dst (rows × n) = src (rows × width) · chirp, zero-padded (Bluestein's input).
@compute @workgroup_size(256)
fn fft_chirp_in(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = flat_id(gid);
    if (id >= fp.rows * fp.n) {
        return;
    }
    let row = id / fp.n;
    let m = id % fp.n;
    var v = vec2<f32>(0.0, 0.0);
    if (m < fp.width) {
        var c = table[m];
        if (fp.inverse != 0u) {
            c = conj(c);
        }
        v = cmul(src[row * fp.width + m], c);
    }
    dst[id] = v;
}

// dst[i] = src[i] · table[i mod n] (Bluestein's kernel spectrum), in place allowed? no: src → dst.
@compute @workgroup_size(256)
fn fft_mul(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = flat_id(gid);
    if (id >= fp.rows * fp.n) {
        return;
    }
    dst[id] = cmul(src[id], table[id % fp.n]);
}

// dst (rows × width) = src (rows × n)[.. width] · chirp · scale (Bluestein's output).
@compute @workgroup_size(256)
fn fft_chirp_out(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = flat_id(gid);
    if (id >= fp.rows * fp.width) {
        return;
    }
    let row = id / fp.width;
    let k = id % fp.width;
    var c = table[k];
    if (fp.inverse != 0u) {
        c = conj(c);
    }
    dst[id] = cmul(src[row * fp.n + k], c) * fp.scale;
}

// dst (width × height) = src (height × width) transposed.
@compute @workgroup_size(256)
fn fft_transpose(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = flat_id(gid);
    if (id >= fp.width * fp.height) {
        return;
    }
    let r = id / fp.width;
    let c = id % fp.width;
    dst[c * fp.height + r] = src[id];
}

// z = dpc_row + i·dpc_col from the fused CoM moments (src read as raw words: 3 u64 per
// position), with the scan mean, flip and rotation of the contract (C-DPC).
@group(0) @binding(4) var<storage, read> moments: array<u32>;

fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

// (m − mean·t)/t for one axis, from the exact moment m and total t: with the reference
// a/2^k near the mean and d the rest of it, m·2^k − a·t is an exact signed 64-bit integer
// (the host picks k so that it fits), so the centred value keeps float32's relative
// accuracy however small it is against the CoM itself (a float32 CoM of ~100 px is only
// good to ~1e-5 px, and a small DPC would inherit that error). C-IDPC-GPU's `m·2^k − a·t`.
fn centred(m: vec2<u32>, t: vec2<u32>, a: u32, k: u32, d: f32) -> f32 {
    let scale = f32(1u << k);
    if (t.x == 0u && t.y == 0u) {
        // The contract's CoM of an empty pattern is 0.
        return -(f32(a) / scale) - d;
    }
    var ms = m;
    if (k != 0u) {
        ms = vec2<u32>(m.x << k, (m.y << k) | (m.x >> (32u - k)));
    }
    let lo = mul64(a, t.x);
    let at = vec2<u32>(lo.x, lo.y + a * t.y);
    let neg = ms.y < at.y || (ms.y == at.y && ms.x < at.x);
    let diff = select(sub64(ms, at), sub64(at, ms), neg);
    let q = u64_f32(diff.x, diff.y) / u64_f32(t.x, t.y) / scale;
    return select(q, -q, neg) - d;
}

@compute @workgroup_size(256)
fn idpc_pack(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = flat_id(gid);
    if (id >= fp.width * fp.height) {
        return;
    }
    let o = 6u * id;
    let t = vec2<u32>(moments[o], moments[o + 1u]);
    let dr = centred(vec2<u32>(moments[o + 2u], moments[o + 3u]), t, fp.ref_r, fp.ref_shift, fp.mean_r);
    let dc = centred(vec2<u32>(moments[o + 4u], moments[o + 5u]), t, fp.ref_c, fp.ref_shift, fp.mean_c);
    // The mean is already subtracted: flip and rotation as the contract orders them.
    dst[id] = dpc_from_com(vec2<f32>(dr, dc), vec2<f32>(0.0, 0.0), fp.cos_t, fp.sin_t, fp.flip);
}

// The same from a centre-of-mass plane given as float32 (row, col) pairs (float data, whose
// exact moments the host divides).
@compute @workgroup_size(256)
fn idpc_pack_com(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = flat_id(gid);
    if (id >= fp.width * fp.height) {
        return;
    }
    let com = vec2<f32>(bitcast<f32>(moments[2u * id]), bitcast<f32>(moments[2u * id + 1u]));
    dst[id] = dpc_from_com(com, vec2<f32>(fp.mean_r, fp.mean_c), fp.cos_t, fp.sin_t, fp.flip);
}

fn freq(k: u32, n: u32) -> f32 {
    return select(f32(k), f32(k) - f32(n), k >= (n + 1u) / 2u);
}

// C-IDPC: φ̂ = (ν_r·Ĝ_r + ν_c·Ĝ_c) / (2πi|ν|²), φ̂(0) = 0, ν = fftfreq per scan axis, from
// Z = FFT2(G_r + i·G_c) held transposed (width = scan rows along a stored row, height = scan
// cols): Ĝ_r(k) = (Z(k) + Z*(−k))/2, Ĝ_c(k) = (Z(k) − Z*(−k))/(2i).
@compute @workgroup_size(256)
fn idpc_filter(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = flat_id(gid);
    let rows = fp.width;
    let cols = fp.height;
    if (id >= rows * cols) {
        return;
    }
    let j = id / rows;
    let i = id % rows;
    let mi = (rows - i) % rows;
    let mj = (cols - j) % cols;
    let zk = src[id];
    let zm = conj(src[mj * rows + mi]);
    let gr = (zk + zm) * 0.5;
    let gc_times_i = (zk - zm) * 0.5;
    let gc = vec2<f32>(gc_times_i.y, -gc_times_i.x);
    let vr = freq(i, rows) / f32(rows);
    let vc = freq(j, cols) / f32(cols);
    let nu2 = vr * vr + vc * vc;
    var out = vec2<f32>(0.0, 0.0);
    if (nu2 > 0.0) {
        let num = gr * vr + gc * vc;
        out = vec2<f32>(num.y, -num.x) / (6.283185307179586 * nu2);
    }
    dst[id] = out;
}
