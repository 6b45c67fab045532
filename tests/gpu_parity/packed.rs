//! The compressed resident (`src/kernels/packed.rs`: `wgsl/packed.wgsl`, built by
//! `upload::packed`) against the raw one:
//! every product of the parity matrix on every fixture, with and without bad-pixel masking,
//! built in blocks of the fewest scan rows that are whole tiles and in one block, must equal
//! the raw resident's byte for byte, as must sectors of every width on odd shapes; float32
//! data is refused by name (decision 0025).

use crate::common::*;
use crate::streaming::{by_correction, words};
use stem4d::contract::Dtype;
use stem4d::frames::Correction;
use stem4d::products::gpu;
use stem4d::products::npy::to_bytes;
use stem4d::upload::packed::block_rows;

#[test]
fn packed_products_equal_the_raw_residents_on_every_fixture() {
    let Some(engine) = engine() else { return };
    let mut tally = Tally::default();
    for fx in manifest()["fixtures"].as_array().unwrap() {
        let name = fx["name"].as_str().unwrap();
        let acq = open_fixture(fx);
        if acq.dtype.is_float() {
            let refused = pollster::block_on(engine.upload_packed(
                (&acq, None),
                Correction::default(),
                1,
                true,
                None,
                &mut |_, _| {},
            ));
            let e = refused.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("float32 data is kept raw"), "{name}: {e}");
            continue;
        }
        tally.add(&engine, &acq, name);
    }
    assert!(
        tally.compared > 600,
        "only {} packed products compared",
        tally.compared
    );
    assert!(tally.smaller > 0, "no fixture packed smaller than raw");
}

/// Sectors of every width, 0 to the full sample, on odd shapes whose tiles are full and
/// partial: u8 (32 positions a tile), u16 and u32, each pixel's samples drawn below its own
/// power of two so that a tile's sectors take every width code; the masked sums' slots
/// meeting through subgroups and in workgroup memory.
#[test]
fn packed_sectors_of_every_width_equal_the_raw_ones() {
    let Some(mut engine) = engine() else { return };
    // The slots meet through subgroups where the adapter has them, and in workgroup memory.
    for subgroups in [true, false] {
        engine.use_subgroups(subgroups);
        let tally = Tally::of(&engine, every_width(0x5eed));
        assert!(
            tally.compared > 100,
            "only {} packed products compared",
            tally.compared
        );
        let narrow = Tally::of(&engine, narrow_with_bad_pixels(0xbad));
        assert!(narrow.zeroed > 0, "no narrow pixel found bad and zeroed");
    }
}

/// Masked sums over a compressed resident with the mask cut into 1, 3 and 16 parts a tile
/// (each part's slots meeting apart, then adding into one image) equal the raw resident's,
/// the slots meeting through subgroups and in workgroup memory.
#[test]
fn packed_masked_sums_in_parts_equal_the_raw_ones() {
    use stem4d::formats::prepared::Layout;
    use stem4d::kernels::masked_sum::{encode_masked_sums_in_parts, DetectorList};
    let Some(mut engine) = engine() else { return };
    for (name, acq) in every_width(0x9a27) {
        let det = acq.shape.det_len() as u32;
        let picked: Vec<u32> = (0..det).filter(|k| k % 5 != 2).collect();
        let frames = acq.shape.frames() as u64;
        let tile = Layout::of(acq.dtype, acq.shape.det_len(), acq.shape.frames()).tile as usize;
        let [rows, cols] = acq.shape.scan;
        // The residents do not depend on how the slots meet: built once for both meets.
        let raw = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
        let packed = pollster::block_on(engine.upload_packed(
            (&acq, None),
            Correction::default(),
            block_rows(rows, cols, tile),
            true,
            None,
            &mut |_, _| {},
        ))
        .unwrap();
        for subgroups in [true, false] {
            engine.use_subgroups(subgroups);
            let list = DetectorList::new(&engine, &picked).unwrap();
            let sums = |res: &stem4d::gpu::Resident, parts: u32| {
                let out = engine.storage("sums", frames * 8);
                let mut enc = engine.device.create_command_encoder(&Default::default());
                encode_masked_sums_in_parts(&engine, &mut enc, res, &list, &out, parts).unwrap();
                engine.queue.submit([enc.finish()]);
                pollster::block_on(engine.read_back(&out, frames * 8)).unwrap()
            };
            for parts in [1u32, 3, 16] {
                assert!(
                    sums(&raw, parts) == sums(&packed, parts),
                    "{name}, subgroups {}, {parts} parts: packed differs from raw",
                    engine.subgroups()
                );
            }
        }
    }
}

/// The tiles of `acq` as the position-tiled layout holds them (the prepared writer's raw
/// payload, its blocks joined).
fn raw_tiles(acq: &stem4d::formats::Acquisition) -> Vec<u8> {
    use stem4d::formats::prepared::Payload;
    let mut p = stem4d::upload::prepare::Preparer::with_payload(acq.clone(), 1 << 20, Payload::Raw);
    let mut tiles = Vec::new();
    while let Some((_, piece)) = p.next_piece().unwrap() {
        if p.description().is_some() {
            break;
        }
        tiles.extend_from_slice(&piece);
    }
    tiles
}

/// The GPU's encoder (`packed_codes`, `packed_write`) and the prepared writer's CPU
/// encoder (`formats::prepared::packed_sectors`), which share no code, make the same bytes
/// of every segment of every integer fixture and of sectors of every width, so a packed
/// prepared payload is what a compressed resident holds; and the CPU decoder gives the
/// tiles back.
#[test]
fn the_gpu_and_cpu_encoders_write_the_same_segments() {
    use stem4d::formats::prepared::{packed_sectors, Layout};
    let Some(engine) = engine() else { return };
    let mut acqs: Vec<(String, stem4d::formats::Acquisition)> = manifest()["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|fx| (fx["name"].as_str().unwrap().to_string(), open_fixture(fx)))
        .filter(|(_, a)| !a.dtype.is_float())
        .collect();
    acqs.extend(every_width(0xc0de));
    let mut segments = 0;
    for (name, acq) in &acqs {
        let corr = Correction::default();
        let layout = Layout::of(acq.dtype, acq.shape.det_len(), acq.shape.frames());
        let tile = layout.tile as usize;
        let [_, cols] = acq.shape.scan;
        let res = pollster::block_on(engine.upload_packed(
            (acq, None),
            corr,
            block_rows(1, cols, tile),
            false,
            None,
            &mut |_, _| {},
        ))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let raw = raw_tiles(acq);
        let packed = res.packed.as_ref().unwrap();
        let det_len = acq.shape.det_len();
        let tb = layout.tile_bytes as usize;
        for (seg, buffer) in res.plan.segments.iter().zip(&packed.buffers) {
            let t0 = seg.first_frame / tile;
            let t1 = t0 + seg.frames.div_ceil(tile);
            let tiles = &raw[t0 * tb..t1 * tb];
            let cpu = packed_sectors::encode(&layout, det_len, tiles);
            assert_eq!(
                buffer.size(),
                (cpu.len() as u64).max(16),
                "{name} tiles {t0}..{t1}"
            );
            let gpu = pollster::block_on(engine.read_back(buffer, cpu.len() as u64)).unwrap();
            assert!(gpu == cpu, "{name} tiles {t0}..{t1}: the encoders differ");
            let ib = packed_sectors::index_bytes((t1 - t0) as u64, det_len) as usize;
            let back = packed_sectors::decode(
                &layout,
                det_len,
                &cpu[..ib],
                &cpu[ib..],
                ib as u64 / 4,
                (t1 - t0) as u64,
            )
            .unwrap();
            assert!(back == tiles, "{name} tiles {t0}..{t1}: decoded differs");
            segments += 1;
        }
    }
    assert!(segments > 15, "only {segments} segments compared");
}

/// Frames read back from a compressed resident pass through its small scratch a few tiles
/// at a time (`upload::packed::kept_scratch_bytes`): on an acquisition of more tiles than the
/// scratch holds, every frame and a range across the scratch's edge read back as the raw
/// resident's.
#[test]
fn frames_of_more_tiles_than_the_scratch_holds_read_back_as_raw() {
    let Some(engine) = engine() else { return };
    let dims = [48, 49, 64, 64];
    let frames = dims[0] * dims[1];
    let noise = noise_bytes(frames * dims[2] * dims[3] * 2, 0x7ace);
    // Samples of 12 bits at most: sectors narrower than raw.
    let samples: Vec<u8> = noise
        .chunks_exact(2)
        .flat_map(|b| (u16::from_le_bytes([b[0], b[1]]) & 0x0fff).to_le_bytes())
        .collect();
    let acq = raw_acquisition(Dtype::U16, dims, samples);
    let corr = Correction::default();
    let raw = pollster::block_on(engine.upload(&acq, corr)).unwrap();
    let packed = pollster::block_on(engine.upload_packed(
        (&acq, None),
        corr,
        dims[0],
        false,
        None,
        &mut |_, _| {},
    ))
    .unwrap();
    let tile_bytes = packed.plan.tile_words as u64 * 4;
    let holds = packed.buffers[0].size() / tile_bytes;
    let tiles = frames.div_ceil(packed.plan.tile as usize) as u64;
    assert!(holds < tiles, "the scratch holds {holds} of {tiles} tiles");
    assert!(packed.buffers[0].size() <= stem4d::upload::packed::KEPT_SCRATCH_BYTES);
    let edge = holds as usize * packed.plan.tile as usize;
    for (f0, f1) in [(0, frames), (edge - 3, edge + 5), (frames - 1, frames)] {
        let want = pollster::block_on(gpu::frames(&engine, &raw, f0, f1)).unwrap();
        let got = pollster::block_on(gpu::frames(&engine, &packed, f0, f1)).unwrap();
        assert!(
            got == want,
            "frames {f0}..{f1} differ from the raw resident's"
        );
    }
}

/// Products of a compressed resident compared with the raw one's, and residents that came
/// out smaller than raw.
#[derive(Default)]
struct Tally {
    compared: usize,
    smaller: usize,
    /// Compressed residents in which pixels were found bad and zeroed.
    zeroed: usize,
}

impl Tally {
    /// [`Tally::add`] over `acqs`, each named with whether the slots meet through subgroups.
    fn of(
        engine: &stem4d::gpu::Engine,
        acqs: Vec<(String, stem4d::formats::Acquisition)>,
    ) -> Tally {
        let mut tally = Tally::default();
        for (name, acq) in acqs {
            tally.add(
                engine,
                &acq,
                &format!("{name} subgroups {}", engine.subgroups()),
            );
        }
        tally
    }

    /// Every product of the parity matrix of `acq`, with and without bad-pixel masking, on
    /// compressed residents built in blocks of one and of all scan rows, decoded on the GPU
    /// and packed on the CPU: each equal to the raw resident's byte for byte.
    fn add(
        &mut self,
        engine: &stem4d::gpu::Engine,
        acq: &stem4d::formats::Acquisition,
        name: &str,
    ) {
        for masked in [false, true] {
            for (corr, ps, raw) in by_correction(engine, acq, masked) {
                let tile = 256
                    / stem4d::gpu::plan_of(acq, corr.bin, engine.adapter.limits)
                        .unwrap()
                        .bits as usize;
                let [rows, cols] = acq.shape.binned(corr.bin).scan;
                for want in [1, rows] {
                    let step = block_rows(want, cols, tile);
                    for gpu_decode in [true, false] {
                        let what = format!(
                            "{name} masked {masked} bin {} rows {step} gpu decode {gpu_decode}",
                            corr.bin
                        );
                        let built = pollster::block_on(engine.upload_packed(
                            (acq, None),
                            corr,
                            step,
                            gpu_decode,
                            None,
                            &mut |_, _| {},
                        ));
                        let mut res = match built {
                            Ok(res) => res,
                            Err(e) => {
                                // Refused as the raw upload is.
                                let e = words(&e.to_string());
                                let as_raw = raw
                                    .iter()
                                    .all(|r| r.as_ref().is_err_and(|r| words(&r.to_string()) == e));
                                assert!(as_raw, "{what}: {e}");
                                continue;
                            }
                        };
                        let packed = res.packed.as_ref().unwrap();
                        assert!(packed.packed_bytes > 0, "{what}");
                        if packed.packed_bytes < packed.raw_bytes {
                            self.smaller += 1;
                        }
                        pollster::block_on(gpu::settle_bad_pixels(engine, acq, &mut res)).unwrap();
                        if res.found_bad.is_some() {
                            self.zeroed += 1;
                        }
                        for (p, r) in ps.iter().zip(&raw) {
                            let got =
                                pollster::block_on(gpu::compute_resident(engine, acq, &res, p));
                            match (r, got) {
                                (Ok(r), Ok(g)) => {
                                    assert_eq!(r.shape, g.shape, "{what} {}", p.kind.name());
                                    assert!(
                                        to_bytes(r) == to_bytes(&g),
                                        "{what} {}: packed differs from raw",
                                        p.kind.name()
                                    );
                                    self.compared += 1;
                                }
                                (Err(a), Err(b)) => {
                                    assert_eq!(a.to_string(), b.to_string(), "{what}")
                                }
                                (a, b) => panic!(
                                    "{what} {}: raw {:?}, packed {:?}",
                                    p.kind.name(),
                                    a.as_ref().err(),
                                    b.err()
                                ),
                            }
                        }
                    }
                }
            }
        }
    }
}
