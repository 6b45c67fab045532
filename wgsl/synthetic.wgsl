// The synthetic acquisition of `src/formats/synthetic.rs`, generated straight into a resident
// buffer (u16 samples, position tiles of 16: a word holds one pixel at two neighbouring
// positions): the same integers as the CPU, in milliseconds (C-SYNTH).

struct SynthParams {
    frames: u32,
    first_frame: u32,
    tile_words: u32,
    det_rows: u32,
    det_cols: u32,
    scan_cols: u32,
    groups_x: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> sp: SynthParams;
@group(0) @binding(1) var<storage, read_write> resident: array<u32>;

fn triangle(x: u32, period: u32) -> i32 {
    let half = period / 2u;
    let p = x % period;
    let up = select(period - p, p, p < half);
    return i32(up * 48u / half) - 24;
}

fn mix32(x: u32) -> u32 {
    var h = x;
    h ^= h >> 16u;
    h *= 0x85ebca6bu;
    h ^= h >> 13u;
    h *= 0xc2b2ae35u;
    return h ^ (h >> 16u);
}

fn synth_sample(frame: u32, k: u32) -> u32 {
    let r = frame / sp.scan_cols;
    let c = frame % sp.scan_cols;
    let i = i32(k / sp.det_cols);
    let j = i32(k % sp.det_cols);
    let cr = 8 * i32(sp.det_rows) + triangle(r, 126u);
    let cc = 8 * i32(sp.det_cols) + triangle(c, 90u);
    let di = 16 * i - cr;
    let dj = 16 * j - cc;
    let d2 = di * di + dj * dj;
    let rad = i32(min(sp.det_rows, sp.det_cols)) * 256 / 100;
    let ring = 22 * rad / 10;
    var base = 3;
    var amp = 2;
    if (d2 <= rad * rad) {
        base = 900;
        amp = 30;
    } else if (d2 > (ring - 32) * (ring - 32) && d2 < (ring + 32) * (ring + 32)) {
        base = 40;
        amp = 6;
    }
    let noise = i32(mix32((frame * 0x9e3779b1u) ^ (k * 0x85ebca77u)) % 61u) - 30;
    return u32(max(base + noise * amp / 17, 0));
}

@compute @workgroup_size(256)
fn synthetic(@builtin(global_invocation_id) gid: vec3<u32>) {
    let w = gid.x + gid.y * sp.groups_x * 256u;
    let tiles = (sp.frames + 15u) / 16u;
    if (w >= tiles * sp.tile_words) {
        return;
    }
    let within = w % sp.tile_words;
    let k = within / 8u;
    if (k >= sp.det_rows * sp.det_cols) {
        return;
    }
    let f = (w / sp.tile_words) * 16u + (within % 8u) * 2u;
    // Positions past the segment pad its last tile: zero.
    var word = 0u;
    if (f < sp.frames) {
        word = synth_sample(sp.first_frame + f, k);
    }
    if (f + 1u < sp.frames) {
        word |= synth_sample(sp.first_frame + f + 1u, k) << 16u;
    }
    resident[w] = word;
}
