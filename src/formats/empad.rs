//! EMPAD raw: frames of 130 rows × 128 columns little-endian float32; rows 128 and 129 are
//! metadata and are dropped. The scan shape comes from the name `scan_xC_yR.raw`.

use super::{resolve_scan_shape, Acquisition, Calibration, Format, OpenOptions, Part, PartKind};
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

/// `scan_x256_y128.raw` → rows 128, cols 256.
fn shape_from_name(name: &str) -> Option<[usize; 2]> {
    let stem = name
        .strip_suffix(".raw")
        .or_else(|| name.strip_suffix(".RAW"))?;
    let mut x = None;
    let mut y = None;
    for token in stem.split('_') {
        if let Some(v) = token.strip_prefix('x') {
            x = v.parse::<usize>().ok().or(x);
        } else if let Some(v) = token.strip_prefix('y') {
            y = v.parse::<usize>().ok().or(y);
        }
    }
    Some([y?, x?])
}

pub(super) fn open(files: FileSet, name: &str, opts: &OpenOptions) -> Result<Acquisition> {
    let src = files
        .get(name)
        .ok_or_else(|| Error::param(format!("{name} not among the files")))?;
    let len = src.len();
    if len == 0 {
        return Err(Error::format(
            name,
            "the file is empty (0 bytes): no EMPAD frames",
        ));
    }
    if len % FRAME_BYTES != 0 {
        return Err(Error::format(
            name,
            format!(
                "EMPAD raw file size {len} bytes is not a whole number of {FRAME_BYTES}-byte frames (130 x 128 float32): truncated or not EMPAD"
            ),
        ));
    }
    let frames = len / FRAME_BYTES;
    let from_name = shape_from_name(name).map(|s| (s, format!("file name {name}")));
    let (scan, source) = resolve_scan_shape(name, frames, opts.scan_shape, from_name)?;
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
            },
        }],
        pixel_mask: None,
        calibration: Calibration::default(),
        crop: None,
    })
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
