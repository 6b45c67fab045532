// Virtual images: each frame's sum over a set of detector pixels (masked_sum.wgsl's
// contract, C-MASK), exact in 64 bits. The set comes as spans, runs of consecutive pixels
// (start, length) in the frame, and a list of the pixels of runs too short to fill a warp
// (`split_runs` on the host): a run as long as several warps (the total, a wide rectangle)
// is read side by side with no index at all, while disks and annuli, whose rows are shorter
// than that, are gathered pixel by pixel with every lane busy (decision 0040). One warp
// per frame (grid-stride over frames); the lanes meet by shuffles, with no block-wide
// barrier.

// Each frame's sum into `out`, one warp a frame: `lane_sum(f, lane)` is a lane's part of
// frame f, the lanes' parts meet by shuffles.
template <typename LaneSum>
__device__ __forceinline__ void warp_per_frame(u64 n_frames, u64 *__restrict__ out,
                                               LaneSum lane_sum) {
    const u32 lane = threadIdx.x & 31u;
    for (u64 f = warp_index(); f < n_frames; f += warp_count()) {
        const u64 acc = warp_sum_u64(lane_sum(f, lane));
        if (lane == 0) out[f] = acc;
    }
}

template <typename T>
__device__ void masked_sum(const T *__restrict__ frames, u64 frame_len, u64 n_frames,
                           const u32 *__restrict__ spans, u32 n_spans,
                           const u32 *__restrict__ pixels, u32 n_pixels,
                           u64 *__restrict__ out) {
    warp_per_frame(n_frames, out, [&](u64 f, u32 lane) {
        const T *frame = frames + f * frame_len;
        u64 acc = 0;
        for (u32 i = lane; i < n_pixels; i += 32) acc += (u64)frame[pixels[i]];
        for (u32 s = 0; s < n_spans; s++) {
            const T *run = frame + spans[2 * s];
            const u32 len = spans[2 * s + 1];
            for (u32 k = lane; k < len; k += 32) acc += (u64)run[k];
        }
        return acc;
    });
}

#define MASKED_SUM(T)                                                                         \
    extern "C" __global__ void masked_sum_##T(const T *frames, u64 frame_len, u64 n_frames,  \
                                              const u32 *spans, u32 n_spans,                 \
                                              const u32 *pixels, u32 n_pixels, u64 *out) {   \
        masked_sum<T>(frames, frame_len, n_frames, spans, n_spans, pixels, n_pixels, out);    \
    }
STEM4D_FOR_SAMPLES(MASKED_SUM)

// Frames whose bytes are a multiple of 16 (so every frame starts on a 16-byte boundary) are
// read 16 bytes a load, as the CoM moments read them: the set comes as words of the frame
// (`word_runs` on the host), each with one bit per sample it takes, and runs of at least
// two loads a lane of whole words as spans with no index. A BF disk's row of 61 u16 pixels
// is 8–9 loads, not 61 (decision 0048).

// The sum of a word's samples, every one (`all`) or those whose bit of `take` is set: u8
// sixteen (bytes kept as 0/1 weights of a dot product), u16 eight, u32 four.
template <typename T> __device__ __forceinline__ u64 word_sum(uint4 q, u32 take, bool all);

template <> __device__ __forceinline__ u64 word_sum<u8>(uint4 q, u32 take, bool all) {
    u32 w[4];
#pragma unroll
    for (int c = 0; c < 4; c++) {
        // Bits 4c..4c+3 of `take` to bytes of 0 or 1 (the shifts do not overlap).
        w[c] = all ? 0x01010101u : (((take >> (4 * c)) & 15u) * 0x00204081u) & 0x01010101u;
    }
    u32 s = __dp4a(q.x, w[0], 0u);
    s = __dp4a(q.y, w[1], s);
    s = __dp4a(q.z, w[2], s);
    return (u64)__dp4a(q.w, w[3], s);
}

__device__ __forceinline__ u32 pair_sum_u16(u32 x, u32 two, bool all) {
    // Two bits to a mask of 0xffff halves.
    const u32 m = all ? 0xffffffffu : ((two & 1u) | ((two & 2u) << 15)) * 0xffffu;
    const u32 y = x & m;
    return (y & 0xffffu) + (y >> 16);
}

template <> __device__ __forceinline__ u64 word_sum<u16>(uint4 q, u32 take, bool all) {
    return (u64)(pair_sum_u16(q.x, take, all) + pair_sum_u16(q.y, take >> 2, all) +
                 pair_sum_u16(q.z, take >> 4, all) + pair_sum_u16(q.w, take >> 6, all));
}

template <> __device__ __forceinline__ u64 word_sum<u32>(uint4 q, u32 take, bool all) {
    u64 s = 0;
    if (all || (take & 1u)) s += q.x;
    if (all || (take & 2u)) s += q.y;
    if (all || (take & 4u)) s += q.z;
    if (all || (take & 8u)) s += q.w;
    return s;
}

// `words`: (word of the frame, its samples' bits) pairs; `spans`: (first word, words) pairs.
template <typename T>
__device__ void masked_sum_words(const uint4 *__restrict__ frames, u64 frame_words,
                                 u64 n_frames, const u32 *__restrict__ spans, u32 n_spans,
                                 const uint2 *__restrict__ words, u32 n_words,
                                 u64 *__restrict__ out) {
    warp_per_frame(n_frames, out, [&](u64 f, u32 lane) {
        const uint4 *frame = frames + f * frame_words;
        u64 acc = 0;
#pragma unroll 4
        for (u32 i = lane; i < n_words; i += 32) {
            const uint2 e = words[i];
            acc += word_sum<T>(frame[e.x], e.y, false);
        }
        for (u32 s = 0; s < n_spans; s++) {
            const uint4 *run = frame + spans[2 * s];
            const u32 len = spans[2 * s + 1];
            for (u32 k = lane; k < len; k += 32) acc += word_sum<T>(run[k], 0u, true);
        }
        return acc;
    });
}

#define MASKED_SUM_WORDS(T)                                                                   \
    extern "C" __global__ void masked_sum_words_##T(                                          \
        const uint4 *frames, u64 frame_words, u64 n_frames, const u32 *spans, u32 n_spans,    \
        const uint2 *words, u32 n_words, u64 *out) {                                          \
        masked_sum_words<T>(frames, frame_words, n_frames, spans, n_spans, words, n_words,    \
                            out);                                                             \
    }
STEM4D_FOR_SAMPLES(MASKED_SUM_WORDS)

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
