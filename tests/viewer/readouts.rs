//! Hover readouts are the exact products: BF, patterns, DF, sum patterns over a scan ROI and
//! DPC follow the view; float32 data through exact GPU sums; a circular scan ROI sums
//! exactly the positions inside it; weighted masks past the GPU's weights come from the reference.

use super::{bf_state, cpu_at, open_unbinned, state};
use crate::common::*;
use serde_json::json;
use stem4d::cpu;
use stem4d::frames::Correction;
use stem4d::products::{ProductKind, ProductParams};
use stem4d::session::Panel;

/// Hover readouts are the exact products, not the display planes (C-DISPLAY).
#[test]
fn readouts_follow_the_view_and_equal_the_cpu_reference() {
    let Some(engine) = engine() else { return };
    let (mut s, acq) = open_unbinned(&engine, "arina_u16");
    let [rows, cols] = acq.shape.scan;
    let fit = cpu::compute(
        &acq,
        &ProductParams::new(ProductKind::FitBf),
        Correction::default(),
    )
    .unwrap();
    assert_eq!(s.bf_fit.to_vec(), fit.data.to_f64());
    assert_eq!(s.profile.shape, acq.shape.as_array());
    assert!(s.profile.resident_payload_bytes.unwrap() > 0);

    for (center, radius, cursor) in [
        ([6.0, 5.5], 3.0, [0, 0]),
        ([4.2, 6.1], 2.5, [rows - 1, cols - 2]),
    ] {
        pollster::block_on(s.update(&engine, &bf_state(center, radius, cursor))).unwrap();
        let mut p = ProductParams::new(ProductKind::Bf);
        (p.center, p.radius) = (Some(center), Some(radius));
        for (r, c) in [(0, 0), (rows - 1, cols - 1), (2, 3)] {
            let got = pollster::block_on(s.value_at(&engine, Panel::Image, r, c)).unwrap();
            assert_eq!(got, cpu_at(&acq, &p, r * cols + c), "BF at ({r}, {c})");
        }
        let mut pat = ProductParams::new(ProductKind::Pattern);
        pat.at = Some(cursor);
        let det_cols = acq.shape.det[1];
        for (i, j) in [(0, 0), (3, 4), (acq.shape.det[0] - 1, det_cols - 1)] {
            let got = pollster::block_on(s.value_at(&engine, Panel::Pattern, i, j)).unwrap();
            assert_eq!(
                got,
                cpu_at(&acq, &pat, i * det_cols + j),
                "pattern at {cursor:?}"
            );
        }
    }

    // DF through the cached totals, and the sum pattern over a scan ROI: exact readouts.
    pollster::block_on(s.update(&engine, &state(json!({
        "image": {"kind": "df", "center": [6, 5], "radius": 2.0, "cursor": [1, 1], "roi": [1, 4, 2, 6]},
        "pattern": {"source": "sum"}
    }))))
    .unwrap();
    let mut df = ProductParams::new(ProductKind::Df);
    (df.center, df.radius) = (Some([6.0, 5.0]), Some(2.0));
    assert_eq!(
        pollster::block_on(s.value_at(&engine, Panel::Image, 3, 4)).unwrap(),
        cpu_at(&acq, &df, 3 * cols + 4)
    );
    let mut sum = ProductParams::new(ProductKind::SumDp);
    sum.scan_roi = Some(stem4d::contract::Region {
        r0: 1,
        r1: 4,
        c0: 2,
        c1: 6,
    });
    assert_eq!(
        pollster::block_on(s.value_at(&engine, Panel::Pattern, 5, 5)).unwrap(),
        cpu_at(&acq, &sum, 5 * acq.shape.det[1] + 5)
    );

    // DPC with rotation and flip: the display plane within f32 of the CPU reference.
    pollster::block_on(s.update(
        &engine,
        &state(json!({
            "image": {"kind": "dpc", "axis": 1, "rotation": 30.0, "flip": true, "cursor": [0, 0]},
            "pattern": {"source": "mean"}
        })),
    ))
    .unwrap();
    let mut dpc = ProductParams::new(ProductKind::Dpc);
    (dpc.rotation, dpc.flip) = (30.0, true);
    let want = cpu_at(&acq, &dpc, rows * cols + 2 * cols + 1);
    let got = pollster::block_on(s.value_at(&engine, Panel::Image, 2, 1)).unwrap();
    assert!((got - want).abs() < 1e-3, "dpc {got} vs {want}");
    let stats = pollster::block_on(s.stats(&engine, Panel::Image)).unwrap();
    assert!(stats.lo < stats.hi);
    let png = pollster::block_on(s.png(&engine, Panel::Pattern)).unwrap();
    assert_eq!(&png[1..4], b"PNG");
}

#[test]
fn float32_acquisitions_are_viewed_through_exact_gpu_sums() {
    let Some(engine) = engine() else { return };
    let (mut s, acq) = open_unbinned(&engine, "emd_f32");
    assert_eq!(s.profile.products_on, "gpu");
    assert!(s.profile.resident_payload_bytes.is_some());
    pollster::block_on(s.update(&engine, &bf_state([5.0, 6.0], 3.0, [1, 2]))).unwrap();
    let mut p = ProductParams::new(ProductKind::Bf);
    (p.center, p.radius) = (Some([5.0, 6.0]), Some(3.0));
    let cols = acq.shape.scan[1];
    let got = pollster::block_on(s.value_at(&engine, Panel::Image, 1, 1)).unwrap();
    assert_eq!(got, cpu_at(&acq, &p, cols + 1) as f32 as f64);
    // `stem4d.product` on the float resident: the CPU reference's values, bit for bit.
    for kind in [ProductKind::MeanDp, ProductKind::Total, ProductKind::MaxDp] {
        let p = ProductParams::new(kind);
        let gpu = pollster::block_on(s.product(&engine, &p, Correction::default())).unwrap();
        let cpu = stem4d::cpu::compute(&acq, &p, Correction::default()).unwrap();
        assert_eq!(gpu.data, cpu.data, "{kind:?}");
    }
}

#[test]
fn a_circular_scan_roi_sums_exactly_the_positions_inside_it() {
    let Some(engine) = engine() else { return };
    let (mut s, acq) = open_unbinned(&engine, "arina_u16");
    let [rows, cols] = acq.shape.scan;
    let (centre, radius) = ([2.3, 3.6], 2.2);
    for source in ["sum", "mean"] {
        pollster::block_on(s.update(&engine, &state(json!({
            "image": {"kind": "total", "cursor": [0, 0], "roiCircle": [centre[0], centre[1], radius]},
            "pattern": {"source": source}
        }))))
        .unwrap();
        let det = acq.shape.det_len();
        let mut want = vec![0u64; det];
        let mut count = 0;
        for r in 0..rows {
            for c in 0..cols {
                let (dr, dc) = (r as f64 - centre[0], c as f64 - centre[1]);
                if dr * dr + dc * dc <= radius * radius {
                    count += 1;
                    let mut p = ProductParams::new(ProductKind::Pattern);
                    p.at = Some([r, c]);
                    for (w, v) in want.iter_mut().zip(
                        cpu::compute(&acq, &p, Correction::default())
                            .unwrap()
                            .data
                            .to_f64(),
                    ) {
                        *w += v as u64;
                    }
                }
            }
        }
        assert!(count > 3 && count < rows * cols);
        let kc = acq.shape.det[1];
        for k in [0, 17, det / 2, det - 1] {
            let got =
                pollster::block_on(s.value_at(&engine, Panel::Pattern, k / kc, k % kc)).unwrap();
            let exact = want[k] as f64;
            match source {
                "sum" => assert_eq!(got, exact, "sum pattern pixel {k}"),
                _ => assert!(
                    (got - exact / count as f64).abs() <= 1e-4 * exact.max(1.0),
                    "mean pixel {k}: {got}"
                ),
            }
        }
    }
    let both = json!({"image": {"kind": "total", "roi": [0, 2, 0, 2], "roiCircle": [1, 1, 1]}, "pattern": {"source": "sum"}});
    assert!(pollster::block_on(s.update(&engine, &state(both)))
        .unwrap_err()
        .to_string()
        .contains("not both"));
    let empty =
        json!({"image": {"kind": "total", "roiCircle": [-9, -9, 1]}, "pattern": {"source": "sum"}});
    assert!(pollster::block_on(s.update(&engine, &state(empty)))
        .unwrap_err()
        .to_string()
        .contains("no position"));
}

/// `stem4d.product` with a weighted mask of more distinct weights than the GPU combines:
/// the session computes it on the CPU reference (the GPU declines it as unsupported), the
/// reference's values exactly (C-WEIGHTS).
#[test]
fn weighted_masks_past_the_gpus_weights_come_from_the_reference() {
    let Some(engine) = engine() else { return };
    let (mut s, acq) = open_unbinned(&engine, "arina_u16");
    let n = acq.shape.det[0] * acq.shape.det[1];
    let w: Vec<f64> = (0..n).map(|k| 0.25 + (k % 70) as f64).collect();
    let mut p = ProductParams::new(ProductKind::Mask);
    p.mask = Some(stem4d::contract::DetectorMask::Weighted(w));
    let got = pollster::block_on(s.product(&engine, &p, Correction::default())).unwrap();
    let want = stem4d::cpu::compute(&acq, &p, Correction::default()).unwrap();
    assert_eq!(got, want);
}
