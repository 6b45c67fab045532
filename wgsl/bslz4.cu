// GPU decode on the CUDA backend (bslz4.wgsl's contract, C-DECODE-GPU): the LZ4 blocks of
// bitshuffle+LZ4 (32008) and LZ4 (32004) chunks, inflated one block a thread from the
// block table the host walked (`decode::walk`: per block its source start and length, its
// output start and length, bit 31 set for a block stored raw). A bitshuffle block's
// inflated bytes are its bit planes, written to `planes` for `bitunshuffle`
// (unshuffle.cu); an LZ4 chunk's blocks and raw blocks go straight to `out`. Nothing is
// read or written outside a block's own ranges: a block whose stream is malformed (a
// length past its end, an offset before its start, a size other than the table's) stops
// there and sets `failed`, and the host names the chunk from its CPU decoder.

// An LZ4 length from its token's 4 bits `*len`: at 15, the bytes that follow at `*ip` are
// added until one is below 255 (LZ4's length extension, for literals and matches alike).
// False where the input ends first.
__device__ __forceinline__ bool lz4_length(const u8 *in, u32 in_len, u32 *ip, u32 *len) {
    if (*len != 15) return true;
    u32 more;
    do {
        if (*ip >= in_len) return false;
        more = in[(*ip)++];
        *len += more;
    } while (more == 255);
    return true;
}

extern "C" __global__ void lz4_blocks(const u8 *__restrict__ src, const u32 *__restrict__ table,
                                      u32 n_blocks, u32 shuffled, u8 *__restrict__ planes,
                                      u8 *__restrict__ out, u32 *__restrict__ failed) {
    for (u64 b = (u64)blockIdx.x * blockDim.x + threadIdx.x; b < n_blocks;
         b += (u64)gridDim.x * blockDim.x) {
        const u32 *t = table + 4 * b;
        const u8 *in = src + t[0];
        const u32 in_len = t[1];
        const u32 raw = t[3] >> 31, out_len = t[3] & 0x7fffffffu;
        u8 *dst = (raw || !shuffled ? out : planes) + t[2];
        if (raw) {
            if (in_len != out_len) {
                atomicExch(failed, 1u);
                continue;
            }
            for (u32 i = 0; i < in_len; i++) dst[i] = in[i];
            continue;
        }
        u32 ip = 0, op = 0;
        bool bad = false;
        while (ip < in_len) {
            const u32 token = in[ip++];
            u32 lit = token >> 4;
            if (!lz4_length(in, in_len, &ip, &lit)) {
                bad = true;
                break;
            }
            if (lit > in_len - ip || lit > out_len - op) {
                bad = true;
                break;
            }
            for (u32 i = 0; i < lit; i++) dst[op + i] = in[ip + i];
            ip += lit;
            op += lit;
            // The last sequence is literals only.
            if (ip == in_len) break;
            if (in_len - ip < 2) {
                bad = true;
                break;
            }
            const u32 offset = (u32)in[ip] | (u32)in[ip + 1] << 8;
            ip += 2;
            if (offset == 0 || offset > op) {
                bad = true;
                break;
            }
            u32 len = token & 15u;
            if (!lz4_length(in, in_len, &ip, &len)) {
                bad = true;
                break;
            }
            len += 4;
            if (len > out_len - op) {
                bad = true;
                break;
            }
            // Byte by byte: a match may overlap the bytes it copies.
            for (u32 i = 0; i < len; i++) dst[op + i] = dst[op - offset + i];
            op += len;
        }
        if (bad || op != out_len) atomicExch(failed, 1u);
    }
}
