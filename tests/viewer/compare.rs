//! The compare grid: other acquisitions brought up to the viewed one's view in the same
//! submission show their own exact images, with the cursor clamped to their scans; a
//! detector cannot be shared across detector shapes.

use super::{fixture_acq, open_unbinned, state};
use crate::common::*;
use serde_json::json;
use stem4d::contract::Region;
use stem4d::cpu;
use stem4d::formats::Acquisition;
use stem4d::frames::Correction;
use stem4d::gpu::Engine;
use stem4d::session::{check_shared_detector, encode_compare, OpenRequest, Panel, Session};

fn open_acq(engine: &Engine, acq: Acquisition) -> Session {
    let req = OpenRequest {
        bin: 1,
        ..Default::default()
    };
    pollster::block_on(Session::open(engine, acq, &req, 0.0, &mut |_, _, _| {})).unwrap()
}

/// The image each session's panel holds, read position by position.
fn image(engine: &Engine, s: &Session) -> Vec<f64> {
    let [rows, cols] = s.acq.shape.scan;
    (0..rows * cols)
        .map(|k| pollster::block_on(s.value_at(engine, Panel::Image, k / cols, k % cols)).unwrap())
        .collect()
}

#[test]
fn compared_acquisitions_show_their_own_exact_images_in_one_submission() {
    let Some(engine) = engine() else { return };
    let (mut viewed, acq) = open_unbinned(&engine, "arina_u16");
    // The same acquisition prepared (no decode), and a crop of it: another scan shape.
    let prepared = open_paths(&[fixtures().join("data/arina_u16.stem4d")], None, None).unwrap();
    let region = Region {
        r0: 1,
        r1: 4,
        c0: 0,
        c1: 5,
    };
    let cropped = acq.clone().crop_scan(region).unwrap();
    let mut others = [
        open_acq(&engine, prepared.clone()),
        open_acq(&engine, cropped.clone()),
    ];
    for (name, kind) in [
        (
            "an off-centre disk",
            json!({"kind": "bf", "center": [6.3, 4.6], "radius": 2.7}),
        ),
        (
            "an annulus",
            json!({"kind": "adf", "center": [6.0, 5.0], "inner": 2.0, "outer": 5.5}),
        ),
        ("a rectangle", json!({"kind": "rect", "rect": [1, 9, 2, 6]})),
        ("the total", json!({"kind": "total"})),
        ("CoM columns", json!({"kind": "com", "axis": 1})),
    ] {
        let mut image_view = kind.clone();
        image_view["cursor"] = json!([4, 6]);
        image_view["roi"] = json!([0, 5, 0, 7]);
        let st = state(json!({"image": image_view, "pattern": {"source": "cursor"}}));
        let mut enc = engine.device.create_command_encoder(&Default::default());
        {
            let mut refs: Vec<&mut Session> = others.iter_mut().collect();
            pollster::block_on(encode_compare(
                &engine,
                &mut enc,
                &mut viewed,
                &mut refs,
                &st,
            ))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        engine.queue.submit([enc.finish()]);
        let p = st.image.params();
        let want = |a: &Acquisition| {
            cpu::compute(a, &p, Correction::default())
                .unwrap()
                .data
                .to_f64()
        };
        let com = name.starts_with("CoM");
        let close = |got: Vec<f64>, want: Vec<f64>, who: &str| {
            assert_eq!(got.len(), want.len(), "{name} of {who}");
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                // CoM planes are float32 of the exact ratio; sums are exact.
                let tol = if com { 1e-5 * w.abs().max(1.0) } else { 0.0 };
                assert!(
                    (g - w).abs() <= tol,
                    "{name} of {who} at {k}: {g} against {w}"
                );
            }
        };
        let whole = want(&acq);
        // CoM is component-major: [2, rows, cols]; the panel shows component 1.
        let axis_of = |v: Vec<f64>| if com { v[v.len() / 2..].to_vec() } else { v };
        close(
            image(&engine, &viewed),
            axis_of(whole.clone()),
            "the viewed acquisition",
        );
        close(
            image(&engine, &others[0]),
            axis_of(want(&prepared)),
            "the prepared one",
        );
        close(
            image(&engine, &others[1]),
            axis_of(want(&cropped)),
            "the crop",
        );
        assert_eq!(
            axis_of(want(&prepared)),
            axis_of(whole),
            "{name}: prepared = original"
        );
    }
    // The crop's cursor is the viewed one's clamped to its 3×5 scan; its ROI is the pattern's.
    let st = state(
        json!({"image": {"kind": "total", "cursor": [4, 6], "roi": [0, 5, 0, 7],
        "display": {"zoom": 4.0, "pan": [1.0, 1.0]}}, "pattern": {"source": "mean"}}),
    );
    let theirs = st.for_compare([3, 5]);
    assert_eq!(theirs.image.cursor, [2, 4]);
    assert_eq!(
        (
            theirs.image.roi,
            theirs.image.display.zoom,
            theirs.image.display.pan
        ),
        (None, 1.0, None)
    );
    assert_eq!(
        (theirs.image.kind, theirs.pattern.source),
        (st.image.kind, st.pattern.source)
    );
}

#[test]
fn a_shared_detector_refuses_another_detector_shape_by_name() {
    let arina = fixture_acq("arina_u16");
    let emd = fixture_acq("emd_u16_contig");
    let e = check_shared_detector("arina_u16_master.h5", &arina, "emd_u16_contig.h5", &emd, 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("emd_u16_contig.h5: its detector is 8×9 pixels and that of arina_u16_master.h5 is 13×11"),
        "{e}"
    );
    let e = check_shared_detector("a", &arina, "b", &emd, 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("4×5 pixels (bin 2)") && e.contains("7×6"), "{e}");
    // The same detector shape, whatever the scans.
    let crop = arina
        .clone()
        .crop_scan(Region {
            r0: 0,
            r1: 2,
            c0: 1,
            c1: 3,
        })
        .unwrap();
    check_shared_detector("a", &arina, "b", &crop, 1).unwrap();
}
