//! The EMPAD acquisition description: the `.xml` the EMPAD software writes beside the `.raw`.
//! It names its raw file, the scan shape, and what the microscope reported (through its
//! instrument object model, in SI units). Field names are those of EMPAD 1.x and EMPAD2
//! (the same as RosettaSciIO reads); which ones are used is said in each value's source.

use super::{Calibration, CalibrationField as Field};
use crate::error::{Error, Result};

/// Larger than any description the EMPAD software writes (a few KB).
const MAX_XML_BYTES: u64 = 4 << 20;
/// Every EMPAD has 128 × 128 pixels of 150 µm (the detector's specification; the file does
/// not record it).
pub(super) const PIXEL_PITCH_M: f64 = 150e-6;

/// What a description says.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Description {
    pub raw_file: Option<String>,
    /// `[rows, cols]`, and the elements it came from.
    pub scan: Option<([usize; 2], String)>,
    pub calibration: Calibration,
}

fn child<'a>(node: roxmltree::Node<'a, 'a>, name: &str) -> Option<roxmltree::Node<'a, 'a>> {
    node.children().find(|c| c.has_tag_name(name))
}

fn text_at(node: roxmltree::Node, path: &[&str]) -> Option<String> {
    let mut n = node;
    for p in path {
        n = child(n, p)?;
    }
    n.text().map(|t| t.trim().to_string())
}

fn number_at(node: roxmltree::Node, path: &[&str]) -> Option<f64> {
    text_at(node, path).and_then(|t| t.parse::<f64>().ok())
}

fn count_at(node: roxmltree::Node, path: &[&str]) -> Option<usize> {
    text_at(node, path)
        .and_then(|t| t.parse::<usize>().ok())
        .filter(|&n| n > 0)
}

/// Parse `bytes`, the description `name`.
pub(super) fn parse(name: &str, bytes: &[u8]) -> Result<Description> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::format(name, format!("EMPAD description is not UTF-8 text: {e}")))?;
    let doc = roxmltree::Document::parse(text).map_err(|e| {
        Error::format(
            name,
            format!("EMPAD description is not well-formed XML: {e}"),
        )
    })?;
    let root = doc.root_element();
    if !root.has_tag_name("root") {
        return Err(Error::format(
            name,
            format!(
                "not an EMPAD description: its root element is <{}>, not <root>",
                root.tag_name().name()
            ),
        ));
    }
    let mut d = Description {
        raw_file: child(root, "raw_file")
            .and_then(|n| n.attribute("filename"))
            .map(str::to_string),
        ..Default::default()
    };
    let acquire = root
        .children()
        .find(|c| c.has_tag_name("scan_parameters") && c.attribute("mode") == Some("acquire"));
    d.scan = match (count_at(root, &["pix_y"]), count_at(root, &["pix_x"])) {
        (Some(r), Some(c)) => Some(([r, c], format!("{name}: pix_y x pix_x"))),
        _ => acquire.and_then(|a| {
            let r = count_at(a, &["scan_resolution_y"])?;
            let c = count_at(a, &["scan_resolution_x"])?;
            Some((
                [r, c],
                format!("{name}: scan_parameters (acquire) scan_resolution_y x scan_resolution_x"),
            ))
        }),
    };
    let cal = &mut d.calibration;
    if let Some(iom) = child(root, "iom_measurements") {
        let src = |what: &'static str| move || format!("{name}: iom_measurements/{what}");
        cal.offer(
            Field::Energy,
            number_at(iom, &["high_voltage"]),
            src("high_voltage (V)"),
        );
        cal.offer(
            Field::Energy,
            number_at(iom, &["ColumnSourceHighVoltage"]),
            src("ColumnSourceHighVoltage (V)"),
        );
        cal.offer(
            Field::CameraLength,
            number_at(iom, &["nominal_camera_length"]),
            src("nominal_camera_length (m)"),
        );
        cal.offer(
            Field::CameraLength,
            number_at(iom, &["ColumnOpticsGetCameraLengthNominalCameraLength"]),
            src("ColumnOpticsGetCameraLengthNominalCameraLength (m)"),
        );
        // The instrument reports angles in radians.
        cal.offer(
            Field::ScanRotation,
            number_at(iom, &["scan_rotation"]).map(f64::to_degrees),
            src("scan_rotation (rad)"),
        );
        if let Some(([rows, cols], _)) = d.scan {
            scan_step(cal, name, iom, [rows, cols]);
        }
    }
    cal.offer(Field::DetectorPixelSize, Some(PIXEL_PITCH_M), || {
        "EMPAD pixel pitch 150 µm (the detector's specification)".into()
    });
    cal.derive();
    Ok(d)
}

/// The scan step in nm. EMPAD 1.x before 1.2 wrote `optics/get_full_scan_field_of_view` as
/// "(x, y)" in m over the scan's columns and rows; later versions write
/// `full_scan_field_of_view/x` for the scan's larger side, multiplied by `scale_factor`.
fn scan_step(cal: &mut Calibration, name: &str, iom: roxmltree::Node, [rows, cols]: [usize; 2]) {
    if let Some(t) = text_at(iom, &["optics", "get_full_scan_field_of_view"]) {
        let fov: Vec<f64> = t
            .trim_matches(|c| c == '(' || c == ')' || c == '[' || c == ']')
            .split(',')
            .filter_map(|v| v.trim().parse().ok())
            .collect();
        if let [x, _y] = fov[..] {
            cal.offer(Field::ScanStep, Some(x / cols as f64 * 1e9), || {
                format!("{name}: iom_measurements/optics/get_full_scan_field_of_view (m) / scan columns")
            });
        }
    } else if let (Some(x), Some(k)) = (
        number_at(iom, &["full_scan_field_of_view", "x"]),
        number_at(iom, &["full_scan_field_of_view", "scale_factor"]),
    ) {
        if k > 0.0 {
            cal.offer(Field::ScanStep, Some(x / k / rows.max(cols) as f64 * 1e9), || {
                format!(
                    "{name}: iom_measurements/full_scan_field_of_view x (m) / scale_factor / the scan's larger side"
                )
            });
        }
    }
    cal.set_units(Some("nm"), None);
}

pub(super) fn read(src: &dyn crate::source::ByteSource) -> Result<Description> {
    let len = src.len();
    if len > MAX_XML_BYTES {
        return Err(Error::format(
            src.name(),
            format!("{len} bytes is too large for an EMPAD description (at most {MAX_XML_BYTES})"),
        ));
    }
    parse(src.name(), &src.read_vec(0, len)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The shape of a description EMPAD 1.2.2 writes (RosettaSciIO's test file), trimmed.
    const V122: &str = r#"<root name="x"><timestamp isoformat="2026-03-25T16:47:52"/>
      <raw_file filename="scan_x32_y64.raw"/>
      <scan_parameters mode="search"><scan_resolution_y>8</scan_resolution_y><scan_resolution_x>8</scan_resolution_x></scan_parameters>
      <scan_parameters mode="acquire"><scan_size>0.6</scan_size><scan_resolution_y>64</scan_resolution_y><scan_resolution_x>32</scan_resolution_x></scan_parameters>
      <iom_measurements><scan_rotation>0.5235987755982988</scan_rotation>
        <full_scan_field_of_view><scale_factor>0.72</scale_factor><x>1.272412341559544e-06</x><y>1.272412341559544e-06</y></full_scan_field_of_view>
        <nominal_camera_length>0.369</nominal_camera_length><high_voltage>300000.0</high_voltage></iom_measurements></root>"#;

    #[test]
    fn an_empad_1_2_description_gives_shape_and_calibration() {
        let d = parse("scan.xml", V122.as_bytes()).unwrap();
        assert_eq!(d.raw_file.as_deref(), Some("scan_x32_y64.raw"));
        assert_eq!(
            d.scan.as_ref().map(|s| s.0),
            Some([64, 32]),
            "the acquire mode, rows = y"
        );
        let c = &d.calibration;
        assert_eq!(c.energy_ev, Some(300e3));
        assert_eq!(c.camera_length_m, Some(0.369));
        assert!((c.scan_rotation_deg.unwrap_or(0.0) - 30.0).abs() < 1e-9);
        let step = 1.272412341559544e-06 / 0.72 / 64.0 * 1e9;
        assert_eq!(c.scan_step, Some(step));
        assert_eq!(c.scan_units.as_deref(), Some("nm"));
        assert_eq!(c.detector_step, Some(150e-6 / 0.369 * 1e3));
        assert!(c.sources["camera_length_m"].contains("nominal_camera_length"));
    }

    #[test]
    fn an_older_description_gives_its_field_of_view_per_column() {
        let xml = r#"<root><raw_file filename="a.raw"/><pix_x>4</pix_x><pix_y>3</pix_y>
          <iom_measurements><optics><get_full_scan_field_of_view>(8e-09, 6e-09)</get_full_scan_field_of_view></optics></iom_measurements></root>"#;
        let d = parse("a.xml", xml.as_bytes()).unwrap();
        assert_eq!(d.scan.map(|s| s.0), Some([3, 4]));
        assert_eq!(d.calibration.scan_step, Some(2.0));
    }

    #[test]
    fn a_broken_description_is_refused_by_name() {
        for (bytes, what) in [
            (&b"<root><pix_x>4</root>"[..], "well-formed"),
            (&b"<html></html>"[..], "root element"),
            (&[0xff, 0xfe, 0x00][..], "UTF-8"),
        ] {
            let e = parse("bad.xml", bytes).unwrap_err().to_string();
            assert!(e.contains("bad.xml") && e.contains(what), "{e}");
        }
    }
}
