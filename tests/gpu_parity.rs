//! The WGSL kernels against the CPU reference on whatever adapter wgpu finds (lavapipe in
//! CI): integer products byte for byte, CoM the float32 rounding of the exact quotient,
//! DPC within 2e-6 px, iDPC within 1e-5 · max|φ|. `STEM4D_REQUIRE_GPU=1` makes a missing
//! adapter a failure (CI sets it); otherwise the test says it was skipped.

mod common;

use common::*;
use stem4d::cpu;
use stem4d::products::gpu as products;
use stem4d::products::{ArrayData, ProductArray};

fn check(kind: &str, what: &str, gpu: &ProductArray, cpu: &ProductArray) -> Result<(), String> {
    match kind {
        "com" | "dpc" | "idpc" => {
            let (ArrayData::F32(g), ArrayData::F64(c)) = (&gpu.data, &cpu.data) else {
                return Err(format!("{what}: GPU {kind} must be float32, CPU float64"));
            };
            if gpu.shape != cpu.shape {
                return Err(format!("{what}: shape {:?} != {:?}", gpu.shape, cpu.shape));
            }
            let scale = c.iter().fold(0f64, |m, v| m.max(v.abs()));
            for (i, (&g, &c)) in g.iter().zip(c).enumerate() {
                let ok = match kind {
                    "com" => g == c as f32,
                    "dpc" => (g as f64 - c).abs() <= 2e-6,
                    _ => (g as f64 - c).abs() <= 1e-5 * scale,
                };
                if !ok {
                    return Err(format!("{what}: [{i}] GPU {g:e} vs CPU {c:e}"));
                }
            }
            Ok(())
        }
        // Weighted masks: float64 from exact per-weight sums, within the CPU bound.
        _ if matches!(gpu.data, ArrayData::F64(_)) => compare(what, kind, gpu, cpu, 1e-12),
        _ => compare(what, kind, gpu, cpu, 0.0),
    }
}

#[test]
fn kernels_match_the_cpu_reference_on_every_fixture() {
    let Some(engine) = engine() else { return };
    eprintln!("adapter: {:?}", engine.adapter);
    let mut failures = Vec::new();
    let (mut checked, mut float_checked) = (0, 0);
    for fx in manifest()["fixtures"].as_array().unwrap() {
        let name = fx["name"].as_str().unwrap();
        let acq = open_fixture(fx);
        let float = acq.dtype.is_float();
        for p in fx["products"].as_array().unwrap() {
            let kind = p["kind"].as_str().unwrap();
            let params = params(kind, &p["params"]);
            // Moments of u32 detectors can exceed 64 bits; the engine refuses them (tested below).
            let what = format!("{name} {}", p["ref"].as_str().unwrap());
            let gpu = match pollster::block_on(products::compute(&engine, &acq, &params)) {
                Ok(g) => g,
                Err(e)
                    if acq.dtype == stem4d::contract::Dtype::U32
                        && matches!(kind, "com" | "dpc" | "idpc") =>
                {
                    assert!(e.to_string().contains("64 bits"), "{what}: {e}");
                    continue;
                }
                // Weighted masks with many distinct weights are refused by name, never approximated.
                Err(e) if e.to_string().contains("distinct weights") => continue,
                // Float data is never binned on the GPU; the refusal says so.
                Err(e) if float && params.bin > 1 => {
                    assert!(e.to_string().contains("binned float32"), "{what}: {e}");
                    continue;
                }
                Err(e) => {
                    failures.push(format!("{what}: {e}"));
                    continue;
                }
            };
            let cpu = cpu::compute(&acq, &params).unwrap();
            let verdict = match (kind, &gpu.data, &cpu.data) {
                // The contract's float mean: the float64 mean rounded to float32, bit for bit.
                ("mean-dp-f32", ArrayData::F64(g), ArrayData::F64(c)) => {
                    match g
                        .iter()
                        .zip(c)
                        .position(|(a, b)| (*a as f32).to_bits() != (*b as f32).to_bits())
                    {
                        None => Ok(()),
                        Some(i) => Err(format!("{what}: [{i}] {} != {}", g[i] as f32, c[i] as f32)),
                    }
                }
                // Float sums are exact integers rounded once: the same bits as the CPU's.
                (_, ArrayData::F64(_), _) if float && p["params"]["weights"].is_null() => {
                    compare(&what, kind, &gpu, &cpu, 0.0)
                }
                _ => check(kind, &what, &gpu, &cpu),
            };
            if let Err(e) = verdict {
                failures.push(e);
            }
            checked += 1;
            float_checked += float as usize;
        }
    }
    assert!(checked > 200, "only {checked} products checked");
    assert!(
        float_checked > 50,
        "only {float_checked} float32 products checked"
    );
    eprintln!("{checked} products checked, {float_checked} of them on float32 residents");
    assert!(
        failures.is_empty(),
        "{} of {checked} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The position-tiled kernels at their edges: scans that fill their tiles or leave the last
/// one partly padded (tiles of 32, 16 and 8 positions for u8, u16 and u32), detector rows
/// narrower than a slot's run or wider than the column-moment fold, and a u16 detector of
/// more than 65,537 pixels whose per-position totals pass 2^32 (the 64-bit reduction across
/// slots). Values sit at the sample limits (every bit set in many pixels, saturation
/// sentinels included), with and without bad-pixel masking, on rectangular scans.
#[test]
fn tiled_kernels_match_the_cpu_at_tile_edges_and_sample_limits() {
    use stem4d::contract::Dtype;
    use stem4d::products::{ProductKind, ProductParams};
    let Some(engine) = engine() else { return };
    let cases = [
        (Dtype::U8, [5, 3, 4, 32]),
        (Dtype::U8, [3, 4, 6, 16]),
        (Dtype::U8, [2, 3, 5, 3]),
        (Dtype::U8, [7, 5, 4, 9]),
        (Dtype::U16, [4, 5, 7, 24]),
        (Dtype::U16, [3, 2, 9, 8]),
        (Dtype::U16, [2, 3, 9, 3]),
        (Dtype::U16, [1, 3, 300, 256]),
        (Dtype::U32, [3, 2, 5, 8]),
        (Dtype::U32, [3, 5, 3, 4]),
    ];
    let mut checked = 0;
    for (seed, (dtype, dims)) in cases.into_iter().enumerate() {
        let n = dims.iter().product::<usize>() * dtype.size();
        let mut bytes = noise_bytes(n, seed as u64 + 7);
        // A third of the bytes saturated: sums and moments near the u32 fold limits; on the
        // large detector 15 in 16, so totals pass 2^32.
        let large = dims[2] * dims[3] > 65_537;
        for (i, b) in bytes.iter_mut().enumerate() {
            if i % 3 == 0 || (large && i % 16 != 0) {
                *b = 0xff;
            }
        }
        let acq = raw_acquisition(dtype, dims, bytes);
        let [kr, kc] = [dims[2], dims[3]];
        for mask_bad in [false, true] {
            for kind in [
                ProductKind::Total,
                ProductKind::Bf,
                ProductKind::Adf,
                ProductKind::Rect,
                ProductKind::Df,
                ProductKind::Com,
                ProductKind::SumDp,
                ProductKind::MaxDp,
                ProductKind::Pattern,
            ] {
                if dtype == Dtype::U32 && kind == ProductKind::Com {
                    continue;
                }
                let mut p = ProductParams::new(kind);
                p.mask_bad_pixels = mask_bad;
                p.center = Some([kr as f64 * 0.4, kc as f64 * 0.55]);
                p.radius = Some(kr.min(kc) as f64 * 0.35 + 0.3);
                p.inner = Some(1.1);
                p.outer = Some(kr.max(kc) as f64 * 0.45);
                p.rect = Some(stem4d::contract::Region {
                    r0: 1,
                    r1: kr,
                    c0: kc / 3,
                    c1: kc,
                });
                p.at = Some([dims[0] - 1, dims[1] / 2]);
                let what = format!("{dtype:?} {dims:?} {kind:?} mask={mask_bad}");
                let gpu = pollster::block_on(products::compute(&engine, &acq, &p))
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let cpu = cpu::compute(&acq, &p).unwrap();
                if large && kind == ProductKind::Total && !mask_bad {
                    let stem4d::products::ArrayData::U64(t) = &cpu.data else {
                        panic!("{what}: u64 totals");
                    };
                    assert!(t.iter().all(|&t| t > u32::MAX as u64), "{what}: below 2^32");
                }
                check(kind.name(), &what, &gpu, &cpu).unwrap();
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 10 * 2 * 9 - 4);
}

/// The masked sums meeting their slots through subgroups (where the adapter has them:
/// lavapipe and the H200 do), through workgroup memory and atomically in the output give
/// the CPU's sums, on 8-, 16- and 32-bit data with padded tiles, at saturation on a detector
/// whose totals pass 2^32 (the subgroup path then needs two parts per tile) and with 32-bit
/// samples that carry, for whole, disk and scattered masks in any number of parts.
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
            let want = cpu::compute(&acq, &p).unwrap().data;
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
/// must take the ring path, or the test would check nothing new.
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
            let want = cpu::compute(&acq, &p).unwrap().data;
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

#[test]
fn residents_split_across_buffers_give_the_same_sums() {
    let Some(engine) = engine() else { return };
    let fx = fixture_named("arina_u16");
    let acq = open_fixture(&fx);
    let corr = stem4d::frames::Correction::default();
    let whole = pollster::block_on(engine.upload(&acq, corr)).unwrap();
    // Force a tiny binding limit: one tile of positions per buffer.
    let mut limits = engine.adapter.limits;
    limits.max_storage_binding = whole.plan.tile_words as u64 * 4;
    let plan =
        stem4d::upload::plan::ResidentPlan::new(acq.shape, acq.dtype, false, limits).unwrap();
    // 35 positions: tiles of 16, 16 and a padded 3.
    assert_eq!(plan.segments.len(), 3);
    let split = pollster::block_on(engine.upload_with_limits(&acq, corr, limits)).unwrap();
    assert_eq!(split.buffers.len(), plan.segments.len());
    let all: Vec<u32> = (0..acq.shape.det_len() as u32).collect();
    let a = pollster::block_on(stem4d::kernels::masked_sum::masked_sums(
        &engine, &whole, &all,
    ))
    .unwrap();
    let b = pollster::block_on(stem4d::kernels::masked_sum::masked_sums(
        &engine, &split, &all,
    ))
    .unwrap();
    assert_eq!(a, b);
    let ma =
        pollster::block_on(stem4d::kernels::com_moments::com_moments(&engine, &whole)).unwrap();
    let mb =
        pollster::block_on(stem4d::kernels::com_moments::com_moments(&engine, &split)).unwrap();
    assert_eq!(ma, mb);
    let roi = stem4d::contract::Region::full(acq.shape.scan);
    let pa = pollster::block_on(stem4d::kernels::pattern_reduce::pattern_reduce(
        &engine, &whole, roi,
    ))
    .unwrap();
    let pb = pollster::block_on(stem4d::kernels::pattern_reduce::pattern_reduce(
        &engine, &split, roi,
    ))
    .unwrap();
    assert_eq!(pa, pb);
}

#[test]
fn weighted_masks_sum_exactly_per_distinct_weight() {
    let Some(engine) = engine() else { return };
    for name in ["arina_u16", "arina_u32"] {
        let fx = fixture_named(name);
        let acq = open_fixture(&fx);
        let det = acq.shape.det;
        // Asymmetric weights with few distinct values (incl. negative and tiny ones).
        let levels = [0.5, 1.0, -2.25, 1e-3, 3.0e5];
        let w: Vec<f64> = (0..det[0] * det[1])
            .map(|k| {
                if k % 7 == 3 {
                    0.0
                } else {
                    levels[(k * k + k / 3) % levels.len()]
                }
            })
            .collect();
        let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Mask);
        p.mask = Some(stem4d::contract::DetectorMask::Weighted(w));
        let gpu = pollster::block_on(products::compute(&engine, &acq, &p)).unwrap();
        let cpu = cpu::compute(&acq, &p).unwrap();
        compare(name, "mask", &gpu, &cpu, 1e-12).unwrap();
    }
}

#[test]
fn synthetic_residents_made_on_the_gpu_equal_the_cpu_samples() {
    use stem4d::formats::synthetic;
    let Some(engine) = engine() else { return };
    // Odd detector (a half-filled last word), rectangular scan, and a forced split.
    let acq = synthetic::open([4, 37, 13, 11]).unwrap();
    let corr = stem4d::frames::Correction::default();
    let mut limits = engine.adapter.limits;
    // Two tiles (of 16 positions, 143 sectors of 32 bytes) per buffer.
    limits.max_storage_binding = 143 * 32 * 2;
    let res = pollster::block_on(engine.upload_with_limits(&acq, corr, limits)).unwrap();
    assert!(res.buffers.len() > 3);
    let n = acq.shape.frames();
    let got = pollster::block_on(products::frames(&engine, &res, 0, n)).unwrap();
    let det = acq.shape.det_len();
    for f in 0..n {
        for k in 0..det {
            assert_eq!(
                got[f * det + k],
                synthetic::sample(acq.shape, f, k) as u32,
                "frame {f} pixel {k}"
            );
        }
    }
    let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Com);
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &res, &p)).unwrap();
    check(
        "com",
        "synthetic com",
        &gpu,
        &cpu::compute(&acq, &p).unwrap(),
    )
    .unwrap();
    p.kind = stem4d::products::ProductKind::Bf;
    (p.center, p.radius) = (Some([6.2, 5.1]), Some(2.5));
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &res, &p)).unwrap();
    assert_eq!(gpu, cpu::compute(&acq, &p).unwrap());
}

/// The CoM running sums folded into 64 bits after every row, every few, or never, and both
/// kernels cut into any number of parts per tile (whose sums meet through atomic adds),
/// must all give the same exact sums and moments: the folds and the carries are where a
/// wrap would hide.
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
            cpu::compute(&acq, &p).unwrap()
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

/// Reduced patterns over many chunks of positions and several segments (atomics + carries)
/// equal the CPU reference, over the whole scan and over an off-centre ROI.
#[test]
fn pattern_reductions_over_many_position_chunks_are_exact() {
    use stem4d::products::{ProductKind, ProductParams};
    let Some(engine) = engine() else { return };
    let acq = stem4d::formats::synthetic::open([41, 29, 9, 7]).unwrap();
    let mut limits = engine.adapter.limits;
    limits.max_storage_binding = 32 * 4 * 300; // ~300 frames per buffer
    let res =
        pollster::block_on(engine.upload_with_limits(&acq, Default::default(), limits)).unwrap();
    assert!(res.buffers.len() >= 4);
    for roi in [
        None,
        Some(stem4d::contract::Region {
            r0: 3,
            r1: 40,
            c0: 1,
            c1: 28,
        }),
    ] {
        for kind in [ProductKind::SumDp, ProductKind::MaxDp, ProductKind::MeanDp] {
            let mut p = ProductParams::new(kind);
            p.scan_roi = roi;
            let gpu =
                pollster::block_on(products::compute_resident(&engine, &acq, &res, &p)).unwrap();
            assert_eq!(gpu, cpu::compute(&acq, &p).unwrap(), "{kind:?} roi {roi:?}");
        }
    }
}

/// iDPC on the GPU (Stockham and Bluestein FFTs around the Fourier-integration filter)
/// against the CPU reference's float64 FFT, on power-of-two, odd and mixed scan sizes.
#[test]
fn idpc_on_the_gpu_meets_the_contract_bound_for_any_scan_size() {
    use stem4d::kernels::fft::{DpcSettings, Idpc};
    let Some(engine) = engine() else { return };
    // [6, 5, 64, 64]: a scan so small that the DPC varies by ~0.1 px around a CoM of ~32 px;
    // a float32 CoM would carry ~2e-6 px of rounding into a phase of ~0.05.
    for dims in [
        [8, 16, 9, 7],
        [5, 7, 11, 9],
        [12, 10, 9, 9],
        [1, 6, 8, 8],
        [27, 18, 7, 9],
        [6, 5, 64, 64],
    ] {
        let acq = stem4d::formats::synthetic::open(dims).unwrap();
        let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
        let m =
            pollster::block_on(stem4d::kernels::com_moments::com_moments(&engine, &res)).unwrap();
        let com = products::com_from_moments(&m);
        let n = acq.shape.frames() as u64;
        let moments = engine.input(
            &m.iter()
                .flat_map(|v| v.iter().flat_map(|x| [*x as u32, (*x >> 32) as u32]))
                .collect::<Vec<u32>>(),
        );
        let _ = n;
        for (rotation, flip) in [(0.0, false), (33.0, true)] {
            let settings = DpcSettings {
                mean: cpu::scan_means(&com),
                rotation,
                flip,
            };
            let idpc = Idpc::new(&engine, acq.shape.scan);
            let mut enc = engine.device.create_command_encoder(&Default::default());
            idpc.encode(
                &engine,
                &mut enc,
                stem4d::kernels::fft::CentreSource::Moments {
                    buf: &moments,
                    bound: stem4d::kernels::com_moments::moment_bound(&res),
                },
                settings,
            )
            .unwrap();
            engine.queue.submit([enc.finish()]);
            let got = pollster::block_on(idpc.read(&engine)).unwrap();
            let want = cpu::idpc(&cpu::dpc_from_com(&com, rotation, flip), acq.shape.scan);
            let scale = want.iter().fold(0f64, |a, v| a.max(v.abs())).max(1e-30);
            let worst = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs())
                .fold(0f64, f64::max);
            eprintln!("{dims:?} rot {rotation}: max |phase| {scale:e}, max error {worst:e}");
            assert!(
                worst <= 1e-5 * scale,
                "{dims:?} rot {rotation}: max |Δ| {worst:e} vs bound {:e}",
                1e-5 * scale
            );
        }
    }
}

/// Bitshuffle+LZ4 and LZ4 decoded on the GPU (compressed bytes uploaded) equal the CPU
/// decoder, sample for sample, with and without bad-pixel masking, unbinned and binned
/// (partial edge blocks), whole and split across buffers.
#[test]
fn gpu_decode_equals_the_cpu_decoder() {
    use stem4d::frames::{Correction, FrameReader, Samples};
    use stem4d::upload::gpu_decode as decode;
    let Some(engine) = engine() else { return };
    let m = manifest();
    let mut checked = 0;
    for fx in m["fixtures"].as_array().unwrap() {
        let acq = open_fixture(fx);
        if !decode::supported(&acq, Correction::default()) {
            continue;
        }
        let n = acq.shape.frames();
        for (mask_bad_pixels, bin) in [(false, 1), (true, 1), (true, 2), (false, 3)] {
            let corr = Correction {
                mask_bad_pixels,
                bin,
            };
            let Ok(block) = FrameReader::new(&acq).block(0, n, corr) else {
                // The contract refuses this bin here (a sum past u32): the GPU must too.
                let err = pollster::block_on(engine.upload(&acq, corr)).err();
                assert!(
                    err.is_some_and(|e| e.to_string().contains("exceeds uint32")),
                    "{}",
                    fx["name"]
                );
                continue;
            };
            let Samples::Int(want) = block.samples else {
                panic!("integer samples");
            };
            let mut limits = engine.adapter.limits;
            let whole = pollster::block_on(engine.upload_with_limits(&acq, corr, limits)).unwrap();
            // Dectris's 8 KiB blocks all take the parsed path when their tables fit.
            if fx["filters"].to_string().contains("bitshuffle") {
                assert_eq!(whole.gpu_inflated_in_place, 0, "{}", fx["name"]);
            }
            // One tile per buffer: windows of whole chunks then cross tiles and buffers.
            limits.max_storage_binding = whole.plan.tile_words as u64 * 4;
            let split = pollster::block_on(engine.upload_with_limits(&acq, corr, limits)).unwrap();
            // Both through the GPU decoder, not the CPU path (which builds no block tables).
            for res in [&whole, &split] {
                assert!(
                    res.upload_times
                        .0
                        .iter()
                        .any(|(step, _)| *step == "block tables"),
                    "{}: GPU decode",
                    fx["name"]
                );
            }
            for res in [&whole, &split] {
                let got = pollster::block_on(products::frames(&engine, res, 0, n)).unwrap();
                if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
                    let det = res.plan.shape.det_len();
                    panic!(
                        "{} masked={mask_bad_pixels} bin={bin}: GPU decode differs at frame {}, pixel {}: {} vs {}",
                        fx["name"],
                        i / det,
                        i % det,
                        got[i],
                        want[i]
                    );
                }
                assert_eq!(got.len(), want.len());
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 8,
        "only {checked} bitshuffle fixtures decoded on the GPU"
    );
}

/// Corrupt bitshuffle/LZ4 chunks give the file's name and the problem, never a wrong image.
#[test]
fn gpu_decode_refuses_corrupt_chunks_by_name() {
    let Some(engine) = engine() else { return };
    let bad = fixtures().join("bad");
    for (case, expect) in [
        ("bslz4_corrupt_lz4", "lz4"),
        ("bslz4_truncated_chunk", "truncated"),
        ("bslz4_block_len_overflow", "block"),
        ("bslz4_huge_total", "size"),
    ] {
        let acq = open_paths(&[bad.join(case).join("data.h5")], Some([4, 6]), None)
            .unwrap_or_else(|e| panic!("{case}: metadata opens: {e}"));
        assert!(
            stem4d::upload::gpu_decode::supported(&acq, Default::default()),
            "{case}"
        );
        let err = pollster::block_on(engine.upload(&acq, Default::default()))
            .err()
            .unwrap_or_else(|| panic!("{case}: uploaded without error"))
            .to_string();
        assert!(
            err.contains("data.h5") && err.to_lowercase().contains(expect),
            "{case}: {err}"
        );
    }
}

/// The compressed synthetic acquisition (bitshuffle+LZ4 chunks in memory) decodes on the GPU
/// to the same samples the generator gives, and its products equal the CPU reference.
#[test]
fn compressed_synthetic_decodes_on_the_gpu_to_the_generated_samples() {
    use stem4d::formats::synthetic;
    let Some(engine) = engine() else { return };
    // Blocks inflated in workgroup memory (≤ 8 KiB) and in place (16 KiB, and a 9.4 KiB
    // partial block), with a raw tail of n % 8 elements.
    for (dims, block) in [([2, 3, 130, 101], 4096), ([2, 3, 130, 101], 8192)] {
        let acq = synthetic::open_compressed_blocks(dims, block).unwrap();
        assert!(stem4d::upload::gpu_decode::supported(
            &acq,
            Default::default()
        ));
        let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
        let n = acq.shape.frames();
        let got = pollster::block_on(products::frames(&engine, &res, 0, n)).unwrap();
        let det = acq.shape.det_len();
        for (i, v) in got.iter().enumerate() {
            let want = synthetic::sample(acq.shape, i / det, i % det) as u32;
            assert_eq!(*v, want, "{dims:?} blocks of {block}: sample {i}");
        }
    }
    let acq = synthetic::open_compressed([5, 7, 33, 29]).unwrap();
    let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Adf);
    (p.center, p.inner, p.outer) = (Some([16.0, 14.5]), Some(3.0), Some(11.0));
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &res, &p)).unwrap();
    assert_eq!(gpu, cpu::compute(&acq, &p).unwrap());
}

/// A resident replaced by one of the same plan lends it its buffers, cleared: byte for byte
/// (partial tiles included) the new resident is what a fresh upload makes, and its products
/// equal the CPU reference. Buffers no plan reuses are freed.
#[test]
fn a_replaced_resident_lends_its_buffers_cleared() {
    use stem4d::formats::synthetic;
    let Some(engine) = engine() else { return };
    let bytes = |res: &stem4d::gpu::Resident| -> Vec<Vec<u8>> {
        res.buffers
            .iter()
            .map(|b| pollster::block_on(engine.read_back(b, b.size())).unwrap())
            .collect()
    };
    // 15×20 = 300 positions and 13×23 = 299 take the same 19 tiles of 16: the first fills
    // the position the second leaves as padding (and its bytes differ everywhere else).
    let first = synthetic::open([15, 20, 21, 18]).unwrap();
    let old = pollster::block_on(engine.upload(&first, Default::default())).unwrap();
    let old_bytes = bytes(&old);
    let acq = synthetic::open_compressed([13, 23, 21, 18]).unwrap();
    let fresh = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    let fresh_bytes = bytes(&fresh);
    drop(fresh);
    assert_eq!(old.plan.segments.len(), 1);
    let stale = old_bytes[0]
        .iter()
        .zip(&fresh_bytes[0])
        .filter(|(o, f)| o != f)
        .count();
    assert!(
        stale > 0,
        "the old resident's bytes differ from the new one's"
    );
    engine.set_aside(old);
    assert_eq!(engine.set_aside_buffers(), 1);
    let reused = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    assert_eq!(
        engine.set_aside_buffers(),
        0,
        "the upload took the buffer set aside"
    );
    engine.release_set_aside();
    assert_eq!(
        bytes(&reused),
        fresh_bytes,
        "a reused buffer reads as a new one"
    );
    let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::SumDp);
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &reused, &p)).unwrap();
    assert_eq!(gpu, cpu::compute(&acq, &p).unwrap());
    p.kind = stem4d::products::ProductKind::MaxDp;
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &reused, &p)).unwrap();
    assert_eq!(gpu, cpu::compute(&acq, &p).unwrap());
    // Another plan (bin 2) reuses nothing: what was set aside is freed before it uploads.
    engine.set_aside(reused);
    let binned = stem4d::frames::Correction {
        bin: 2,
        ..Default::default()
    };
    let res = pollster::block_on(engine.upload(&acq, binned)).unwrap();
    assert_eq!(
        engine.set_aside_buffers(),
        0,
        "buffers of another size are freed"
    );
    let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Total);
    p.bin = 2;
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &res, &p)).unwrap();
    assert_eq!(gpu, cpu::compute(&acq, &p).unwrap());
}

/// LZ4 (32004) chunks take the GPU decoder itself (not the CPU fallback) and match the CPU.
#[test]
fn lz4_chunks_take_the_gpu_decoder() {
    use stem4d::frames::{Correction, FrameReader, Samples};
    let Some(engine) = engine() else { return };
    let fx = fixture_named("lz4_stack_u16");
    let acq = open_fixture(&fx);
    let corr = Correction {
        mask_bad_pixels: true,
        bin: 2,
    };
    let plan = stem4d::upload::plan::ResidentPlan::new(
        acq.shape.binned(2),
        acq.dtype,
        true,
        engine.adapter.limits,
    )
    .unwrap();
    let res = pollster::block_on(stem4d::upload::gpu_decode::upload(
        &engine,
        &acq,
        None,
        corr,
        &plan,
        &mut |_, _| {},
    ))
    .unwrap()
    .expect("the GPU decoder takes these LZ4 chunks");
    let n = acq.shape.frames();
    let Samples::Int(want) = FrameReader::new(&acq).block(0, n, corr).unwrap().samples else {
        panic!("integer samples");
    };
    assert_eq!(
        pollster::block_on(products::frames(&engine, &res, 0, n)).unwrap(),
        want
    );
}

/// Float32 residents: signed values over forty binary orders, −0.0, exact cancellations and
/// a rectangular scan with a ragged detector; every product equals the CPU reference's bits.
/// NaN and spans too wide for 128-bit sums are refused with the file's name.
#[test]
fn float32_residents_sum_exactly_or_refuse_by_name() {
    use stem4d::contract::Dtype;
    use stem4d::products::{ProductKind, ProductParams};
    let Some(engine) = engine() else { return };
    let dims = [4, 7, 9, 11];
    let n = dims.iter().product::<usize>();
    let noise = noise_bytes(n * 4, 99);
    let values: Vec<f32> = noise
        .chunks_exact(4)
        .enumerate()
        .map(|(i, b)| {
            let m = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let x = (m >> 8) as f32
                * 2f32.powi((m % 40) as i32 - 20)
                * if m & 1 == 0 { -1.0 } else { 1.0 };
            match i % 17 {
                0 => -0.0,
                1 => 16_777_215.0,
                2 => -16_777_215.0,
                _ => x,
            }
        })
        .collect();
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let acq = raw_acquisition(Dtype::F32, dims, bytes(&values));
    let mut checked = 0;
    for kind in ProductKind::ALL {
        let mut p = ProductParams::new(kind);
        p.center = Some([4.3, 5.1]);
        p.radius = Some(3.2);
        p.inner = Some(2.0);
        p.outer = Some(5.5);
        p.rect = Some(stem4d::contract::Region {
            r0: 1,
            r1: 8,
            c0: 2,
            c1: 11,
        });
        p.at = Some([3, 5]);
        if kind == ProductKind::Mask {
            p.mask = Some(stem4d::contract::DetectorMask::Bool(
                (0..99).map(|k| k % 3 != 1).collect(),
            ));
        }
        let what = format!("f32 {dims:?} {kind:?}");
        let gpu = pollster::block_on(products::compute(&engine, &acq, &p))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let cpu = cpu::compute(&acq, &p).unwrap();
        match kind {
            // Signed data put some centres of mass far out, where 2e-6 px is below a float32
            // ulp: DPC here is the float32 rounding of the CPU's value, as CoM is.
            ProductKind::Dpc => check("com", &what, &gpu, &cpu).unwrap(),
            ProductKind::Com | ProductKind::Idpc => check(kind.name(), &what, &gpu, &cpu).unwrap(),
            _ => compare(&what, kind.name(), &gpu, &cpu, 0.0).unwrap(),
        }
        checked += 1;
    }
    assert_eq!(checked, ProductKind::ALL.len());

    let mut nan = values.clone();
    nan[50] = f32::NAN;
    let acq = raw_acquisition(Dtype::F32, dims, bytes(&nan));
    let e = pollster::block_on(products::compute(
        &engine,
        &acq,
        &ProductParams::new(ProductKind::Total),
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains(&acq.primary) && e.contains("NaN"), "{e}");

    let mut wide = values;
    wide[7] = 1e-38;
    wide[8] = 1e30;
    let acq = raw_acquisition(Dtype::F32, dims, bytes(&wide));
    let e = pollster::block_on(products::compute(
        &engine,
        &acq,
        &ProductParams::new(ProductKind::MeanDp),
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains(&acq.primary) && e.contains("128-bit"), "{e}");
}

/// A scan crop is the sub-scan: per-position products equal the uncropped ones over the crop,
/// the sum pattern equals the uncropped one over that scan ROI, on the CPU and on the GPU
/// (which reads the crop's row runs through the CPU path, also for GPU-decodable chunks).
#[test]
fn a_scan_crop_is_the_sub_scan_on_every_backend() {
    use stem4d::contract::Region;
    use stem4d::products::{ArrayData, ProductKind, ProductParams};
    let Some(engine) = engine() else { return };
    for name in ["arina_u16", "gzip_stack_u16", "contiguous_f32_4d"] {
        let acq = open_fixture(&fixture_named(name));
        let [rows, cols] = acq.shape.scan;
        let region = Region {
            r0: 1,
            r1: rows,
            c0: 1,
            c1: cols - 1,
        };
        let cropped = acq.clone().crop_scan(region).unwrap();
        assert_eq!(cropped.shape.scan, [rows - 1, cols - 2]);
        assert!(cropped.scan_shape_source.contains("cropped"));
        for kind in [
            ProductKind::Total,
            ProductKind::Bf,
            ProductKind::Com,
            ProductKind::SumDp,
        ] {
            let mut p = ProductParams::new(kind);
            p.center = Some([acq.shape.det[0] as f64 / 2.0, acq.shape.det[1] as f64 / 2.5]);
            p.radius = Some(3.5);
            let whole = cpu::compute(&acq, &p).unwrap();
            let cut = cpu::compute(&cropped, &p).unwrap();
            let gpu = pollster::block_on(products::compute(&engine, &cropped, &p)).unwrap();
            let what = format!("{name} cropped {kind:?}");
            check(kind.name(), &what, &gpu, &cut).unwrap();
            let expected = if kind == ProductKind::SumDp {
                let mut roi = p.clone();
                roi.scan_roi = Some(region);
                cpu::compute(&acq, &roi).unwrap().data
            } else {
                // The crop's positions, picked from the whole scan (per plane for CoM).
                let v = whole.data.to_f64();
                let planes = v.len() / (rows * cols);
                let picked: Vec<f64> = (0..planes)
                    .flat_map(|k| {
                        let v = &v;
                        (region.r0..region.r1).flat_map(move |r| {
                            (region.c0..region.c1).map(move |c| v[k * rows * cols + r * cols + c])
                        })
                    })
                    .collect();
                ArrayData::F64(picked)
            };
            assert_eq!(cut.data.to_f64(), expected.to_f64(), "{what}");
        }
    }
    let acq = open_fixture(&fixture_named("arina_u16"));
    let e = acq
        .clone()
        .crop_scan(Region {
            r0: 0,
            r1: 99,
            c0: 0,
            c1: 1,
        })
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("scan crop"), "{e}");
}

/// Reads counted per source: the GPU upload must not read chunk by chunk (in a browser each
/// File API read costs ~0.5 ms: 262,144 chunk reads took 155 s on the H200 machine).
struct Counting {
    inner: std::sync::Arc<dyn stem4d::source::ByteSource>,
    reads: std::sync::atomic::AtomicUsize,
}

impl stem4d::source::ByteSource for Counting {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> stem4d::Result<()> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.read_at(offset, buf)
    }
}

#[test]
fn gpu_upload_reads_neighbouring_chunks_in_one_call() {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use stem4d::formats::synthetic;
    use stem4d::source::{ByteSource, FileSet};
    let Some(engine) = engine() else { return };
    // 60 chunks stored back to back in one "file".
    let acq = synthetic::open_compressed([6, 10, 40, 36]).unwrap();
    let counting = Arc::new(Counting {
        inner: acq.parts[0].source.clone(),
        reads: Default::default(),
    });
    let mut acq = acq;
    acq.parts[0].source = counting.clone();
    acq.files = FileSet::new(vec![counting.clone() as Arc<dyn ByteSource>]).unwrap();
    assert!(stem4d::upload::gpu_decode::supported(
        &acq,
        Default::default()
    ));
    let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    assert_eq!(
        counting.reads.load(Ordering::Relaxed),
        1,
        "one read for one window"
    );
    let got = pollster::block_on(products::frames(&engine, &res, 0, 60)).unwrap();
    let det = acq.shape.det_len();
    for (i, v) in got.iter().enumerate() {
        assert_eq!(
            *v,
            synthetic::sample(acq.shape, i / det, i % det) as u32,
            "sample {i}"
        );
    }
}

/// Opening an acquisition reads its metadata (superblock, object headers, chunk B-trees)
/// through a page cache: small reads of neighbouring bytes cost one read of the source.
#[test]
fn indexing_reads_metadata_in_pages() {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use stem4d::formats::{Acquisition, OpenOptions};
    use stem4d::source::{ByteSource, FileSet, FsSource};
    let fx = fixture_named("gzip_stack_u16");
    let counting: Vec<Arc<Counting>> = fixture_paths(&fx)
        .iter()
        .map(|p| {
            Arc::new(Counting {
                inner: Arc::new(FsSource::open(p).unwrap()),
                reads: Default::default(),
            })
        })
        .collect();
    let files = FileSet::new(
        counting
            .iter()
            .map(|c| c.clone() as Arc<dyn ByteSource>)
            .collect(),
    )
    .unwrap();
    let acq = Acquisition::open(files, &OpenOptions::default()).unwrap();
    let reads: usize = counting
        .iter()
        .map(|c| c.reads.load(Ordering::Relaxed))
        .sum();
    let chunks = match &acq.parts[0].kind {
        stem4d::formats::PartKind::Hdf5(ix) => ix.chunks.len(),
        _ => unreachable!(),
    };
    eprintln!("{reads} reads to index {chunks} chunks");
    // The whole fixture is a few pages: without the cache every header and node is a read.
    assert!(reads <= 4, "{reads} reads to index {chunks} chunks");
}

/// A [`ChunkDecoder`] standing in for the browser's decode Workers: it decodes with the
/// crate's pipeline, last job first (answers must still come back in job order), counts the
/// chunks, and fails every job from `fail_from` on.
struct TestDecoder {
    jobs: std::sync::atomic::AtomicUsize,
    fail_from: usize,
}

impl stem4d::frames::ChunkDecoder for TestDecoder {
    fn decode<'a>(
        &'a self,
        jobs: Vec<stem4d::frames::ChunkJob>,
    ) -> stem4d::frames::LocalFuture<'a, Vec<Result<Vec<u8>, String>>> {
        use std::sync::atomic::Ordering;
        let mut out: Vec<_> = jobs
            .iter()
            .rev()
            .map(|j| {
                let seen = self.jobs.fetch_add(1, Ordering::Relaxed);
                if seen >= self.fail_from {
                    return Err("worker refused the chunk".to_string());
                }
                stem4d::decode::decode_chunk(&j.filters, j.filter_mask, &j.raw, j.expected, j.elem)
                    .map_err(|e| e.0)
            })
            .collect();
        out.reverse();
        Box::pin(std::future::ready(out))
    }

    fn workers(&self) -> usize {
        3
    }
}

/// Chunks the WGSL decoder does not take (deflate, shuffle) go to the engine's chunk decoder
/// (the browser's Worker pool) once each, ahead of the window that packs them; the resident
/// is the same bytes as when the reader decodes them itself, for whole, cropped and binned
/// uploads; a chunk the decoder refuses is named by file and chunk.
#[test]
fn chunks_decoded_by_a_chunk_decoder_make_the_same_resident() {
    use std::sync::atomic::AtomicUsize;
    use stem4d::contract::Region;
    use stem4d::frames::Correction;
    use stem4d::gpu::Engine;
    use stem4d::upload::plan::DeviceLimits;
    let (Some(plain), Some(mut offloading)) = (engine(), engine()) else {
        return;
    };
    offloading.set_chunk_decoder(Box::new(TestDecoder {
        jobs: AtomicUsize::new(0),
        fail_from: usize::MAX / 2,
    }));
    assert_eq!(offloading.chunk_decode_workers(), 3);
    for name in ["gzip_stack_u16", "gzip_noshuffle_u32_3d"] {
        let acq = open_fixture(&fixture_named(name));
        let chunks = match &acq.parts[0].kind {
            stem4d::formats::PartKind::Hdf5(ix) => ix.chunks.len(),
            _ => unreachable!(),
        };
        let [rows, cols] = acq.shape.scan;
        let crop = Region {
            r0: 1,
            r1: rows,
            c0: 0,
            c1: cols - 1,
        };
        for (what, acq, bin) in [
            ("whole", acq.clone(), 1),
            ("binned", acq.clone(), 2),
            ("cropped", acq.clone().crop_scan(crop).unwrap(), 1),
        ] {
            let corr = Correction {
                mask_bad_pixels: true,
                bin,
            };
            let limits = DeviceLimits {
                // Several windows and buffers even for a fixture: chunks span windows.
                max_buffer_size: 4096,
                max_storage_binding: 4096,
            };
            let resident = |e: &Engine| {
                let res = pollster::block_on(e.upload_with_limits(&acq, corr, limits)).unwrap();
                let mut bytes = Vec::new();
                for (b, seg) in res.buffers.iter().zip(&res.plan.segments) {
                    bytes.extend(pollster::block_on(e.read_back(b, seg.bytes)).unwrap());
                }
                (bytes, res.offloaded_chunks)
            };
            let (want, none) = resident(&plain);
            let (got, offloaded) = resident(&offloading);
            assert_eq!(none, 0);
            assert!(want == got, "{name} {what}: resident differs");
            // Each chunk once, though windows split chunks (a crop skips none here: its
            // rows still cross every chunk of the stack).
            assert!(
                offloaded > 0 && offloaded <= chunks,
                "{name} {what}: {offloaded} of {chunks} chunks offloaded"
            );
            if what == "whole" {
                assert_eq!(offloaded, chunks, "{name}: every chunk decoded once");
            }
        }
    }
    let mut failing = engine().unwrap();
    failing.set_chunk_decoder(Box::new(TestDecoder {
        jobs: AtomicUsize::new(0),
        fail_from: 2,
    }));
    let acq = open_fixture(&fixture_named("gzip_stack_u16"));
    let e = pollster::block_on(failing.upload(&acq, Correction::default()))
        .err()
        .expect("a refused chunk fails the upload")
        .to_string();
    assert!(
        e.contains(&acq.primary) && e.contains("chunk [") && e.contains("worker refused"),
        "{e}"
    );
}
