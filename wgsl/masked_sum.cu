// Virtual images: each frame's sum over a sparse list of detector pixels (masked_sum.wgsl's
// contract, C-MASK), exact in 64 bits. One block per frame (grid-stride over frames); the
// block's threads stride over the pixel list, then reduce with warp shuffles.

template <typename T>
__device__ void masked_sum(const T *__restrict__ frames, u64 frame_len, u64 n_frames,
                           const u32 *__restrict__ pixels, u32 n_pixels,
                           u64 *__restrict__ out) {
    __shared__ u64 scratch[32];
    for (u64 f = blockIdx.x; f < n_frames; f += gridDim.x) {
        const T *frame = frames + f * frame_len;
        u64 acc = 0;
        for (u32 i = threadIdx.x; i < n_pixels; i += blockDim.x) acc += (u64)frame[pixels[i]];
        acc = block_sum_u64(acc, scratch);
        if (threadIdx.x == 0) out[f] = acc;
    }
}

#define MASKED_SUM(T)                                                                         \
    extern "C" __global__ void masked_sum_##T(const T *frames, u64 frame_len, u64 n_frames,  \
                                              const u32 *pixels, u32 n_pixels, u64 *out) {   \
        masked_sum<T>(frames, frame_len, n_frames, pixels, n_pixels, out);                    \
    }
STEM4D_FOR_SAMPLES(MASKED_SUM)
