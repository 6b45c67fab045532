//! Dectris Arina/Eiger: `<name>_master.h5` links `/entry/data/data_NNNNNN` to the data files;
//! the scan shape lives only in the optional companion `<name>.h5` (`STEM Metadata`:
//! `NumPixelsX` = columns, `NumPixelsY` = rows).

use hdf5_reader::Hdf5File;

use super::calibration::{ev_per, metres_per};
use super::{
    check_chunk_coverage, check_detector, check_frames, resolve_scan_shape, Acquisition,
    Calibration, CalibrationField as Field, Format, OpenOptions, Part, PartKind,
};
use crate::error::{Error, Result};
use crate::hdf5_index::{attr_f64, attr_number, dataset_f64_units, DatasetIndex, H5Set};

const DETECTOR: &str = "/entry/instrument/detector";

/// Whether `file` (`name` in `h5`) is an Arina master: `/entry/data` lists `data_NNNNNN`
/// links. A listing that fails while following a link is that linked file's error, said
/// now: falling through to a search for a data set would hide it.
pub(super) fn is_master(h5: &H5Set, name: &str, file: &Hdf5File) -> Result<bool> {
    let Ok(group) = file.group("/entry/data") else {
        return Ok(false);
    };
    let before = h5.link_requests();
    match group.member_names() {
        Ok(names) => Ok(!data_link_names(names).is_empty()),
        Err(e) if h5.link_requests() > before => {
            Err(h5.blame(name, "cannot list /entry/data", before, e))
        }
        Err(_) => Ok(false),
    }
}

/// Names of the `data_NNNNNN` members of `/entry/data`, in frame order.
fn data_links(file: &Hdf5File) -> Option<Vec<String>> {
    let group = file.group("/entry/data").ok()?;
    // Link names are listed without resolving them, so missing data files are named later.
    group.member_names().ok().map(data_link_names)
}

/// The `data_NNNNNN` names among a group's members (groups, data sets), in frame order.
fn data_link_names((groups, datasets): (Vec<String>, Vec<String>)) -> Vec<String> {
    let mut links: Vec<String> = groups
        .into_iter()
        .chain(datasets)
        .filter(|n| n.starts_with("data_") && n[5..].chars().all(|c| c.is_ascii_digit()))
        .collect();
    links.sort();
    links
}

/// The scan shape the companion records (`STEM Metadata` NumPixelsY × NumPixelsX), if it
/// records one. A value that is there but is no scan dimension (NaN, negative, a string, an
/// array), or one dimension without the other, is an error naming the companion.
fn companion_scan_shape(
    cname: &str,
    attrs: &[hdf5_reader::Attribute],
    frames: u64,
) -> Result<Option<([usize; 2], String)>> {
    let dim = |what: &str| -> Result<Option<usize>> {
        let field = format!("STEM Metadata {what}");
        match attr_number(attrs, what) {
            None => Ok(None),
            Some(Ok(v)) => super::scan_dimension(cname, &field, v, frames).map(Some),
            Some(Err(held)) => Err(Error::ScanShape {
                file: cname.to_string(),
                message: format!(
                    "{field} is {held}, not a scan dimension of these {frames} frames (one whole number from 1 to {frames}); pass --scan-shape ROWS,COLS"
                ),
            }),
        }
    };
    match (dim("NumPixelsY")?, dim("NumPixelsX")?) {
        (Some(r), Some(c)) => Ok(Some((
            [r, c],
            format!("{cname}: STEM Metadata NumPixelsY x NumPixelsX"),
        ))),
        (None, None) => Ok(None),
        (r, _) => Err(Error::ScanShape {
            file: cname.to_string(),
            message: format!(
                "STEM Metadata records {} but not {}; pass --scan-shape ROWS,COLS",
                if r.is_some() {
                    "NumPixelsY"
                } else {
                    "NumPixelsX"
                },
                if r.is_some() {
                    "NumPixelsX"
                } else {
                    "NumPixelsY"
                },
            ),
        }),
    }
}

pub(super) fn open(h5: &H5Set, master: &str, opts: &OpenOptions) -> Result<Acquisition> {
    let file = h5.open(master)?;
    let links = data_links(&file).unwrap_or_default();
    // Listing resolves each external link; a target that is not among the opened files is
    // left out of the listing, so name it here rather than read fewer frames.
    let mut missing = h5.missing_link_targets().into_iter();
    if let Some(first) = missing.next() {
        return Err(Error::MissingFile {
            missing: first,
            referenced_by: format!("{master}:/entry/data"),
            also_missing: missing.collect(),
        });
    }
    let mut parts = Vec::new();
    let mut frames = 0u64;
    let mut det: Option<[u64; 2]> = None;
    let mut dtype = None;
    for link in &links {
        let path = format!("/entry/data/{link}");
        let (data_file, ds) = h5.dataset(master, &path)?;
        let ix = DatasetIndex::build(h5, &data_file, "/entry/data/data", &ds)?;
        if ix.shape.len() != 3 {
            return Err(Error::format(
                &data_file,
                format!(
                    "Arina data set {path} has rank {} (expected (n, H, W))",
                    ix.shape.len()
                ),
            ));
        }
        let this_det = [ix.shape[1], ix.shape[2]];
        if det.is_some_and(|d| d != this_det) || dtype.is_some_and(|d| d != ix.dtype) {
            return Err(Error::format(
                &data_file,
                "data files disagree on detector shape or dtype",
            ));
        }
        check_detector(&data_file, this_det)?;
        check_frames(&data_file, ix.shape[0])?;
        check_chunk_coverage(&ix)?;
        det = Some(this_det);
        dtype = Some(ix.dtype);
        let n = ix.shape[0];
        parts.push(Part {
            source: h5.source(&data_file)?,
            first_frame: frames as usize,
            frames: n as usize,
            kind: PartKind::Hdf5(ix),
        });
        frames = frames.saturating_add(n);
    }
    let (Some(det), Some(dtype)) = (det, dtype) else {
        return Err(Error::format(master, "Arina master links no data files"));
    };
    let det = check_detector(master, det)?;
    let frames = check_frames(master, frames)?;

    let companion = master.strip_suffix("_master.h5").map(|p| format!("{p}.h5"));
    let mut calibration = Calibration::default();
    let mut from_companion = None;
    if let Some(cname) = companion.as_deref() {
        if h5.files().get(cname).is_some() {
            let cfile = h5.open(cname)?;
            let meta = cfile.group("STEM Metadata").ok();
            let attrs = meta.and_then(|g| g.attributes().ok()).unwrap_or_default();
            // Recorded dimensions must be usable; with --scan-shape given they are not needed.
            if opts.scan_shape.is_none() {
                from_companion = companion_scan_shape(cname, &attrs, frames)?;
            }
            companion_calibration(&mut calibration, cname, &attrs);
        }
    }
    master_calibration(&mut calibration, master, &file);
    calibration.derive();

    let from_companion =
        from_companion.map(|(s, src): ([usize; 2], String)| (s.map(|d| d as u64), src));
    let (scan, scan_source) = resolve_scan_shape(master, frames, opts.scan_shape, from_companion)
        .map_err(|e| match (e, companion.as_deref()) {
        (Error::ScanShape { file, message }, Some(c)) if h5.files().get(c).is_none() => {
            Error::ScanShape {
                file,
                message: format!("{message}; or open the companion file {c} with the master"),
            }
        }
        (e, _) => e,
    })?;

    Ok(Acquisition {
        format: Format::Arina,
        files: h5.files().clone(),
        primary: master.to_string(),
        dataset_path: "/entry/data/data_*".into(),
        shape: crate::contract::Shape4 { scan, det },
        dtype,
        scan_shape_source: scan_source,
        parts,
        pixel_mask: read_pixel_mask(&file, master, det)?,
        calibration,
        crop: None,
        unused_files: Vec::new(),
    })
}

/// The companion's "STEM Metadata" attributes, as the Arina software writes them: Pixel
/// Size in nm, High Tension in V, Camera Length in m, Rotation (no unit recorded; read as
/// degrees, like the companion's other human units, and said so in the source).
fn companion_calibration(cal: &mut Calibration, cname: &str, attrs: &[hdf5_reader::Attribute]) {
    let src = |a: &'static str| move || format!("{cname}: STEM Metadata/{a}");
    cal.offer(
        Field::ScanStep,
        attr_f64(attrs, "Pixel Size"),
        src("Pixel Size (nm)"),
    );
    cal.set_units(Some("nm"), None);
    cal.offer(
        Field::Energy,
        attr_f64(attrs, "High Tension"),
        src("High Tension (V)"),
    );
    cal.offer(
        Field::CameraLength,
        attr_f64(attrs, "Camera Length"),
        src("Camera Length (m)"),
    );
    cal.offer(
        Field::ScanRotation,
        attr_f64(attrs, "Rotation"),
        src("Rotation (no unit recorded: read as degrees)"),
    );
}

/// The master's NeXus fields: pixel size, the detector's distance and the beam energy, in
/// the units their `units` attributes name (absent: m and eV; an unknown unit drops the value).
fn master_calibration(cal: &mut Calibration, master: &str, file: &Hdf5File) {
    let read = |path: String, si: &'static str, per: fn(Option<&str>) -> Option<f64>| {
        let found = dataset_f64_units(file, &path);
        let value = found
            .as_ref()
            .and_then(|(v, units)| Some(v * per(units.as_deref())?));
        let units = match found.and_then(|(_, u)| u) {
            Some(u) if u != si => format!("{u}, shown in {si}"),
            _ => si.to_string(),
        };
        (value, move || format!("{master}: {path} ({units})"))
    };
    let (v, s) = read(format!("{DETECTOR}/x_pixel_size"), "m", metres_per);
    cal.offer(Field::DetectorPixelSize, v, s);
    let (v, s) = read(format!("{DETECTOR}/detector_distance"), "m", metres_per);
    cal.offer(Field::DetectorDistance, v, s);
    let (v, s) = read(
        "/entry/instrument/beam/incident_energy".into(),
        "eV",
        ev_per,
    );
    cal.offer(Field::Energy, v, s);
    // Dectris records the beam energy as the detector's photon energy.
    let (v, s) = read(
        format!("{DETECTOR}/detectorSpecific/photon_energy"),
        "eV",
        ev_per,
    );
    cal.offer(Field::Energy, v, s);
}

fn read_pixel_mask(file: &Hdf5File, master: &str, det: [usize; 2]) -> Result<Option<Vec<bool>>> {
    for path in [
        format!("{DETECTOR}/detectorSpecific/pixel_mask"),
        format!("{DETECTOR}/pixel_mask"),
    ] {
        let Ok(ds) = file.dataset(&path) else {
            continue;
        };
        if ds.shape() != [det[0] as u64, det[1] as u64] {
            return Err(Error::format(
                master,
                format!(
                    "{path} has shape {:?} but the detector is {}x{}",
                    ds.shape(),
                    det[0],
                    det[1]
                ),
            ));
        }
        let values = ds
            .read_array::<u32>()
            .map_err(|e| crate::hdf5_index::h5_err(master, &format!("cannot read {path}"), e))?;
        return Ok(Some(values.iter().map(|&v| v != 0).collect()));
    }
    Ok(None)
}
