//! Quantum Detectors Merlin MIB: frames one after another, each an ASCII header (`MQ1,`
//! then comma-separated fields, padded to its stated length: 384 bytes for one chip, 768 for
//! a quad) followed by the pixels, big-endian, row after row. The fields read here: header
//! length (3rd), chips (4th), width and height in pixels (5th, 6th: detector columns and
//! rows), pixel type (7th: `U08` for 1- and 6-bit counters, `U16` for 12-bit, `U32` for
//! 24-bit; `R64` is the raw readout, decoded by `mib_raw` with the counter depth the
//! header's last field gives) and the chip layout (8th). Frames are kept as stored, row 0
//! first (no flip).
//!
//! The scan shape comes from the acquisition header `<name>.hdr` where it records lines
//! (`Frames per Trigger` > 1: the columns; `Frames in Acquisition` ÷ that: the rows), else
//! from `--scan-shape`.

use super::mib_raw::MibRaw;
use super::{resolve_scan_shape, Acquisition, Format, OpenOptions, Part, PartKind, RawSamples};
use crate::contract::{Dtype, Shape4};
use crate::error::{Error, Result};
use crate::source::{ByteSource, FileSet};

pub(super) fn is_mib_name(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".mib")
}

fn is_hdr_name(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".hdr")
}

/// Bytes of a frame header read to find its length (the longest known is 768).
const FIRST_READ: usize = 1024;

/// What a frame header says.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FrameHeader {
    header_bytes: u64,
    chips: u32,
    /// Detector rows × columns (decoded, for raw frames).
    det: [usize; 2],
    dtype: Dtype,
    layout: String,
    /// Raw frames (`R64`): how their counters are stored.
    raw: Option<MibRaw>,
}

impl FrameHeader {
    /// Bytes of one frame's pixels as stored.
    fn pixel_bytes(&self) -> u64 {
        match &self.raw {
            Some(raw) => raw.stored_bytes() as u64,
            None => (self.det[0] * self.det[1] * self.dtype.size()) as u64,
        }
    }
}

fn bad(name: &str, what: impl Into<String>) -> Error {
    Error::format(name, what.into())
}

/// Parse the frame header at the start of `bytes` (at least its first 8 fields).
fn parse_header(name: &str, bytes: &[u8]) -> Result<FrameHeader> {
    if !bytes.starts_with(b"MQ1,") {
        return Err(bad(
            name,
            "not a Merlin MIB file: a frame does not start with an MQ1 header",
        ));
    }
    let text: String = bytes
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect();
    let fields: Vec<&str> = text.split(',').map(str::trim).collect();
    if fields.len() < 8 {
        return Err(bad(name, "MIB frame header has fewer than 8 fields"));
    }
    let number = |i: usize, what: &str| -> Result<u64> {
        fields[i].parse::<u64>().map_err(|_| {
            bad(
                name,
                format!("MIB frame header: {what} '{}' is not a number", fields[i]),
            )
        })
    };
    let header_bytes = number(2, "header length")?;
    if !(16..=1 << 16).contains(&header_bytes) {
        return Err(bad(
            name,
            format!("MIB frame header length {header_bytes} is not plausible"),
        ));
    }
    let chips = number(3, "chip count")? as u32;
    let cols = number(4, "width")? as usize;
    let rows = number(5, "height")? as usize;
    if rows == 0 || cols == 0 || rows > 1 << 14 || cols > 1 << 14 {
        return Err(bad(
            name,
            format!("MIB frames of {cols} x {rows} pixels are not plausible"),
        ));
    }
    let layout = fields[7].to_string();
    let (dtype, det, raw) = match fields[6] {
        "U08" | "U8" => (Dtype::U8, [rows, cols], None),
        "U16" => (Dtype::U16, [rows, cols], None),
        "U32" => (Dtype::U32, [rows, cols], None),
        "R64" => {
            // The counter depth is the header's last field (`…,MQ1A,time,exposure,depth,`).
            let last = fields.iter().rev().find(|f| !f.is_empty()).copied();
            let depth = last.and_then(|f| f.parse::<u32>().ok()).ok_or_else(|| {
                bad(
                    name,
                    "raw MIB frame header (R64) does not end with its counter depth",
                )
            })?;
            let (raw, det, dtype) = MibRaw::new(name, depth, chips, &layout, [rows, cols])?;
            (dtype, det, Some(raw))
        }
        other => {
            return Err(bad(
                name,
                format!("MIB pixel type '{other}' is not one of U08, U16, U32, R64"),
            ))
        }
    };
    Ok(FrameHeader {
        header_bytes,
        chips,
        det,
        dtype,
        layout,
        raw,
    })
}

fn read_header(src: &dyn ByteSource, at: u64, len: usize) -> Result<FrameHeader> {
    let mut buf = vec![0u8; len];
    src.read_at(at, &mut buf)?;
    parse_header(src.name(), &buf)
}

/// The acquisition header's fields (`key:\tvalue` lines between `HDR,` and `End`).
fn hdr_fields(src: &dyn ByteSource) -> Result<Vec<(String, String)>> {
    let len = src.len();
    if len > 1 << 20 {
        return Err(bad(
            src.name(),
            format!("a Merlin .hdr of {len} bytes is not plausible (they are a few KiB)"),
        ));
    }
    let mut buf = vec![0u8; len as usize];
    src.read_at(0, &mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    if !text.starts_with("HDR") {
        return Err(bad(
            src.name(),
            "not a Merlin acquisition header (it does not start with HDR)",
        ));
    }
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| {
            (
                k.trim().trim_end_matches(':').to_string(),
                v.trim().to_string(),
            )
        })
        .collect())
}

/// `[rows, cols]` from the acquisition header, where it records lines.
fn scan_from_hdr(name: &str, fields: &[(String, String)]) -> Result<Option<[u64; 2]>> {
    let get = |key: &str| -> Result<Option<u64>> {
        fields
            .iter()
            .find(|(k, _)| k.starts_with(key))
            .map(|(_, v)| {
                v.parse::<u64>()
                    .map_err(|_| bad(name, format!("'{key}' is '{v}', not a number")))
            })
            .transpose()
    };
    let (Some(all), Some(per)) = (get("Frames in Acquisition")?, get("Frames per Trigger")?) else {
        return Ok(None);
    };
    if per <= 1 {
        // Each frame its own trigger: the header does not say how they form lines.
        return Ok(None);
    }
    if all % per != 0 {
        return Err(bad(
            name,
            format!("{all} frames in acquisition are not whole lines of {per} frames per trigger"),
        ));
    }
    Ok(Some([all / per, per]))
}

pub(super) fn open(files: FileSet, name: &str, opts: &OpenOptions) -> Result<Acquisition> {
    let (src, len) = super::frames_source(&files, name, "MIB frames")?;
    let first = read_header(src.as_ref(), 0, FIRST_READ.min(len as usize))?;
    // The whole header, now that its length is known: its fields must say the same.
    let head = first.header_bytes;
    if head > len {
        return Err(bad(
            name,
            format!("MIB header of {head} bytes is longer than the file"),
        ));
    }
    let frame_bytes = head + first.pixel_bytes();
    if len % frame_bytes != 0 {
        return Err(bad(
            name,
            format!(
                "{len} bytes are not a whole number of {frame_bytes}-byte MIB frames ({head}-byte header + {} x {} {}{}): truncated, or frames of several sizes",
                first.det[1],
                first.det[0],
                first.dtype.name(),
                match &first.raw {
                    Some(raw) => format!(" as {}-bit raw counters", raw.depth),
                    None => String::new(),
                }
            ),
        ));
    }
    let frames = len / frame_bytes;
    // The last frame must be laid out as the first: a file whose frames change size or type
    // part way would otherwise be read as garbage.
    let last_at = (frames - 1) * frame_bytes;
    let last = read_header(src.as_ref(), last_at, (head as usize).min(FIRST_READ))?;
    if last != first {
        return Err(bad(
            name,
            format!("the last MIB frame's header ({last:?}) differs from the first's ({first:?})"),
        ));
    }
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    let hdr = files
        .files()
        .iter()
        .find(|f| is_hdr_name(f.name()) && f.name().rsplit_once('.').map(|(s, _)| s) == Some(stem))
        .or_else(|| {
            let hdrs: Vec<_> = files
                .files()
                .iter()
                .filter(|f| is_hdr_name(f.name()))
                .collect();
            (hdrs.len() == 1).then(|| hdrs[0])
        })
        .cloned();
    let mut used = vec![name.to_string()];
    let found = match &hdr {
        Some(h) => {
            used.push(h.name().to_string());
            let fields = hdr_fields(h.as_ref())?;
            scan_from_hdr(h.name(), &fields)?.map(|s| {
                (
                    s,
                    format!("{}: Frames in Acquisition / Frames per Trigger", h.name()),
                )
            })
        }
        None => None,
    };
    let (scan, source) = resolve_scan_shape(name, frames, opts.scan_shape, found)?;
    if first.chips == 0 || first.layout.is_empty() {
        return Err(bad(name, "MIB frame header names no chips"));
    }
    Ok(Acquisition {
        format: Format::Mib,
        files: files.clone(),
        primary: name.to_string(),
        dataset_path: String::new(),
        shape: Shape4 {
            scan,
            det: first.det,
        },
        dtype: first.dtype,
        scan_shape_source: source,
        parts: vec![Part {
            source: src,
            first_frame: 0,
            frames: frames as usize,
            kind: PartKind::Raw {
                offset: head,
                stride: frame_bytes,
                stored_rows: first.det[0],
                samples: match first.raw {
                    Some(raw) => RawSamples::MibRaw(raw),
                    None => RawSamples::Big,
                },
            },
        }],
        pixel_mask: None,
        calibration: Default::default(),
        crop: None,
        unused_files: super::unused_files(&files, &used),
    })
}

/// A Merlin acquisition header given without its frames: the error says what is missing.
pub(super) fn header_without_frames(files: &FileSet) -> Option<Error> {
    let h = files.files().iter().find(|f| is_hdr_name(f.name()))?;
    let stem = h.name().rsplit_once('.').map_or(h.name(), |(s, _)| s);
    Some(bad(
        h.name(),
        format!("this Merlin acquisition header's frames are in {stem}.mib: open it together with the header"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(fields: &str, len: usize) -> Vec<u8> {
        let mut b = fields.as_bytes().to_vec();
        b.resize(len, 0);
        b
    }

    #[test]
    fn headers_give_rows_cols_and_type() {
        let h = header("MQ1,000001,00384,01,0256,0128,U16,   1x1,01,2024", 384);
        let p = parse_header("a.mib", &h).unwrap();
        assert_eq!(p.det, [128, 256]);
        assert_eq!(p.dtype, Dtype::U16);
        assert_eq!(p.header_bytes, 384);
        assert_eq!(p.layout, "1x1");
        let q = header("MQ1,000001,00768,04,0512,0512,U08,   2x2,0F,2024", 768);
        assert_eq!(parse_header("q.mib", &q).unwrap().chips, 4);
        // Raw: the quad's four chips side by side as stored, 512 x 512 decoded.
        let r = header(
            "MQ1,1,00768,04,1024,0256,R64,   2x2,0F,MQ1A,t,1000000ns,1,",
            768,
        );
        let p = parse_header("r.mib", &r).unwrap();
        assert_eq!(
            (p.det, p.dtype, p.pixel_bytes()),
            ([512, 512], Dtype::U8, 32768)
        );
        // Raw 24-bit: the header's 512 columns are the two 12-bit images of a 256-wide chip.
        let r = header("MQ1,1,00384,01,0512,0256,R64,1x1,01,MQ1A,t,1ns,24,", 384);
        let p = parse_header("r.mib", &r).unwrap();
        assert_eq!(
            (p.det, p.dtype, p.pixel_bytes()),
            ([256, 256], Dtype::U32, 262144)
        );
    }

    #[test]
    fn bad_headers_are_named() {
        let say = |h: &[u8]| parse_header("x.mib", h).unwrap_err().to_string();
        assert!(say(b"HDR,\t").contains("not a Merlin MIB file"));
        assert!(say(&header("MQ1,1,00384,01,0256,0256,R64,1x1", 64)).contains("counter depth"));
        let r24 = header("MQ1,1,00768,04,1024,0256,R64,2x2,0F,MQ1A,t,1ns,24,", 768);
        assert!(say(&r24).contains("24-bit counters are decoded for single chips"));
        assert!(say(&header("MQ1,1,00384,01,0256,0256,F32,1x1", 64)).contains("'F32'"));
        assert!(say(&header("MQ1,1,0038x,01,0256,0256,U08,1x1", 64)).contains("header length"));
        assert!(say(&header("MQ1,1,00384,01,0000,0256,U08,1x1", 64)).contains("not plausible"));
        assert!(say(&header("MQ1,1,00384", 64)).contains("fewer than 8 fields"));
    }

    #[test]
    fn the_hdr_gives_lines_only_when_it_records_them() {
        let f = |all: &str, per: &str| {
            vec![
                (
                    "Frames in Acquisition (Number)".to_string(),
                    all.to_string(),
                ),
                ("Frames per Trigger (Number)".to_string(), per.to_string()),
            ]
        };
        assert_eq!(scan_from_hdr("a.hdr", &f("8", "4")).unwrap(), Some([2, 4]));
        assert_eq!(scan_from_hdr("a.hdr", &f("8", "1")).unwrap(), None);
        assert!(scan_from_hdr("a.hdr", &f("9", "4")).is_err());
        assert!(scan_from_hdr("a.hdr", &f("x", "4")).is_err());
    }
}
