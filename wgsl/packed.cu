// The CUDA backend's compressed resident (packed.wgsl's idea in CUDA's own layout, decision
// 0064): the samples of one detector pixel at T = 256 / bits consecutive scan positions (a
// "tile"; 32 bytes raw) form a sector, cut to the bit length of its largest sample
// (frame-of-reference packing with the reference 0: the counts are the stored bits, nothing
// rounded). Positions past the last frame count as zeros.
//
// - `index`, per tile t and group j of 8 pixels (8j .. 8j + 7): at 2 (t G + j) the group's
//   first data word counted from its tile's base, at 2 (t G + j) + 1 its 8 width codes, 4
//   bits each (pixel 8j + i at bits 4i; codes 0–14 are widths, 15 the full `bits`); pixels
//   past the detector have width 0.
// - `tile_base[t]`: the device address of tile t's data. The data lies in segments, one
//   allocation per batch of tiles encoded together; a kernel reads every tile through this
//   table, so one launch covers every segment.
// - a group's sectors follow one another, sample p of a sector at bit p · width from its
//   start; a group is padded to a whole word and a segment holds one word more than its
//   data, so a read of two words never passes its end.
//
// Encoded from frame-major samples in two passes (`packed_sizes_*`: codes and each group's
// start by a block-wide scan per tile; the host places the tiles; `packed_write_*`: the
// bits), the hot and dead pixels found afterwards zeroed in place (`packed_zero_listed`),
// frames read back (`packed_frames`). The product kernels walk sectors with `packed_sample`.

#define PACKED_FULL_CODE 15u

template <typename T> struct packed_geometry {
    static constexpr u32 bits = 8 * sizeof(T);
    static constexpr u32 tile = 256 / bits;
};

__device__ __forceinline__ u32 packed_width(u32 code, u32 bits) {
    return code == PACKED_FULL_CODE ? bits : code;
}

// The code of a sector whose samples OR to `ored`: its bit length, or the full width where
// that is no shorter (or past what a code holds).
__device__ __forceinline__ u32 packed_code(u32 ored, u32 bits) {
    const u32 len = 32u - (u32)__clz(ored);
    return (len >= PACKED_FULL_CODE || len >= bits) ? PACKED_FULL_CODE : len;
}

// The widths of a group's sectors below slot `slot` (0–7), summed without a loop: the
// codes' nibbles added bytewise, each full code then counted as `bits` instead of 15.
__device__ __forceinline__ u32 packed_widths_below(u32 codes, u32 slot, u32 bits) {
    const u32 below = slot == 0u ? 0u : codes & (0xffffffffu >> (32u - 4u * slot));
    const u32 pairs = (below & 0x0f0f0f0fu) + ((below >> 4) & 0x0f0f0f0fu);
    const u32 nibbles = (pairs * 0x01010101u) >> 24;
    const u32 full = below & (below >> 1) & (below >> 2) & (below >> 3) & 0x11111111u;
    return (u32)((int)nibbles + __popc(full) * ((int)bits - 15));
}

// The `width`-bit sample at bit `bit` of `data` (width 1–32; two words read).
__device__ __forceinline__ u32 packed_sample(const u32 *__restrict__ data, u32 bit, u32 width) {
    const u32 at = bit >> 5;
    const u32 v = __funnelshift_r(data[at], data[at + 1], bit & 31u);
    return width >= 32u ? v : v & ((1u << width) - 1u);
}

// Tile t's data.
__device__ __forceinline__ const u32 *packed_tile(const u64 *__restrict__ tile_base, u64 t) {
    return reinterpret_cast<const u32 *>(tile_base[t]);
}

// Codes and starts of every group of the tiles of `raw` (frame-major, frames [0, n_frames)
// of the batch, the rest zeros): one block of 256 threads per tile, its groups taken 256 at
// a time, the starts an exclusive scan carried across them; the tile's words into
// `tile_words`.
template <typename T>
__device__ void packed_sizes(const T *__restrict__ raw, u64 frame_len, u32 n_frames, u32 groups,
                             u32 *__restrict__ index, u32 *__restrict__ tile_words) {
    constexpr u32 BITS = packed_geometry<T>::bits, TILE = packed_geometry<T>::tile;
    __shared__ u32 warp_total[8];
    __shared__ u32 carry;
    const u32 t = blockIdx.x, lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    for (u32 j0 = 0; j0 < groups; j0 += 256u) {
        const u32 j = j0 + threadIdx.x;
        u32 codes = 0, words = 0;
        if (j < groups) {
            u32 ored[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (u32 p = 0; p < TILE; p++) {
                const u64 f = (u64)t * TILE + p;
                if (f >= n_frames) break;
                const T *frame = raw + f * frame_len;
#pragma unroll
                for (u32 i = 0; i < 8; i++) {
                    const u64 k = 8ull * j + i;
                    if (k < frame_len) ored[i] |= (u32)frame[k];
                }
            }
            u32 width_sum = 0;
#pragma unroll
            for (u32 i = 0; i < 8; i++) {
                if (8ull * j + i < frame_len) {
                    const u32 c = packed_code(ored[i], BITS);
                    codes |= c << (4u * i);
                    width_sum += packed_width(c, BITS);
                }
            }
            words = (width_sum * TILE + 31u) / 32u;
        }
        u32 inclusive = words;
        for (u32 o = 1; o < 32; o <<= 1) {
            const u32 n = __shfl_up_sync(0xffffffffu, inclusive, o);
            if (lane >= o) inclusive += n;
        }
        if (lane == 31u) warp_total[warp] = inclusive;
        __syncthreads();
        u32 before = carry;
        for (u32 w = 0; w < warp; w++) before += warp_total[w];
        const u32 start = before + inclusive - words;
        if (j < groups) {
            const u64 g = (u64)t * groups + j;
            index[2 * g] = start;
            index[2 * g + 1] = codes;
        }
        // Every thread has read `carry` and the warps' totals before they change.
        __syncthreads();
        if (threadIdx.x == 255u) carry = start + words;
        __syncthreads();
    }
    if (threadIdx.x == 0) tile_words[t] = carry;
}

// Each group's bits written at its start (`packed_sizes`' index, the tiles placed in
// `tile_base`): a thread per group, grid-stride; a group's words are its own.
template <typename T>
__device__ void packed_write(const T *__restrict__ raw, u64 frame_len, u32 n_frames, u32 groups,
                             u64 n_groups, const u32 *__restrict__ index,
                             const u64 *__restrict__ tile_base) {
    constexpr u32 BITS = packed_geometry<T>::bits, TILE = packed_geometry<T>::tile;
    for (u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x; g < n_groups;
         g += (u64)gridDim.x * blockDim.x) {
        const u64 t = g / groups, j = g % groups;
        const u32 codes = index[2 * g + 1];
        u32 *out = reinterpret_cast<u32 *>(tile_base[t]) + index[2 * g];
        // Bits gathered and not yet written, and how many (always below 32).
        u32 acc = 0, n = 0, at = 0;
        for (u32 i = 0; i < 8; i++) {
            const u32 w = packed_width((codes >> (4u * i)) & 15u, BITS);
            if (w == 0) continue;
            const u64 k = 8 * j + i;
            for (u32 p = 0; p < TILE; p++) {
                const u64 f = t * TILE + p;
                const u32 v = f < n_frames ? (u32)raw[f * frame_len + k] : 0u;
                acc |= v << n;
                if (n + w >= 32u) {
                    out[at++] = acc;
                    // The bits of v that did not fit (none when it started the word).
                    acc = n == 0 ? 0u : v >> (32u - n);
                    n = n + w - 32u;
                } else {
                    n += w;
                }
            }
        }
        if (n > 0) out[at] = acc;
    }
}

#define PACKED_ENCODE(T)                                                                      \
    extern "C" __global__ void packed_sizes_##T(const T *raw, u64 frame_len, u32 n_frames,   \
                                                u32 groups, u32 *index, u32 *tile_words) {   \
        packed_sizes<T>(raw, frame_len, n_frames, groups, index, tile_words);                 \
    }                                                                                         \
    extern "C" __global__ void packed_write_##T(const T *raw, u64 frame_len, u32 n_frames,   \
                                                u32 groups, u64 n_groups, const u32 *index,  \
                                                const u64 *tile_base) {                      \
        packed_write<T>(raw, frame_len, n_frames, groups, n_groups, index, tile_base);        \
    }
STEM4D_FOR_SAMPLES(PACKED_ENCODE)

// The sectors of pixels `pixels[0..n_pixels)` zeroed in every one of `tiles` tiles, their
// codes kept (they decode to zeros): a thread per (tile, pixel). Neighbouring sectors share
// a group's edge words, so every word is cleared with atomicAnd.
extern "C" __global__ void packed_zero_listed(const u32 *index, const u64 *tile_base,
                                              u32 groups, u32 bits, u64 tiles,
                                              const u32 *pixels, u32 n_pixels) {
    const u32 tile = 256u / bits;
    const u64 n = tiles * n_pixels;
    for (u64 id = (u64)blockIdx.x * blockDim.x + threadIdx.x; id < n;
         id += (u64)gridDim.x * blockDim.x) {
        const u64 t = id / n_pixels;
        const u32 k = pixels[id % n_pixels];
        const u64 g = t * groups + (k >> 3);
        const u32 codes = index[2 * g + 1], slot = k & 7u;
        const u32 w = packed_width((codes >> (4u * slot)) & 15u, bits);
        if (w == 0) continue;
        u32 *data = reinterpret_cast<u32 *>(tile_base[t]);
        const u32 first = index[2 * g] * 32u + packed_widths_below(codes, slot, bits) * tile;
        const u32 last = first + w * tile;  // one past the sector's last bit
        for (u32 word = first >> 5; word * 32u < last; word++) {
            const u32 lo = max(first, word * 32u) - word * 32u;
            const u32 hi = min(last, word * 32u + 32u) - word * 32u;
            const u32 bits_set = (hi - lo == 32u) ? 0xffffffffu : ((1u << (hi - lo)) - 1u) << lo;
            atomicAnd(&data[word], ~bits_set);
        }
    }
}

// Frames [f0, f0 + n_frames) as u32 samples, frame-major (a thread per sample).
extern "C" __global__ void packed_frames(const u32 *index, const u64 *tile_base, u32 groups,
                                         u32 bits, u64 frame_len, u64 f0, u64 n_frames,
                                         u32 *out) {
    const u32 tile = 256u / bits;
    const u64 n = frame_len * n_frames;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        const u64 f = f0 + i / frame_len, k = i % frame_len;
        const u64 t = f / tile, g = t * groups + (k >> 3);
        const u32 codes = index[2 * g + 1], slot = (u32)(k & 7u);
        const u32 w = packed_width((codes >> (4u * slot)) & 15u, bits);
        u32 v = 0;
        if (w != 0) {
            const u32 bit = index[2 * g] * 32u + packed_widths_below(codes, slot, bits) * tile +
                            (u32)(f % tile) * w;
            v = packed_sample(packed_tile(tile_base, t), bit, w);
        }
        out[i] = v;
    }
}

// Sums over the sectors of one tile per block, for the masked sums (MOMENTS false: each
// position's sum over the pixels `items` select) and the CoM moments (MOMENTS true: Σ I,
// Σ row·I, Σ col·I over every pixel). `items`: (group, 8-bit selection) pairs, or null for
// every group with every pixel. A sub-warp of T lanes takes one group at a time, lane p
// reading sample p of each selected sector (the group's codes read once and their widths
// summed as it goes); the lanes of a position meet by shuffles, the warps through shared
// memory; 64-bit sums, so exact in any order. Blocks of 256 threads.
template <typename T, bool MOMENTS>
__device__ void packed_sector_sums(const u32 *__restrict__ index,
                                   const u64 *__restrict__ tile_base, u32 groups, u32 det_cols,
                                   u64 n_frames, const u32 *__restrict__ items, u32 n_items,
                                   u64 *__restrict__ out) {
    constexpr u32 BITS = packed_geometry<T>::bits, TILE = packed_geometry<T>::tile;
    constexpr u32 SUBS = 32 / TILE, WARPS = 8, SUMS = MOMENTS ? 3 : 1;
    __shared__ u64 part[WARPS][TILE][SUMS];
    const u64 t = blockIdx.x;
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, p = lane % TILE;
    const u32 sub = warp * SUBS + lane / TILE, n_subs = WARPS * SUBS;
    const u32 *data = packed_tile(tile_base, t);
    const uint2 *group = reinterpret_cast<const uint2 *>(index) + t * groups;
    u64 s = 0, sr = 0, sc = 0;
    for (u32 it = sub; it < n_items; it += n_subs) {
        const u32 j = items != nullptr ? items[2 * it] : it;
        const u32 selected = items != nullptr ? items[2 * it + 1] : 0xffu;
        const uint2 e = group[j];
        u32 bit = e.x * 32u;
        // The group's first pixel; MOMENTS steps along its row.
        u32 row = 0, col = 0;
        if (MOMENTS) {
            row = (8u * j) / det_cols;
            col = 8u * j - row * det_cols;
        }
#pragma unroll
        for (u32 i = 0; i < 8; i++) {
            const u32 w = packed_width((e.y >> (4u * i)) & 15u, BITS);
            if (w != 0 && ((selected >> i) & 1u) != 0) {
                const u64 v = packed_sample(data, bit + p * w, w);
                s += v;
                if (MOMENTS) {
                    sr += v * row;
                    sc += v * col;
                }
            }
            bit += w * TILE;
            if (MOMENTS && ++col == det_cols) {
                col = 0;
                row++;
            }
        }
    }
    for (u32 o = TILE; o < 32; o <<= 1) {
        s += __shfl_xor_sync(0xffffffffu, s, o);
        if (MOMENTS) {
            sr += __shfl_xor_sync(0xffffffffu, sr, o);
            sc += __shfl_xor_sync(0xffffffffu, sc, o);
        }
    }
    if (lane < TILE) {
        part[warp][lane][0] = s;
        if (MOMENTS) {
            part[warp][lane][1] = sr;
            part[warp][lane][2] = sc;
        }
    }
    __syncthreads();
    if (threadIdx.x < TILE * SUMS) {
        const u32 q = threadIdx.x % TILE, m = threadIdx.x / TILE;
        u64 total = 0;
        for (u32 w = 0; w < WARPS; w++) total += part[w][q][m];
        const u64 f = t * TILE + q;
        if (f < n_frames) out[SUMS * f + m] = total;
    }
}
