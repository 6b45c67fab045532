//! What a view state may ask for: bad states are refused with their reason, display scales
//! parse from `scale` or the older `log` flag, and absolute limits on a log scale show the
//! data or say why not.

use super::{open_unbinned, state};
use crate::common::*;
use serde_json::json;
use stem4d::session::{Panel, ViewState};

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
/// and limits above every value come with a note instead of a silent black image (C-DISPLAY).
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
