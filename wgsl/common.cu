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

// Float32 data summed exactly (common.wgsl's C-FLOAT-GPU): the host audits that every sample
// is an integer multiple of 2^lsb and that the sums fit, so each sum is a 128-bit
// two's-complement integer in units of 2^lsb and the order of addition cannot change a bit.
struct wide {
    u64 lo, hi;
};

__device__ __forceinline__ wide wide_add(wide a, wide b) {
    wide s;
    s.lo = a.lo + b.lo;
    s.hi = a.hi + b.hi + (s.lo < a.lo ? 1ull : 0ull);
    return s;
}

__device__ __forceinline__ wide warp_sum_wide(wide v) {
    for (int o = 16; o > 0; o >>= 1) {
        wide other;
        other.lo = __shfl_down_sync(0xffffffffu, v.lo, o);
        other.hi = __shfl_down_sync(0xffffffffu, v.hi, o);
        v = wide_add(v, other);
    }
    return v;
}

// `factor · x` (x: float32 bits, finite) as a 128-bit integer in units of 2^lsb.
__device__ __forceinline__ wide fixed_wide(u32 x, u32 factor, int lsb) {
    const u32 e = (x >> 23) & 0xffu;
    u32 m = x & 0x7fffffu;
    if (e != 0) m |= 0x800000u;
    wide v = {0, 0};
    if (m == 0 || factor == 0) return v;
    const u64 p = (u64)m * factor;
    const int s = (int)(e > 1 ? e : 1) - 150 - lsb;
    // The host's audit keeps 0 <= s and the value below 2^127.
    if (s < 0 || s >= 128) return v;
    if (s == 0) {
        v.lo = p;
    } else if (s < 64) {
        v.lo = p << s;
        v.hi = p >> (64 - s);
    } else {
        v.hi = p << (s - 64);
    }
    if (x >> 31) {
        v.lo = ~v.lo;
        v.hi = ~v.hi;
        v = wide_add(v, wide{1, 0});
    }
    return v;
}

// Add `v` to the 128-bit integer at `at` (lo, hi) with two 64-bit atomics: the carry out of
// the low word is known from the value it held, so the sum is exact in any order.
__device__ __forceinline__ void atomic_add_wide(u64 *at, wide v) {
    const u64 old = atomicAdd(at, v.lo);
    const u64 carry = (old + v.lo < old) ? 1ull : 0ull;
    atomicAdd(at + 1, v.hi + carry);
}

// Order-preserving key of float32 bits for atomicMax (negative values reverse): IEEE total
// order, +0 above -0 (common.wgsl's `float_key`).
__device__ __forceinline__ u32 float_key(u32 x) { return (x >> 31) ? ~x : (x | 0x80000000u); }
