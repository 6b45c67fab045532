// stem4d:after masked_sum.wgsl packed_read.wgsl packed_window.wgsl
// The masked sum over a compressed resident (decision 0025; the layout is `packed.wgsl`'s),
// decoded where it is read: the same workgroups, parts and slots as `masked_sum`, but each
// invocation fetches several of its pixels' sectors (`packed_window.wgsl`) and decodes them
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
    return fetch_if(tile, k, bits, true);
}

// As `fetch` where `live`, else a sector of zeros (nothing of it loaded).
fn fetch_if(tile: u32, k: u32, bits: u32, live: bool) -> Fetched {
    let s = packed_sector(tile, k, params.packed_groups, bits);
    return fetch_sector(s, select(0u, select(s.width, 0u, pixel_cleared(k)), live), bits);
}

// A fetched sector of 16-bit samples added into lanes a–d as the raw kernel adds each raw
// word's low and high sample, both cut straight from the word's field (decision 0061);
// sectors at most 8 bits wide, most of a pattern's, take `add_narrow_pairs`.
fn add_pairs(l: ptr<function, Lanes>, f: Fetched, slot: u32) {
    if (f.w <= 8u) {
        add_narrow_pairs(l, f, slot);
        return;
    }
    let x = sector_fields(f, slot, 16u);
    let m = vec4<u32>(low_mask(f.w));
    let w = vec4<u32>(f.w);
    (*l).a += x.lo & m;
    (*l).b += x.lo >> w;
    (*l).c += x.hi & m;
    (*l).d += x.hi >> w;
}

// A fetched sector of 16-bit samples at most 8 bits wide added as `add_pairs` adds it:
// four fields of four samples (two raw words each) instead of eight of two, half the
// window reads and funnel shifts (decision 0063). Field q holds samples 4q to 4q + 3: the
// low and high samples of raw words 2q and 2q + 1.
fn add_narrow_pairs(l: ptr<function, Lanes>, f: Fetched, slot: u32) {
    fill_window(f, slot);
    let fw = 4u * f.w;
    let f0 = window_field(slot, f.r0, fw, 0u);
    let f1 = window_field(slot, f.r0, fw, 1u);
    let f2 = window_field(slot, f.r0, fw, 2u);
    let f3 = window_field(slot, f.r0, fw, 3u);
    let m = vec4<u32>(low_mask(f.w));
    let lo = vec4<u32>(f0, f0, f1, f1) >> vec4<u32>(0u, 2u * f.w, 0u, 2u * f.w);
    let hi = vec4<u32>(f2, f2, f3, f3) >> vec4<u32>(0u, 2u * f.w, 0u, 2u * f.w);
    let w = vec4<u32>(f.w);
    (*l).a += lo & m;
    (*l).b += (lo >> w) & m;
    (*l).c += hi & m;
    (*l).d += (hi >> w) & m;
}

// A fetched sector of 8-bit samples added into lanes a–h: each raw word's four samples.
fn add_bytes(l: ptr<function, Lanes>, f: Fetched, slot: u32) {
    let x = sector_fields(f, slot, 8u);
    let m = vec4<u32>(low_mask(f.w));
    let w = vec4<u32>(f.w);
    let w2 = 2u * w;
    let w3 = 3u * w;
    (*l).a += x.lo & m;
    (*l).b += (x.lo >> w) & m;
    (*l).c += (x.lo >> w2) & m;
    (*l).d += x.lo >> w3;
    (*l).e += x.hi & m;
    (*l).f += (x.hi >> w) & m;
    (*l).g += (x.hi >> w2) & m;
    (*l).h += x.hi >> w3;
}

// The lanes of an invocation over its pixels of the part. Each width has its own loop, so
// that the others' lanes hold no registers (as `sum_lanes`): the one loop for every width
// kept all eight lanes and four fetched sectors live, 112 registers on an H100 (decision
// 0051). 16-bit samples keep four sectors in flight, 8-bit samples two, 32-bit one.
fn sum_packed_lanes(pt: Part, lid: u32, bits: u32) -> Lanes {
    let z = vec4<u32>(0u);
    var l = Lanes(z, z, z, z, z, z, z, z);
    let slot = lid * WINDOW;
    var i = pt.i0 + lid;
    if (bits == 16u) {
        for (; i + 3u * SLOTS < pt.i1; i += 4u * SLOTS) {
            let f0 = fetch(pt.tile, pixels[i], bits);
            let f1 = fetch(pt.tile, pixels[i + SLOTS], bits);
            let f2 = fetch(pt.tile, pixels[i + 2u * SLOTS], bits);
            let f3 = fetch(pt.tile, pixels[i + 3u * SLOTS], bits);
            add_pairs(&l, f0, slot);
            add_pairs(&l, f1, slot);
            add_pairs(&l, f2, slot);
            add_pairs(&l, f3, slot);
        }
        for (; i < pt.i1; i += SLOTS) {
            add_pairs(&l, fetch(pt.tile, pixels[i], bits), slot);
        }
    } else if (bits == 8u) {
        for (; i < pt.i1; i += 2u * SLOTS) {
            let f0 = fetch(pt.tile, pixels[i], bits);
            let more = i + SLOTS < pt.i1;
            let f1 = fetch_if(pt.tile, pixels[select(i, i + SLOTS, more)], bits, more);
            add_bytes(&l, f0, slot);
            add_bytes(&l, f1, slot);
        }
    } else {
        let one = vec4<u32>(1u);
        for (; i < pt.i1; i += SLOTS) {
            let r = sector_fields(fetch(pt.tile, pixels[i], bits), slot, bits);
            let s = l.a + r.lo;
            let t = l.b + r.hi;
            l.c += select(z, one, s < r.lo);
            l.d += select(z, one, t < r.hi);
            l.a = s;
            l.b = t;
        }
    }
    return l;
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
    meet(pt, lid, bits, sum_packed_lanes(pt, lid, bits));
}
