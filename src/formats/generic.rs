//! Plain HDF5 stacks `(N, Kr, Kc)` / `(Rr, Rc, Kr, Kc)` and py4DSTEM EMD 1.0 files.

use hdf5_reader::group::Group;
use hdf5_reader::Hdf5File;

use super::{
    check_chunk_coverage, check_detector, check_frames, resolve_scan_shape, Acquisition,
    Calibration, CalibrationField as Field, Format, OpenOptions, Part, PartKind,
};
use crate::contract::Shape4;
use crate::error::{Error, Result};
use crate::hdf5_index::{attr_f64, dataset_f64, DatasetIndex, H5Set};

/// Bound on the group walk: real files have tens of objects; a loop or a bomb has more.
const MAX_OBJECTS: usize = 10_000;
/// Group nesting followed when searching for the data set: deeper (or cyclic, through hard
/// links back to an ancestor) structures are not searched further.
const MAX_DEPTH: usize = 32;

struct Candidate {
    path: String,
    shape: Vec<u64>,
}

/// What the search for the data set found: the candidates, and the objects it could not
/// read with why (a corrupt or truncated header, an unsupported version, a link to a file
/// not given). When no candidate is found, those are the real cause and the error says them.
struct Search<'a> {
    h5: &'a H5Set,
    primary: &'a str,
    found: Vec<Candidate>,
    unreadable: Vec<Error>,
    seen: usize,
}

impl Search<'_> {
    /// Note that `what` could not be read (`e`, after `before` link requests).
    fn unreadable(&mut self, what: String, before: usize, e: hdf5_reader::error::Error) {
        let err = self.h5.blame(self.primary, &what, before, e);
        self.unreadable.push(err);
    }
}

/// How many unreadable objects an error lists (the rest are counted).
const UNREADABLE_LISTED: usize = 3;

pub(super) fn open(
    h5: &H5Set,
    primary: &str,
    file: &Hdf5File,
    opts: &OpenOptions,
) -> Result<Acquisition> {
    let root = file
        .root_group()
        .map_err(|e| crate::hdf5_index::h5_err(primary, "cannot read the root group", e))?;
    let emd = attr_string(&root, "emd_group_type").as_deref() == Some("file");
    let path = match &opts.dataset {
        Some(p) => p.clone(),
        None => {
            let mut search = Search {
                h5,
                primary,
                found: Vec::new(),
                unreadable: Vec::new(),
                seen: 0,
            };
            walk(&root, "", emd, &mut search, 0);
            let unreadable = std::mem::take(&mut search.unreadable);
            search
                .found
                .into_iter()
                .max_by_key(|c| {
                    (
                        c.shape.len() == 4,
                        c.shape.iter().fold(1u64, |a, &d| a.saturating_mul(d)),
                    )
                })
                .map(|c| c.path)
                .ok_or_else(|| not_found(h5, primary, unreadable))?
        }
    };
    let (data_file, ds) = h5.dataset(primary, &path)?;
    let ix = DatasetIndex::build(h5, &data_file, &path, &ds)?;
    let (frames, det, from_file) = match ix.shape.as_slice() {
        [n, kr, kc] => (*n, [*kr, *kc], None),
        [rr, rc, kr, kc] => (
            rr.saturating_mul(*rc),
            [*kr, *kc],
            Some(([*rr, *rc], format!("{path} shape"))),
        ),
        other => {
            return Err(Error::format(
                &data_file,
                format!(
                    "data set {path} has shape {other:?}; expected (N, H, W) or (Rr, Rc, H, W)"
                ),
            ))
        }
    };
    let det = check_detector(&data_file, det)?;
    let frames = check_frames(&data_file, frames)?;
    check_chunk_coverage(&ix)?;
    let (scan, scan_source) = resolve_scan_shape(&data_file, frames, opts.scan_shape, from_file)?;
    let mut calibration = if emd {
        emd_calibration(file, primary, &path)
    } else {
        Calibration::default()
    };
    calibration.derive();
    let format = match (emd, ix.shape.len()) {
        (true, _) => Format::Emd,
        (false, 3) => Format::Hdf5Stack3d,
        _ => Format::Hdf5Stack4d,
    };
    let dtype = ix.dtype;
    Ok(Acquisition {
        format,
        files: h5.files().clone(),
        primary: primary.to_string(),
        dataset_path: path,
        shape: Shape4 { scan, det },
        dtype,
        scan_shape_source: scan_source,
        parts: vec![Part {
            source: h5.source(&data_file)?,
            first_frame: 0,
            frames: frames as usize,
            kind: PartKind::Hdf5(ix),
        }],
        pixel_mask: None,
        calibration,
        crop: None,
        unused_files: Vec::new(),
    })
}

fn attr_string(group: &Group, name: &str) -> Option<String> {
    let a = group.attribute(name).ok()?;
    a.read_string()
        .ok()
        .map(|s| s.trim_end_matches('\0').to_string())
}

/// The error when no data set qualifies. A link followed to a file not given hides its
/// target: that is the error itself. Otherwise the objects that could not be read are said,
/// since one of them is most likely the data.
fn not_found(h5: &H5Set, primary: &str, unreadable: Vec<Error>) -> Error {
    let mut missing = h5.missing_link_targets().into_iter();
    if let Some(first) = missing.next() {
        return Error::MissingFile {
            missing: first,
            referenced_by: primary.to_string(),
            also_missing: missing.collect(),
        };
    }
    let none = "no 3D (N, H, W) or 4D (Rr, Rc, H, W) numeric data set found";
    if unreadable.is_empty() {
        return Error::format(primary, format!("{none} (use --dataset PATH)"));
    }
    let count = unreadable.len();
    let mut said = Vec::new();
    for e in unreadable {
        match e {
            // In the primary file: no need to name it twice.
            Error::Format { file, message } if file == primary => said.push(message),
            other => said.push(other.to_string()),
        }
    }
    said.truncate(UNREADABLE_LISTED);
    let mut listed = said.join("; ");
    if count > UNREADABLE_LISTED {
        listed.push_str(&format!("; and {} more", count - UNREADABLE_LISTED));
    }
    Error::format(primary, format!("{none}; what could not be read: {listed}"))
}

fn walk(group: &Group, prefix: &str, emd: bool, search: &mut Search, depth: usize) {
    if depth > MAX_DEPTH || search.seen > MAX_OBJECTS {
        return;
    }
    let here = if prefix.is_empty() { "/" } else { prefix };
    let before = search.h5.link_requests();
    let (groups, datasets) = match group.member_names() {
        Ok(names) => names,
        Err(e) => {
            search.unreadable(format!("cannot list group {here}"), before, e);
            return;
        }
    };
    search.seen += groups.len() + datasets.len();
    if search.seen > MAX_OBJECTS {
        return;
    }
    for name in datasets {
        let name = crate::source::base_name(&name).to_string();
        let path = format!("{prefix}/{name}");
        let before = search.h5.link_requests();
        let ds = match group.dataset(&name) {
            Ok(ds) => ds,
            Err(e) => {
                search.unreadable(format!("cannot read data set {path}"), before, e);
                continue;
            }
        };
        let shape = ds.shape().to_vec();
        let numeric = matches!(
            ds.dtype(),
            hdf5_reader::Datatype::FixedPoint { .. } | hdf5_reader::Datatype::FloatingPoint { .. }
        );
        if numeric && (shape.len() == 3 || shape.len() == 4) && (!emd || name == "data") {
            search.found.push(Candidate { path, shape });
        }
    }
    for name in groups {
        let name = crate::source::base_name(&name).to_string();
        let path = format!("{prefix}/{name}");
        let before = search.h5.link_requests();
        match group.group(&name) {
            Ok(g) => walk(&g, &path, emd, search, depth + 1),
            Err(e) => search.unreadable(format!("cannot read group {path}"), before, e),
        }
    }
}

/// EMD 1.0 keeps axis calibrations in `dim0..dim3` beside `data`; py4DSTEM/emdfile keep
/// microscope values in `metadatabundle/<name>` groups of the data's group or its
/// ancestors (attributes or scalar data sets): the convergence semi-angle in mrad and the
/// beam energy in eV (`beam_energy`) or V (`accelerating_voltage`).
fn emd_calibration(file: &Hdf5File, primary: &str, data_path: &str) -> Calibration {
    let parent = data_path.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
    let axis = |k: usize| -> Option<(f64, Option<String>)> {
        let ds = file.dataset(&format!("{parent}/dim{k}")).ok()?;
        let v = ds.read_array::<f64>().ok()?;
        let mut it = v.iter();
        let a = *it.next()?;
        let b = *it.next()?;
        let units = ds
            .attribute("units")
            .ok()
            .and_then(|u| u.read_string().ok())
            .map(|u| u.trim_end_matches('\0').to_string());
        Some((b - a, units))
    };
    let mut cal = Calibration::default();
    if let Some((step, units)) = axis(0) {
        cal.offer(Field::ScanStep, Some(step), || {
            format!("{primary}: {parent}/dim0")
        });
        cal.set_units(units.as_deref(), None);
    }
    if let Some((step, units)) = axis(2) {
        cal.offer(Field::DetectorStep, Some(step), || {
            format!("{primary}: {parent}/dim2")
        });
        cal.set_units(None, units.as_deref());
    }
    let mut group = parent.to_string();
    loop {
        let bundle = format!("{group}/metadatabundle");
        if let Ok(g) = file.group(&bundle) {
            for m in g.groups().unwrap_or_default() {
                let name = format!("{bundle}/{}", crate::source::base_name(m.name()));
                let attrs = m.attributes().unwrap_or_default();
                let value = |key: &str| {
                    attr_f64(&attrs, key).or_else(|| dataset_f64(file, &format!("{name}/{key}")))
                };
                let src = |key: &'static str| {
                    let name = name.clone();
                    move || format!("{primary}: {name}/{key}")
                };
                cal.offer(
                    Field::ConvergenceSemiangle,
                    value("convergence_semiangle_mrad"),
                    src("convergence_semiangle_mrad"),
                );
                cal.offer(Field::Energy, value("beam_energy"), src("beam_energy (eV)"));
                cal.offer(
                    Field::Energy,
                    value("accelerating_voltage"),
                    src("accelerating_voltage (V)"),
                );
            }
        }
        match group.rsplit_once('/') {
            Some((up, _)) => group = up.to_string(),
            None => break,
        }
    }
    cal
}
