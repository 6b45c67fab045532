// stem4d:after masked_sum.wgsl packed_read.wgsl packed_window.wgsl
// The masked sum over a compressed resident (decision 0025; the layout is `packed.wgsl`'s),
// decoded where it is read: the same workgroups, parts and slots as `masked_sum`, but each
// invocation fetches four of its pixels' sectors (`packed_window.wgsl`) and decodes them
// into their eight raw words before adding them into the same lanes. Nothing is unpacked
// into memory, so a mask reads only its own pixels' packed bits and the index words of
// their groups (decisions 0028 and 0041).
// The lanes' limits are the raw kernel's: a decoded sample is the stored one.

// The segment's packed buffer: its index, then its data.
@group(0) @binding(6) var<storage, read> packed_in: array<u32>;
// One bit per detector pixel: found bad after the upload, read as 0.
@group(0) @binding(7) var<storage, read> zeroed: array<u32>;

// Pixel `k`'s sector in tile `tile`, fetched (a pixel found bad reads as zeros).
fn fetch(tile: u32, k: u32, bits: u32) -> Fetched {
    let s = packed_sector(tile, k, params.packed_groups, bits);
    return fetch_sector(s, select(s.width, 0u, pixel_cleared(k)), bits);
}

// Add a fetched sector into the lanes.
fn add_fetched(l: ptr<function, Lanes>, f: Fetched, slot: u32, bits: u32) {
    let r = decode_sector(f, slot, bits);
    add_sector(l, r.lo, r.hi, bits);
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
    let slot = lid * WINDOW;
    var i = pt.i0 + lid;
    // Four sectors fetched, then decoded: their loads in flight together.
    for (; i + 3u * SLOTS < pt.i1; i += 4u * SLOTS) {
        let f0 = fetch(pt.tile, pixels[i], bits);
        let f1 = fetch(pt.tile, pixels[i + SLOTS], bits);
        let f2 = fetch(pt.tile, pixels[i + 2u * SLOTS], bits);
        let f3 = fetch(pt.tile, pixels[i + 3u * SLOTS], bits);
        add_fetched(&l, f0, slot, bits);
        add_fetched(&l, f1, slot, bits);
        add_fetched(&l, f2, slot, bits);
        add_fetched(&l, f3, slot, bits);
    }
    for (; i < pt.i1; i += SLOTS) {
        add_fetched(&l, fetch(pt.tile, pixels[i], bits), slot, bits);
    }
    meet(pt, lid, bits, l);
}
