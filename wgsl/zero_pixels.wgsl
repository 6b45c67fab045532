// Bad-pixel masking of pixels found after the upload (hot and dead pixels of the mean
// pattern, `src/pattern/`): the listed detector pixels' samples at every scan position of a
// resident segment become 0, as if the decode had zeroed them. In the position-tiled
// resident (`src/upload/plan.rs`) a pixel's samples at a tile's positions are one 32-byte
// sector, so each invocation clears one word of one listed pixel's sector in one tile.
// C-BAD, C-BAD-FOUND: the found pixels are left out of every product, as on the CPU.

struct ZeroParams {
    tiles: u32,
    tile_words: u32,
    pixels: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<uniform> zp: ZeroParams;
@group(0) @binding(1) var<storage, read> pixels: array<u32>;
@group(0) @binding(2) var<storage, read_write> resident: array<u32>;

@compute @workgroup_size(256)
fn zero_pixels(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = gid.x + gid.y * zp.groups_x * 256u;
    let per_tile = zp.pixels * 8u;
    if (id >= zp.tiles * per_tile) {
        return;
    }
    let tile = id / per_tile;
    let within = id % per_tile;
    let k = pixels[within / 8u];
    resident[tile * zp.tile_words + k * 8u + within % 8u] = 0u;
}

// Bad-pixel masking of a prepared acquisition copied in as it is stored (decision 0037): the
// samples equal to the saturation sentinel (the largest value of `bits` bits) become 0, as the
// decode zeroes them with masking on (C-BAD). One invocation a word of the segment.
struct SentinelParams {
    words: u32,
    bits: u32,
    groups_x: u32,
    _pad: u32,
}

@group(0) @binding(3) var<uniform> sp: SentinelParams;

@compute @workgroup_size(256)
fn zero_sentinels(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = gid.x + gid.y * sp.groups_x * 256u;
    if (id >= sp.words) {
        return;
    }
    let w = resident[id];
    if (sp.bits == 32u) {
        resident[id] = select(w, 0u, w == 0xffffffffu);
        return;
    }
    let mask = (1u << sp.bits) - 1u;
    var out = 0u;
    for (var s = 0u; s < 32u; s += sp.bits) {
        let v = (w >> s) & mask;
        out |= select(v, 0u, v == mask) << s;
    }
    resident[id] = out;
}
