// Centre-of-mass moments of every frame (com_moments.wgsl's contract, C-COM): the total,
// Σ row·I and Σ col·I, exact in 64 bits (the host refuses shapes whose bound passes 2^64).
// One warp per frame (grid-stride over frames): row by row, its lanes the columns, so no
// index is divided; the lanes meet by shuffles.

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
        t = warp_sum_u64(t);
        r = warp_sum_u64(r);
        c = warp_sum_u64(c);
        if (lane == 0) {
            out[3 * f] = t;
            out[3 * f + 1] = r;
            out[3 * f + 2] = c;
        }
    }
}

#define COM_MOMENTS(T)                                                                        \
    extern "C" __global__ void com_moments_##T(const T *frames, u64 n_frames, u32 det_rows,  \
                                               u32 det_cols, u64 *out) {                     \
        com_moments<T>(frames, n_frames, det_rows, det_cols, out);                            \
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
