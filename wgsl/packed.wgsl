// stem4d:after packed_read.wgsl
// The compressed resident (`src/upload/packed.rs`, decision 0025): the position-tiled
// resident (`src/upload/plan.rs`) with each 32-byte sector (one detector pixel at a tile's
// T = 256 / bits positions) cut to the bit width of its largest sample: frame-of-reference
// packing with the reference 0, so the counts are the stored bits and nothing is rounded.
//
// A segment's buffer is an index, then the data:
// - per group of 8 pixels of a tile (tile-major, pixels ascending), two words: the word
//   where the group's data starts (from the start of the buffer), and the width codes of
//   its 8 sectors, 4 bits each (pixel i of the group at bits 4i; code 15 is the full
//   `bits`, codes 0–14 are widths); pixels past the detector have width 0;
// - per group, its sectors one after another, sample k of a sector at bit k · width of it,
//   the group padded to a whole word.
//
// `packed_codes` and `packed_write` encode a raw segment (two passes: the sizes, their
// prefix sums per workgroup and, on the host, across workgroups; then the words);
// `packed_rebase` and `packed_zero_sentinels` finish a prepared block kept packed (its index
// moved into a larger segment, its saturation sentinels zeroed in place);
// `packed` (the unpack) writes raw sectors back into a raw-layout scratch segment for the
// listed pixels only, zeroing the pixels found bad after the upload, so the product kernels
// read the scratch as they read a raw resident and the unpacked acquisition never exists
// whole.

struct PackedParams {
    // Tiles of the segment, and the first tile `packed` writes.
    tiles: u32,
    first_tile: u32,
    groups_per_tile: u32,
    det_len: u32,
    bits: u32,
    tile_words: u32,
    groups_x: u32,
    // `packed`: entries of the pixel list, 0 for every pixel.
    n_list: u32,
    // `packed`: the tile of `scratch` tile `first_tile` lands on (0 for a product's read;
    // a prepared reopen expands a block into a run of a raw resident segment's tiles).
    out_tile: u32,
    // `packed_rebase`: words added to each group's data start.
    rebase: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> pp: PackedParams;
// The raw segment being encoded.
@group(0) @binding(1) var<storage, read> raw: array<u32>;
// Per group: data words from its workgroup's first group, and the width codes.
@group(0) @binding(2) var<storage, read_write> local_out: array<u32>;
// Per workgroup of `packed_codes`: data words of its groups.
@group(0) @binding(3) var<storage, read_write> block_words: array<u32>;
@group(0) @binding(4) var<storage, read> local_in: array<u32>;
// Per workgroup of `packed_codes`: where its groups' data starts in the packed buffer.
@group(0) @binding(5) var<storage, read> block_base: array<u32>;
@group(0) @binding(6) var<storage, read_write> packed_out: array<u32>;
@group(0) @binding(7) var<storage, read> packed_in: array<u32>;
// The pixels to unpack (ascending; unused when `n_list` is 0).
@group(0) @binding(8) var<storage, read> list: array<u32>;
// One bit per detector pixel: found bad after the upload, unpacked as 0.
@group(0) @binding(9) var<storage, read> zeroed: array<u32>;
@group(0) @binding(10) var<storage, read_write> scratch: array<u32>;

// Groups each `packed_codes` invocation sizes (its workgroup's 256 take 1024).
const PER_INVOCATION: u32 = 4u;
const GROUPS_PER_BLOCK: u32 = 1024u;

var<workgroup> scan: array<u32, 256>;

// Code of a sector whose samples OR to `ored`: the bit length of its largest sample.
fn code_of(ored: u32, bits: u32) -> u32 {
    let w = 32u - countLeadingZeros(ored);
    return select(w, 15u, w >= 15u || w >= bits);
}

// OR of every sample of pixel `k`'s sector in tile `t` of the raw segment, folded to one
// sample's bits.
fn sector_or(t: u32, k: u32) -> u32 {
    let base = t * pp.tile_words + k * 8u;
    var o = 0u;
    for (var w = 0u; w < 8u; w += 1u) {
        o |= raw[base + w];
    }
    if (pp.bits == 16u) {
        o = (o | (o >> 16u)) & 0xffffu;
    } else if (pp.bits == 8u) {
        o |= o >> 16u;
        o = (o | (o >> 8u)) & 0xffu;
    }
    return o;
}

// Width codes of group `g`'s 8 sectors.
fn group_codes(g: u32) -> u32 {
    let t = g / pp.groups_per_tile;
    let k0 = (g % pp.groups_per_tile) * 8u;
    var codes = 0u;
    for (var i = 0u; i < 8u; i += 1u) {
        if (k0 + i < pp.det_len) {
            codes |= code_of(sector_or(t, k0 + i), pp.bits) << (4u * i);
        }
    }
    return codes;
}

fn group_words(codes: u32) -> u32 {
    return (packed_widths_before(codes, 8u, pp.bits) * (256u / pp.bits) + 31u) / 32u;
}

@compute @workgroup_size(256)
fn packed_codes(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let block = wg.x + wg.y * pp.groups_x;
    let total = pp.tiles * pp.groups_per_tile;
    let g0 = block * GROUPS_PER_BLOCK + lid * PER_INVOCATION;
    var codes: array<u32, 4>;
    var words: array<u32, 4>;
    var mine = 0u;
    for (var i = 0u; i < PER_INVOCATION; i += 1u) {
        codes[i] = 0u;
        words[i] = 0u;
        if (g0 + i < total) {
            codes[i] = group_codes(g0 + i);
            words[i] = group_words(codes[i]);
        }
        mine += words[i];
    }
    // Inclusive prefix sums of the invocations' words (Hillis–Steele).
    scan[lid] = mine;
    for (var off = 1u; off < 256u; off *= 2u) {
        workgroupBarrier();
        var v = scan[lid];
        if (lid >= off) {
            v += scan[lid - off];
        }
        workgroupBarrier();
        scan[lid] = v;
    }
    workgroupBarrier();
    var at = scan[lid] - mine;
    for (var i = 0u; i < PER_INVOCATION; i += 1u) {
        if (g0 + i < total) {
            local_out[2u * (g0 + i)] = at;
            local_out[2u * (g0 + i) + 1u] = codes[i];
        }
        at += words[i];
    }
    if (lid == 255u) {
        block_words[block] = scan[255];
    }
}

@compute @workgroup_size(256)
fn packed_write(@builtin(global_invocation_id) gid: vec3<u32>) {
    let g = gid.x + gid.y * pp.groups_x * 256u;
    if (g >= pp.tiles * pp.groups_per_tile) {
        return;
    }
    let codes = local_in[2u * g + 1u];
    var at = block_base[g / GROUPS_PER_BLOCK] + local_in[2u * g];
    packed_out[2u * g] = at;
    packed_out[2u * g + 1u] = codes;
    let t = g / pp.groups_per_tile;
    let k0 = (g % pp.groups_per_tile) * 8u;
    let per_word = 32u / pp.bits;
    // Bits gathered and not yet written, and how many.
    var acc = 0u;
    var n = 0u;
    for (var i = 0u; i < 8u; i += 1u) {
        let w = packed_width((codes >> (4u * i)) & 15u, pp.bits);
        if (w == 0u) {
            continue;
        }
        let base = t * pp.tile_words + (k0 + i) * 8u;
        for (var p = 0u; p < 256u / pp.bits; p += 1u) {
            let v = sample_at(raw[base + p / per_word], p, pp.bits);
            acc |= v << n;
            if (n + w >= 32u) {
                packed_out[at] = acc;
                at += 1u;
                // The bits of v that did not fit (none when it started a word).
                acc = select(v >> (32u - n), 0u, n == 0u);
                n = n + w - 32u;
            } else {
                n += w;
            }
        }
    }
    if (n > 0u) {
        packed_out[at] = acc;
    }
}

@compute @workgroup_size(256)
fn packed(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = gid.x + gid.y * pp.groups_x * 256u;
    let n = select(pp.det_len, pp.n_list, pp.n_list > 0u);
    if (id >= pp.tiles * n) {
        return;
    }
    let t = pp.first_tile + id / n;
    var k = id % n;
    if (pp.n_list > 0u) {
        k = list[k];
    }
    // Tile `first_tile` lands on tile `out_tile`: a product's scratch holds only the tiles
    // a read asks for, from word 0.
    let out = (pp.out_tile + id / n) * pp.tile_words + k * 8u;
    let s = packed_sector(t, k, pp.groups_per_tile, pp.bits);
    if (s.width == 0u || pixel_cleared(k)) {
        for (var j = 0u; j < 8u; j += 1u) {
            scratch[out + j] = 0u;
        }
        return;
    }
    var r = bit_reader(s.word, s.bit);
    for (var j = 0u; j < 8u; j += 1u) {
        scratch[out + j] = read_raw_word(&r, s.width, pp.bits);
    }
}

// A prepared payload's block placed in a compressed resident's segment (decision 0055): its
// index lies at tiles `first_tile` to `first_tile + tiles` of the segment's index, its data
// `rebase` words further on than the block's own index said (wrapping arithmetic).
@compute @workgroup_size(256)
fn packed_rebase(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = gid.x + gid.y * pp.groups_x * 256u;
    if (id >= pp.tiles * pp.groups_per_tile) {
        return;
    }
    let g = pp.first_tile * pp.groups_per_tile + id;
    packed_out[2u * g] += pp.rebase;
}

// The samples of `tiles` tiles of a packed segment that equal the saturation sentinel of
// `bits`-bit samples (all bits set) set to 0 in place, as the decode masks them (C-BAD).
// Only a sector at the full width (code 15) can hold one; its width code stays, so the
// sector decodes to the same samples with those zeroed. One invocation a group: a group's
// words are its own (its data padded to a whole word).
@compute @workgroup_size(256)
fn packed_zero_sentinels(@builtin(global_invocation_id) gid: vec3<u32>) {
    let g = gid.x + gid.y * pp.groups_x * 256u;
    if (g >= pp.tiles * pp.groups_per_tile) {
        return;
    }
    let start = packed_out[2u * g];
    let codes = packed_out[2u * g + 1u];
    let w = pp.bits;
    let ones = select((1u << w) - 1u, 0xffffffffu, w == 32u);
    let per_sector = 256u / w;
    for (var i = 0u; i < 8u; i += 1u) {
        if (((codes >> (4u * i)) & 15u) != 15u) {
            continue;
        }
        let first = packed_widths_before(codes, i, w) * per_sector;
        for (var p = 0u; p < per_sector; p += 1u) {
            let bit = first + p * w;
            let at = start + bit / 32u;
            let s = bit % 32u;
            let spills = s + w > 32u;
            let lo = packed_out[at];
            var v = lo >> s;
            if (spills) {
                v |= packed_out[at + 1u] << (32u - s);
            }
            if ((v & ones) != ones) {
                continue;
            }
            packed_out[at] = lo & ~(ones << s);
            if (spills) {
                packed_out[at + 1u] &= ~(ones >> (32u - s));
            }
        }
    }
}
