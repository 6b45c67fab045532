//! The EMPAD acquisition description: the `.xml` the EMPAD software writes beside the `.raw`
//! (its scan shape: C-SCAN; its calibration: C-CAL).
//! It names its raw file, the scan shape, and what the microscope reported through its
//! instrument interface (SI units, angles in radians). Three generations are known by their
//! element names (RosettaSciIO's `rsciio/empad` reads the first two; element names hold
//! dots, `<optics.get_cameralength>`, they are not nested):
//!
//! | what | 0.51 | 1.2 | EMPAD2 |
//! |---|---|---|---|
//! | raw file | `raw_file@filename` | `raw_file@filename` | `rawfile/filename` |
//! | scan shape | `pix_x`, `pix_y` | `scan_parameters[mode=acquire]/scan_resolution_x`, `_y` | (the raw name) |
//! | high tension (V) | `source.get_voltage` | `high_voltage` | `ColumnSourceHighVoltage` |
//! | camera length (m, nominal) | `optics.get_cameralength` | `nominal_camera_length` | `ColumnOpticsGetCameraLengthNominalCameraLength` |
//! | scan rotation (rad) | `column.get_scanrotation` | `scan_rotation` | `ColumnGetScanRotation` |
//! | field of view (m) | `optics.get_full_scan_field_of_view` `[x, y]` | `full_scan_field_of_view/x`, `/scale_factor` | — |
//! | angle per pixel (rad) | `calibrated_diffraction_angle` | — | `calibrated_diffraction_angle` |
//!
//! (all but the first two rows under `iom_measurements`). The angle per detector pixel is
//! only the file's calibrated one: the nominal camera length is not the EMPAD's (both real
//! files that record the two put the calibrated angle at 2.07 × pixel ÷ nominal length), so
//! no angle is derived from it (docs/decisions/0002-calibration-sources.md).

use super::{Calibration, CalibrationField as Field};
use crate::error::{Error, Result};
use crate::source::base_name;

/// Larger than any description the EMPAD software writes (a few KB).
const MAX_XML_BYTES: u64 = 4 << 20;
/// Every EMPAD has 128 × 128 pixels of 150 µm (the detector's specification; the file does
/// not record it).
pub(super) const PIXEL_PITCH_M: f64 = 150e-6;
const IOM: &str = "iom_measurements";

/// How a description records the scan's field of view; a step once the scan shape is known.
#[derive(Clone, Debug, PartialEq)]
enum FieldOfView {
    /// 0.51: `[x, y]` in m, x along the scan's columns.
    Pair { x_m: f64 },
    /// 1.2: the scan's larger side times `scale_factor` (RosettaSciIO: the FOV "is
    /// mistakenly stored as the internal FOV × scale_factor", about 0.72).
    Scaled { x_m: f64, scale_factor: f64 },
}

/// What a description says.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Description {
    pub raw_file: Option<String>,
    /// `[rows, cols]`, and the elements it came from.
    pub scan: Option<([usize; 2], String)>,
    field_of_view: Option<(FieldOfView, String)>,
    /// All but the scan step, which needs the scan shape ([`Description::calibration`]).
    calibration: Calibration,
}

impl Description {
    /// The calibration of a scan of `[rows, cols]` (the shape the acquisition was opened
    /// with, which `--scan-shape` may have set): the scan step from the field of view.
    pub fn calibration(&self, [rows, cols]: [usize; 2]) -> Calibration {
        let mut cal = self.calibration.clone();
        if let Some((fov, from)) = &self.field_of_view {
            let step_m = match *fov {
                FieldOfView::Pair { x_m } => x_m / cols as f64,
                FieldOfView::Scaled { x_m, scale_factor } => {
                    x_m / scale_factor / rows.max(cols) as f64
                }
            };
            cal.offer(Field::ScanStep, Some(step_m * 1e9), || from.clone());
            cal.set_units(Some("nm"), None);
        }
        cal
    }
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
            .map(str::to_string)
            .or_else(|| text_at(root, &["rawfile", "filename"]))
            .map(|f| base_name(f.trim()).to_string())
            .filter(|f| !f.is_empty()),
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
    if let Some(iom) = child(root, IOM) {
        // The first element of each list that the description holds wins (one generation's
        // names never appear in another's).
        let mut offer = |field: Field, tags: &[&'static str], unit: &'static str, scale: f64| {
            for &tag in tags {
                let v = number_at(iom, &[tag]).map(|v| v * scale);
                cal.offer(field, v, || format!("{name}: {IOM}/{tag} ({unit})"));
            }
        };
        offer(
            Field::Energy,
            &[
                "source.get_voltage",
                "high_voltage",
                "ColumnSourceHighVoltage",
            ],
            "V",
            1.0,
        );
        offer(
            Field::CameraLength,
            &[
                "optics.get_cameralength",
                "nominal_camera_length",
                "ColumnOpticsGetCameraLengthNominalCameraLength",
            ],
            "m, nominal",
            1.0,
        );
        offer(
            Field::ScanRotation,
            &[
                "column.get_scanrotation",
                "scan_rotation",
                "ColumnGetScanRotation",
            ],
            "rad, shown in degrees",
            1f64.to_degrees(),
        );
        offer(
            Field::DetectorStep,
            &["calibrated_diffraction_angle"],
            "rad per pixel, shown in mrad",
            1e3,
        );
        d.field_of_view = field_of_view(name, iom);
    }
    cal.set_units(None, Some("mrad"));
    cal.offer(Field::DetectorPixelSize, Some(PIXEL_PITCH_M), || {
        "EMPAD pixel pitch 150 µm (the detector's specification)".into()
    });
    cal.derive_wavelength();
    Ok(d)
}

/// The field of view in either form, with the source of the step it gives.
fn field_of_view(name: &str, iom: roxmltree::Node) -> Option<(FieldOfView, String)> {
    if let Some(t) = text_at(iom, &["optics.get_full_scan_field_of_view"]) {
        let fov: Vec<f64> = t
            .trim_matches(|c| c == '(' || c == ')' || c == '[' || c == ']')
            .split(',')
            .filter_map(|v| v.trim().parse().ok())
            .collect();
        if let [x_m, _y] = fov[..] {
            return Some((
                FieldOfView::Pair { x_m },
                format!("{name}: {IOM}/optics.get_full_scan_field_of_view x (m) / scan columns"),
            ));
        }
        return None;
    }
    let x_m = number_at(iom, &["full_scan_field_of_view", "x"])?;
    let scale_factor = number_at(iom, &["full_scan_field_of_view", "scale_factor"])?;
    (scale_factor > 0.0).then(|| {
        (
            FieldOfView::Scaled { x_m, scale_factor },
            format!(
                "{name}: {IOM}/full_scan_field_of_view x (m) / scale_factor / the scan's larger side"
            ),
        )
    })
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

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() <= 1e-12 * b.abs().max(1.0))
    }

    // The shape of a description EMPAD 1.2.2 writes (RosettaSciIO's test file), trimmed.
    const V122: &str = r#"<root name="x"><timestamp isoformat="2026-03-25T16:47:52"/>
      <raw_file filename="scan_x32_y64.raw"/>
      <scan_parameters mode="search"><scan_resolution_y>8</scan_resolution_y><scan_resolution_x>8</scan_resolution_x></scan_parameters>
      <scan_parameters mode="acquire"><scan_size>0.6</scan_size><scan_resolution_y>64</scan_resolution_y><scan_resolution_x>32</scan_resolution_x></scan_parameters>
      <iom_measurements><scan_rotation>0.5235987755982988</scan_rotation>
        <full_scan_field_of_view><scale_factor>0.72</scale_factor><x>1.272412341559544e-06</x><y>1.272412341559544e-06</y></full_scan_field_of_view>
        <nominal_camera_length>0.369</nominal_camera_length><high_voltage>300000.0</high_voltage></iom_measurements></root>"#;

    // Shaped as EMPAD 0.51 writes it (dotted element names; values made up).
    const V051: &str = r#"<root name="acquisition_1"><type>scan</type><pix_x>4</pix_x><pix_y>3</pix_y>
      <raw_file filename="scan_x4_y3.raw"/>
      <scan_parameters mode="acquire"><scan_resolution_x>128</scan_resolution_x><scan_resolution_y>128</scan_resolution_y></scan_parameters>
      <iom_measurements><optics.get_cameralength>0.7225</optics.get_cameralength>
        <source.get_voltage>200000.0</source.get_voltage><optics.get_magnicication>None</optics.get_magnicication>
        <optics.get_full_scan_field_of_view>[8e-09, 8e-09]</optics.get_full_scan_field_of_view>
        <column.get_scanrotation>-0.25</column.get_scanrotation>
        <calibrated_diffraction_angle>0.0004</calibrated_diffraction_angle></iom_measurements></root>"#;

    // Shaped as EMPAD2 software writes it.
    const G2: &str = r#"<root><scan><type>scan</type><shape>(4, 4)</shape></scan>
      <iom_measurements><ColumnGetScanRotation>-2.8274333882308174</ColumnGetScanRotation>
        <ColumnOpticsGetCameraLengthNominalCameraLength>1.197</ColumnOpticsGetCameraLengthNominalCameraLength>
        <ColumnSourceHighVoltage>80000.0</ColumnSourceHighVoltage>
        <calibrated_diffraction_angle>0.00025</calibrated_diffraction_angle></iom_measurements>
      <rawfile><framecount>16</framecount><filename>scan_x4_y4.raw</filename></rawfile></root>"#;

    #[test]
    fn an_empad_1_2_description_gives_shape_and_calibration() {
        let d = parse("scan.xml", V122.as_bytes()).unwrap();
        assert_eq!(d.raw_file.as_deref(), Some("scan_x32_y64.raw"));
        assert_eq!(
            d.scan.as_ref().map(|s| s.0),
            Some([64, 32]),
            "the acquire mode, rows = y"
        );
        let c = d.calibration([64, 32]);
        assert_eq!(c.energy_ev, Some(300e3));
        assert_eq!(c.camera_length_m, Some(0.369));
        assert!((c.scan_rotation_deg.unwrap_or(0.0) - 30.0).abs() < 1e-9);
        // RosettaSciIO's reading of its file: 27.6131150 nm.
        assert!((c.scan_step.unwrap() - 27.613_115).abs() < 1e-6, "{c:?}");
        assert_eq!(c.scan_units.as_deref(), Some("nm"));
        // 1.2 records no calibrated angle, and the nominal camera length is not the EMPAD's.
        assert_eq!(c.detector_step, None, "{c:?}");
        assert_eq!(c.detector_units, None);
        assert_eq!(c.detector_pixel_size_m, Some(PIXEL_PITCH_M));
        assert!(c.sources["camera_length_m"].contains("nominal_camera_length (m, nominal)"));
        assert!(c.wavelength_pm.is_some());
    }

    #[test]
    fn an_empad_0_51_description_is_read_by_its_dotted_names() {
        let d = parse("a.xml", V051.as_bytes()).unwrap();
        // pix_x/pix_y, not the scan generator's 128 x 128.
        assert_eq!(d.scan.as_ref().map(|s| s.0), Some([3, 4]));
        let c = d.calibration([3, 4]);
        assert_eq!(c.energy_ev, Some(200e3));
        assert!(c.sources["energy_ev"].starts_with("a.xml: iom_measurements/source.get_voltage"));
        assert_eq!(c.camera_length_m, Some(0.7225));
        assert!(close(c.scan_rotation_deg, (-0.25f64).to_degrees()));
        assert!(close(c.scan_step, 2.0), "8 nm over 4 columns: {c:?}");
        // The calibrated angle, not 150 µm / 0.7225 m.
        assert!(close(c.detector_step, 0.4), "{c:?}");
        assert_eq!(c.detector_units.as_deref(), Some("mrad"));
        assert!(c.sources["detector_step"].contains("calibrated_diffraction_angle"));
    }

    #[test]
    fn an_empad2_description_names_its_raw_file_and_rotation() {
        let d = parse("c.xml", G2.as_bytes()).unwrap();
        assert_eq!(d.raw_file.as_deref(), Some("scan_x4_y4.raw"));
        assert_eq!(d.scan, None);
        let c = d.calibration([4, 4]);
        assert_eq!(c.energy_ev, Some(80e3));
        assert_eq!(c.camera_length_m, Some(1.197));
        assert!(close(c.scan_rotation_deg, -162.0), "{c:?}");
        assert!(close(c.detector_step, 0.25), "{c:?}");
        assert_eq!(c.scan_step, None);
    }

    #[test]
    fn the_scan_step_follows_the_shape_opened() {
        let d = parse("a.xml", V051.as_bytes()).unwrap();
        // --scan-shape 2,6 over the same 12 frames: 8 nm over 6 columns.
        assert!(close(d.calibration([2, 6]).scan_step, 8.0 / 6.0));
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
