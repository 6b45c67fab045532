// Prepended to every CUDA module of the native CUDA backend (src/cuda/), as common.wgsl is to
// every WGSL one. The resident is frame-major: frame f's pixel k at f * frame_len + k, samples
// of the source type (u8, u16, u32) or u32 once binned. Sums are exact 64-bit integers.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// The sum of `v` over the block (blockDim.x a multiple of 32, at most 1024), valid in
// thread 0; `scratch` holds 32 values. Warp shuffles, then one warp over the warps' sums.
__device__ __forceinline__ u64 block_sum_u64(u64 v, u64 *scratch) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = 0;
    if (warp == 0) {
        if (lane < (blockDim.x >> 5)) v = scratch[lane];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    }
    __syncthreads();
    return v;
}

// Three instantiations of each templated kernel, one per stored sample type.
#define STEM4D_FOR_SAMPLES(MACRO) MACRO(u8) MACRO(u16) MACRO(u32)
