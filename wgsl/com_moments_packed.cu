// Centre-of-mass moments of the compressed resident (com_moments_packed.wgsl's contract,
// C-COM, decision 0064): each frame's Σ I, Σ row·I and Σ col·I over every pixel, exact in
// 64 bits (the host refuses shapes whose bound passes 2^64), read from the packed sectors
// (`packed_sector_sums`), one block per tile of T positions; pixels found bad were zeroed
// in place, so every group is read whole.

#define COM_MOMENTS_PACKED(T)                                                                 \
    extern "C" __global__ void com_moments_packed_##T(const u32 *index, const u64 *tile_base,\
                                                      u32 groups, u32 det_cols,              \
                                                      u64 n_frames, u64 *out) {              \
        packed_sector_sums<T, true>(index, tile_base, groups, det_cols, n_frames, nullptr,    \
                                    groups, out);                                             \
    }
STEM4D_FOR_SAMPLES(COM_MOMENTS_PACKED)
