//! Hot and dead pixels found in the mean pattern, and the BF fit that sees past them: the
//! CPU reference, the GPU engine and the viewer's open find exactly the pixels the numpy
//! reference (tests/fixtures/make_fixtures.py) finds, zero them with masking on, and fit the
//! disk of the fixtures made with hot pixels within a pixel of the truth, masked or not
//! (C-BAD-FOUND, C-FIT).

mod common;

use common::*;
use serde_json::Value;
use stem4d::frames::Correction;
use stem4d::session::{OpenRequest, Session};

fn pixels(v: &Value) -> Vec<[usize; 2]> {
    v.as_array()
        .expect("pixel list")
        .iter()
        .map(|p| usize2(p).expect("[row, col]"))
        .collect()
}

fn fixtures() -> Vec<Value> {
    manifest()["fixtures"]
        .as_array()
        .expect("fixtures")
        .iter()
        .filter(|fx| fixture_paths(fx).iter().all(|p| p.exists()))
        .cloned()
        .collect()
}

const MASKED: Correction = Correction {
    mask_bad_pixels: true,
    bin: 1,
};

/// C-BAD-FOUND on the CPU: the hot and dead pixels numpy's implementation of the rule finds.
#[test]
fn the_cpu_reference_finds_the_pixels_numpy_finds() {
    let mut seen_hot = 0;
    for fx in fixtures() {
        let acq = open_fixture(&fx);
        let found = stem4d::cpu::find_bad_pixels(&acq, MASKED).unwrap();
        let want = &fx["found_bad_pixels"];
        assert_eq!(found.hot, pixels(&want["hot"]), "{} hot", fx["name"]);
        assert_eq!(found.dead, pixels(&want["dead"]), "{} dead", fx["name"]);
        seen_hot += found.hot.len();
    }
    assert!(seen_hot >= 5, "the fixtures hold hot pixels to find");
}

fn open(engine: &stem4d::gpu::Engine, fx: &Value, mask: bool) -> Session {
    let req = OpenRequest {
        bin: 1,
        mask_bad_pixels: mask,
        ..Default::default()
    };
    pollster::block_on(Session::open(
        engine,
        open_fixture(fx),
        &req,
        0.0,
        &mut |_, _, _| {},
    ))
    .unwrap_or_else(|e| panic!("{}: {e}", fx["name"]))
}

#[test]
fn the_viewer_finds_the_same_pixels_and_fits_like_numpy() {
    let Some(engine) = engine() else { return };
    for fx in fixtures() {
        let name = fx["name"].as_str().unwrap_or_default();
        let s = open(&engine, &fx, true);
        let report = s.profile.bad_pixels.as_ref().expect("bad-pixel provenance");
        let want = &fx["found_bad_pixels"];
        assert!(report.masked, "{name}");
        assert_eq!(report.hot, pixels(&want["hot"]), "{name} hot");
        assert_eq!(report.dead, pixels(&want["dead"]), "{name} dead");
        let fit = f64s(&fx["bf_fit"]).expect("bf_fit");
        for (got, want) in s.bf_fit.iter().zip(&fit) {
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "{name}: fit {:?} vs {fit:?}",
                s.bf_fit
            );
        }
        let implausible = fx["implausible_bf_fit"].as_bool().unwrap_or(false);
        assert_eq!(
            s.bf_fit_warning.is_some(),
            implausible,
            "{name}: {:?}",
            s.bf_fit_warning
        );
        if let Some(w) = &s.bf_fit_warning {
            assert!(
                s.profile.warnings.contains(w),
                "{name}: the warning joins the profile"
            );
        }
    }
}

/// C-FIT: the disk within a pixel of the truth past hot pixels, masked or not.
#[test]
fn the_disk_is_found_past_hot_pixels_with_masking_on_and_off() {
    let Some(engine) = engine() else { return };
    let mut fixtures_with_truth = 0;
    for fx in fixtures()
        .into_iter()
        .filter(|fx| fx["true_bf_disk"].is_array())
    {
        fixtures_with_truth += 1;
        let name = fx["name"].as_str().unwrap_or_default().to_string();
        let truth = f64s(&fx["true_bf_disk"]).expect("true disk");
        for mask in [true, false] {
            let s = open(&engine, &fx, mask);
            let [r, c, radius] = s.bf_fit;
            let off = (r - truth[0]).hypot(c - truth[1]);
            assert!(
                off <= 1.0 && (radius - truth[2]).abs() <= 1.0,
                "{name} mask {mask}: {:?} vs {truth:?}",
                s.bf_fit
            );
            assert_eq!(s.bf_fit_warning, None, "{name} mask {mask}");
            let report = s.profile.bad_pixels.as_ref().expect("provenance");
            assert!(report.hot_count >= 2, "{name} mask {mask}: {report:?}");
            let unmasked_said = s.profile.warnings.iter().any(|w| w.contains("not masked"));
            assert_eq!(unmasked_said, !mask, "{name}: {:?}", s.profile.warnings);
        }
    }
    assert_eq!(fixtures_with_truth, 2);
}

/// With masking on, the found pixels are zeroed on the GPU exactly where the CPU reference
/// zeroes them: every masked product of the hot-pixel fixtures is the same on both, and the
/// hot pixels read 0 in the sum pattern (C-BAD, C-BAD-FOUND).
#[test]
fn found_pixels_are_zeroed_alike_on_both_backends() {
    let Some(engine) = engine() else { return };
    for fx in fixtures()
        .into_iter()
        .filter(|fx| fx["true_bf_disk"].is_array())
    {
        let acq = open_fixture(&fx);
        let hot = pixels(&fx["found_bad_pixels"]["hot"]);
        for entry in fx["products"].as_array().expect("products") {
            let kind = entry["kind"].as_str().unwrap_or_default();
            let (p, corr) = params(kind, &entry["params"]);
            let cpu = stem4d::cpu::compute(&acq, &p, corr).unwrap();
            let gpu = pollster::block_on(stem4d::products::gpu::compute(&engine, &acq, &p, corr))
                .unwrap();
            let (c, g) = (cpu.data.to_f64(), gpu.data.to_f64());
            assert_eq!(cpu.shape, gpu.shape, "{} {kind}", fx["name"]);
            for (k, (a, b)) in c.iter().zip(&g).enumerate() {
                // The GPU's CoM is the float32 rounding of the exact quotient (the contract).
                let want = if kind == "com" { *a as f32 as f64 } else { *a };
                assert_eq!(want, *b, "{} {kind} [{k}]: cpu {a} gpu {b}", fx["name"]);
            }
            if kind == "sum-dp" && corr.mask_bad_pixels && corr.bin == 1 {
                let cols = acq.shape.det[1];
                for [r, c2] in &hot {
                    assert_eq!(
                        c[r * cols + c2],
                        0.0,
                        "{} hot pixel ({r}, {c2}) zeroed",
                        fx["name"]
                    );
                }
            }
        }
    }
}

/// The zeroing kernel (`src/kernels/zero_pixels.rs`) clears exactly the listed pixels at every position of every segment
/// of a resident split across buffers (one tile per buffer here), and nothing else: the
/// zeroed resident reads back as the CPU frames with those pixels zeroed.
#[test]
fn zeroing_reaches_every_segment_of_a_split_resident() {
    let Some(engine) = engine() else { return };
    // 35 frames: three 16-position tiles, one per buffer.
    let dims = [5, 7, 48, 40];
    let acq = raw_acquisition(
        stem4d::contract::Dtype::U16,
        dims,
        noise_bytes(dims.iter().product::<usize>() * 2, 11),
    );
    let corr = MASKED;
    let whole = pollster::block_on(engine.upload(&acq, corr)).unwrap();
    let mut limits = engine.adapter.limits;
    limits.max_storage_binding = whole.plan.tile_words as u64 * 4;
    let mut res = pollster::block_on(engine.upload_with_limits(&acq, corr, limits)).unwrap();
    assert!(
        res.buffers.len() > 1,
        "split into {} buffers",
        res.buffers.len()
    );
    let det = acq.shape.det;
    let pixels: Vec<u32> = [[5, 33], [23, 19], [0, 0], [47, 39]]
        .iter()
        .map(|[r, c]| (r * det[1] + c) as u32)
        .collect();
    engine.zero_pixels(&mut res, &pixels).unwrap();
    let p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Binned);
    let got = pollster::block_on(stem4d::products::gpu::compute_resident(
        &engine, &acq, &res, &p,
    ))
    .unwrap()
    .data
    .to_f64();
    let mut want = stem4d::frames::FrameReader::new(&acq)
        .block(0, acq.shape.frames(), corr)
        .unwrap();
    let mut mask = vec![false; det[0] * det[1]];
    for &k in &pixels {
        mask[k as usize] = true;
    }
    want.zero_pixels(&mask);
    let stem4d::frames::Samples::Int(want) = want.samples else {
        panic!("integer frames")
    };
    let want: Vec<f64> = want.iter().map(|&v| v as f64).collect();
    assert_eq!(got, want);
}
