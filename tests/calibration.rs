//! Calibration read from the files, each value with its source: the fixtures' companions,
//! masters and EMD dims as make_fixtures.py wrote them, the real Dectris files, and EMPAD
//! descriptions written here (C-CAL).

mod common;

use std::path::PathBuf;

use common::*;
use stem4d::formats::Calibration;

fn calibration_of(name: &str) -> Calibration {
    open_fixture(&fixture_named(name)).calibration
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= 1e-12 * b.abs().max(1.0))
}

#[test]
fn companion_and_master_values_reach_the_calibration_with_their_sources() {
    let c = calibration_of("arina_u32");
    assert!(
        close(c.scan_step, 0.25) && c.scan_units.as_deref() == Some("nm"),
        "{c:?}"
    );
    assert!(
        close(c.energy_ev, 300e3) && close(c.camera_length_m, 0.115),
        "{c:?}"
    );
    assert!(close(c.detector_pixel_size_m, 75e-6), "{c:?}");
    assert!(
        close(c.scan_rotation_deg, 12.5),
        "the companion's rotation: {c:?}"
    );
    assert!(
        close(c.detector_step, 75e-6 / 0.115 * 1e3),
        "mrad from the camera length: {c:?}"
    );
    assert!(
        (c.wavelength_pm.unwrap_or(0.0) - 1.9687).abs() < 1e-4,
        "300 kV: {c:?}"
    );
    assert!(c.sources["scan_rotation_deg"].starts_with("arina_u32.h5: STEM Metadata/Rotation"));
    assert!(c.sources["detector_pixel_size_m"].starts_with("arina_u32_master.h5: "));
    assert!(c.sources["detector_step"].contains("camera_length_m"));
    for key in ["scan_step", "energy_ev", "camera_length_m", "wavelength_pm"] {
        assert!(
            c.sources.contains_key(key),
            "{key} has a source: {:?}",
            c.sources
        );
    }
}

#[test]
fn without_a_companion_angles_come_from_the_masters_detector_distance() {
    let c = calibration_of("arina_u8");
    assert!(close(c.detector_distance_m, 0.25), "{c:?}");
    assert!(close(c.detector_step, 75e-6 / 0.25 * 1e3), "{c:?}");
    assert_eq!(c.detector_units.as_deref(), Some("mrad"));
    assert!(
        c.sources["detector_step"].contains("detector_distance_m"),
        "{:?}",
        c.sources
    );
    assert!(c.sources["detector_distance_m"]
        .contains("arina_u8_master.h5: /entry/instrument/detector/detector_distance"));
    assert_eq!(c.camera_length_m, None);
    assert_eq!(c.scan_rotation_deg, None);
}

#[test]
fn the_real_dectris_files_give_their_companion_and_master_values() {
    let fx = fixture_named("real_arina");
    if !fixture_paths(&fx).iter().all(|p| p.exists()) {
        assert!(
            std::env::var("STEM4D_REQUIRE_GPU").is_err(),
            "the shared Dectris files are missing"
        );
        return;
    }
    let c = open_fixture(&fx).calibration;
    assert!(
        close(c.scan_step, 0.13915206) && close(c.camera_length_m, 0.115),
        "{c:?}"
    );
    assert!(close(c.energy_ev, 300e3), "{c:?}");
    // 100 µm pixels; the master's detector_distance is 0.0 (unset) and is not used.
    assert!(close(c.detector_pixel_size_m, 1e-4), "{c:?}");
    assert_eq!(c.detector_distance_m, None);
    assert!(close(c.detector_step, 1e-4 / 0.115 * 1e3), "{c:?}");
    assert!(close(c.scan_rotation_deg, 0.0), "{c:?}");
}

#[test]
fn emd_dims_give_steps_and_units() {
    let c = calibration_of("emd_f32");
    assert!(
        close(c.scan_step, 0.5) && c.scan_units.as_deref() == Some("nm"),
        "{c:?}"
    );
    assert!(
        close(c.detector_step, 0.12) && c.detector_units.as_deref() == Some("mrad"),
        "{c:?}"
    );
    assert!(
        c.sources["detector_step"].ends_with("/dim2"),
        "{:?}",
        c.sources
    );
}

/// The error of opening `paths`, which must fail.
fn refusal(paths: &[PathBuf]) -> String {
    match open_paths(paths, None, None) {
        Ok(_) => panic!("{paths:?} opened"),
        Err(e) => e.to_string(),
    }
}

/// An EMPAD raw of `frames` zero frames named `raw`, and a description `xml` beside it, in a
/// fresh folder.
fn empad_pair(tag: &str, raw: &str, frames: usize, xml: &str) -> Vec<PathBuf> {
    let dir = std::env::temp_dir().join(format!("stem4d-cal-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let raw_path = dir.join(raw);
    std::fs::write(&raw_path, vec![0u8; frames * 130 * 128 * 4]).unwrap();
    let xml_path = dir.join("acquisition.xml");
    std::fs::write(&xml_path, xml).unwrap();
    vec![raw_path, xml_path]
}

/// The scan shape from the description (C-SCAN), and its calibration (C-CAL).
#[test]
fn an_empad_description_gives_the_scan_shape_and_calibration() {
    let xml = r#"<root><raw_file filename="frames.raw"/>
      <scan_parameters mode="acquire"><scan_resolution_y>2</scan_resolution_y><scan_resolution_x>3</scan_resolution_x></scan_parameters>
      <iom_measurements><scan_rotation>-0.25</scan_rotation><nominal_camera_length>0.3</nominal_camera_length>
      <high_voltage>200000</high_voltage>
      <full_scan_field_of_view><scale_factor>0.72</scale_factor><x>2.16e-9</x><y>2.16e-9</y></full_scan_field_of_view>
      </iom_measurements></root>"#;
    let acq = open_paths(&empad_pair("ok", "frames.raw", 6, xml), None, None).unwrap();
    assert_eq!(
        acq.shape.scan,
        [2, 3],
        "the description's scan shape (rows = y)"
    );
    assert!(
        acq.scan_shape_source.contains("acquisition.xml"),
        "{}",
        acq.scan_shape_source
    );
    let c = acq.calibration;
    assert!(
        close(c.energy_ev, 200e3) && close(c.camera_length_m, 0.3),
        "{c:?}"
    );
    assert!(close(c.scan_rotation_deg, (-0.25f64).to_degrees()), "{c:?}");
    assert!(close(c.scan_step, 2.16e-9 / 0.72 / 3.0 * 1e9), "{c:?}");
    // No calibrated angle in a 1.2 description, and none derived from the nominal camera
    // length (not the EMPAD's: docs/decisions/0002-calibration-sources.md).
    assert_eq!(c.detector_step, None, "{c:?}");
    assert!(c.sources["detector_pixel_size_m"].contains("specification"));
}

#[test]
fn an_empad_0_51_description_gives_its_calibrated_angle_and_field_of_view() {
    // Element names with dots, as EMPAD 0.51 writes them.
    let xml = r#"<root><type>scan</type><pix_x>3</pix_x><pix_y>2</pix_y><raw_file filename="frames.raw"/>
      <iom_measurements><optics.get_cameralength>0.7225</optics.get_cameralength>
      <source.get_voltage>300000.0</source.get_voltage>
      <optics.get_full_scan_field_of_view>[9e-09, 9e-09]</optics.get_full_scan_field_of_view>
      <column.get_scanrotation>0.1</column.get_scanrotation>
      <calibrated_diffraction_angle>0.00042906574394463665</calibrated_diffraction_angle>
      </iom_measurements></root>"#;
    let paths = empad_pair("v051", "frames.raw", 6, xml);
    let acq = open_paths(&paths, None, None).unwrap();
    assert_eq!(acq.shape.scan, [2, 3]);
    let c = acq.calibration;
    assert!(close(c.energy_ev, 300e3), "{c:?}");
    assert!(close(c.camera_length_m, 0.7225), "{c:?}");
    assert!(close(c.scan_rotation_deg, 0.1f64.to_degrees()), "{c:?}");
    assert!(close(c.scan_step, 3.0), "9 nm over 3 columns: {c:?}");
    assert!(
        close(c.detector_step, 0.429_065_743_944_636_65),
        "the calibrated angle, in mrad: {c:?}"
    );
    assert_eq!(c.detector_units.as_deref(), Some("mrad"));
    // A shape given on the command line sets the step: 9 nm over 6 columns.
    let acq = open_paths(&paths, Some([1, 6]), None).unwrap();
    assert!(
        close(acq.calibration.scan_step, 1.5),
        "{:?}",
        acq.calibration
    );
}

fn cal_fixture(name: &str) -> PathBuf {
    fixtures().join("calibration").join(name)
}

/// tests/fixtures/make_calibration_fixtures.py's Arina master (in mm and keV) and data, with
/// or without its companion.
fn arina_cal(companion: bool) -> Calibration {
    let mut paths = vec![
        cal_fixture("arina_cal_master.h5"),
        cal_fixture("arina_cal_data_000001.h5"),
    ];
    let shape = if companion {
        paths.push(cal_fixture("arina_cal.h5"));
        None
    } else {
        Some([2, 3])
    };
    open_paths(&paths, shape, None).unwrap().calibration
}

#[test]
fn a_companion_wins_over_its_master() {
    let c = arina_cal(true);
    assert!(close(c.scan_step, 0.5), "{c:?}");
    // The companion's 200 kV, not the master's 300 keV photon energy.
    assert!(close(c.energy_ev, 200e3), "{c:?}");
    assert!(c.sources["energy_ev"].contains("High Tension"));
    // The pixel over the companion's camera length, not over the master's 300 mm.
    assert!(close(c.camera_length_m, 0.08), "{c:?}");
    assert!(close(c.detector_distance_m, 0.3), "{c:?}");
    assert!(close(c.detector_step, 55e-6 / 0.08 * 1e3), "{c:?}");
    assert!(close(c.scan_rotation_deg, -7.5), "{c:?}");
}

#[test]
fn the_masters_units_attributes_are_honoured() {
    let c = arina_cal(false);
    assert!(close(c.detector_distance_m, 0.3), "300 mm: {c:?}");
    assert!(
        c.sources["detector_distance_m"].ends_with("detector_distance (mm, shown in m)"),
        "{:?}",
        c.sources
    );
    assert!(close(c.energy_ev, 300e3), "300 keV: {c:?}");
    assert!(c.sources["energy_ev"].contains("photon_energy (keV, shown in eV)"));
    assert!(close(c.detector_step, 55e-6 / 0.3 * 1e3), "{c:?}");
    assert!(
        c.sources["detector_pixel_size_m"].ends_with("x_pixel_size (m)"),
        "{:?}",
        c.sources
    );
}

#[test]
fn py4dstem_metadata_gives_the_convergence_angle() {
    let acq = open_paths(&[cal_fixture("emd_cal.h5")], None, None).unwrap();
    let c = acq.calibration;
    assert!(close(c.convergence_semiangle_mrad, 21.4), "{c:?}");
    assert_eq!(
        c.sources["convergence_semiangle_mrad"],
        "emd_cal.h5: /cal_root/metadatabundle/calibration/convergence_semiangle_mrad"
    );
    assert!(
        close(c.scan_step, 1.5) && c.scan_units.as_deref() == Some("A"),
        "{c:?}"
    );
    assert!(close(c.detector_step, 0.25), "{c:?}");
}

#[test]
fn info_prints_the_calibration_with_its_sources() {
    let run = |args: &[String]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_stem4d"))
            .args(args)
            .output()
            .expect("run stem4d");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let mut args = vec!["info".to_string()];
    args.extend(
        [
            "arina_cal_master.h5",
            "arina_cal_data_000001.h5",
            "arina_cal.h5",
        ]
        .map(|n| cal_fixture(n).display().to_string()),
    );
    let text = run(&args);
    let first = text
        .lines()
        .find(|l| l.starts_with("calibration"))
        .unwrap_or_else(|| panic!("no calibration: {text}"));
    assert!(
        first.contains("scan step")
            && first.contains("0.5 nm  (arina_cal.h5: STEM Metadata/Pixel Size"),
        "{first}"
    );
    assert!(text.contains("scan rotation           -7.5 deg"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&run(&[
        vec!["info".to_string(), "--json".to_string()],
        args[1..].to_vec(),
    ]
    .concat()))
    .unwrap();
    assert_eq!(json["calibration"]["scan_rotation_deg"], -7.5);
    assert_eq!(
        json["calibration"]["sources"]["camera_length_m"],
        "arina_cal.h5: STEM Metadata/Camera Length (m)"
    );
    // Files without calibration say so.
    let fx = fixture_named("emd_u16_contig");
    let mut args = vec!["info".to_string()];
    args.extend(fixture_paths(&fx).iter().map(|p| p.display().to_string()));
    let plain = fixture_named("lz4_stack_u16");
    let mut plain_args = vec!["info".to_string()];
    if let Some(s) = plain["scan_shape"].as_array() {
        plain_args.push("--scan-shape".into());
        plain_args.push(format!("{},{}", s[0], s[1]));
    }
    plain_args.extend(
        fixture_paths(&plain)
            .iter()
            .map(|p| p.display().to_string()),
    );
    assert!(run(&plain_args).contains("calibration   none in the files"));
    assert!(!run(&args).contains("none in the files"));
}

/// C-SCAN: a description naming another raw file, or a shape that disagrees with the name's.
#[test]
fn empad_descriptions_that_do_not_fit_are_refused_by_name() {
    let other = r#"<root><raw_file filename="other.raw"/><pix_x>3</pix_x><pix_y>2</pix_y></root>"#;
    let e = refusal(&empad_pair("other", "frames.raw", 6, other));
    assert!(
        e.contains("acquisition.xml") && e.contains("other.raw") && e.contains("frames.raw"),
        "{e}"
    );
    let clash =
        r#"<root><raw_file filename="scan_x3_y2.raw"/><pix_x>2</pix_x><pix_y>3</pix_y></root>"#;
    let e = refusal(&empad_pair("clash", "scan_x3_y2.raw", 6, clash));
    assert!(
        e.contains("disagrees") && e.contains("scan_x3_y2.raw"),
        "{e}"
    );
    let broken = "<root><pix_x>3</root>";
    let e = refusal(&empad_pair("broken", "frames.raw", 6, broken));
    assert!(e.contains("acquisition.xml") && e.contains("XML"), "{e}");
    // The description alone: the error names the raw file it needs.
    let paths = empad_pair("alone", "frames.raw", 6, other);
    let e = refusal(&paths[1..]);
    assert!(
        e.contains("acquisition.xml") && e.contains("other.raw"),
        "{e}"
    );
}
