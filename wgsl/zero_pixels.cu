// Bad pixels zeroed in the resident (zero_pixels.wgsl's contract, C-BAD): the file's mask
// and the saturation sentinel before any bin (`zero_masked`), and the hot and dead pixels
// found in the mean pattern afterwards (`zero_listed`).

// Every sample whose pixel `bad` flags (when given) or that equals `sentinel` (when
// `use_sentinel`), over `n_frames` frames; grid-stride over samples.
template <typename T>
__device__ void zero_masked(T *__restrict__ frames, u64 frame_len, u64 n_frames,
                            const u8 *__restrict__ bad, u32 sentinel, u32 use_sentinel) {
    const u64 n = frame_len * n_frames;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        const bool flagged = bad != nullptr && bad[i % frame_len] != 0;
        if (flagged || (use_sentinel != 0 && (u32)frames[i] == sentinel)) frames[i] = 0;
    }
}

// The pixels `pixels[0..n_pixels)` of every frame.
template <typename T>
__device__ void zero_listed(T *__restrict__ frames, u64 frame_len, u64 n_frames,
                            const u32 *__restrict__ pixels, u32 n_pixels) {
    const u64 n = (u64)n_pixels * n_frames;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        frames[(i / n_pixels) * frame_len + pixels[i % n_pixels]] = 0;
    }
}

#define ZERO_PIXELS(T)                                                                        \
    extern "C" __global__ void zero_masked_##T(T *frames, u64 frame_len, u64 n_frames,       \
                                               const u8 *bad, u32 sentinel,                  \
                                               u32 use_sentinel) {                           \
        zero_masked<T>(frames, frame_len, n_frames, bad, sentinel, use_sentinel);             \
    }                                                                                         \
    extern "C" __global__ void zero_listed_##T(T *frames, u64 frame_len, u64 n_frames,       \
                                               const u32 *pixels, u32 n_pixels) {            \
        zero_listed<T>(frames, frame_len, n_frames, pixels, n_pixels);                        \
    }
STEM4D_FOR_SAMPLES(ZERO_PIXELS)
