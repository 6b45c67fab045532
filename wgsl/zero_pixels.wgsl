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
