// Sum and maximum patterns over the scan positions of a rectangle [r0, r1) × [c0, c1)
// (pattern_reduce.wgsl's contract, C-REDUCE): one thread per detector pixel, blockIdx.y a
// share of the positions; shares meet through 64-bit atomicAdd and atomicMax, so the sums
// stay exact whatever the order. `sum` and `max` start at zero.

template <typename T>
__device__ void pattern_reduce(const T *__restrict__ frames, u64 frame_len, u32 scan_cols,
                               u32 r0, u32 c0, u32 roi_cols, u64 roi_len, u64 per_share,
                               u64 *__restrict__ sum, u32 *__restrict__ max) {
    const u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= frame_len) return;
    const u64 j0 = (u64)blockIdx.y * per_share;
    const u64 j1 = min(j0 + per_share, roi_len);
    if (j0 >= j1) return;
    // The share's first position, then along its rows: one division per share.
    u32 r = r0 + (u32)(j0 / roi_cols), c = c0 + (u32)(j0 % roi_cols);
    const u32 c1 = c0 + roi_cols;
    u64 s = 0;
    u32 m = 0;
    for (u64 j = j0; j < j1; j++) {
        const u32 v = frames[((u64)r * scan_cols + c) * frame_len + k];
        s += v;
        m = v > m ? v : m;
        if (++c == c1) {
            c = c0;
            r++;
        }
    }
    atomicAdd(&sum[k], s);
    atomicMax(&max[k], m);
}

#define PATTERN_REDUCE(T)                                                                     \
    extern "C" __global__ void pattern_reduce_##T(const T *frames, u64 frame_len,             \
                                                  u32 scan_cols, u32 r0, u32 c0,             \
                                                  u32 roi_cols, u64 roi_len, u64 per_share,  \
                                                  u64 *sum, u32 *max) {                      \
        pattern_reduce<T>(frames, frame_len, scan_cols, r0, c0, roi_cols, roi_len, per_share, \
                          sum, max);                                                          \
    }
STEM4D_FOR_SAMPLES(PATTERN_REDUCE)

// The same for u8 and u16 frames whose bytes are a multiple of 16: one thread per 16 bytes
// of the frame (E pixels side by side), so each position costs a thread one 16-byte load
// (decision 0040); the host picks it (`pattern_reduce_vec_*`) where the frames allow it.
template <typename T>
__device__ void pattern_reduce_vec(const T *__restrict__ frames, u64 frame_len, u32 scan_cols,
                                   u32 r0, u32 c0, u32 roi_cols, u64 roi_len, u64 per_share,
                                   u64 *__restrict__ sum, u32 *__restrict__ max) {
    constexpr u32 E = 16 / sizeof(T);
    const u64 kv = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (kv >= frame_len / E) return;
    const u64 j0 = (u64)blockIdx.y * per_share;
    const u64 j1 = min(j0 + per_share, roi_len);
    if (j0 >= j1) return;
    u32 r = r0 + (u32)(j0 / roi_cols), c = c0 + (u32)(j0 % roi_cols);
    const u32 c1 = c0 + roi_cols;
    u64 s[E];
    u32 m[E];
#pragma unroll
    for (u32 e = 0; e < E; e++) {
        s[e] = 0;
        m[e] = 0;
    }
    for (u64 j = j0; j < j1; j++) {
        const uint4 *frame =
            reinterpret_cast<const uint4 *>(frames + ((u64)r * scan_cols + c) * frame_len);
        const uint4 q = frame[kv];
        const T *x = reinterpret_cast<const T *>(&q);
#pragma unroll
        for (u32 e = 0; e < E; e++) {
            const u32 v = x[e];
            s[e] += v;
            m[e] = v > m[e] ? v : m[e];
        }
        if (++c == c1) {
            c = c0;
            r++;
        }
    }
#pragma unroll
    for (u32 e = 0; e < E; e++) {
        atomicAdd(&sum[kv * E + e], s[e]);
        atomicMax(&max[kv * E + e], m[e]);
    }
}

#define PATTERN_REDUCE_VEC(T)                                                                 \
    extern "C" __global__ void pattern_reduce_vec_##T(                                        \
        const T *frames, u64 frame_len, u32 scan_cols, u32 r0, u32 c0, u32 roi_cols,         \
        u64 roi_len, u64 per_share, u64 *sum, u32 *max) {                                     \
        pattern_reduce_vec<T>(frames, frame_len, scan_cols, r0, c0, roi_cols, roi_len,        \
                              per_share, sum, max);                                           \
    }
PATTERN_REDUCE_VEC(u8)
PATTERN_REDUCE_VEC(u16)

// Float32 frames (their bits): per pixel the exact sum in units of 2^lsb (two u64, lo and
// hi, met by `atomic_add_wide`) and the largest value's `float_key`. `sum` and `max` start at
// zero (key 0 is below every float's).
extern "C" __global__ void pattern_reduce_f32(const u32 *__restrict__ frames, u64 frame_len,
                                              u32 scan_cols, u32 r0, u32 c0, u32 roi_cols,
                                              u64 roi_len, u64 per_share, int lsb,
                                              u64 *__restrict__ sum, u32 *__restrict__ max) {
    const u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= frame_len) return;
    const u64 j0 = (u64)blockIdx.y * per_share;
    const u64 j1 = min(j0 + per_share, roi_len);
    if (j0 >= j1) return;
    u32 r = r0 + (u32)(j0 / roi_cols), c = c0 + (u32)(j0 % roi_cols);
    const u32 c1 = c0 + roi_cols;
    wide s = {0, 0};
    u32 m = 0;
    for (u64 j = j0; j < j1; j++) {
        const u32 x = frames[((u64)r * scan_cols + c) * frame_len + k];
        s = wide_add(s, fixed_wide(x, 1, lsb));
        const u32 key = float_key(x);
        m = key > m ? key : m;
        if (++c == c1) {
            c = c0;
            r++;
        }
    }
    atomic_add_wide(&sum[2 * k], s);
    atomicMax(&max[k], m);
}
