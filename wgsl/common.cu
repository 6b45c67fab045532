// Prepended to every CUDA module of the native CUDA backend (src/cuda/), as common.wgsl is to
// every WGSL one. The resident is frame-major: frame f's pixel k at f * frame_len + k, samples
// of the source type (u8, u16, u32) or u32 once binned. Sums are exact 64-bit integers.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// The sum of `v` over the warp's 32 lanes, valid in lane 0 (every lane must call it).
__device__ __forceinline__ u64 warp_sum_u64(u64 v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// Warp-per-frame kernels: this thread's warp, the warps of the grid.
__device__ __forceinline__ u64 warp_index() {
    return ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
}
__device__ __forceinline__ u64 warp_count() { return ((u64)gridDim.x * blockDim.x) >> 5; }

// Three instantiations of each templated kernel, one per stored sample type.
#define STEM4D_FOR_SAMPLES(MACRO) MACRO(u8) MACRO(u16) MACRO(u32)
