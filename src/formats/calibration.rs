//! What the files say about the microscope and the detector, each value with the file and
//! field it came from, and what follows from them: the electron wavelength and the angle a
//! detector pixel subtends. Units are in the field names; values are as the files give them,
//! converted to those units only (C-CAL).

use std::collections::BTreeMap;

use serde::Serialize;

/// Electron rest energy (eV) and h·c (eV·pm), CODATA 2018.
const REST_ENERGY_EV: f64 = 510_998.950;
const HC_EV_PM: f64 = 1_239_841.984;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Calibration {
    /// Distance between scan positions, in `scan_units`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scan_step: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scan_units: Option<String>,
    /// Angle (or reciprocal length) per detector pixel, in `detector_units` (unbinned pixels).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detector_step: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detector_units: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detector_pixel_size_m: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub camera_length_m: Option<f64>,
    /// The detector's own distance from the sample (NeXus `detector_distance`), used for
    /// angles when no camera length is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detector_distance_m: Option<f64>,
    /// Beam energy (eV): numerically the accelerating voltage in V.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy_ev: Option<f64>,
    /// Relativistic electron wavelength at `energy_ev`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wavelength_pm: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub convergence_semiangle_mrad: Option<f64>,
    /// The scan's rotation as recorded with the acquisition (the page starts the DPC
    /// rotation from it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scan_rotation_deg: Option<f64>,
    /// For each field above that is set: the file and field it came from, or how it was
    /// derived.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<&'static str, String>,
}

/// A field of [`Calibration`] that holds a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    ScanStep,
    DetectorStep,
    DetectorPixelSize,
    CameraLength,
    DetectorDistance,
    Energy,
    ConvergenceSemiangle,
    ScanRotation,
}

impl Field {
    fn key(self) -> &'static str {
        match self {
            Field::ScanStep => "scan_step",
            Field::DetectorStep => "detector_step",
            Field::DetectorPixelSize => "detector_pixel_size_m",
            Field::CameraLength => "camera_length_m",
            Field::DetectorDistance => "detector_distance_m",
            Field::Energy => "energy_ev",
            Field::ConvergenceSemiangle => "convergence_semiangle_mrad",
            Field::ScanRotation => "scan_rotation_deg",
        }
    }
}

impl Calibration {
    /// A calibration as it was serialised (`stem4d info`, a prepared acquisition's
    /// description): every number and unit it holds, with its sources. Unknown keys are
    /// left out; nothing is derived again.
    pub fn from_json(v: &serde_json::Value) -> Calibration {
        const FIELDS: [Field; 8] = [
            Field::ScanStep,
            Field::DetectorStep,
            Field::DetectorPixelSize,
            Field::CameraLength,
            Field::DetectorDistance,
            Field::Energy,
            Field::ConvergenceSemiangle,
            Field::ScanRotation,
        ];
        let mut c = Calibration::default();
        let source = |key: &str| {
            v["sources"][key]
                .as_str()
                .map_or_else(|| "a prepared acquisition".to_string(), str::to_string)
        };
        for f in FIELDS {
            if let Some(x) = v[f.key()].as_f64().filter(|x| x.is_finite()) {
                *c.slot(f) = Some(x);
                c.sources.insert(f.key(), source(f.key()));
            }
        }
        if let Some(x) = v["wavelength_pm"].as_f64().filter(|x| x.is_finite()) {
            c.wavelength_pm = Some(x);
            c.sources.insert("wavelength_pm", source("wavelength_pm"));
        }
        c.scan_units = v["scan_units"].as_str().map(str::to_string);
        c.detector_units = v["detector_units"].as_str().map(str::to_string);
        c
    }

    fn slot(&mut self, field: Field) -> &mut Option<f64> {
        match field {
            Field::ScanStep => &mut self.scan_step,
            Field::DetectorStep => &mut self.detector_step,
            Field::DetectorPixelSize => &mut self.detector_pixel_size_m,
            Field::CameraLength => &mut self.camera_length_m,
            Field::DetectorDistance => &mut self.detector_distance_m,
            Field::Energy => &mut self.energy_ev,
            Field::ConvergenceSemiangle => &mut self.convergence_semiangle_mrad,
            Field::ScanRotation => &mut self.scan_rotation_deg,
        }
    }

    /// Record `value` for `field` from `source`, unless the field is set already (the first
    /// source a reader asks wins) or the value is not a finite number. Lengths, distances
    /// and energies must also be positive: writers leave 0 where they know nothing (Dectris
    /// masters record `detector_distance` 0.0).
    pub fn offer(&mut self, field: Field, value: Option<f64>, source: impl FnOnce() -> String) {
        let Some(v) = value.filter(|v| v.is_finite()) else {
            return;
        };
        let signed = matches!(field, Field::ScanRotation);
        if !signed && v <= 0.0 {
            return;
        }
        let slot = self.slot(field);
        if slot.is_some() {
            return;
        }
        *slot = Some(v);
        self.sources.insert(field.key(), source());
    }

    /// Units for the step fields, recorded beside them.
    pub fn set_units(&mut self, scan: Option<&str>, detector: Option<&str>) {
        if self.scan_step.is_some() {
            if let Some(u) = scan {
                self.scan_units = Some(u.to_string());
            }
        }
        if self.detector_step.is_some() {
            if let Some(u) = detector {
                self.detector_units = Some(u.to_string());
            }
        }
    }

    /// Derive what follows from the recorded values: the wavelength from the energy
    /// ([`Calibration::derive_wavelength`]) and mrad per detector pixel from the pixel size
    /// over the camera length, else over the detector's distance (small angles: a pixel
    /// subtends size / length).
    pub fn derive(&mut self) {
        self.derive_wavelength();
        if self.detector_step.is_some() {
            return;
        }
        let Some(px) = self.detector_pixel_size_m else {
            return;
        };
        let (length, what) = match (self.camera_length_m, self.detector_distance_m) {
            (Some(cl), _) => (cl, "camera_length_m"),
            (None, Some(d)) => (d, "detector_distance_m"),
            (None, None) => return,
        };
        self.detector_step = Some(px / length * 1e3);
        self.detector_units = Some("mrad".into());
        self.sources.insert(
            "detector_step",
            format!("derived: detector_pixel_size_m / {what}"),
        );
    }

    /// The wavelength from the energy alone: for files whose camera length is not the
    /// detector's (EMPAD's nominal one, [`super::empad_xml`]), so no angle is derived from it.
    pub fn derive_wavelength(&mut self) {
        if let Some(e) = self.energy_ev {
            self.wavelength_pm = Some(HC_EV_PM / (e * (e + 2.0 * REST_ENERGY_EV)).sqrt());
            self.sources.insert(
                "wavelength_pm",
                "derived from energy_ev (relativistic)".into(),
            );
        }
    }

    /// The calibration as `stem4d info` prints it: a line per value, with its source.
    pub fn text_lines(&self) -> Vec<String> {
        let units = |u: &Option<String>| u.clone().unwrap_or_default();
        let rows: [(&str, &str, Option<f64>, String); 9] = [
            (
                "scan_step",
                "scan step",
                self.scan_step,
                units(&self.scan_units),
            ),
            (
                "detector_step",
                "detector step",
                self.detector_step,
                units(&self.detector_units),
            ),
            (
                "detector_pixel_size_m",
                "detector pixel size",
                self.detector_pixel_size_m,
                "m".into(),
            ),
            (
                "camera_length_m",
                "camera length",
                self.camera_length_m,
                "m".into(),
            ),
            (
                "detector_distance_m",
                "detector distance",
                self.detector_distance_m,
                "m".into(),
            ),
            ("energy_ev", "energy", self.energy_ev, "eV".into()),
            (
                "wavelength_pm",
                "wavelength",
                self.wavelength_pm,
                "pm".into(),
            ),
            (
                "convergence_semiangle_mrad",
                "convergence semi-angle",
                self.convergence_semiangle_mrad,
                "mrad".into(),
            ),
            (
                "scan_rotation_deg",
                "scan rotation",
                self.scan_rotation_deg,
                "deg".into(),
            ),
        ];
        rows.iter()
            .filter_map(|(key, label, value, units)| {
                let v = (*value)?;
                let from = self
                    .sources
                    .get(key)
                    .map(|s| format!("  ({s})"))
                    .unwrap_or_default();
                Some(format!("{label:<24}{v} {units}{from}"))
            })
            .collect()
    }
}

/// A `units` attribute as written, trimmed of padding and lower-cased.
fn unit_name(u: &str) -> String {
    u.trim().trim_end_matches('\0').to_ascii_lowercase()
}

/// Metres per unit of a length `units` attribute as HDF5/NeXus files write it: absent is
/// metres (NeXus's default for lengths); an unknown unit is None (the value is not used).
pub fn metres_per(units: Option<&str>) -> Option<f64> {
    let Some(u) = units else {
        return Some(1.0);
    };
    match unit_name(u).as_str() {
        "m" | "meter" | "meters" | "metre" | "metres" => Some(1.0),
        "mm" | "millimeter" | "millimeters" | "millimetre" | "millimetres" => Some(1e-3),
        "um" | "µm" | "μm" | "micron" | "microns" | "micrometer" | "micrometre" => Some(1e-6),
        "nm" | "nanometer" | "nanometre" => Some(1e-9),
        _ => None,
    }
}

/// eV per unit of an energy `units` attribute: absent is eV, an unknown unit None.
pub fn ev_per(units: Option<&str>) -> Option<f64> {
    let Some(u) = units else {
        return Some(1.0);
    };
    match unit_name(u).as_str() {
        "ev" => Some(1.0),
        "kev" => Some(1e3),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wavelength_at_common_voltages_is_the_textbook_one() {
        // 2.5079 pm at 200 kV, 1.9687 pm at 300 kV, 3.7014 pm at 100 kV.
        for (kv, pm) in [(100.0, 3.7014), (200.0, 2.5079), (300.0, 1.9687)] {
            let mut c = Calibration::default();
            c.offer(Field::Energy, Some(kv * 1e3), || "test".into());
            c.derive();
            let got = c.wavelength_pm.unwrap_or(f64::NAN);
            assert!((got - pm).abs() < 1e-4, "{kv} kV: {got} pm");
        }
    }

    #[test]
    fn mrad_come_from_the_camera_length_else_the_detector_distance() {
        let mut c = Calibration::default();
        c.offer(Field::DetectorPixelSize, Some(75e-6), || "master".into());
        c.offer(Field::DetectorDistance, Some(0.0), || "master".into());
        c.derive();
        assert_eq!(c.detector_step, None, "a zero distance is no distance");
        c.offer(Field::DetectorDistance, Some(0.25), || "master".into());
        c.derive();
        assert_eq!(c.detector_step, Some(75e-6 / 0.25 * 1e3));
        assert!(c.sources["detector_step"].contains("detector_distance_m"));
        let mut c = Calibration::default();
        c.offer(Field::DetectorPixelSize, Some(75e-6), || "master".into());
        c.offer(Field::CameraLength, Some(0.115), || "companion".into());
        c.offer(Field::DetectorDistance, Some(0.25), || "master".into());
        c.derive();
        assert_eq!(c.detector_step, Some(75e-6 / 0.115 * 1e3));
        assert_eq!(c.detector_units.as_deref(), Some("mrad"));
        assert!(c.sources["detector_step"].contains("camera_length_m"));
    }

    #[test]
    fn units_attributes_convert_or_drop_the_value() {
        assert_eq!(metres_per(None), Some(1.0));
        assert_eq!(metres_per(Some("m")), Some(1.0));
        assert_eq!(metres_per(Some("mm")), Some(1e-3));
        assert_eq!(metres_per(Some("um")), Some(1e-6));
        assert_eq!(metres_per(Some("pixel")), None);
        assert_eq!(ev_per(None), Some(1.0));
        assert_eq!(ev_per(Some("keV")), Some(1e3));
        assert_eq!(ev_per(Some("V")), None);
    }

    #[test]
    fn the_wavelength_alone_derives_no_angle() {
        let mut c = Calibration::default();
        c.offer(Field::DetectorPixelSize, Some(150e-6), || "spec".into());
        c.offer(Field::CameraLength, Some(0.369), || "nominal".into());
        c.offer(Field::Energy, Some(300e3), || "xml".into());
        c.derive_wavelength();
        assert!(c.wavelength_pm.is_some());
        assert_eq!(c.detector_step, None);
        let lines = c.text_lines();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[2].starts_with("energy") && lines[2].contains("300000 eV  (xml)"));
    }

    #[test]
    fn the_first_source_wins_and_nonsense_is_ignored() {
        let mut c = Calibration::default();
        c.offer(Field::Energy, Some(f64::NAN), || "a".into());
        c.offer(Field::Energy, Some(-3.0), || "b".into());
        c.offer(Field::Energy, Some(300e3), || "c".into());
        c.offer(Field::Energy, Some(200e3), || "d".into());
        assert_eq!(c.energy_ev, Some(300e3));
        assert_eq!(c.sources["energy_ev"], "c");
        c.offer(Field::ScanRotation, Some(-12.5), || "e".into());
        assert_eq!(
            c.scan_rotation_deg,
            Some(-12.5),
            "rotations may be negative"
        );
    }
}
