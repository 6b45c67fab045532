// Centre-of-mass moments of every frame (com_moments.wgsl's contract, C-COM): the total,
// Σ row·I and Σ col·I, exact in 64 bits (the host refuses shapes whose bound passes 2^64).
// One warp per frame (grid-stride over frames): row by row, its lanes the columns, so no
// index is divided; the lanes meet by shuffles.

// A frame's three moments, each summed over the warp's lanes, written by lane 0 at `out`.
__device__ __forceinline__ void write_moments(u64 t, u64 r, u64 c, u32 lane, u64 *out) {
    t = warp_sum_u64(t);
    r = warp_sum_u64(r);
    c = warp_sum_u64(c);
    if (lane == 0) {
        out[0] = t;
        out[1] = r;
        out[2] = c;
    }
}

template <typename T>
__device__ void com_moments(const T *__restrict__ frames, u64 n_frames, u32 det_rows,
                            u32 det_cols, u64 *__restrict__ out) {
    const u64 frame_len = (u64)det_rows * det_cols;
    const u32 lane = threadIdx.x & 31u;
    for (u64 f = warp_index(); f < n_frames; f += warp_count()) {
        const T *frame = frames + f * frame_len;
        u64 t = 0, r = 0, c = 0;
        for (u32 row = 0; row < det_rows; row++) {
            const T *line = frame + (u64)row * det_cols;
            u64 line_sum = 0;
            for (u32 col = lane; col < det_cols; col += 32) {
                const u64 v = line[col];
                line_sum += v;
                c += (u64)col * v;
            }
            t += line_sum;
            r += (u64)row * line_sum;
        }
        write_moments(t, r, c, lane, out + 3 * f);
    }
}

// The same for u8 and u16 frames whose bytes are a multiple of 16 (frames then start on a
// 16-byte boundary): the lanes load 16 bytes at a time along the flat frame, a row and
// column found once a load, and each load's sums kept in 32 bits before the 64-bit moments
// take them (`com_moments_any` checks that E samples times the last column fit; decision
// 0040).
template <typename T>
__device__ void com_moments_vec(const T *__restrict__ frames, u64 n_frames, u32 det_rows,
                                u32 det_cols, u64 *__restrict__ out) {
    constexpr u32 E = 16 / sizeof(T);
    const u64 frame_len = (u64)det_rows * det_cols;
    const u32 n_vec = (u32)(frame_len / E);
    const u32 lane = threadIdx.x & 31u;
    for (u64 f = warp_index(); f < n_frames; f += warp_count()) {
        const uint4 *frame = reinterpret_cast<const uint4 *>(frames + f * frame_len);
        u64 t = 0, r = 0, c = 0;
        for (u32 v = lane; v < n_vec; v += 32) {
            const uint4 q = frame[v];
            const T *x = reinterpret_cast<const T *>(&q);
            const u32 e0 = v * E;
            u32 row = e0 / det_cols, col = e0 - row * det_cols;
            u32 s = 0, cx = 0;
#pragma unroll
            for (u32 j = 0; j < E; j++) {
                const u32 xj = x[j];
                s += xj;
                cx += col * xj;
                if (++col == det_cols) {
                    // A row ends inside the load: its part of the row moment now.
                    t += s;
                    r += (u64)row * s;
                    s = 0;
                    col = 0;
                    row++;
                }
            }
            t += s;
            r += (u64)row * s;
            c += cx;
        }
        write_moments(t, r, c, lane, out + 3 * f);
    }
}

template <typename T>
__device__ void com_moments_any(const T *frames, u64 n_frames, u32 det_rows, u32 det_cols,
                                u64 *out) {
    // The column-weighted sum of one load, E · (Kc − 1) · max T, must stay below 2^32.
    const u64 max_t = sizeof(T) == 1 ? 0xffull : 0xffffull;
    const bool fits = (u64)(16 / sizeof(T)) * det_cols * max_t < (1ull << 32);
    if (sizeof(T) < 4 && ((u64)det_rows * det_cols * sizeof(T)) % 16 == 0 && fits)
        com_moments_vec<T>(frames, n_frames, det_rows, det_cols, out);
    else
        com_moments<T>(frames, n_frames, det_rows, det_cols, out);
}

#define COM_MOMENTS(T)                                                                        \
    extern "C" __global__ void com_moments_##T(const T *frames, u64 n_frames, u32 det_rows,  \
                                               u32 det_cols, u64 *out) {                     \
        com_moments_any<T>(frames, n_frames, det_rows, det_cols, out);                        \
    }
STEM4D_FOR_SAMPLES(COM_MOMENTS)

// Float32 frames (their bits): the exact total, Σ row·x and Σ col·x in units of 2^lsb, six
// u64 a frame (three (lo, hi) pairs).
extern "C" __global__ void com_moments_f32(const u32 *__restrict__ frames, u64 n_frames,
                                           u32 det_rows, u32 det_cols, int lsb,
                                           u64 *__restrict__ out) {
    const u64 frame_len = (u64)det_rows * det_cols;
    const u32 lane = threadIdx.x & 31u;
    for (u64 f = warp_index(); f < n_frames; f += warp_count()) {
        const u32 *frame = frames + f * frame_len;
        wide t = {0, 0}, r = {0, 0}, c = {0, 0};
        for (u32 row = 0; row < det_rows; row++) {
            const u32 *line = frame + (u64)row * det_cols;
            for (u32 col = lane; col < det_cols; col += 32) {
                const u32 x = line[col];
                t = wide_add(t, fixed_wide(x, 1, lsb));
                r = wide_add(r, fixed_wide(x, row, lsb));
                c = wide_add(c, fixed_wide(x, col, lsb));
            }
        }
        t = warp_sum_wide(t);
        r = warp_sum_wide(r);
        c = warp_sum_wide(c);
        if (lane == 0) {
            u64 *o = out + 6 * f;
            o[0] = t.lo;
            o[1] = t.hi;
            o[2] = r.lo;
            o[3] = r.hi;
            o[4] = c.lo;
            o[5] = c.hi;
        }
    }
}
