// The masked sum without workgroup memory, for adapters with subgroups (natively: wgpu keeps
// the feature off on the web): the engine appends this entry point to `masked_sum.wgsl`
// (its parameters, bindings and helpers). The loop is the same; the slots' lanes meet through subgroupAdd
// instead of workgroup memory, which on the H200 cost the kernel a third of its time, and
// each subgroup adds its part of the tile's positions into the output (one lane per
// position). A subgroup's sum of a position is at most the part's pixels times the largest
// sample, which the host keeps below 2^32. 8- and 16-bit samples only.

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
    let base = pt.tile * (params.tile_words / 4u) + lid % 2u;
    var a = vec4<u32>(0u);
    var b = vec4<u32>(0u);
    var c = vec4<u32>(0u);
    var d = vec4<u32>(0u);
    var i = pt.i0 + lid / 2u;
    let n = pt.i1;
    if (bits == 16u) {
        let lo = vec4<u32>(0xffffu);
        let sh = vec4<u32>(16u);
        // Four loads in flight.
        for (; i + 3u * SLOTS < n; i += 4u * SLOTS) {
            let v0 = resident[base + 2u * pixels[i]];
            let v1 = resident[base + 2u * pixels[i + SLOTS]];
            let v2 = resident[base + 2u * pixels[i + 2u * SLOTS]];
            let v3 = resident[base + 2u * pixels[i + 3u * SLOTS]];
            a += (v0 & lo) + (v1 & lo) + (v2 & lo) + (v3 & lo);
            b += (v0 >> sh) + (v1 >> sh) + (v2 >> sh) + (v3 >> sh);
        }
        for (; i < n; i += SLOTS) {
            let v = resident[base + 2u * pixels[i]];
            a += v & lo;
            b += v >> sh;
        }
    } else {
        let m = vec4<u32>(0xffu);
        for (; i + SLOTS < n; i += 2u * SLOTS) {
            let v0 = resident[base + 2u * pixels[i]];
            let v1 = resident[base + 2u * pixels[i + SLOTS]];
            a += (v0 & m) + (v1 & m);
            b += ((v0 >> vec4<u32>(8u)) & m) + ((v1 >> vec4<u32>(8u)) & m);
            c += ((v0 >> vec4<u32>(16u)) & m) + ((v1 >> vec4<u32>(16u)) & m);
            d += (v0 >> vec4<u32>(24u)) + (v1 >> vec4<u32>(24u));
        }
        for (; i < n; i += SLOTS) {
            let v = resident[base + 2u * pixels[i]];
            a += v & m;
            b += (v >> vec4<u32>(8u)) & m;
            c += (v >> vec4<u32>(16u)) & m;
            d += v >> vec4<u32>(24u);
        }
    }
    // The two halves of a sector hold different positions: each is summed on its own.
    let z = vec4<u32>(0u);
    let first = lid % 2u == 0u;
    let a0 = subgroupAdd(select(z, a, first));
    let a1 = subgroupAdd(select(a, z, first));
    let b0 = subgroupAdd(select(z, b, first));
    let b1 = subgroupAdd(select(b, z, first));
    var c0 = z;
    var c1 = z;
    var d0 = z;
    var d1 = z;
    if (bits == 8u) {
        c0 = subgroupAdd(select(z, c, first));
        c1 = subgroupAdd(select(c, z, first));
        d0 = subgroupAdd(select(z, d, first));
        d1 = subgroupAdd(select(d, z, first));
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
