// stem4d:subgroups masked_sum.wgsl
// The masked sum without workgroup memory, for adapters with subgroups (in the browser
// asked for apart from wgpu, which has no name for them there, and built after an `enable
// subgroups;` directive naga does not parse: `src/gpu/web_subgroups.rs`): the engine appends
// this entry point to `masked_sum.wgsl` (its parameters, bindings and helpers). The loop is
// the same (`sum_lanes`); the slots' lanes meet through subgroupAdd (`meet_subgroup`, which
// the compressed resident's kernel shares: `masked_sum_packed_subgroup.wgsl`) instead of
// workgroup memory, and each subgroup adds its part of the tile's positions into the
// output (one lane per position; on a subgroup smaller than the workgroup, each adds its
// own sums). A subgroup's sum of a position is at most the part's pixels times the largest
// sample, which the host keeps below 2^32. 8- and 16-bit samples only.

// Component `w` of lane `k` (see `Lanes`).
fn lane(l: Lanes, k: u32, w: u32) -> u32 {
    switch k {
        case 0u: {
            return l.a[w];
        }
        case 1u: {
            return l.b[w];
        }
        case 2u: {
            return l.c[w];
        }
        case 3u: {
            return l.d[w];
        }
        case 4u: {
            return l.e[w];
        }
        case 5u: {
            return l.f[w];
        }
        case 6u: {
            return l.g[w];
        }
        default: {
            return l.h[w];
        }
    }
}

// Position p's lane index and word: half p / held, then word and sample within it.
fn lane_at(p: u32, bits: u32) -> vec2<u32> {
    let per_word = 32u / bits;
    let held = 128u / bits;
    let q = p % held;
    return vec2<u32>((p / held) * per_word + q % per_word, q / per_word);
}

@compute @workgroup_size(32)
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
    meet_subgroup(pt, sid, sn, bits, sum_lanes(pt, lid, bits));
}

// The slots' lanes meet through subgroupAdd, and each subgroup adds its sum of each
// position into the output, one invocation a position.
fn meet_subgroup(pt: Part, sid: u32, sn: u32, bits: u32, lanes: Lanes) {
    let tile_len = 256u / bits;
    var l = lanes;
    l.a = subgroupAdd(l.a);
    l.b = subgroupAdd(l.b);
    l.c = subgroupAdd(l.c);
    l.d = subgroupAdd(l.d);
    if (bits == 8u) {
        l.e = subgroupAdd(l.e);
        l.f = subgroupAdd(l.f);
        l.g = subgroupAdd(l.g);
        l.h = subgroupAdd(l.h);
    }
    for (var p = sid; p < tile_len; p += sn) {
        let at = lane_at(p, bits);
        add_at(pt, tile_len, p, vec2<u32>(lane(l, at.x, at.y), 0u));
    }
}
