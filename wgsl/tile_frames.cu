// Frames laid into a binned resident (tile_frames.wgsl's binning, C-BIN): each output pixel
// the sum of its b × b block of existing source pixels (partial edge blocks kept), widened
// to u32, bad pixels (the file's mask, the sentinel) zeroed first. A sum past uint32 sets
// `overflow` (the host refuses the bin, as the CPU reference does). One thread per output
// sample, grid-stride.

template <typename T>
__device__ void bin_frames(const T *__restrict__ raw, u32 *__restrict__ out, u64 n_frames,
                           u32 det_rows, u32 det_cols, u32 b, const u8 *__restrict__ bad,
                           u32 sentinel, u32 use_sentinel, u32 *__restrict__ overflow) {
    const u32 out_rows = (det_rows + b - 1) / b, out_cols = (det_cols + b - 1) / b;
    const u64 out_len = (u64)out_rows * out_cols, in_len = (u64)det_rows * det_cols;
    const u64 n = out_len * n_frames;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        const u64 f = i / out_len, o = i % out_len;
        const u32 I = (u32)(o / out_cols), J = (u32)(o % out_cols);
        const T *frame = raw + f * in_len;
        u64 acc = 0;
        for (u32 r = I * b; r < min(I * b + b, det_rows); r++) {
            for (u32 c = J * b; c < min(J * b + b, det_cols); c++) {
                const u64 k = (u64)r * det_cols + c;
                const u32 v = frame[k];
                const bool zeroed = (bad != nullptr && bad[k] != 0) ||
                                    (use_sentinel != 0 && v == sentinel);
                acc += zeroed ? 0ull : (u64)v;
            }
        }
        if (acc > 0xffffffffull) {
            atomicOr(overflow, 1u);
            acc = 0xffffffffull;
        }
        out[i] = (u32)acc;
    }
}

#define BIN_FRAMES(T)                                                                         \
    extern "C" __global__ void bin_frames_##T(const T *raw, u32 *out, u64 n_frames,          \
                                              u32 det_rows, u32 det_cols, u32 b,             \
                                              const u8 *bad, u32 sentinel,                   \
                                              u32 use_sentinel, u32 *overflow) {             \
        bin_frames<T>(raw, out, n_frames, det_rows, det_cols, b, bad, sentinel, use_sentinel, \
                      overflow);                                                              \
    }
STEM4D_FOR_SAMPLES(BIN_FRAMES)
