// stem4d:after masked_sum.wgsl packed_read.wgsl
// The masked sum over a compressed resident (decision 0025; the layout is `packed.wgsl`'s),
// decoded where it is read: the same workgroups, parts and slots as `masked_sum`, but each
// invocation reads its pixels' width codes from the segment's index (`packed_sector`) and
// their sectors' packed bits, and rebuilds each sector's eight raw words in registers
// before adding them into the same lanes. Nothing is unpacked into memory, so a mask reads
// only its own pixels' packed bits and the index words of their groups (decision 0028).
// The lanes' limits are the raw kernel's: a decoded sample is the stored one.

// The segment's packed buffer: its index, then its data.
@group(0) @binding(6) var<storage, read> packed_in: array<u32>;
// One bit per detector pixel: found bad after the upload, read as 0.
@group(0) @binding(7) var<storage, read> zeroed: array<u32>;

// Word `j` (0–7) of a sector of width `w` (1–`bits`) whose samples start at bit `first`
// of the data from word `start` on, as the raw resident holds it.
fn packed_word(start: u32, first: u32, w: u32, j: u32, bits: u32) -> u32 {
    let per_word = 32u / bits;
    var word = 0u;
    for (var s = 0u; s < per_word; s += 1u) {
        let bit = first + (j * per_word + s) * w;
        let i = start + bit / 32u;
        let sh = bit % 32u;
        var hi = 0u;
        if (sh + w > 32u) {
            hi = packed_in[i + 1u];
        }
        word |= packed_bits(packed_in[i], hi, sh, w) << (s * bits);
    }
    return word;
}

// Add a sector's eight raw words (`lo`: words 0–3, `hi`: 4–7) into the lanes (`Lanes`).
fn add_sector(l: ptr<function, Lanes>, lo: vec4<u32>, hi: vec4<u32>, bits: u32) {
    if (bits == 16u) {
        let m = vec4<u32>(0xffffu);
        let sh = vec4<u32>(16u);
        (*l).a += lo & m;
        (*l).b += lo >> sh;
        (*l).c += hi & m;
        (*l).d += hi >> sh;
    } else if (bits == 8u) {
        let m = vec4<u32>(0xffu);
        (*l).a += lo & m;
        (*l).b += (lo >> vec4<u32>(8u)) & m;
        (*l).c += (lo >> vec4<u32>(16u)) & m;
        (*l).d += lo >> vec4<u32>(24u);
        (*l).e += hi & m;
        (*l).f += (hi >> vec4<u32>(8u)) & m;
        (*l).g += (hi >> vec4<u32>(16u)) & m;
        (*l).h += hi >> vec4<u32>(24u);
    } else {
        let s = (*l).a + lo;
        let t = (*l).b + hi;
        (*l).c += select(vec4<u32>(0u), vec4<u32>(1u), s < lo);
        (*l).d += select(vec4<u32>(0u), vec4<u32>(1u), t < hi);
        (*l).a = s;
        (*l).b = t;
    }
}

@compute @workgroup_size(32)
fn masked_sum_packed(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let bits = params.bits;
    let tile_len = 256u / bits;
    let pt = part_of(wg);
    // The whole workgroup shares the tile: a uniform exit.
    if (pt.tile * tile_len >= params.frames) {
        return;
    }
    let z = vec4<u32>(0u);
    var l = Lanes(z, z, z, z, z, z, z, z);
    for (var i = pt.i0 + lid; i < pt.i1; i += SLOTS) {
        let k = pixels[i];
        let s = packed_sector(pt.tile, k, params.packed_groups, bits);
        // A sector of zeros, or a pixel found bad: nothing to add.
        if (s.width == 0u || pixel_cleared(k)) {
            continue;
        }
        let start = s.word;
        let first = s.bit;
        let w = s.width;
        let lo = vec4<u32>(
            packed_word(start, first, w, 0u, bits),
            packed_word(start, first, w, 1u, bits),
            packed_word(start, first, w, 2u, bits),
            packed_word(start, first, w, 3u, bits),
        );
        let hi = vec4<u32>(
            packed_word(start, first, w, 4u, bits),
            packed_word(start, first, w, 5u, bits),
            packed_word(start, first, w, 6u, bits),
            packed_word(start, first, w, 7u, bits),
        );
        add_sector(&l, lo, hi, bits);
    }
    meet(pt, lid, bits, l);
}
