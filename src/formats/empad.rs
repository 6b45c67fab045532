//! EMPAD raw: frames of 130 rows × 128 columns little-endian float32; rows 128 and 129 are
//! metadata and are dropped. The scan shape comes from the name `scan_xC_yR.raw` or from the
//! EMPAD description (`.xml`) given with it, which also gives the calibration (`empad_xml`).

use super::{empad_xml, resolve_scan_shape, Acquisition, Format, OpenOptions, Part, PartKind};
use crate::contract::{Dtype, Shape4};
use crate::error::{Error, Result};
use crate::source::FileSet;

const ROWS_STORED: usize = 130;
const ROWS: usize = 128;
const COLS: usize = 128;
const FRAME_BYTES: u64 = (ROWS_STORED * COLS * 4) as u64;

pub(super) fn is_raw_name(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".raw")
}

/// `[rows, cols]` from `..._x{cols}_y{rows}....raw` (`scan_x256_y128.raw`: rows 128, cols
/// 256), as the 64-bit numbers written on any platform; `resolve_scan_shape` checks them
/// against the frame count.
fn shape_from_name(name: &str) -> Option<[u64; 2]> {
    let stem = name
        .strip_suffix(".raw")
        .or_else(|| name.strip_suffix(".RAW"))?;
    let mut x = None;
    let mut y = None;
    for token in stem.split('_') {
        if let Some(v) = token.strip_prefix('x') {
            x = v.parse::<u64>().ok().or(x);
        } else if let Some(v) = token.strip_prefix('y') {
            y = v.parse::<u64>().ok().or(y);
        }
    }
    Some([y?, x?])
}

pub(super) fn open(files: FileSet, name: &str, opts: &OpenOptions) -> Result<Acquisition> {
    let (src, len) = super::frames_source(&files, name, "EMPAD frames")?;
    if len % FRAME_BYTES != 0 {
        return Err(Error::format(
            name,
            format!(
                "EMPAD raw file size {len} bytes is not a whole number of {FRAME_BYTES}-byte frames (130 x 128 float32): truncated or not EMPAD"
            ),
        ));
    }
    let frames = len / FRAME_BYTES;
    let described = describe(&files, name)?;
    let mut used = vec![name.to_string()];
    used.extend(described.as_ref().map(|(xml, _)| xml.clone()));
    let description = described.map(|(_, d)| d);
    let from_name = shape_from_name(name).map(|s| (s, format!("file name {name}")));
    let from_xml = description
        .as_ref()
        .and_then(|d| d.scan.clone())
        .map(|(s, src)| (s.map(|d| d as u64), src));
    // C-SCAN: the name's shape and the description's must agree.
    let found = match (from_name, from_xml) {
        (Some(n), Some(x)) if n.0 != x.0 => {
            return Err(Error::format(
                name,
                format!(
                    "the scan shape {}x{} of the file name disagrees with {}x{} of {}: give --scan-shape",
                    n.0[0], n.0[1], x.0[0], x.0[1], x.1
                ),
            ))
        }
        (Some(n), _) => Some(n),
        (None, x) => x,
    };
    let (scan, source) = resolve_scan_shape(name, frames, opts.scan_shape, found)?;
    let calibration = description.map(|d| d.calibration(scan)).unwrap_or_default();
    Ok(Acquisition {
        format: Format::EmpadRaw,
        files: files.clone(),
        primary: name.to_string(),
        dataset_path: String::new(),
        shape: Shape4 {
            scan,
            det: [ROWS, COLS],
        },
        dtype: Dtype::F32,
        scan_shape_source: source,
        parts: vec![Part {
            source: src,
            first_frame: 0,
            frames: frames as usize,
            kind: PartKind::Raw {
                offset: 0,
                stride: FRAME_BYTES,
                stored_rows: ROWS_STORED,
                samples: super::RawSamples::Little,
            },
        }],
        pixel_mask: None,
        calibration,
        crop: None,
        unused_files: super::unused_files(&files, &used),
    })
}

/// The description of raw file `raw` among `files`: the `.xml` that names it, else the only
/// `.xml`. One that names another raw file is refused rather than applied to this one
/// (C-SCAN).
fn describe(files: &FileSet, raw: &str) -> Result<Option<(String, empad_xml::Description)>> {
    let xmls: Vec<_> = files
        .files()
        .iter()
        .filter(|f| is_xml_name(f.name()))
        .collect();
    let mut read = Vec::new();
    for x in &xmls {
        read.push((x.name().to_string(), empad_xml::read(x.as_ref())?));
    }
    if let Some(i) = read
        .iter()
        .position(|(_, d)| d.raw_file.as_deref() == Some(raw))
    {
        return Ok(Some(read.swap_remove(i)));
    }
    match read.len() {
        0 => Ok(None),
        1 => {
            let (xml, d) = read.swap_remove(0);
            match d.raw_file.as_deref() {
                Some(other) => Err(Error::format(
                    &xml,
                    format!("this EMPAD description is of {other}, not of {raw}: open the two together"),
                )),
                None => Ok(Some((xml, d))),
            }
        }
        _ => Err(Error::format(
            raw,
            "several .xml files are given and none names this raw file: give the one that describes it",
        )),
    }
}

pub(super) fn is_xml_name(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".xml")
}

/// Files holding an EMPAD description but not its raw file: the error names what is missing.
pub(super) fn description_without_raw(files: &FileSet) -> Option<Error> {
    let x = files.files().iter().find(|f| is_xml_name(f.name()))?;
    let d = empad_xml::read(x.as_ref()).ok()?;
    let raw = d.raw_file?;
    Some(Error::format(
        x.name(),
        format!("this EMPAD description's frames are in {raw}: open {raw} together with it"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_shape_from_name_is_rows_then_cols() {
        assert_eq!(shape_from_name("scan_x256_y128.raw"), Some([128, 256]));
        assert_eq!(shape_from_name("foo.raw"), None);
    }
}
