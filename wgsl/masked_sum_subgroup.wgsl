// The masked sum without workgroup memory, for adapters with subgroups (natively: wgpu keeps
// the feature off on the web): the engine appends this entry point to `masked_sum.wgsl`
// (its parameters, bindings and helpers). The loop is the same (`sum_lanes`); the slots'
// lanes meet through subgroupAdd instead of workgroup memory (ADF 2.75 → 2.46 ms on the
// H200), and each subgroup adds its part of the tile's positions into the output (one lane
// per position). A subgroup's sum of a position is at most the part's pixels times the
// largest sample, which the host keeps below 2^32. 8- and 16-bit samples only.

// Lane `l` (0..3) of the four per-position vectors at word `w`.
fn lane_of(a: vec4<u32>, b: vec4<u32>, c: vec4<u32>, d: vec4<u32>, l: u32, w: u32) -> u32 {
    switch l {
        case 0u: {
            return a[w];
        }
        case 1u: {
            return b[w];
        }
        case 2u: {
            return c[w];
        }
        default: {
            return d[w];
        }
    }
}

@compute @workgroup_size(64)
fn masked_sum_subgroup(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) sid: u32,
    @builtin(subgroup_size) sn: u32,
) {
    let bits = params.bits;
    let tile_len = 256u / bits;
    let pt = part_of(wg);
    if (pt.tile * tile_len >= params.frames) {
        return;
    }
    let l = sum_lanes(pt, lid, bits);
    // The two halves of a sector hold different positions: each is summed on its own.
    let z = vec4<u32>(0u);
    let first = lid % 2u == 0u;
    let a0 = subgroupAdd(select(z, l.a, first));
    let a1 = subgroupAdd(select(l.a, z, first));
    let b0 = subgroupAdd(select(z, l.b, first));
    let b1 = subgroupAdd(select(l.b, z, first));
    var c0 = z;
    var c1 = z;
    var d0 = z;
    var d1 = z;
    if (bits == 8u) {
        c0 = subgroupAdd(select(z, l.c, first));
        c1 = subgroupAdd(select(l.c, z, first));
        d0 = subgroupAdd(select(z, l.d, first));
        d1 = subgroupAdd(select(l.d, z, first));
    }
    // Position p of the tile: half p / held, then word and lane within it.
    let per_word = 32u / bits;
    let held = tile_len / 2u;
    for (var p = sid; p < tile_len; p += sn) {
        let q = p % held;
        var v = 0u;
        if (p < held) {
            v = lane_of(a0, b0, c0, d0, q % per_word, q / per_word);
        } else {
            v = lane_of(a1, b1, c1, d1, q % per_word, q / per_word);
        }
        let f = pt.tile * tile_len + p;
        if (f < params.frames) {
            add_sum(params.first_frame + f, vec2<u32>(v, 0u));
        }
    }
}
