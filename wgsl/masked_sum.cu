// Virtual images: each frame's sum over a set of detector pixels (masked_sum.wgsl's
// contract, C-MASK), exact in 64 bits. The set comes as spans, runs of consecutive pixels
// (start, length) in the frame, and a list of the pixels of runs too short to fill a warp
// (`split_runs` on the host): a run as long as several warps (the total, a wide rectangle)
// is read side by side with no index at all, while disks and annuli, whose rows are shorter
// than that, are gathered pixel by pixel with every lane busy (decision 0040). One warp
// per frame (grid-stride over frames); the lanes meet by shuffles, with no block-wide
// barrier.

template <typename T>
__device__ void masked_sum(const T *__restrict__ frames, u64 frame_len, u64 n_frames,
                           const u32 *__restrict__ spans, u32 n_spans,
                           const u32 *__restrict__ pixels, u32 n_pixels,
                           u64 *__restrict__ out) {
    const u32 lane = threadIdx.x & 31u;
    for (u64 f = warp_index(); f < n_frames; f += warp_count()) {
        const T *frame = frames + f * frame_len;
        u64 acc = 0;
        for (u32 i = lane; i < n_pixels; i += 32) acc += (u64)frame[pixels[i]];
        for (u32 s = 0; s < n_spans; s++) {
            const T *run = frame + spans[2 * s];
            const u32 len = spans[2 * s + 1];
            for (u32 k = lane; k < len; k += 32) acc += (u64)run[k];
        }
        acc = warp_sum_u64(acc);
        if (lane == 0) out[f] = acc;
    }
}

#define MASKED_SUM(T)                                                                         \
    extern "C" __global__ void masked_sum_##T(const T *frames, u64 frame_len, u64 n_frames,  \
                                              const u32 *spans, u32 n_spans,                 \
                                              const u32 *pixels, u32 n_pixels, u64 *out) {   \
        masked_sum<T>(frames, frame_len, n_frames, spans, n_spans, pixels, n_pixels, out);    \
    }
STEM4D_FOR_SAMPLES(MASKED_SUM)

// Float32 frames (their bits): each frame's exact sum over the spans in units of 2^lsb, two
// u64 (lo, hi) a frame.
extern "C" __global__ void masked_sum_f32(const u32 *__restrict__ frames, u64 frame_len,
                                          u64 n_frames, const u32 *__restrict__ spans,
                                          u32 n_spans, const u32 *__restrict__ pixels,
                                          u32 n_pixels, int lsb, u64 *__restrict__ out) {
    const u32 lane = threadIdx.x & 31u;
    for (u64 f = warp_index(); f < n_frames; f += warp_count()) {
        const u32 *frame = frames + f * frame_len;
        wide acc = {0, 0};
        for (u32 s = 0; s < n_spans; s++) {
            const u32 start = spans[2 * s], len = spans[2 * s + 1];
            for (u32 k = lane; k < len; k += 32)
                acc = wide_add(acc, fixed_wide(frame[start + k], 1, lsb));
        }
        for (u32 i = lane; i < n_pixels; i += 32)
            acc = wide_add(acc, fixed_wide(frame[pixels[i]], 1, lsb));
        acc = warp_sum_wide(acc);
        if (lane == 0) {
            out[2 * f] = acc.lo;
            out[2 * f + 1] = acc.hi;
        }
    }
}
