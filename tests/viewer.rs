//! The viewing session the page drives, on lavapipe: open → resident → derived totals and
//! CoM; view updates recompute only the planes whose inputs changed; hover readouts are the
//! exact products; products re-upload on a new bin; float32 data falls back to the CPU.

mod common;

use common::*;
use serde_json::json;
use stem4d::cpu;
use stem4d::formats::Acquisition;
use stem4d::gpu::Engine;
use stem4d::products::{ProductKind, ProductParams};
use stem4d::session::{OpenRequest, Panel, Session, ViewState};

fn fixture_acq(name: &str) -> Acquisition {
    open_fixture(&fixture_named(name))
}

fn open(engine: &Engine, name: &str, req: OpenRequest) -> Session {
    let acq = fixture_acq(name);
    let mut stages = Vec::new();
    let s = pollster::block_on(Session::open(engine, acq, &req, 0.0, &mut |st, d, n| {
        stages.push((st.to_string(), d, n))
    }))
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    if s.profile.products_on == "gpu" {
        let last = stages
            .iter()
            .rev()
            .find(|s| s.0.contains("upload"))
            .unwrap();
        assert_eq!(last.1, last.2, "{name}: upload progress ends at the total");
    }
    s
}

/// Fixture `name` opened unbinned, and the acquisition the CPU reference reads.
fn open_unbinned(engine: &Engine, name: &str) -> (Session, Acquisition) {
    let req = OpenRequest {
        bin: 1,
        ..Default::default()
    };
    (open(engine, name, req), fixture_acq(name))
}

fn state(v: serde_json::Value) -> ViewState {
    serde_json::from_value(v).unwrap()
}

fn bf_state(center: [f64; 2], radius: f64, cursor: [usize; 2]) -> ViewState {
    state(json!({
        "image": {"kind": "bf", "center": center, "radius": radius, "cursor": cursor},
        "pattern": {"source": "cursor", "display": {"log": true}}
    }))
}

fn cpu_at(acq: &Acquisition, p: &ProductParams, k: usize) -> f64 {
    cpu::compute(acq, p).unwrap().data.to_f64()[k]
}

#[test]
fn readouts_follow_the_view_and_equal_the_cpu_reference() {
    let Some(engine) = engine() else { return };
    let (mut s, acq) = open_unbinned(&engine, "arina_u16");
    let [rows, cols] = acq.shape.scan;
    let fit = cpu::compute(&acq, &ProductParams::new(ProductKind::FitBf)).unwrap();
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

fn stage_count(s: &Session, name: &str) -> usize {
    s.profile.stages.iter().filter(|st| st.name == name).count()
}

#[test]
fn an_open_leaves_the_totals_com_and_ring_sums_to_prepare() {
    let Some(engine) = engine() else { return };
    let (mut s, acq) = open_unbinned(&engine, "arina_u16");
    let [rows, cols] = acq.shape.scan;
    let (derive, rings) = ("totals + CoM moments", "ring sums about the BF centre");
    assert_eq!((stage_count(&s, derive), stage_count(&s, rings)), (0, 0));
    assert_eq!(s.ring_sums_centre(), None);
    let bf_centre = [s.bf_fit[0], s.bf_fit[1]];
    let bf = |radius| bf_state(bf_centre, radius, [1, 2]);
    let mut p = ProductParams::new(ProductKind::Bf);
    (p.center, p.radius) = (Some(bf_centre), Some(s.bf_fit[2]));
    let want = cpu::compute(&acq, &p).unwrap().data.to_f64();
    let image = |s: &Session| -> Vec<f64> {
        (0..rows * cols)
            .map(|k| {
                pollster::block_on(s.value_at(&engine, Panel::Image, k / cols, k % cols)).unwrap()
            })
            .collect()
    };
    // Before: a dense masked sum; after: ring sums about the same centre. Both exact.
    pollster::block_on(s.update(&engine, &bf(s.bf_fit[2]))).unwrap();
    assert_eq!(image(&s), want, "BF before prepare");
    let total_ms = s.profile.total_ms;
    pollster::block_on(s.prepare(&engine)).unwrap();
    assert_eq!((stage_count(&s, derive), stage_count(&s, rings)), (1, 1));
    assert!(s.profile.total_ms > total_ms);
    let centre = s.ring_sums_centre().expect("ring sums made by prepare");
    assert!((centre[0] - bf_centre[0]).abs() + (centre[1] - bf_centre[1]).abs() < 1e-9);
    pollster::block_on(s.update(&engine, &bf(1.0))).unwrap();
    pollster::block_on(s.update(&engine, &bf(s.bf_fit[2]))).unwrap();
    assert_eq!(image(&s), want, "BF from the ring sums");
    // Derived once, whatever asks for it next; a second prepare does nothing.
    pollster::block_on(s.update(
        &engine,
        &state(json!({
            "image": {"kind": "df", "center": bf_centre, "radius": 2.0, "cursor": [0, 0]},
            "pattern": {"source": "mean"}
        })),
    ))
    .unwrap();
    pollster::block_on(s.prepare(&engine)).unwrap();
    assert_eq!((stage_count(&s, derive), stage_count(&s, rings)), (1, 1));
}

#[test]
fn a_product_with_another_bin_reuploads_and_stays_exact() {
    let Some(engine) = engine() else { return };
    let (mut s, acq) = open_unbinned(&engine, "arina_u16");
    let mut p = ProductParams::new(ProductKind::Binned);
    p.bin = 3;
    p.mask_bad_pixels = true;
    pollster::block_on(s.prepare(&engine)).unwrap();
    let at_load = s.ring_sums_centre().expect("ring sums made by prepare");
    let gpu = pollster::block_on(s.product(&engine, &p)).unwrap();
    assert_eq!(gpu, cpu::compute(&acq, &p).unwrap());
    assert_eq!(s.correction().bin, 3);
    // The new resident has ring sums too, about the same centre on the binned detector.
    let binned_centre = s
        .ring_sums_centre()
        .expect("ring sums made after the re-upload");
    for (a, b) in at_load.iter().zip(binned_centre) {
        assert!(
            ((a + 0.5) / 3.0 - 0.5 - b).abs() < 1e-9,
            "{at_load:?} -> {binned_centre:?}"
        );
    }
    // The view follows the new resident: the pattern panel is the binned detector.
    pollster::block_on(s.update(&engine, &bf_state([2.0, 2.0], 1.5, [0, 0]))).unwrap();
    let binned = acq.shape.binned(3).det;
    assert!(
        pollster::block_on(s.value_at(&engine, Panel::Pattern, binned[0] - 1, binned[1] - 1))
            .is_ok()
    );
    assert!(pollster::block_on(s.value_at(&engine, Panel::Pattern, binned[0], 0)).is_err());
    // The re-upload's totals and ring sums are not the load's: its profile keeps one each.
    pollster::block_on(s.update(
        &engine,
        &state(json!({
            "image": {"kind": "df", "center": [2.0, 2.0], "radius": 1.5, "cursor": [0, 0]},
            "pattern": {"source": "mean"}
        })),
    ))
    .unwrap();
    let counts =
        ["totals + CoM moments", "ring sums about the BF centre"].map(|n| stage_count(&s, n));
    assert_eq!(counts, [1, 1], "{:?}", s.profile.stages);
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
        let gpu = pollster::block_on(s.product(&engine, &p)).unwrap();
        let cpu = stem4d::cpu::compute(&acq, &p).unwrap();
        assert_eq!(gpu.data, cpu.data, "{kind:?}");
    }
}

#[test]
fn bad_view_states_are_refused_with_their_reason() {
    let Some(engine) = engine() else { return };
    let (mut s, acq) = open_unbinned(&engine, "arina_u8");
    let [rows, _] = acq.shape.scan;
    for (v, want) in [
        (
            json!({"image": {"kind": "bf", "center": [4, 4], "radius": 2, "cursor": [rows, 0]}, "pattern": {"source": "cursor"}}),
            "outside",
        ),
        (
            json!({"image": {"kind": "bf", "center": [4, 4], "radius": 2, "display": {"cmap": "jet"}}, "pattern": {"source": "cursor"}}),
            "jet",
        ),
        (
            json!({"image": {"kind": "bf", "radius": 2}, "pattern": {"source": "cursor"}}),
            "center",
        ),
        (
            json!({"image": {"kind": "adf", "center": [4, 4], "inner": 5, "outer": 3}, "pattern": {"source": "cursor"}}),
            "inner",
        ),
        (
            json!({"image": {"kind": "point"}, "pattern": {"source": "cursor"}}),
            "point",
        ),
        (
            json!({"image": {"kind": "total", "roi": [0, 0, 0, 1]}, "pattern": {"source": "mean"}}),
            "ROI",
        ),
        (
            json!({"image": {"kind": "total", "display": {"limits": {"mode": "percentile", "lo": 50, "hi": 10}}}, "pattern": {"source": "mean"}}),
            "lo < hi",
        ),
    ] {
        let e = pollster::block_on(s.update(&engine, &state(v.clone())))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{v}: {e}");
    }
    let unknown = serde_json::from_value::<ViewState>(
        json!({"image": {"kind": "bf", "centre": [1, 1]}, "pattern": {"source": "cursor"}}),
    );
    assert!(unknown.unwrap_err().to_string().contains("centre"));
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
                    for (w, v) in want
                        .iter_mut()
                        .zip(cpu::compute(&acq, &p).unwrap().data.to_f64())
                    {
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

#[test]
fn a_scan_crop_opens_the_sub_scan_and_says_so() {
    let Some(engine) = engine() else { return };
    let acq = fixture_acq("arina_u16");
    let [rows, cols] = acq.shape.scan;
    let mut s = open(
        &engine,
        "arina_u16",
        OpenRequest {
            bin: 1,
            crop: Some([1, rows, 2, cols]),
            ..Default::default()
        },
    );
    assert_eq!(s.profile.scan_crop, Some([1, rows, 2, cols]));
    assert_eq!(s.profile.shape[..2], [rows - 1, cols - 2]);
    pollster::block_on(s.update(&engine, &bf_state([6.0, 5.0], 3.0, [0, 0]))).unwrap();
    let mut p = ProductParams::new(ProductKind::Bf);
    (p.center, p.radius) = (Some([6.0, 5.0]), Some(3.0));
    // Position (0, 0) of the crop is (1, 2) of the stored scan.
    let got = pollster::block_on(s.value_at(&engine, Panel::Image, 0, 0)).unwrap();
    assert_eq!(got, cpu_at(&acq, &p, cols + 2));
}

/// The page keeps the acquisition open before a new one until the new one is checked and
/// planned: an open refused by its options never releases it; one that loads releases it
/// once, before its upload.
#[test]
fn an_open_releases_the_previous_session_only_once_it_is_checked() {
    let Some(engine) = engine() else { return };
    let acq = fixture_acq("arina_u16");
    let [rows, cols] = acq.shape.scan;
    let refusals = [
        (
            "crop past the scan",
            OpenRequest {
                bin: 1,
                crop: Some([0, rows + 1, 0, cols]),
                ..Default::default()
            },
        ),
        (
            "bin of zero",
            OpenRequest {
                bin: 0,
                ..Default::default()
            },
        ),
        (
            "unknown leaf reads",
            OpenRequest {
                bin: 1,
                leaves: Some("sometimes".into()),
                ..Default::default()
            },
        ),
    ];
    for (what, req) in refusals {
        let mut released = 0;
        let out = pollster::block_on(Session::open_replacing(
            &engine,
            fixture_acq("arina_u16"),
            &req,
            0.0,
            &mut |_, _, _| {},
            &mut || released += 1,
        ));
        assert!(out.is_err(), "{what}: refused");
        assert_eq!(released, 0, "{what}: the previous session stays open");
    }
    for name in ["arina_u16", "emd_f32"] {
        let mut order = Vec::new();
        let progress = std::cell::RefCell::new(Vec::new());
        let s = pollster::block_on(Session::open_replacing(
            &engine,
            fixture_acq(name),
            &OpenRequest {
                bin: 1,
                ..Default::default()
            },
            0.0,
            &mut |st, _, _| progress.borrow_mut().push(st.to_string()),
            &mut || order.push(progress.borrow().len()),
        ));
        assert!(s.is_ok(), "{name}: opens");
        assert_eq!(
            order,
            vec![0],
            "{name}: released once, before any upload progress"
        );
    }
}

/// A canvas is redrawn only when its key changes: the key must change whenever its pixels
/// would (a new plane, new limits, a new view) and stay put otherwise.
#[test]
fn draw_keys_change_exactly_with_what_a_canvas_shows() {
    let Some(engine) = engine() else { return };
    let (mut s, _) = open_unbinned(&engine, "arina_u16");
    let canvas = [64, 48];
    let view = |marker: bool, cursor: [usize; 2], radius: f64, cmap: &str| {
        state(json!({
            "image": {"kind": "bf", "center": [4.0, 5.0], "radius": radius, "cursor": cursor,
                      "cursorMarker": marker, "display": {"cmap": cmap}},
            "pattern": {"source": "cursor"}
        }))
    };
    let mut keys = |st: &ViewState| {
        pollster::block_on(s.update(&engine, st)).unwrap();
        (
            s.draw_key(Panel::Image, canvas).unwrap(),
            s.draw_key(Panel::Pattern, canvas).unwrap(),
        )
    };
    let (im0, pat0) = keys(&view(false, [0, 0], 2.0, "inferno"));
    // Same view again: nothing to redraw.
    assert_eq!(keys(&view(false, [0, 0], 2.0, "inferno")), (im0, pat0));
    // The cursor moves, drawn on the page's overlay: only the pattern changes.
    let (im1, pat1) = keys(&view(false, [1, 2], 2.0, "inferno"));
    assert_eq!(im1, im0, "the image shows no cursor");
    assert_ne!(pat1, pat0, "the pattern at the new cursor");
    // Drawn into the image, the cursor changes the image too.
    let (im2, pat2) = keys(&view(true, [1, 2], 2.0, "inferno"));
    assert_ne!(im2, im1);
    assert_eq!(pat2, pat1);
    let (im3, _) = keys(&view(true, [2, 2], 2.0, "inferno"));
    assert_ne!(im3, im2, "the marker moved");
    // A new detector is a new image (new plane and limits); the pattern's outline moves too.
    let (im4, pat4) = keys(&view(true, [2, 2], 3.0, "inferno"));
    assert_ne!(im4.0, im3.0, "a new plane generation");
    assert_ne!(pat4, pat2);
    // A colour map is a new view of the same plane.
    let (im5, _) = keys(&view(true, [2, 2], 3.0, "viridis"));
    assert_eq!(im5.0, im4.0);
    assert_ne!(im5, im4);
    // Another canvas size is another picture.
    assert_ne!(s.draw_key(Panel::Image, [65, 48]).unwrap(), im5);
}

/// With the detector drawn on the page's overlay, dragging it or resizing it leaves the
/// pattern's draw key put (its canvas is not presented again) for every detector shape,
/// and the image's key follows the new plane; drawn into the pattern, the key moves.
#[test]
fn a_detector_on_the_overlay_leaves_the_pattern_canvas_alone() {
    let Some(engine) = engine() else { return };
    let (mut s, _) = open_unbinned(&engine, "arina_u16");
    let canvas = [64, 48];
    let detectors = [
        (
            json!({"kind": "bf", "center": [4.0, 5.0], "radius": 2.0}),
            json!({"center": [4.5, 5.0], "radius": 2.5}),
        ),
        (
            json!({"kind": "df", "center": [4.0, 5.0], "radius": 2.0}),
            json!({"center": [4.0, 5.5]}),
        ),
        (
            json!({"kind": "adf", "center": [4.0, 5.0], "inner": 2.0, "outer": 4.0}),
            json!({"inner": 1.5}),
        ),
        (
            json!({"kind": "rect", "rect": [1, 4, 2, 6]}),
            json!({"rect": [1, 5, 2, 6]}),
        ),
        (
            json!({"kind": "point", "point": [3, 4]}),
            json!({"point": [3, 5]}),
        ),
    ];
    for (first, moved) in detectors {
        let mut keys = |marker: bool, image: &serde_json::Value| {
            let mut im = image.clone();
            im["detectorMarker"] = json!(marker);
            im["cursorMarker"] = json!(false);
            let st = state(json!({"image": im, "pattern": {"source": "cursor"}}));
            pollster::block_on(s.update(&engine, &st)).unwrap();
            (
                s.draw_key(Panel::Image, canvas).unwrap(),
                s.draw_key(Panel::Pattern, canvas).unwrap(),
            )
        };
        let mut next = first.clone();
        for (k, v) in moved.as_object().unwrap() {
            next[k] = v.clone();
        }
        let (im0, pat0) = keys(false, &first);
        let (im1, pat1) = keys(false, &next);
        assert_ne!(im1.0, im0.0, "{first}: a new image for the moved detector");
        assert_eq!(pat1, pat0, "{first}: the pattern's canvas is left alone");
        let (_, pat2) = keys(true, &first);
        let (_, pat3) = keys(true, &next);
        assert_ne!(
            pat2, pat0,
            "{first}: drawn into the pattern, the outline is in its key"
        );
        assert_ne!(pat3, pat2, "{first}: and it moves with the detector");
    }
}

/// The benchmarks' pass clock: where the device has timestamps, a BF update times its
/// masked sum and display kernels each as a pass of its own, a DPC turn reads no detector
/// pixels, and a timed update makes the image an untimed one makes; off, nothing is timed.
#[test]
fn timed_passes_name_each_kernel_of_an_update() {
    let Some(engine) = engine() else { return };
    let has = engine
        .device
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY);
    let (mut s, _) = open_unbinned(&engine, "arina_u16");
    let bf = bf_state([4.5, 5.0], 2.5, [3, 4]);
    pollster::block_on(s.update(&engine, &bf)).unwrap();
    let untimed = pollster::block_on(s.image_npy(&engine)).unwrap();
    assert_eq!(engine.time_passes(true), has);
    if !has {
        assert!(pollster::block_on(engine.pass_times()).unwrap().is_none());
        return;
    }
    pollster::block_on(s.update(&engine, &bf_state([4.0, 5.0], 2.0, [3, 4]))).unwrap();
    pollster::block_on(engine.pass_times()).unwrap();
    pollster::block_on(s.update(&engine, &bf)).unwrap();
    let t = pollster::block_on(engine.pass_times()).unwrap().unwrap();
    let names: Vec<&str> = t.passes.iter().map(|p| p.0).collect();
    for k in [
        "display_prep",
        "display_stats",
        "display_hist",
        "display_limits",
    ] {
        assert!(names.contains(&k), "{k} timed in {names:?}");
    }
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("masked_sum") || *n == "ring_sum"),
        "the masked sum timed in {names:?}"
    );
    assert!(t.passes.iter().all(|p| p.1.is_finite() && p.1 >= 0.0));
    assert!((t.busy_ms - t.passes.iter().map(|p| p.1).sum::<f64>()).abs() < 1e-9);
    let longest = t.passes.iter().map(|p| p.1).fold(0.0, f64::max);
    assert!(
        t.busy_ms > 0.0 && t.span_ms >= longest && t.untimed == 0,
        "{t:?}"
    );
    assert_eq!(pollster::block_on(s.image_npy(&engine)).unwrap(), untimed);
    let dpc = state(
        json!({"image": {"kind": "dpc", "rotation": 30.0, "cursor": [3, 4]}, "pattern": {"source": "cursor", "display": {"log": true}}}),
    );
    pollster::block_on(s.update(&engine, &dpc)).unwrap();
    // The first DPC image made the totals and CoM moments; the next turn is the DPC alone.
    let first = pollster::block_on(engine.pass_times()).unwrap().unwrap();
    assert!(first.passes.iter().any(|p| p.0 == "com_moments"));
    let mut turned = dpc.clone();
    turned.image.rotation = 31.0;
    pollster::block_on(s.update(&engine, &turned)).unwrap();
    let t = pollster::block_on(engine.pass_times()).unwrap().unwrap();
    assert!(
        !t.passes.is_empty()
            && t.passes
                .iter()
                .all(|p| !p.0.starts_with("masked_sum") && p.0 != "ring_sum"),
        "a DPC turn: {:?}",
        t.passes
    );
    assert!(!engine.time_passes(false));
    pollster::block_on(s.update(&engine, &bf_state([4.0, 5.0], 2.0, [3, 4]))).unwrap();
    assert!(pollster::block_on(engine.pass_times()).unwrap().is_none());
}

/// The page's open leaves B-tree leaves unread: the session reads them during the upload
/// (alone, or as the spans of their chunks), or first where the GPU decoder does not take
/// the acquisition (a crop); either way it ends with the info and products of a session on
/// an ordinary open. Two data files, each a tree of two levels.
#[test]
fn a_deferred_index_opens_the_same_session() {
    use std::sync::Arc;
    use stem4d::source::{ByteSource, FileSet, FsSource};
    let Some(engine) = engine() else { return };
    let open_set = |defer: bool| {
        let files = [
            "arina_stream_master.h5",
            "arina_stream_data_000001.h5",
            "arina_stream_data_000002.h5",
        ]
        .iter()
        .map(|n| {
            Arc::new(FsSource::open(&fixtures().join("index").join(n)).unwrap())
                as Arc<dyn ByteSource>
        })
        .collect();
        let opts = stem4d::formats::OpenOptions {
            scan_shape: Some([20, 24]),
            dataset: None,
        };
        Acquisition::open_with(FileSet::new(files).unwrap(), &opts, defer).unwrap()
    };
    // An open binned `bin`, its leaves read as `leaves` asks (the default: spans).
    let request = |bin: usize, leaves: Option<&str>| OpenRequest {
        bin,
        leaves: leaves.map(String::from),
        ..Default::default()
    };
    let cases = [
        ("leaves read alone", request(1, Some("reads")), true),
        ("leaves as spans (the default)", request(1, None), true),
        (
            "leaves read alone, binned 2",
            request(2, Some("reads")),
            true,
        ),
        ("spans, binned 2", request(2, None), true),
        (
            "cropped",
            OpenRequest {
                bin: 1,
                crop: Some([2, 9, 3, 17]),
                ..Default::default()
            },
            false,
        ),
    ];
    for (what, req, fed) in cases {
        let session = |defer: bool| {
            pollster::block_on(Session::open(
                &engine,
                open_set(defer),
                &req,
                0.0,
                &mut |_, _, _| {},
            ))
            .unwrap_or_else(|e| panic!("{what}: {e}"))
        };
        let (mut plain, mut deferred) = (session(false), session(true));
        assert_eq!(deferred.info, plain.info, "{what}");
        let stages: Vec<&str> = deferred
            .profile
            .stages
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        let during = stages.contains(&"of which chunk index (not overlapped)");
        let first = stages.contains(&"chunk index leaves");
        assert_eq!((during, first), (fed, !fed), "{what}: {stages:?}");
        // Frames written one by one keep each leaf among its chunks: by default the spans
        // that hold them are the windows.
        let spanned = deferred.profile.leaf_span_windows > 0;
        assert_eq!(spanned, fed && req.leaves.is_none(), "{what}: span windows");
        for kind in [ProductKind::Total, ProductKind::SumDp, ProductKind::Bf] {
            let mut p = ProductParams::new(kind);
            p.bin = req.bin;
            p.center = Some([3.6, 4.1]);
            p.radius = Some(2.5);
            let got = pollster::block_on(deferred.product(&engine, &p)).unwrap();
            let want = pollster::block_on(plain.product(&engine, &p)).unwrap();
            assert_eq!(got, want, "{what} {kind:?}");
        }
    }
    let bad = OpenRequest {
        bin: 1,
        leaves: Some("sometimes".into()),
        ..Default::default()
    };
    let refused = pollster::block_on(Session::open(
        &engine,
        open_set(true),
        &bad,
        0.0,
        &mut |_, _, _| {},
    ));
    let msg = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(msg.contains("leaves") && msg.contains("sometimes"), "{msg}");
}

/// The DPC of `acq` (float64 CPU reference) as [magnitude, angle] per position.
fn dpc_polar_reference(acq: &Acquisition, rotation: f64, flip: bool) -> Vec<[f64; 2]> {
    let mut p = ProductParams::new(ProductKind::Dpc);
    (p.rotation, p.flip) = (rotation, flip);
    let g = cpu::compute(acq, &p).unwrap().data.to_f64();
    let n = g.len() / 2;
    (0..n)
        .map(|k| stem4d::contract::dpc_polar([g[k], g[n + k]]))
        .collect()
}

/// The contract's DPC bound and what it implies for a magnitude `m` and its direction (see
/// `tests/display_gpu.rs`): `None` where a vector that short has no determined direction.
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

/// `scale` is linear, log or sqrt; the older `log: true/false` still reads (saved views),
/// where both are given they must agree, and anything else is refused by name.
#[test]
fn display_scales_parse_from_scale_or_the_older_log_flag() {
    use stem4d::display::Scale;
    let scale_of = |display: serde_json::Value| {
        serde_json::from_value::<ViewState>(json!({
            "image": {"kind": "total", "display": display},
            "pattern": {"source": "mean"}
        }))
        .map(|v| v.image.display.scale)
        .map_err(|e| e.to_string())
    };
    for (display, want) in [
        (json!({}), Scale::Linear),
        (json!({"log": true}), Scale::Log),
        (json!({"log": false}), Scale::Linear),
        (json!({"scale": "sqrt"}), Scale::Sqrt),
        (json!({"scale": "log", "log": true}), Scale::Log),
        (json!({"scale": "sqrt", "log": false}), Scale::Sqrt),
        (json!({"scale": "linear", "log": false}), Scale::Linear),
    ] {
        assert_eq!(scale_of(display.clone()), Ok(want), "{display}");
    }
    for (display, words) in [
        (json!({"scale": "sqrt", "log": true}), "disagree"),
        (json!({"scale": "log", "log": false}), "disagree"),
        (json!({"scale": "cubic"}), "cubic"),
        (json!({"scale": "log", "logScale": 1}), "logScale"),
    ] {
        let e = scale_of(display.clone()).unwrap_err();
        assert!(e.contains(words), "{display}: {e}");
    }
}

/// At the session: absolute limits typed in data units draw the data on a log scale (never
/// one flat colour), `stem4d.stats` reports them as given with their shown values beside,
/// and limits above every value come with a note instead of a silent black image.
#[test]
fn absolute_limits_on_a_log_scale_show_the_data_or_say_why_not() {
    let Some(engine) = engine() else { return };
    let (mut s, _) = open_unbinned(&engine, "arina_u16");
    let total = |limits: serde_json::Value| {
        state(json!({
            "image": {"kind": "total", "cursor": [0, 0],
                      "display": {"scale": "log", "limits": limits}},
            "pattern": {"source": "mean"}
        }))
    };
    pollster::block_on(s.update(
        &engine,
        &total(json!({"mode": "percentile", "lo": 0, "hi": 100})),
    ))
    .unwrap();
    let range = pollster::block_on(s.stats_report(&engine, Panel::Image)).unwrap();
    assert!(range.min < range.max);
    let (lo, hi) = (
        range.min + 0.25 * (range.max - range.min),
        range.min + 0.75 * (range.max - range.min),
    );
    pollster::block_on(s.update(
        &engine,
        &total(json!({"mode": "absolute", "lo": lo, "hi": hi})),
    ))
    .unwrap();
    let report = pollster::block_on(s.stats_report(&engine, Panel::Image)).unwrap();
    assert_eq!((report.lo, report.hi), (lo, hi));
    let shown = |v: f32| stem4d::display::shown(v, stem4d::display::Scale::Log);
    assert_eq!((report.shown.lo, report.shown.hi), (shown(lo), shown(hi)));
    assert_eq!(report.note, None);
    let json = serde_json::to_value(&report).unwrap();
    let mut keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        ["cmap", "finite", "hi", "hist", "lo", "max", "min", "note", "scale", "shown"]
    );
    assert_eq!(json["scale"], "log");
    assert_eq!(json["hist"].as_array().unwrap().len(), 256);
    let png = pollster::block_on(s.png(&engine, Panel::Image)).unwrap();
    assert!(distinct_colours(&png) >= 3, "the data spread over the map");

    let above = json!({"mode": "absolute", "lo": range.max * 2.0, "hi": range.max * 3.0});
    pollster::block_on(s.update(&engine, &total(above))).unwrap();
    let report = pollster::block_on(s.stats_report(&engine, Panel::Image)).unwrap();
    let note = report.note.clone().expect("limits above the data are said");
    assert!(note.contains("above every value"), "{note}");
    assert_eq!(
        serde_json::to_value(&report).unwrap()["note"],
        note.as_str()
    );
}

/// Distinct RGB colours of a PNG the session wrote (its encoder writes IHDR, one IDAT of
/// unfiltered rows, IEND: `display::png`).
fn distinct_colours(png: &[u8]) -> usize {
    let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]) as usize;
    let idat_len = u32::from_be_bytes([png[33], png[34], png[35], png[36]]) as usize;
    assert_eq!(&png[37..41], b"IDAT");
    let raw = miniz_oxide::inflate::decompress_to_vec_zlib(&png[41..41 + idat_len]).unwrap();
    raw.chunks_exact(1 + 4 * width)
        .flat_map(|row| row[1..].chunks_exact(4).map(|p| [p[0], p[1], p[2]]))
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}
