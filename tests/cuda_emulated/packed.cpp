// The CUDA compressed resident's kernels (wgsl/packed.cu and the product kernels beside it,
// decision 0064) run on the CPU through shim.h, each against a plain loop over the raw
// samples: the encoder in batches of tiles (a segment each, placed through the tile table),
// frames read back, masked sums over a set with a pixel given twice, CoM moments, sum and
// max patterns over a scan rectangle, and pixels zeroed in place. u8, u16 and u32 samples on
// odd shapes with partial tiles and groups, and tiles of more than 256 groups.
#include "shim.h"
#include <cstdio>
#include <cstdlib>
#include <map>
// The kernels' own text, as NVRTC compiles it (src/cuda/engine.rs), from wgsl/.
#include "common.cu"
#include "packed.cu"
#include "masked_sum_packed.cu"
#include "com_moments_packed.cu"
#include "pattern_reduce_packed.cu"

static uint64_t rng = 88172645463325252ull;
static uint64_t next() { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static int fails = 0;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %s:%d ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

std::vector<u32> group_items(std::vector<u32> px) {
    std::sort(px.begin(), px.end());
    std::map<std::pair<int, u32>, u32> layers;
    int rep = 0;
    for (size_t i = 0; i < px.size(); i++) {
        rep = (i > 0 && px[i - 1] == px[i]) ? rep + 1 : 0;
        layers[{rep, px[i] / 8}] |= 1u << (px[i] % 8);
    }
    std::vector<u32> out;
    for (auto &[k, v] : layers) { out.push_back(k.second); out.push_back(v); }
    return out;
}

template <typename T> void test(int R, int C, int Kr, int Kc, int batch) {
    const u32 bits = 8 * sizeof(T), TILE = 256 / bits;
    const int frames = R * C, fl = Kr * Kc;
    const int tiles = (frames + TILE - 1) / TILE, groups = (fl + 7) / 8;
    std::vector<T> raw(frames * fl);
    for (int f = 0; f < frames; f++)
        for (int k = 0; k < fl; k++) {
            u32 w = (k * 7 + f / 40) % (bits + 1);
            u64 v = next();
            u32 x = w == 32 ? (u32)v : (u32)(v & ((1ull << w) - 1));
            if (k % 13 == 5) x = 0;
            if (bits == 32 && k % 5 == 1) x = 0xffffffffu;
            raw[f * fl + k] = (T)x;
        }
    std::vector<u32> index(2 * tiles * groups, 0xdeadbeef);
    std::vector<u64> tile_base(tiles);
    // Reserved: the tile table holds addresses into these vectors.
    std::vector<std::vector<u32>> segs;
    segs.reserve(tiles);
    for (int first = 0; first < tiles; first += batch) {
        int n = std::min(batch, tiles - first);
        u32 valid = std::min<int>(frames - first * TILE, n * TILE);
        const T *rp = raw.data() + (size_t)first * TILE * fl;
        std::vector<u32> tw(n);
        u32 *ix = index.data() + 2 * (size_t)first * groups;
        launch(dim3{(unsigned)n, 1, 1}, 256, [&] { packed_sizes<T>(rp, fl, valid, groups, ix, tw.data()); });
        u64 total = 0;
        std::vector<u64> starts;
        for (auto w : tw) { starts.push_back(total); total += w; }
        // Zeroed, as the backend allocates it (alloc_zeros); one word past the data.
        segs.emplace_back(total + 1, 0u);
        for (int i = 0; i < n; i++) tile_base[first + i] = (u64)(segs.back().data() + starts[i]);
        launch(dim3{2, 1, 1}, 256, [&] { packed_write<T>(rp, fl, valid, groups, (u64)n * groups, ix, tile_base.data() + first); });
    }
    u64 packed_words = 0;
    for (auto &s : segs) packed_words += s.size();
    // 1. frames back
    std::vector<u32> out(frames * fl, 7);
    launch(dim3{3, 1, 1}, 256, [&] { packed_frames(index.data(), tile_base.data(), groups, bits, fl, 0, frames, out.data()); });
    int bad = 0;
    for (int i = 0; i < frames * fl; i++) bad += out[i] != (u32)raw[i];
    CHECK(bad == 0, "frames: %d samples differ (bits %u, %dx%d %dx%d)", bad, bits, R, C, Kr, Kc);
    // 2. masked sums
    std::vector<u32> px;
    for (int k = 0; k < fl; k++) if ((k * 31 + 3) % 7 < 3) px.push_back(k);
    px.push_back(px[px.size() / 2]);  // a pixel twice
    auto items = group_items(px);
    std::vector<u64> sums(frames, 99);
    launch(dim3{(unsigned)tiles, 1, 1}, 256, [&] {
        packed_sector_sums<T, false>(index.data(), tile_base.data(), groups, 1u, frames, items.data(), items.size() / 2, sums.data()); });
    bad = 0;
    for (int f = 0; f < frames; f++) { u64 s = 0; for (auto k : px) s += raw[f * fl + k]; bad += s != sums[f]; }
    CHECK(bad == 0, "masked sums: %d frames differ (bits %u)", bad, bits);
    // 3. moments
    if (bits < 32) {
        std::vector<u64> mom(3 * frames, 99);
        launch(dim3{(unsigned)tiles, 1, 1}, 256, [&] {
            packed_sector_sums<T, true>(index.data(), tile_base.data(), groups, Kc, frames, nullptr, groups, mom.data()); });
        bad = 0;
        for (int f = 0; f < frames; f++) {
            u64 t = 0, r = 0, c = 0;
            for (int k = 0; k < fl; k++) { u64 v = raw[f * fl + k]; t += v; r += v * (k / Kc); c += v * (k % Kc); }
            bad += mom[3 * f] != t || mom[3 * f + 1] != r || mom[3 * f + 2] != c;
        }
        CHECK(bad == 0, "moments: %d frames differ (bits %u)", bad, bits);
    }
    // 4. pattern reduce over a ROI
    int r0 = 1, r1 = R, c0 = 2, c1 = C - 1;
    u64 first = r0 * C + c0, last = (r1 - 1) * C + c1 - 1;
    u64 t0 = first / TILE, t1 = last / TILE + 1;
    u64 pixel_blocks = (fl + 255) / 256;
    // The host's shares (resident.rs's reduce_grid over the tiles).
    u64 shares = std::min<u64>(std::max<u64>(4096 / pixel_blocks, 1), (t1 - t0 + 15) / 16);
    u64 per_share = (t1 - t0 + shares - 1) / shares;
    std::vector<u64> psum(fl, 0);
    std::vector<u32> pmax(fl, 0);
    launch(dim3{(unsigned)pixel_blocks, (unsigned)shares, 1}, 256, [&] {
        pattern_reduce_packed<T>(index.data(), tile_base.data(), groups, fl, C, r0, c0, r1 - r0, c1 - c0, t0, t1, per_share, psum.data(), pmax.data()); });
    bad = 0;
    for (int k = 0; k < fl; k++) {
        u64 s = 0; u32 m = 0;
        for (int r = r0; r < r1; r++) for (int c = c0; c < c1; c++) { u32 v = raw[(r * C + c) * fl + k]; s += v; m = std::max(m, v); }
        bad += s != psum[k] || m != pmax[k];
    }
    CHECK(bad == 0, "pattern reduce: %d pixels differ (bits %u)", bad, bits);
    // 5. zero listed, then frames
    std::vector<u32> zero = {0, 3, (u32)fl / 2, (u32)fl - 1};
    launch(dim3{2, 1, 1}, 256, [&] { packed_zero_listed(index.data(), tile_base.data(), groups, bits, tiles, zero.data(), zero.size()); });
    for (auto k : zero) for (int f = 0; f < frames; f++) raw[f * fl + k] = 0;
    launch(dim3{3, 1, 1}, 256, [&] { packed_frames(index.data(), tile_base.data(), groups, bits, fl, 0, frames, out.data()); });
    bad = 0;
    for (int i = 0; i < frames * fl; i++) bad += out[i] != (u32)raw[i];
    CHECK(bad == 0, "zeroed frames: %d samples differ (bits %u)", bad, bits);
    printf("bits %2u scan %dx%d det %dx%d batch %d: %llu words packed for %llu raw\n", bits, R, C, Kr, Kc, batch,
           (unsigned long long)packed_words, (unsigned long long)frames * fl * sizeof(T) / 4);
}

int main() {
    test<u16>(5, 7, 9, 11, 1);
    test<u16>(5, 7, 9, 11, 2);
    test<u8>(5, 7, 9, 11, 1);
    test<u32>(5, 7, 9, 11, 3);
    test<u16>(3, 11, 48, 50, 100);  // more than 256 groups a tile
    test<u8>(7, 9, 40, 51, 1);
    test<u32>(3, 5, 33, 64, 2);
    printf("%s (%d failures)\n", fails ? "FAILED" : "all equal", fails);
    return fails != 0;
}
