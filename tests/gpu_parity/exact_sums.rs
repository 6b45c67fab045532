//! Masked sums and CoM moments are exact whichever way the kernels' partial sums meet:
//! through subgroups, workgroup memory or atomics, from ring sums, in any number of parts
//! per tile, folded into 64 bits at any interval; part tables that could wrap are refused.

use crate::common::*;
use stem4d::cpu;
use stem4d::frames::Correction;

/// The masked sums meeting their slots through subgroups (where the adapter has them:
/// lavapipe and the H200 do), through workgroup memory and atomically in the output give
/// the CPU's sums, on 8-, 16- and 32-bit data with padded tiles, at saturation on a detector
/// whose totals pass 2^32 (the subgroup path then needs two parts per tile) and with 32-bit
/// samples that carry, for whole, disk and scattered masks in any number of parts (C-MASK).
#[test]
fn masked_sums_agree_whichever_way_the_slots_meet() {
    use stem4d::contract::Dtype;
    let Some(mut engine) = engine() else { return };
    if std::env::var("STEM4D_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        assert!(engine.subgroups(), "the test adapter has no subgroups");
    }
    for (dtype, dims, saturated) in [
        (Dtype::U16, [3, 7, 13, 11], false),
        (Dtype::U8, [5, 9, 12, 10], false),
        (Dtype::U16, [1, 3, 300, 256], true),
        (Dtype::U32, [2, 5, 9, 7], true),
    ] {
        let n = dims.iter().product::<usize>() * dtype.size();
        let mut bytes = noise_bytes(n, 99);
        if saturated {
            bytes.iter_mut().enumerate().for_each(|(i, b)| {
                if i % 16 != 0 {
                    *b = 0xff
                }
            });
        }
        let acq = raw_acquisition(dtype, dims, bytes);
        let det = (dims[2] * dims[3]) as u32;
        let disk: Vec<u32> = (0..det)
            .filter(|k| {
                let (i, j) = ((k / dims[3] as u32) as f64, (k % dims[3] as u32) as f64);
                (i - dims[2] as f64 * 0.4).powi(2) + (j - dims[3] as f64 * 0.6).powi(2)
                    <= (dims[2].min(dims[3]) as f64 * 0.3).powi(2)
            })
            .collect();
        let masks = [
            (0..det).collect::<Vec<u32>>(),
            disk,
            (0..det).filter(|k| k % 7 == 3 || k % 11 == 0).collect(),
        ];
        for (m, picked) in masks.iter().enumerate() {
            let mut mask = vec![false; det as usize];
            picked.iter().for_each(|&k| mask[k as usize] = true);
            let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Mask);
            p.mask = Some(stem4d::contract::DetectorMask::Bool(mask));
            let want = cpu::compute(&acq, &p, Correction::default()).unwrap().data;
            for (subgroups, atomics) in [(true, false), (false, false), (false, true)] {
                engine.use_subgroups(subgroups);
                engine.use_atomic_sums(atomics);
                let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
                let list = stem4d::kernels::masked_sum::DetectorList::new(&engine, picked).unwrap();
                for parts in [1u32, 3, 16] {
                    let frames = acq.shape.frames() as u64;
                    let out = engine.storage("sums", frames * 8);
                    let mut enc = engine.device.create_command_encoder(&Default::default());
                    stem4d::kernels::masked_sum::encode_masked_sums_in_parts(
                        &engine, &mut enc, &res, &list, &out, parts,
                    )
                    .unwrap();
                    engine.queue.submit([enc.finish()]);
                    let got: Vec<u64> = pollster::block_on(engine.read_back(&out, frames * 8))
                        .unwrap()
                        .chunks_exact(8)
                        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                        .collect();
                    assert_eq!(
                        stem4d::products::ArrayData::U64(got),
                        want,
                        "{dtype:?} {dims:?} mask {m}, subgroups {subgroups}, atomics {atomics}, \
                         {parts} parts"
                    );
                }
            }
        }
    }
}

/// Masked sums through cached ring sums (whole rings summed, the other pixels read) equal
/// the CPU's for disks and annuli about the rings' centre (float radii, so rings are cut),
/// off-centre and scattered masks, on 8-, 16- and 32-bit data, at saturation where the
/// per-position totals pass 2^32, and on a resident split across buffers; the centred masks
/// must take the ring path, or the test would check nothing new (C-RING).
#[test]
fn masked_sums_from_ring_sums_equal_the_cpu() {
    use stem4d::contract::{DetectorMask, Dtype};
    use stem4d::kernels::ring_sum::RadialCache;
    let Some(engine) = engine() else { return };
    for (dtype, dims, saturated, split) in [
        (Dtype::U16, [5, 7, 23, 19], false, false),
        (Dtype::U8, [6, 5, 17, 21], false, true),
        (Dtype::U32, [3, 4, 15, 16], true, false),
        (Dtype::U16, [2, 3, 300, 256], true, true),
    ] {
        let n = dims.iter().product::<usize>() * dtype.size();
        let mut bytes = noise_bytes(n, 7);
        if saturated {
            bytes.iter_mut().enumerate().for_each(|(i, b)| {
                if i % 13 != 0 {
                    *b = 0xff
                }
            });
        }
        let acq = raw_acquisition(dtype, dims, bytes);
        let det = [dims[2], dims[3]];
        let corr = stem4d::frames::Correction::default();
        let mut res = if split {
            let whole = pollster::block_on(engine.upload(&acq, corr)).unwrap();
            let mut limits = engine.adapter.limits;
            limits.max_storage_binding = whole.plan.tile_words as u64 * 4;
            pollster::block_on(engine.upload_with_limits(&acq, corr, limits)).unwrap()
        } else {
            pollster::block_on(engine.upload(&acq, corr)).unwrap()
        };
        let c = [det[0] as f64 * 0.47, det[1] as f64 * 0.52];
        res.radial = pollster::block_on(RadialCache::build(&engine, &res, c)).unwrap();
        let radial = res.radial.as_ref().expect("ring sums made");
        let r = det[0].min(det[1]) as f64;
        // Whether the ring path must (Some) or need not (None) be taken: small 8-bit disks
        // may go either way, their pixels costing little more than their rings.
        let masks = [
            (
                DetectorMask::Disk {
                    center: c,
                    radius: 0.31 * r,
                },
                None,
            ),
            (
                DetectorMask::Annulus {
                    center: c,
                    inner: 0.12 * r,
                    outer: 0.43 * r,
                },
                None,
            ),
            (
                DetectorMask::Annulus {
                    center: c,
                    inner: 0.2 * r,
                    outer: 2.0 * r,
                },
                None,
            ),
            (
                DetectorMask::Disk {
                    center: [2.0, 3.0],
                    radius: 0.2 * r,
                },
                Some(false),
            ),
        ];
        let mut all: Vec<u32> = (0..(det[0] * det[1]) as u32).collect();
        let mut cases: Vec<(Vec<u32>, Option<bool>)> = masks
            .iter()
            .map(|(m, ring)| (m.sparse(det).indices, *ring))
            .collect();
        cases.push((all.clone(), Some(true)));
        all.remove(all.len() / 2);
        cases.push((all, Some(true)));
        let scattered = (0..(det[0] * det[1]) as u32).filter(|k| k % 5 == 1);
        cases.push((scattered.collect(), Some(false)));
        let mut ring_cases = 0;
        for (m, (picked, expect)) in cases.iter().enumerate() {
            let ring = radial.split(picked, res.plan.bits).is_some();
            if let Some(e) = expect {
                assert_eq!(ring, *e, "{dtype:?} {dims:?} mask {m}: ring path taken");
            }
            ring_cases += ring as usize;
            let mut mask = vec![false; det[0] * det[1]];
            picked.iter().for_each(|&k| mask[k as usize] = true);
            let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Mask);
            p.mask = Some(stem4d::contract::DetectorMask::Bool(mask));
            let want = cpu::compute(&acq, &p, Correction::default()).unwrap().data;
            let got = pollster::block_on(stem4d::kernels::masked_sum::masked_sums(
                &engine, &res, picked,
            ))
            .unwrap();
            assert_eq!(
                stem4d::products::ArrayData::U64(got),
                want,
                "{dtype:?} {dims:?} mask {m} (ring path {ring})"
            );
        }
        // The centred masks of the 16-bit cases always pay; every case has at least the
        // whole detector and all of it but one pixel.
        let least = if dtype == Dtype::U16 { 5 } else { 2 };
        assert!(
            ring_cases >= least,
            "{dtype:?} {dims:?}: only {ring_cases} masks took the rings"
        );
    }
    // Float32 sums are 128-bit: no ring sums are made for them.
    let f32s = raw_acquisition(Dtype::F32, [2, 3, 9, 8], noise_bytes(2 * 3 * 9 * 8 * 4, 3));
    let res = pollster::block_on(engine.upload(&f32s, Default::default())).unwrap();
    let made = pollster::block_on(RadialCache::build(&engine, &res, [4.0, 4.0])).unwrap();
    assert!(made.is_none(), "ring sums made for a float32 resident");
    // Nor about a centre off the detector (a BF fit gone astray).
    let u16s = raw_acquisition(Dtype::U16, [2, 3, 9, 8], noise_bytes(2 * 3 * 9 * 8 * 2, 5));
    let res = pollster::block_on(engine.upload(&u16s, Default::default())).unwrap();
    for c in [[4.0, 1e12], [-3.0, 4.0], [f64::NAN, 4.0]] {
        let made = pollster::block_on(RadialCache::build(&engine, &res, c)).unwrap();
        assert!(made.is_none(), "ring sums made about {c:?}");
    }
    assert!(
        pollster::block_on(RadialCache::build(&engine, &res, [4.0, 4.0]))
            .unwrap()
            .is_some()
    );
}

/// A table of masked-sum parts that goes backwards, or holds more pixels in one part than
/// u32 lanes can sum exactly (here 76,800 saturated u16 pixels), is refused, never summed.
#[test]
fn masked_sum_part_tables_that_could_wrap_are_refused() {
    use stem4d::contract::Dtype;
    use stem4d::kernels::masked_sum::{encode_parts, Parts};
    let Some(mut engine) = engine() else { return };
    let dims = [1, 2, 300, 256];
    let acq = raw_acquisition(Dtype::U16, dims, vec![0xff; 2 * 300 * 256 * 2]);
    let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    let all: Vec<u32> = (0..300 * 256).collect();
    let list = stem4d::kernels::masked_sum::DetectorList::in_order(&engine, all);
    let out = engine.storage("sums", 2 * 8 * 2);
    for subgroups in [true, false] {
        engine.use_subgroups(subgroups);
        let limit = stem4d::kernels::masked_sum_part_limit(16, engine.subgroups());
        for starts in [vec![0, 76_800], vec![0, 40_000, 30_000, 76_800]] {
            if starts
                .windows(2)
                .all(|w| w[1] >= w[0] && w[1] - w[0] <= limit)
            {
                continue; // within the limit on this path (no subgroups: 32 lanes a part)
            }
            let mut enc = engine.device.create_command_encoder(&Default::default());
            let parts = Parts::Table {
                starts: &starts,
                stride: 2,
            };
            let err = encode_parts(&engine, &mut enc, &res, &list, &out, parts, true);
            assert!(err.is_err(), "{starts:?} accepted (subgroups {subgroups})");
        }
    }
}

/// The CoM running sums folded into 64 bits after every row, every few, or never, and both
/// kernels cut into any number of parts per tile (whose sums meet through atomic adds),
/// must all give the same exact sums and moments: the folds and the carries are where a
/// wrap would hide (C-COM: the moments stay exact).
#[test]
fn folding_and_parts_at_any_interval_are_exact() {
    let Some(engine) = engine() else { return };
    let mut acqs: Vec<(String, stem4d::formats::Acquisition)> = ["arina_u16", "arina_u8"]
        .iter()
        .map(|name| (name.to_string(), open_fixture(&fixture_named(name))))
        .collect();
    // A 64×64 detector: enough rows per band for the four-loads-in-flight path.
    acqs.push((
        "synthetic 64x64".into(),
        stem4d::formats::synthetic::open([6, 5, 64, 64]).unwrap(),
    ));
    for (name, acq) in acqs {
        let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
        let n = acq.shape.frames() as u64;
        let all: Vec<u32> = (0..acq.shape.det_len() as u32).collect();
        // An odd mask: every pixel but a scattered few, so some sectors are left out.
        let picked: Vec<u32> = all.iter().copied().filter(|k| k % 5 != 2).collect();
        let list = stem4d::kernels::masked_sum::DetectorList::new(&engine, &picked).unwrap();
        let out = |bytes: u64| {
            engine.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: bytes,
                // The kernels add into their outputs, which are cleared first.
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        let mut seen = Vec::new();
        for (flush, parts) in [
            (1u32, 1u32),
            (2, 2),
            (3, 3),
            (7, 7),
            (8, 1),
            (9, 40),
            (u32::MAX, 16),
        ] {
            let (sums, moments) = (out(n * 8), out(n * 24));
            let mut enc = engine.device.create_command_encoder(&Default::default());
            stem4d::kernels::masked_sum::encode_masked_sums_in_parts(
                &engine, &mut enc, &res, &list, &sums, parts,
            )
            .unwrap();
            stem4d::kernels::com_moments::encode_com_moments_with(
                &engine, &mut enc, &res, &moments, flush, parts,
            )
            .unwrap();
            engine.queue.submit([enc.finish()]);
            let s = pollster::block_on(engine.read_back(&sums, n * 8)).unwrap();
            let mo = pollster::block_on(engine.read_back(&moments, n * 24)).unwrap();
            seen.push((flush, parts, s, mo));
        }
        let exact =
            pollster::block_on(stem4d::kernels::com_moments::com_moments(&engine, &res)).unwrap();
        let exact_sums = pollster::block_on(stem4d::kernels::masked_sum::masked_sums(
            &engine, &res, &picked,
        ))
        .unwrap();
        let cpu_sums = {
            let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Mask);
            let mut mask = vec![false; all.len()];
            picked.iter().for_each(|&k| mask[k as usize] = true);
            p.mask = Some(stem4d::contract::DetectorMask::Bool(mask));
            cpu::compute(&acq, &p, Correction::default()).unwrap()
        };
        assert_eq!(
            stem4d::products::ArrayData::U64(exact_sums),
            cpu_sums.data,
            "{name}: odd mask"
        );
        assert_eq!(
            stem4d::kernels::com_moments::parse_moments(&seen[0].3),
            exact,
            "{name}: fold every row"
        );
        for (flush, parts, s, mo) in &seen[1..] {
            assert_eq!(s, &seen[0].2, "{name}: sums in {parts} parts");
            assert_eq!(
                mo, &seen[0].3,
                "{name}: moments folding every {flush}, {parts} parts"
            );
        }
        // And the 64-bit-per-sample path (flush 0) agrees.
        let moments = out(n * 24);
        let mut enc = engine.device.create_command_encoder(&Default::default());
        stem4d::kernels::com_moments::encode_com_moments_with(
            &engine, &mut enc, &res, &moments, 0, 3,
        )
        .unwrap();
        engine.queue.submit([enc.finish()]);
        assert_eq!(
            pollster::block_on(engine.read_back(&moments, n * 24)).unwrap(),
            seen[0].3
        );
    }
}
