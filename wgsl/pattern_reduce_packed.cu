// Sum and maximum patterns of the compressed resident over the scan positions of a
// rectangle [r0, r0 + roi_rows) × [c0, c0 + roi_cols) (pattern_reduce_packed.wgsl's
// contract, C-REDUCE, decision 0064): one thread per detector pixel, blockIdx.y a share of
// the tiles [t0, t1) the rectangle touches; each thread decodes its pixel's sector of each
// tile and keeps the positions inside. Shares meet through 64-bit atomicAdd and atomicMax,
// so the sums stay exact whatever the order. `sum` and `max` start at zero.

template <typename T>
__device__ void pattern_reduce_packed(const u32 *__restrict__ index,
                                      const u64 *__restrict__ tile_base, u32 groups,
                                      u64 frame_len, u32 scan_cols, u32 r0, u32 c0,
                                      u32 roi_rows, u32 roi_cols, u64 t0, u64 t1,
                                      u64 per_share, u64 *__restrict__ sum,
                                      u32 *__restrict__ max) {
    constexpr u32 BITS = packed_geometry<T>::bits, TILE = packed_geometry<T>::tile;
    const u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= frame_len) return;
    const u64 ta = t0 + (u64)blockIdx.y * per_share;
    const u64 tb = min(ta + per_share, t1);
    const u32 slot = (u32)(k & 7u);
    u64 s = 0;
    u32 m = 0;
    for (u64 t = ta; t < tb; t++) {
        const u64 g = t * groups + (k >> 3);
        const u32 codes = index[2 * g + 1];
        const u32 w = packed_width((codes >> (4u * slot)) & 15u, BITS);
        if (w == 0) continue;
        const u32 *data = packed_tile(tile_base, t);
        const u32 first = index[2 * g] * 32u + packed_widths_below(codes, slot, BITS) * TILE;
        for (u32 p = 0; p < TILE; p++) {
            const u64 f = t * TILE + p;
            const u64 r = f / scan_cols, c = f % scan_cols;
            if (r < r0 || r >= (u64)r0 + roi_rows || c < c0 || c >= (u64)c0 + roi_cols) continue;
            const u32 v = packed_sample(data, first + p * w, w);
            s += v;
            m = v > m ? v : m;
        }
    }
    if (s != 0) atomicAdd(&sum[k], s);
    if (m != 0) atomicMax(&max[k], m);
}

#define PATTERN_REDUCE_PACKED(T)                                                              \
    extern "C" __global__ void pattern_reduce_packed_##T(                                     \
        const u32 *index, const u64 *tile_base, u32 groups, u64 frame_len, u32 scan_cols,    \
        u32 r0, u32 c0, u32 roi_rows, u32 roi_cols, u64 t0, u64 t1, u64 per_share, u64 *sum, \
        u32 *max) {                                                                           \
        pattern_reduce_packed<T>(index, tile_base, groups, frame_len, scan_cols, r0, c0,      \
                                 roi_rows, roi_cols, t0, t1, per_share, sum, max);            \
    }
STEM4D_FOR_SAMPLES(PATTERN_REDUCE_PACKED)
