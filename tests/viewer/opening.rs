//! Opening a session: what an open leaves to prepare, a re-upload on another bin, a scan
//! crop, when the previous session is released, and a deferred chunk index.

use super::{bf_state, cpu_at, fixture_acq, open, open_unbinned, state};
use crate::common::*;
use serde_json::json;
use stem4d::cpu;
use stem4d::formats::Acquisition;
use stem4d::frames::Correction;
use stem4d::products::{ProductKind, ProductParams};
use stem4d::session::{OpenRequest, Panel, Session};

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
    let want = cpu::compute(&acq, &p, Correction::default())
        .unwrap()
        .data
        .to_f64();
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

/// A product with another bin runs on the binned frames, and the view's pattern is the
/// binned detector (C-BIN-COMPOSE).
#[test]
fn a_product_with_another_bin_reuploads_and_stays_exact() {
    let Some(engine) = engine() else { return };
    let (mut s, acq) = open_unbinned(&engine, "arina_u16");
    let p = ProductParams::new(ProductKind::Binned);
    let corr = Correction {
        bin: 3,
        mask_bad_pixels: true,
    };
    pollster::block_on(s.prepare(&engine)).unwrap();
    let at_load = s.ring_sums_centre().expect("ring sums made by prepare");
    // A product of another correction is refused until the acquisition has it: a new
    // upload is never a product's side effect.
    let refused = pollster::block_on(s.product(&engine, &p, corr)).unwrap_err();
    assert!(
        refused.to_string().contains("set its correction"),
        "{refused}"
    );
    assert_eq!(s.correction(), Correction::default());
    pollster::block_on(s.set_correction(&engine, corr)).unwrap();
    let gpu = pollster::block_on(s.product(&engine, &p, corr)).unwrap();
    assert_eq!(gpu, cpu::compute(&acq, &p, corr).unwrap());
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

/// The crop's positions are renumbered from 0 (C-CROP).
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
            p.center = Some([3.6, 4.1]);
            p.radius = Some(2.5);
            let corr = Correction {
                bin: req.bin,
                ..Correction::default()
            };
            let got = pollster::block_on(deferred.product(&engine, &p, corr)).unwrap();
            let want = pollster::block_on(plain.product(&engine, &p, corr)).unwrap();
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
