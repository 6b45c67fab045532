// What the GPU decode's kernels share (`bslz4.wgsl` inflates, `unshuffle.wgsl` unshuffles
// and packs; each is built after this text): their parameters, the bindings they have in
// common, and byte access to the compressed window and the decoded bit planes.
//
// Bitshuffle+LZ4 (HDF5 filter 32008) and plain LZ4 (32004) are decoded on the GPU from the
// compressed bytes the host uploaded: `bslz4_parse`, `bslz4_serial` and `bslz4` inflate
// every LZ4 block (each block writing only its own word-aligned output range; raw blocks and
// tails are copied), then `unshuffle` (unbinned bit planes) or `unshuffle_pack` (binned
// or plain bytes) gathers each element, zeroes bad pixels, bins (count-preserving, u32 sums,
// overflow reported), and packs the samples into the resident buffer. Every read and write
// is bounds-checked against the block's own ranges: a corrupt block records its index in
// `status[0]` and stops. The rule these kernels keep is C-DECODE-GPU of docs/CONTRACT.md.

struct DecodeParams {
    blocks: u32,
    groups_x: u32,
    // unshuffle_pack
    frames: u32,
    first_frame: u32,
    seg_first_frame: u32,
    tile_words: u32,
    bits: u32,
    det_len: u32,
    elem: u32,
    bin: u32,
    det_cols: u32,
    mask_bad: u32,
    src_bytes: u32,
    dst_bytes: u32,
    out_cols: u32,
    det_rows: u32,
    // The window's first block among all blocks of the upload.
    block_base: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> dp: DecodeParams;
// bslz4: the compressed window; unshuffle_pack: per frame (chunk entry, frame in chunk).
@group(0) @binding(1) var<storage, read> src: array<u32>;
// bslz4: per block (source byte, source length, output byte, output length | raw << 31);
// unshuffle_pack: per chunk (scratch byte, block elements, elements, 1 when not bitshuffled).
@group(0) @binding(2) var<storage, read> table: array<vec4<u32>>;
// Decoded bit planes or bytes: written by the LZ4 kernels, read by the unshuffle kernels.
@group(0) @binding(3) var<storage, read_write> scratch: array<u32>;
// [0]: lowest failing block of the upload (0xffffffff when none); [1]: 1 when a binned sum
// passed u32; [2]: blocks inflated in place by one invocation. Read once the upload is done.
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;
// unshuffle_pack: bad-pixel bits, one per detector pixel.
@group(0) @binding(5) var<storage, read> bad: array<u32>;
// unshuffle_pack: the resident segment the frames go to.
// Position-tiled (`src/upload/plan.rs`): a word holds one pixel at neighbouring positions,
// which may come from two windows, so a word the window fills only partly is or-ed in.
@group(0) @binding(6) var<storage, read_write> resident: array<atomic<u32>>;

fn src_byte(i: u32) -> u32 {
    return (src[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}

fn dst_byte(i: u32) -> u32 {
    return (scratch[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
}
