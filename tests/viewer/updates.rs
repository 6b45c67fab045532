//! What a view update redraws and runs: draw keys change exactly with what a canvas shows,
//! a detector on the overlay leaves the pattern canvas alone, and timed passes name each
//! kernel of an update.

use super::{bf_state, open_unbinned, state};
use crate::common::*;
use serde_json::json;
use stem4d::session::{Panel, ViewState};

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
