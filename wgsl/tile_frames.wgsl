// The CPU upload path's last step: a window of frames packed frame after frame (each
// `frame_words` words, as the host decoded and corrected them) rearranged into the
// position-tiled resident (`src/upload/plan.rs`) on the GPU, one resident word per invocation.
// Windows start on a tile and hold whole tiles but at a segment's end, whose padding
// positions are zero.

struct TileParams {
    frames: u32,
    first_tile: u32,
    frame_words: u32,
    tile_words: u32,
    bits: u32,
    groups_x: u32,
    det_len: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> tp: TileParams;
@group(0) @binding(1) var<storage, read> staged: array<u32>;
@group(0) @binding(2) var<storage, read_write> resident: array<u32>;

@compute @workgroup_size(256)
fn tile_frames(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = gid.x + gid.y * tp.groups_x * 256u;
    let tile_len = 256u / tp.bits;
    let per_word = 32u / tp.bits;
    let tiles = (tp.frames + tile_len - 1u) / tile_len;
    if (id >= tiles * tp.tile_words) {
        return;
    }
    let within = id % tp.tile_words;
    let k = within / 8u;
    if (k >= tp.det_len) {
        return;
    }
    let p0 = (id / tp.tile_words) * tile_len + (within % 8u) * per_word;
    var word = 0u;
    for (var s = 0u; s < per_word; s += 1u) {
        let f = p0 + s;
        if (f < tp.frames) {
            word |= sample_at(staged[f * tp.frame_words + k / per_word], k, tp.bits) << (s * tp.bits);
        }
    }
    resident[tp.first_tile * tp.tile_words + id] = word;
}
