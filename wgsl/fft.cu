// iDPC on the CUDA backend (fft.wgsl's contract, C-IDPC-GPU): the same radix-2 Stockham
// passes, Bluestein steps, transposes, pack and Fourier integration filter, from the same
// float64 host tables rounded to float32 (`kernels::fft::AxisTables`). Complex values are
// float2 (re, im). Every kernel is grid-stride over its items.

// The uniform of fft.wgsl, field for field (`kernels::fft::FftParams`, passed by value).
struct FftParams {
    u32 n, p, rows, inverse, width, height, groups_x, flip;
    float scale, mean_r, mean_c, cos_t, sin_t;
    u32 ref_r, ref_c, ref_shift;
};

#define GRID_STRIDE(i, count)                                                               \
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (u64)(count);               \
         i += (u64)gridDim.x * blockDim.x)

__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
    return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ __forceinline__ float2 conj2(float2 a) { return make_float2(a.x, -a.y); }
__device__ __forceinline__ float2 scaled(float2 a, float s) { return make_float2(a.x * s, a.y * s); }

// One radix-2 Stockham pass of span p over `rows` transforms of length n (table: the n/2
// twiddles exp(-2πi m/n)); `inverse` conjugates them; the last pass scales.
extern "C" __global__ void fft(FftParams fp, const float2 *__restrict__ src,
                               const float2 *__restrict__ table, float2 *__restrict__ dst) {
    const u32 half = fp.n / 2;
    GRID_STRIDE(id, (u64)fp.rows * half) {
        const u32 row = (u32)(id / half), j = (u32)(id % half);
        const u32 k = j & (fp.p - 1);
        const u64 base = (u64)row * fp.n;
        float2 w = table[k * (half / fp.p)];
        if (fp.inverse) w = conj2(w);
        const float2 u = src[base + j];
        const float2 v = cmul(w, src[base + j + half]);
        const u64 o = base + 2 * j - k;
        const float s = fp.p == half ? fp.scale : 1.0f;
        dst[o] = scaled(make_float2(u.x + v.x, u.y + v.y), s);
        dst[o + fp.p] = scaled(make_float2(u.x - v.x, u.y - v.y), s);
    }
}

// dst (rows × n) = src (rows × width) · chirp, zero-padded (Bluestein's input).
extern "C" __global__ void fft_chirp_in(FftParams fp, const float2 *__restrict__ src,
                                        const float2 *__restrict__ table,
                                        float2 *__restrict__ dst) {
    GRID_STRIDE(id, (u64)fp.rows * fp.n) {
        const u64 row = id / fp.n, m = id % fp.n;
        float2 v = make_float2(0.0f, 0.0f);
        if (m < fp.width) {
            float2 c = table[m];
            if (fp.inverse) c = conj2(c);
            v = cmul(src[row * fp.width + m], c);
        }
        dst[id] = v;
    }
}

// dst[i] = src[i] · table[i mod n] (Bluestein's kernel spectrum).
extern "C" __global__ void fft_mul(FftParams fp, const float2 *__restrict__ src,
                                   const float2 *__restrict__ table, float2 *__restrict__ dst) {
    GRID_STRIDE(id, (u64)fp.rows * fp.n) { dst[id] = cmul(src[id], table[id % fp.n]); }
}

// dst (rows × width) = src (rows × n)[.. width] · chirp · scale (Bluestein's output).
extern "C" __global__ void fft_chirp_out(FftParams fp, const float2 *__restrict__ src,
                                         const float2 *__restrict__ table,
                                         float2 *__restrict__ dst) {
    GRID_STRIDE(id, (u64)fp.rows * fp.width) {
        const u64 row = id / fp.width, k = id % fp.width;
        float2 c = table[k];
        if (fp.inverse) c = conj2(c);
        dst[id] = scaled(cmul(src[row * fp.n + k], c), fp.scale);
    }
}

// dst (width × height) = src (height × width) transposed.
extern "C" __global__ void fft_transpose(FftParams fp, const float2 *__restrict__ src,
                                         float2 *__restrict__ dst) {
    GRID_STRIDE(id, (u64)fp.width * fp.height) {
        const u64 r = id / fp.width, c = id % fp.width;
        dst[c * fp.height + r] = src[id];
    }
}

// DPC of the contract (C-DPC) from a CoM already less its mean part: swap when flipped,
// then rotate by (cos, sin).
__device__ __forceinline__ float2 dpc_turned(float dr, float dc, const FftParams &fp) {
    if (fp.flip) {
        const float t = dr;
        dr = dc;
        dc = t;
    }
    return make_float2(fp.cos_t * dr - fp.sin_t * dc, fp.sin_t * dr + fp.cos_t * dc);
}

// (m − mean·t)/t for one axis from the exact moment m and total t, with the mean's
// fixed-point reference a/2^k and d the rest of it: m·2^k − a·t is an exact signed 64-bit
// integer (the host picks k so that it fits), so a small DPC keeps float32's relative
// accuracy (fft.wgsl's `centred`).
__device__ __forceinline__ float centred(u64 m, u64 t, u32 a, u32 k, float d) {
    const float scale = (float)(1u << k);
    if (t == 0) return -((float)a / scale) - d;
    const u64 ms = m << k, at = (u64)a * t;
    const bool neg = ms < at;
    const u64 diff = neg ? at - ms : ms - at;
    const float q = __ull2float_rn(diff) / __ull2float_rn(t) / scale;
    return (neg ? -q : q) - d;
}

// z = dpc_row + i·dpc_col from the exact CoM moments (three u64 per position).
extern "C" __global__ void idpc_pack(FftParams fp, const u64 *__restrict__ moments,
                                     float2 *__restrict__ dst) {
    GRID_STRIDE(id, (u64)fp.width * fp.height) {
        const u64 *m = moments + 3 * id;
        const float dr = centred(m[1], m[0], fp.ref_r, fp.ref_shift, fp.mean_r);
        const float dc = centred(m[2], m[0], fp.ref_c, fp.ref_shift, fp.mean_c);
        dst[id] = dpc_turned(dr, dc, fp);
    }
}

// The same from a CoM plane of float32 (row, col) pairs (float data, whose exact moments
// the host divides).
extern "C" __global__ void idpc_pack_com(FftParams fp, const float2 *__restrict__ com,
                                         float2 *__restrict__ dst) {
    GRID_STRIDE(id, (u64)fp.width * fp.height) {
        const float2 c = com[id];
        dst[id] = dpc_turned(c.x - fp.mean_r, c.y - fp.mean_c, fp);
    }
}

__device__ __forceinline__ float freq(u32 k, u32 n) {
    return k >= (n + 1) / 2 ? (float)k - (float)n : (float)k;
}

// C-IDPC: φ̂ = (ν_r·Ĝ_r + ν_c·Ĝ_c) / (2πi|ν|²), φ̂(0) = 0, from Z = FFT2(G_r + i·G_c) held
// transposed (width = scan rows along a stored row, height = scan cols).
extern "C" __global__ void idpc_filter(FftParams fp, const float2 *__restrict__ src,
                                       float2 *__restrict__ dst) {
    const u32 rows = fp.width, cols = fp.height;
    GRID_STRIDE(id, (u64)rows * cols) {
        const u32 j = (u32)(id / rows), i = (u32)(id % rows);
        const u32 mi = (rows - i) % rows, mj = (cols - j) % cols;
        const float2 zk = src[id];
        const float2 zm = conj2(src[(u64)mj * rows + mi]);
        const float2 gr = make_float2((zk.x + zm.x) * 0.5f, (zk.y + zm.y) * 0.5f);
        const float2 gci = make_float2((zk.x - zm.x) * 0.5f, (zk.y - zm.y) * 0.5f);
        const float2 gc = make_float2(gci.y, -gci.x);
        const float vr = freq(i, rows) / (float)rows;
        const float vc = freq(j, cols) / (float)cols;
        const float nu2 = vr * vr + vc * vc;
        float2 out = make_float2(0.0f, 0.0f);
        if (nu2 > 0.0f) {
            const float2 num = make_float2(gr.x * vr + gc.x * vc, gr.y * vr + gc.y * vc);
            const float d = 6.283185307179586f * nu2;
            out = make_float2(num.y / d, -num.x / d);
        }
        dst[id] = out;
    }
}
