// stem4d:after com_moments.wgsl packed_read.wgsl packed_moments.wgsl
// The CoM moments over a compressed resident for detectors whose rows are whole groups of
// 8 pixels (columns a multiple of 8): an invocation walks groups along detector rows, so
// that one load of a group's two index words finds all eight sectors, each past the one
// before it (a running sum of widths), where walking down a column finds every sector from
// its group's index (`packed_moments`, decision 0061). The workgroups, bands, positions and
// reductions are `com_moments`'; a band's (row, group) items are dealt to the slots in turn.

// A group's index as loaded: its first word, its width codes, and the word of `zeroed`
// holding its pixels' bits. Loaded an item ahead; nothing is taken from it until then.
fn group_raw(w: Work, g: u32) -> vec3<u32> {
    let at = 2u * (w.tile * params.packed_groups + g);
    return vec3<u32>(packed_in[at], packed_in[at + 1u], zeroed[g / 4u]);
}

// The bit, from a group's first data word, of the invocation's first sample in a sector of
// width `width` that starts `*off` bits in; `*off` moves past the sector.
fn invocation_bit(w: Work, width: u32, off: ptr<function, u32>) -> u32 {
    let bit = *off + w.sub * w.hold * width;
    *off += width * (256u / params.bits);
    return bit;
}

// The invocation's words of pixel `n` (0–7) of a group whose sectors start at word
// `start`, its sector `*off` bits past that word; `*off` moves past the sector. Bit n of
// `bad` marks the pixel found bad: read as a sector of zeros, still stored at its width.
fn group_words(w: Work, start: u32, codes: u32, bad: u32, n: u32, off: ptr<function, u32>) -> Words3 {
    let width = packed_width((codes >> (4u * n)) & 15u, params.bits);
    let bit = invocation_bit(w, width, off);
    let at = start + bit / 32u;
    let read = select(width, 0u, ((bad >> n) & 1u) != 0u);
    return Words3(packed_in[at], packed_in[at + 1u], packed_in[at + 2u], bit % 32u, read);
}

// Pixels n0 to n0 + 3 of a group, as `group_words` gives them.
fn group_four(w: Work, start: u32, codes: u32, bad: u32, n0: u32, off: ptr<function, u32>) -> Four {
    let a = group_words(w, start, codes, bad, n0, off);
    let b = group_words(w, start, codes, bad, n0 + 1u, off);
    let c = group_words(w, start, codes, bad, n0 + 2u, off);
    let d = group_words(w, start, codes, bad, n0 + 3u, off);
    return Four(a, b, c, d);
}

// The samples a, b, x, d of pixels n0 to n0 + 3 of a group added into S = Σ v and
// C = Σ n · v.
fn add_samples(a: vec4<u32>, b: vec4<u32>, x: vec4<u32>, d: vec4<u32>, n0: u32, s: ptr<function, vec4<u32>>, c: ptr<function, vec4<u32>>) {
    let all = a + b + x + d;
    *s += all;
    *c += n0 * all + b + 2u * x + 3u * d;
}

// Pixels n0 to n0 + 3 of a group, as `group_four` gives them, added as `add_samples`.
fn add_four(w: Work, f: Four, n0: u32, s: ptr<function, vec4<u32>>, c: ptr<function, vec4<u32>>) {
    add_samples(samples_of(w, f.a), samples_of(w, f.b), samples_of(w, f.c), samples_of(w, f.d), n0, s, c);
}

// Whether every width code of a group is at most 8 (the codes are the widths): the
// invocation's four samples of each sector then lie within 32 bits, in two words.
fn narrow_group(codes: u32) -> bool {
    let high = codes & 0x88888888u;
    let low_set = (codes & 0x77777777u) + 0x77777777u;
    return (high & low_set) == 0u;
}

// An invocation's words of a sector at most 8 bits wide: the two packed words from the one
// holding its first sample, that sample's bit in the first, and the width.
struct Words2 {
    x: u32,
    y: u32,
    sh: u32,
    w: u32,
}

// The invocation's two words of pixel `n` of a narrow group (`narrow_group`) whose sectors
// start at word `start`, its sector `*off` bits past that word (moved past it).
fn narrow_words(w: Work, start: u32, codes: u32, n: u32, off: ptr<function, u32>) -> Words2 {
    let width = (codes >> (4u * n)) & 15u;
    let bit = invocation_bit(w, width, off);
    let at = start + bit / 32u;
    return Words2(packed_in[at], packed_in[at + 1u], bit % 32u, width);
}

// The four samples of `narrow_words`' words: one field of at most 32 bits.
fn narrow_samples(v: Words2) -> vec4<u32> {
    let x = funnel_bits(v.x, v.y, v.sh, 0xffffffffu);
    let m = (1u << v.w) - 1u;
    return vec4<u32>(x & m, (x >> v.w) & m, (x >> (2u * v.w)) & m, (x >> (3u * v.w)) & m);
}

// A narrow group with no pixel found bad added into S and C: two loads a sector, one
// field cut into four samples (decision 0062).
fn add_narrow(w: Work, start: u32, codes: u32, s: ptr<function, vec4<u32>>, c: ptr<function, vec4<u32>>) {
    var off = 0u;
    let v0 = narrow_words(w, start, codes, 0u, &off);
    let v1 = narrow_words(w, start, codes, 1u, &off);
    let v2 = narrow_words(w, start, codes, 2u, &off);
    let v3 = narrow_words(w, start, codes, 3u, &off);
    let v4 = narrow_words(w, start, codes, 4u, &off);
    let v5 = narrow_words(w, start, codes, 5u, &off);
    let v6 = narrow_words(w, start, codes, 6u, &off);
    let v7 = narrow_words(w, start, codes, 7u, &off);
    add_samples(narrow_samples(v0), narrow_samples(v1), narrow_samples(v2), narrow_samples(v3), 0u, s, c);
    add_samples(narrow_samples(v4), narrow_samples(v5), narrow_samples(v6), narrow_samples(v7), 4u, s, c);
}

// The invocation's u32-lane moments over its items, added into the output as `com_moments`
// adds them. An item is 8 pixels of a row: S = Σ v, C = Σ n · v over its pixels n, so that
// Σ col · v = 8 · group · S + C. Every lane's sum stays below 2^32 where
// `com_parts_rows` allows the band.
fn packed_moments_rows(w: Work, lid: u32) {
    let gpr = params.det_cols / 8u;
    let items = (w.i1 - w.i0) * gpr;
    let step_rows = w.slots / gpr;
    let step_groups = w.slots % gpr;
    var t = vec4<u32>(0u);
    var mr = vec4<u32>(0u);
    var mc = vec4<u32>(0u);
    var n = w.slot;
    var row = w.i0 + n / gpr;
    var gr = n % gpr;
    var next = group_raw(w, select(0u, row * gpr + gr, n < items));
    while (n < items) {
        let g = row * gpr + gr;
        let cur = next;
        let i = row;
        let j0 = 8u * gr;
        n += w.slots;
        gr += step_groups;
        let wrap = gr >= gpr;
        gr = select(gr, gr - gpr, wrap);
        row += step_rows + select(0u, 1u, wrap);
        next = group_raw(w, select(0u, row * gpr + gr, n < items));
        let bad = cur.z >> (8u * (g % 4u));
        var s = vec4<u32>(0u);
        var c = vec4<u32>(0u);
        if ((bad & 0xffu) == 0u && narrow_group(cur.y)) {
            add_narrow(w, cur.x, cur.y, &s, &c);
        } else {
            var off = 0u;
            let lo = group_four(w, cur.x, cur.y, bad, 0u, &off);
            let hi = group_four(w, cur.x, cur.y, bad, 4u, &off);
            add_four(w, lo, 0u, &s, &c);
            add_four(w, hi, 4u, &s, &c);
        }
        t += s;
        mr += i * s;
        mc += j0 * s + c;
    }
    let zero = vec4<u32>(0u);
    finish(Wide4(t, zero), Wide4(mr, zero), Wide4(mc, zero), lid, w);
}

@compute @workgroup_size(256)
fn com_moments_packed_rows(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let flat = wg.x + wg.y * params.groups_x;
    if (past_end(flat)) {
        return;
    }
    packed_moments_rows(work_of(flat, lid), lid);
}
