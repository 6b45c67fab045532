// stem4d:after com_moments.wgsl packed_read.wgsl
// The fused CoM moments over a compressed resident (decision 0025's layout), decoded where
// they are read: the same workgroups, bands, slots and reductions as `com_moments` and
// `com_moments_wide`, but each invocation reads its positions of a pixel's sector from the
// packed bits (its `hold` consecutive samples, from bit `hold · sub · width` of the sector)
// instead of a word of the raw resident, so the unpacked acquisition is never written
// (decision 0031). The u32 lanes' bands are the raw kernel's: a decoded sample is the
// stored one.

// The segment's packed buffer: its index, then its data.
@group(0) @binding(4) var<storage, read> packed_in: array<u32>;
// One bit per detector pixel: found bad after the upload, read as 0.
@group(0) @binding(5) var<storage, read> zeroed: array<u32>;

// The invocation's positions of pixel `k` of its tile, as `unpack` gives them from the raw
// resident: four samples (two for 32-bit ones), 0 where the pixel was found bad.
fn packed_samples(w: Work, k: u32) -> vec4<u32> {
    let bits = params.bits;
    let cleared = ((zeroed[k / 32u] >> (k % 32u)) & 1u) != 0u;
    let s = packed_sector(w.tile, k, params.packed_groups, bits);
    if (s.width == 0u || cleared) {
        return vec4<u32>(0u);
    }
    // Past the samples of the invocations before this one.
    var r = bit_reader(s.word, s.bit + w.sub * w.hold * s.width);
    let a = read_bits(&r, s.width);
    let b = read_bits(&r, s.width);
    if (w.hold == 2u) {
        return vec4<u32>(a, b, 0u, 0u);
    }
    let c = read_bits(&r, s.width);
    return vec4<u32>(a, b, c, read_bits(&r, s.width));
}

@compute @workgroup_size(256)
fn com_moments_packed(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let flat = wg.x + wg.y * params.groups_x;
    if (past_end(flat)) {
        return;
    }
    let w = work_of(flat, lid);
    let cols = params.det_cols;
    var t = vec4<u32>(0u);
    var mr = vec4<u32>(0u);
    var mc = vec4<u32>(0u);
    for (var j = w.slot; j < cols; j += w.slots) {
        var i = w.i0;
        while (i < w.i1) {
            // Over rows [i, stop): S = Σ v and Q = Σ of S before each row, so that
            // Σ row · v = (stop − 1) · S − Q (as `com_moments`).
            let stop = min(w.i1, i + params.flush);
            var s = vec4<u32>(0u);
            var q = vec4<u32>(0u);
            var k = i * cols + j;
            for (; i < stop; i += 1u) {
                q += s;
                s += packed_samples(w, k);
                k += cols;
            }
            t += s;
            mr += (stop - 1u) * s - q;
            mc += j * s;
        }
    }
    let zero = vec4<u32>(0u);
    finish(Wide4(t, zero), Wide4(mr, zero), Wide4(mc, zero), lid, w);
}

// The same moments with 64-bit sums per sample (as `com_moments_wide`).
@compute @workgroup_size(256)
fn com_moments_packed_wide(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let flat = wg.x + wg.y * params.groups_x;
    if (past_end(flat)) {
        return;
    }
    let w = work_of(flat, lid);
    let cols = params.det_cols;
    let zero = Wide4(vec4<u32>(0u), vec4<u32>(0u));
    var t = zero;
    var mr = zero;
    var mc = zero;
    for (var j = w.slot; j < cols; j += w.slots) {
        for (var i = w.i0; i < w.i1; i += 1u) {
            let v = packed_samples(w, i * cols + j);
            t = add_lanes(t, v);
            mr = add_scaled(mr, v, i);
            mc = add_scaled(mc, v, j);
        }
    }
    finish(t, mr, mc, lid, w);
}
