// Virtual images: each frame's sum over a sparse list of detector pixels (masked_sum.wgsl's
// contract, C-MASK), exact in 64 bits. One warp per frame (grid-stride over frames): its
// lanes stride over the pixel list and meet by shuffles, with no block-wide barrier.

template <typename T>
__device__ void masked_sum(const T *__restrict__ frames, u64 frame_len, u64 n_frames,
                           const u32 *__restrict__ pixels, u32 n_pixels,
                           u64 *__restrict__ out) {
    const u32 lane = threadIdx.x & 31u;
    for (u64 f = warp_index(); f < n_frames; f += warp_count()) {
        const T *frame = frames + f * frame_len;
        u64 acc = 0;
        for (u32 i = lane; i < n_pixels; i += 32) acc += (u64)frame[pixels[i]];
        acc = warp_sum_u64(acc);
        if (lane == 0) out[f] = acc;
    }
}

#define MASKED_SUM(T)                                                                         \
    extern "C" __global__ void masked_sum_##T(const T *frames, u64 frame_len, u64 n_frames,  \
                                              const u32 *pixels, u32 n_pixels, u64 *out) {   \
        masked_sum<T>(frames, frame_len, n_frames, pixels, n_pixels, out);                    \
    }
STEM4D_FOR_SAMPLES(MASKED_SUM)
