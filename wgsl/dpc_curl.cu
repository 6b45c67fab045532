// The sums that decide the DPC rotation (dpc_curl.wgsl's contract, `products::dpc_rotation`):
// over the cells of four neighbouring scan positions of a DPC field (g_r, g_c) before flip
// and rotation, the divergence D and curl C of the field and of it with its components
// swapped; per block the partial sums ΣC², ΣC·D, ΣD² of each. Each cell's terms are
// float32 as in WGSL; CUDA adds them in float64 (shuffles, then one warp per block), and
// the host adds the partials in float64.

extern "C" __global__ void dpc_curl(u32 rows, u32 cols, const float2 *__restrict__ field,
                                    double *__restrict__ partials) {
    __shared__ double warp_sums[32][6];
    const u64 cells_c = cols > 0 ? cols - 1 : 0;
    const u64 cells = (rows > 0 ? rows - 1 : 0) * cells_c;
    double s[6] = {0, 0, 0, 0, 0, 0};
    for (u64 cell = (u64)blockIdx.x * blockDim.x + threadIdx.x; cell < cells;
         cell += (u64)gridDim.x * blockDim.x) {
        const u64 r = cell / cells_c, c = cell % cells_c;
        const u64 k = r * cols + c;
        const float2 a = field[k], b = field[k + 1], d = field[k + cols], e = field[k + cols + 1];
        // ∂/∂row and ∂/∂col of both components on the cell.
        const float drx = (d.x + e.x - a.x - b.x) * 0.5f, dry = (d.y + e.y - a.y - b.y) * 0.5f;
        const float dcx = (b.x + e.x - a.x - d.x) * 0.5f, dcy = (b.y + e.y - a.y - d.y) * 0.5f;
        const float div = drx + dcy, curl = dry - dcx;
        const float div_f = dry + dcx, curl_f = drx - dcy;
        const float t[6] = {curl * curl, curl * div, div * div,
                            curl_f * curl_f, curl_f * div_f, div_f * div_f};
        for (int q = 0; q < 6; q++) s[q] += (double)t[q];
    }
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    for (int q = 0; q < 6; q++) {
        for (int o = 16; o > 0; o >>= 1) s[q] += __shfl_down_sync(0xffffffffu, s[q], o);
        if (lane == 0) warp_sums[warp][q] = s[q];
    }
    __syncthreads();
    if (warp == 0) {
        const u32 warps = blockDim.x >> 5;
        for (int q = 0; q < 6; q++) {
            double v = lane < warps ? warp_sums[lane][q] : 0.0;
            for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
            if (lane == 0) partials[6 * (u64)blockIdx.x + q] = v;
        }
    }
}
