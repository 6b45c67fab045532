// Bit-unshuffle on the CUDA backend (unshuffle.wgsl's contract): a bitshuffle block of n
// elements (a multiple of 8) of `elem` bytes is 8·elem bit planes of n/8 bytes, plane
// 8·j + i holding bit i of byte j of every element, element k at bit k % 8 of byte k / 8.
// One CUDA block per table block (grid-stride), a thread per output byte: byte j of element
// k gathers its eight bits from the eight planes of byte j; neighbouring threads read the
// same plane bytes, so the gathers are served from cache. Raw blocks were copied already.

extern "C" __global__ void bitunshuffle(const u8 *__restrict__ planes,
                                        const u32 *__restrict__ table, u32 n_blocks, u32 elem,
                                        u8 *__restrict__ out) {
    for (u64 b = blockIdx.x; b < n_blocks; b += gridDim.x) {
        const u32 *t = table + 4 * b;
        if (t[3] >> 31) continue;
        const u32 start = t[2], len = t[3] & 0x7fffffffu;
        const u32 rows = len / elem / 8;
        const u8 *p = planes + start;
        for (u32 item = threadIdx.x; item < len; item += blockDim.x) {
            const u32 k = item / elem, j = item - k * elem;
            const u32 g = k >> 3, shift = k & 7u;
            u32 v = 0;
#pragma unroll
            for (u32 i = 0; i < 8; i++) v |= (u32)((p[(u64)(8 * j + i) * rows + g] >> shift) & 1u) << i;
            out[start + item] = (u8)v;
        }
    }
}
