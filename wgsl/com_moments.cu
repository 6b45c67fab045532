// Centre-of-mass moments of every frame (com_moments.wgsl's contract, C-COM): the total,
// Σ row·I and Σ col·I, exact in 64 bits (the host refuses shapes whose bound passes 2^64).
// One block per frame, grid-stride over frames.

template <typename T>
__device__ void com_moments(const T *__restrict__ frames, u64 n_frames, u32 det_rows,
                            u32 det_cols, u64 *__restrict__ out) {
    __shared__ u64 scratch[32];
    const u64 frame_len = (u64)det_rows * det_cols;
    for (u64 f = blockIdx.x; f < n_frames; f += gridDim.x) {
        const T *frame = frames + f * frame_len;
        u64 t = 0, r = 0, c = 0;
        for (u64 k = threadIdx.x; k < frame_len; k += blockDim.x) {
            const u64 v = frame[k];
            t += v;
            r += (k / det_cols) * v;
            c += (k % det_cols) * v;
        }
        t = block_sum_u64(t, scratch);
        r = block_sum_u64(r, scratch);
        c = block_sum_u64(c, scratch);
        if (threadIdx.x == 0) {
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
