// A CPU stand-in for the CUDA built-ins the compressed resident's kernels use
// (tests/cuda_emulated.rs): a launch runs its blocks one after another, each block's threads
// as OS threads; __syncthreads and the warp shuffles are barriers (every lane must reach a
// shuffle, as on the device with a full mask); atomics are the compiler's. It checks the
// kernels' arithmetic and their threads' sharing of work where no GPU is, not their speed
// nor the device's memory model.
#pragma once
#include <cstdint>
#include <thread>
#include <barrier>
#include <vector>
#include <memory>
#include <functional>
#include <algorithm>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct uint2 { unsigned x, y; };
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
struct WarpX { std::barrier<> bar{32}; unsigned long long buf[32]; };
struct BlockCtx { std::barrier<> *bar; std::vector<std::unique_ptr<WarpX>> warps; };
inline thread_local BlockCtx *ctx;
inline void __syncthreads() { ctx->bar->arrive_and_wait(); }
template <typename T> T shfl_with(T v, unsigned src_lane) {
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    WarpX &x = *ctx->warps[w];
    x.buf[lane] = (unsigned long long)v;
    x.bar.arrive_and_wait();
    T r = (T)x.buf[src_lane & 31];
    x.bar.arrive_and_wait();
    return r;
}
template <typename T> T __shfl_xor_sync(unsigned, T v, int o) { return shfl_with(v, (threadIdx.x & 31) ^ o); }
template <typename T> T __shfl_down_sync(unsigned, T v, int o) {
    unsigned l = threadIdx.x & 31; return shfl_with(v, l + o < 32 ? l + o : l); }
template <typename T> T __shfl_up_sync(unsigned, T v, unsigned o) {
    unsigned l = threadIdx.x & 31; return shfl_with(v, l >= o ? l - o : l); }
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
    return (unsigned)((((unsigned long long)hi << 32) | lo) >> (s & 31)); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAnd(unsigned *a, unsigned v) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicOr(unsigned *a, unsigned v) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicMax(unsigned *a, unsigned v) {
    unsigned old = __atomic_load_n(a, __ATOMIC_SEQ_CST);
    while (old < v && !__atomic_compare_exchange_n(a, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return old; }
template <typename A, typename B> auto min(A a, B b) { return a < b ? a : b; }
template <typename A, typename B> auto max(A a, B b) { return a > b ? a : b; }
template <typename F> void launch(dim3 grid, unsigned threads, F f) {
    gridDim = grid; blockDim = dim3{threads, 1, 1};
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            std::barrier<> bar(threads);
            BlockCtx c{&bar, {}};
            for (unsigned w = 0; w < threads / 32; w++) c.warps.emplace_back(new WarpX());
            std::vector<std::thread> ts;
            for (unsigned t = 0; t < threads; t++)
                ts.emplace_back([&, t] { threadIdx = dim3{t, 0, 0}; blockIdx = dim3{bx, by, 0}; ctx = &c; f(); });
            for (auto &t : ts) t.join();
        }
}
