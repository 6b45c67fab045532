//! DPC magnitude (`commag`) and direction (`comdir`) in the session: readouts, exports and
//! colours within the bounds the contract's DPC bound implies, redrawn only when they change
//! (C-DPC-POLAR).

use super::{open_unbinned, state};
use crate::common::*;
use serde_json::json;
use stem4d::cpu;
use stem4d::formats::Acquisition;
use stem4d::frames::Correction;
use stem4d::products::{ProductKind, ProductParams};
use stem4d::session::{Panel, ViewState};

/// The DPC of `acq` (float64 CPU reference) as [magnitude, angle] per position.
fn dpc_polar_reference(acq: &Acquisition, rotation: f64, flip: bool) -> Vec<[f64; 2]> {
    let mut p = ProductParams::new(ProductKind::Dpc);
    (p.rotation, p.flip) = (rotation, flip);
    let g = cpu::compute(acq, &p, Correction::default())
        .unwrap()
        .data
        .to_f64();
    let n = g.len() / 2;
    (0..n)
        .map(|k| stem4d::contract::dpc_polar([g[k], g[n + k]]))
        .collect()
}

/// The contract's DPC bound and what it implies for a magnitude `m` and its direction (see
/// `tests/display_gpu/dpc_polar.rs`): `None` where a vector that short has no determined direction.
const DPC_EPS: f64 = 2e-6;
fn magnitude_bound(m: f64) -> f64 {
    2f64.sqrt() * DPC_EPS + 8.0 * f32::EPSILON as f64 * m
}
fn angle_bound(m: f64) -> Option<f64> {
    let ratio = 2f64.sqrt() * DPC_EPS / m;
    (ratio < 1.0).then(|| ratio.asin() + 2e-6)
}
fn angle_diff(a: f64, b: f64) -> f64 {
    let d = (a - b).rem_euclid(std::f64::consts::TAU);
    d.min(std::f64::consts::TAU - d)
}

fn polar_state(kind: &str, rotation: f64, flip: bool) -> ViewState {
    state(json!({
        "image": {"kind": kind, "rotation": rotation, "flip": flip, "cursor": [0, 0],
                  "display": {"scale": "sqrt"}},
        "pattern": {"source": "mean"}
    }))
}

/// DPC magnitude (`commag`) and direction (`comdir`) on an odd, rectangular scan with
/// rotation and flip: every hover readout within the bounds the contract's DPC bound implies
/// of the float64 CPU reference (the direction in degrees), the `.npy` exports (float32
/// magnitude, angle in radians) from the exact DPC product, the direction's stats naming the
/// colour wheel and describing the magnitude, and PNGs coloured accordingly.
#[test]
fn dpc_magnitude_and_direction_follow_the_cpu_reference() {
    let Some(engine) = engine() else { return };
    for name in ["arina_u16", "emd_f32"] {
        let (mut s, acq) = open_unbinned(&engine, name);
        let [rows, cols] = acq.shape.scan;
        let (rotation, flip) = (30.0, true);
        let want = dpc_polar_reference(&acq, rotation, flip);
        let mut bounded = 0;
        pollster::block_on(s.update(&engine, &polar_state("commag", rotation, flip))).unwrap();
        let magnitude_stats = pollster::block_on(s.stats_report(&engine, Panel::Image)).unwrap();
        assert_eq!(magnitude_stats.cmap, "inferno", "{name}");
        let magnitude_png = pollster::block_on(s.png(&engine, Panel::Image)).unwrap();
        assert_eq!(want.len(), rows * cols);
        for (k, &[m, _]) in want.iter().enumerate() {
            let got =
                pollster::block_on(s.value_at(&engine, Panel::Image, k / cols, k % cols)).unwrap();
            assert!(
                (got - m).abs() <= magnitude_bound(m),
                "{name} |g|[{k}] {got} vs {m}"
            );
        }
        let npy = pollster::block_on(s.image_npy(&engine)).unwrap();
        let npy = stem4d::products::npy::from_bytes("commag.npy", &npy).unwrap();
        assert_eq!(npy.shape, vec![rows, cols]);
        let stem4d::products::ArrayData::F32(mags) = &npy.data else {
            panic!("{name}: the magnitude exports as float32");
        };
        for (k, (&got, [m, _])) in mags.iter().zip(&want).enumerate() {
            let tol = 4.0 * f32::EPSILON as f64 * m + 1e-12;
            assert!(
                (got as f64 - m).abs() <= tol,
                "{name} npy |g|[{k}] {got} vs {m}"
            );
        }

        pollster::block_on(s.update(&engine, &polar_state("comdir", rotation, flip))).unwrap();
        let report = pollster::block_on(s.stats_report(&engine, Panel::Image)).unwrap();
        assert_eq!(report.cmap, "wheel", "{name}");
        // The direction view's limits, range and histogram are the magnitude's.
        let near = |a: f32, b: f32| (a - b).abs() <= 1e-5 * b.abs().max(1e-3);
        assert!(
            near(report.max, magnitude_stats.max) && near(report.min, magnitude_stats.min),
            "{name}: {report:?} vs {magnitude_stats:?}"
        );
        assert_eq!(report.finite as usize, rows * cols);
        for (k, &[m, a]) in want.iter().enumerate() {
            let got =
                pollster::block_on(s.value_at(&engine, Panel::Image, k / cols, k % cols)).unwrap();
            assert!(got.abs() <= 180.0 + 1e-4, "{name}: degrees in (−180, 180]");
            if let Some(bound) = angle_bound(m) {
                bounded += 1;
                let diff = angle_diff(got.to_radians(), a);
                assert!(
                    diff <= bound,
                    "{name} angle[{k}] {got}° vs {}°",
                    a.to_degrees()
                );
            }
        }
        assert!(
            bounded > rows * cols / 2,
            "{name}: {bounded} directions bounded"
        );
        let npy = pollster::block_on(s.image_npy(&engine)).unwrap();
        let npy = stem4d::products::npy::from_bytes("comdir.npy", &npy).unwrap();
        let stem4d::products::ArrayData::F32(angles) = &npy.data else {
            panic!("{name}: the direction exports as float32");
        };
        for (k, (&got, [m, a])) in angles.iter().zip(&want).enumerate() {
            if *m > 1e-9 {
                assert!(angle_diff(got as f64, *a) <= 1e-6, "{name} npy angle[{k}]");
            }
        }
        let wheel_png = pollster::block_on(s.png(&engine, Panel::Image)).unwrap();
        assert_eq!(&wheel_png[1..4], b"PNG");
        assert_ne!(
            wheel_png, magnitude_png,
            "{name}: the wheel is not the colour map"
        );
        // The magnitude is the same whatever the rotation: the direction turns with it.
        let turned = polar_state("comdir", rotation + 90.0, flip);
        pollster::block_on(s.update(&engine, &turned)).unwrap();
        let k = (rows / 2) * cols + cols / 2;
        if let Some(bound) = angle_bound(want[k][0]) {
            let got =
                pollster::block_on(s.value_at(&engine, Panel::Image, rows / 2, cols / 2)).unwrap();
            let diff = angle_diff(got.to_radians(), want[k][1] + std::f64::consts::FRAC_PI_2);
            assert!(diff <= bound, "{name}: turned by 90°: {got}°");
        }
    }
}

/// Redraws skip what did not change: the magnitude's plane (and canvas) stays put while the
/// DPC turns or flips, the direction's does not; magnitude and direction are different
/// pictures of one state; a new scale is new limits.
#[test]
fn dpc_magnitude_and_direction_redraw_only_when_they_change() {
    let Some(engine) = engine() else { return };
    let (mut s, _) = open_unbinned(&engine, "arina_u16");
    let canvas = [64, 48];
    let mut key = |st: &ViewState| {
        pollster::block_on(s.update(&engine, st)).unwrap();
        s.draw_key(Panel::Image, canvas).unwrap()
    };
    let mag = key(&polar_state("commag", 0.0, false));
    assert_eq!(key(&polar_state("commag", 0.0, false)), mag, "same view");
    assert_eq!(
        key(&polar_state("commag", 45.0, true)),
        mag,
        "|g| ignores the turn"
    );
    let dir = key(&polar_state("comdir", 45.0, true));
    assert_ne!(dir.0, mag.0, "a direction plane of its own");
    assert_eq!(dir.1.wheel, 1);
    assert_eq!(mag.1.wheel, 0);
    assert_eq!(key(&polar_state("comdir", 45.0, true)), dir, "same view");
    let turned = key(&polar_state("comdir", 50.0, true));
    assert_ne!(turned.0, dir.0, "the direction turns");
    let flipped = key(&polar_state("comdir", 50.0, false));
    assert_ne!(flipped.0, turned.0, "and flips");
    let mut linear = polar_state("comdir", 50.0, false);
    linear.image.display.scale = stem4d::display::Scale::Linear;
    let relimited = key(&linear);
    assert_ne!(relimited.0, flipped.0, "a new scale is new limits");
    assert_ne!(relimited.1.scale, flipped.1.scale);
}
