// Virtual image from cached ring sums (`src/kernels/ring_sum.rs`): per scan position, the exact
// 64-bit sum of the listed detector rings' sums, each a masked sum made once per resident.
// A disk or annulus about the rings' centre is then a few ring sums per position (BF r=30:
// 30 of them, 240 bytes) plus the masked sum of the pixels of its partial rings, added in
// by the masked-sum kernel afterwards: a regrouping of the same exact integer sum (C-RING).

struct RingSumParams {
    // Scan positions: also each ring's length in `ring_sums`.
    frames: u32,
    // Rings listed in `picked`.
    rings: u32,
    groups_x: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> params: RingSumParams;
// Ring after ring, per position the ring's exact (lo, hi) sum (`frames` pairs a ring).
@group(0) @binding(1) var<storage, read> ring_sums: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> picked: array<u32>;
// Per position (lo, hi), written.
@group(0) @binding(3) var<storage, read_write> sums: array<vec2<u32>>;

@compute @workgroup_size(64)
fn ring_sum(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = gid.x + gid.y * params.groups_x * 64u;
    if (p >= params.frames) {
        return;
    }
    let n = params.rings;
    let st = params.frames;
    var s = vec2<u32>(0u, 0u);
    var k = 0u;
    // Four loads in flight: neighbouring positions read neighbouring words of each ring.
    for (; k + 3u < n; k += 4u) {
        let a = ring_sums[picked[k] * st + p];
        let b = ring_sums[picked[k + 1u] * st + p];
        let c = ring_sums[picked[k + 2u] * st + p];
        let d = ring_sums[picked[k + 3u] * st + p];
        s = add64(add64(s, a), add64(add64(b, c), d));
    }
    for (; k < n; k += 1u) {
        s = add64(s, ring_sums[picked[k] * st + p]);
    }
    sums[p] = s;
}
