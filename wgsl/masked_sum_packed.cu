// Virtual images of the compressed resident (masked_sum_packed.wgsl's contract, C-MASK,
// decision 0064): each frame's exact sum over the pixels a detector set selects, read from
// the packed sectors (`packed_sector_sums`), one block per tile of T positions. The set comes
// as (group, 8-bit selection) pairs (`GroupSet` on the host): a group's codes are read once
// for all its selected pixels.

#define MASKED_SUM_PACKED(T)                                                                  \
    extern "C" __global__ void masked_sum_packed_##T(const u32 *index, const u64 *tile_base, \
                                                     u32 groups, u64 n_frames,               \
                                                     const u32 *items, u32 n_items,          \
                                                     u64 *out) {                             \
        packed_sector_sums<T, false>(index, tile_base, groups, 1u, n_frames, items, n_items,  \
                                     out);                                                    \
    }
STEM4D_FOR_SAMPLES(MASKED_SUM_PACKED)
