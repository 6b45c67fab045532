// stem4d:after com_moments.wgsl packed_read.wgsl packed_moments.wgsl
// The CoM moments' loop over a compressed resident where invocations walk detector columns
// (as `com_moments` does): taken by `com_moments_packed` and `com_moments_packed_quad`,
// which differ only in how the invocations of a sector find it (`four_words`).

// Pixels k, k + cols, k + 2 · cols and k + 3 · cols, each found by this invocation.
fn four_found(w: Work, k: u32, cols: u32) -> Four {
    return Four(
        load_words(w, k),
        load_words(w, k + cols),
        load_words(w, k + 2u * cols),
        load_words(w, k + 3u * cols),
    );
}

// The invocation's u32-lane moments over its columns and band, added into the output as
// `com_moments` adds them. `lane` is the invocation's place in its quad where the quad
// shares the sectors' index (`com_moments_packed_quad`), else 4.
fn packed_moments(w: Work, lid: u32, lane: u32) {
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
            // Four pixels' loads in flight.
            for (; i + 3u < stop; i += 4u) {
                let f = four_words(w, k, cols, lane);
                k += 4u * cols;
                q += s;
                s += samples_of(w, f.a);
                q += s;
                s += samples_of(w, f.b);
                q += s;
                s += samples_of(w, f.c);
                q += s;
                s += samples_of(w, f.d);
            }
            for (; i < stop; i += 1u) {
                q += s;
                s += samples_of(w, load_words(w, k));
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
