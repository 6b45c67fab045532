//! Whole products against the CPU reference: every product of every fixture, the
//! position-tiled kernels at tile edges and sample limits, weighted masks, iDPC at any scan
//! size, float32 residents, and scan crops.

use super::check;
use crate::common::*;
use stem4d::cpu;
use stem4d::frames::Correction;
use stem4d::products::gpu as products;
use stem4d::products::ArrayData;

/// Every product of every fixture on the GPU under the contract's bounds: C-MASK, C-REDUCE,
/// C-COM, C-DPC, C-DPC-MEAN, C-IDPC, C-BAD and C-BAD-FOUND (masked products), C-BIN-COMPOSE,
/// C-FLOAT-GPU (float32 fixtures, bit for bit), C-BOUND-FLOAT-MEAN (`mean-dp-f32`).
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
            let (params, corr) = params(kind, &p["params"]);
            // Moments of u32 detectors can exceed 64 bits; the engine refuses them (tested below).
            let what = format!("{name} {}", p["ref"].as_str().unwrap());
            let gpu = match pollster::block_on(products::compute(&engine, &acq, &params, corr)) {
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
                Err(e) if float && corr.bin > 1 => {
                    assert!(e.to_string().contains("binned float32"), "{what}: {e}");
                    continue;
                }
                Err(e) => {
                    failures.push(format!("{what}: {e}"));
                    continue;
                }
            };
            let cpu = cpu::compute(&acq, &params, corr).unwrap();
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
/// sentinels included), with and without bad-pixel masking, on rectangular scans (C-MASK:
/// sums past 32 bits stay exact; C-BAD).
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
                let corr = Correction {
                    mask_bad_pixels: mask_bad,
                    bin: 1,
                };
                let gpu = pollster::block_on(products::compute(&engine, &acq, &p, corr))
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let cpu = cpu::compute(&acq, &p, corr).unwrap();
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

/// Weighted masks on the GPU meet the CPU's float64 bound (C-WEIGHTS).
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
        let gpu = pollster::block_on(products::compute(&engine, &acq, &p, Correction::default()))
            .unwrap();
        let cpu = cpu::compute(&acq, &p, Correction::default()).unwrap();
        compare(name, "mask", &gpu, &cpu, 1e-12).unwrap();
    }
}

/// A weighted mask with more distinct weights than the GPU path combines (64) is refused by
/// the GPU backend as unsupported, by name, never approximated (C-WEIGHTS); the session then
/// computes it on the CPU reference, the same values (tests/viewer/readouts.rs).
#[test]
fn weighted_masks_past_the_gpus_weights_are_refused_by_name() {
    let Some(engine) = engine() else { return };
    let fx = fixture_named("arina_u16");
    let acq = open_fixture(&fx);
    let n = acq.shape.det[0] * acq.shape.det[1];
    // 65 distinct weights, the rest of the pixels left out.
    let w: Vec<f64> = (0..n)
        .map(|k| if k < 65 { 1.0 + k as f64 / 8.0 } else { 0.0 })
        .collect();
    let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Mask);
    p.mask = Some(stem4d::contract::DetectorMask::Weighted(w));
    let e = pollster::block_on(products::compute(&engine, &acq, &p, Correction::default()))
        .unwrap_err();
    assert!(e.is_gpu_unsupported(), "{e:?}");
    assert!(e.to_string().contains("65 distinct weights"), "{e}");
}

/// iDPC on the GPU (Stockham and Bluestein FFTs around the Fourier-integration filter)
/// against the CPU reference's float64 FFT, on power-of-two, odd and mixed scan sizes
/// (C-IDPC-GPU, within C-BOUND-IDPC).
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

/// Float32 residents: signed values over forty binary orders, −0.0, exact cancellations and
/// a rectangular scan with a ragged detector; every product equals the CPU reference's bits.
/// NaN and spans too wide for 128-bit sums are refused with the file's name (C-FLOAT-GPU).
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
        let gpu = pollster::block_on(products::compute(&engine, &acq, &p, Correction::default()))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let cpu = cpu::compute(&acq, &p, Correction::default()).unwrap();
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
        Correction::default(),
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
        Correction::default(),
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains(&acq.primary) && e.contains("128-bit"), "{e}");
}

/// A scan crop is the sub-scan: per-position products equal the uncropped ones over the crop,
/// the sum pattern equals the uncropped one over that scan ROI, on the CPU and on the GPU
/// (which reads the crop's row runs through the CPU path, also for GPU-decodable chunks):
/// C-CROP.
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
            let whole = cpu::compute(&acq, &p, Correction::default()).unwrap();
            let cut = cpu::compute(&cropped, &p, Correction::default()).unwrap();
            let gpu = pollster::block_on(products::compute(
                &engine,
                &cropped,
                &p,
                Correction::default(),
            ))
            .unwrap();
            let what = format!("{name} cropped {kind:?}");
            check(kind.name(), &what, &gpu, &cut).unwrap();
            let expected = if kind == ProductKind::SumDp {
                let mut roi = p.clone();
                roi.scan_roi = Some(region);
                cpu::compute(&acq, &roi, Correction::default())
                    .unwrap()
                    .data
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
