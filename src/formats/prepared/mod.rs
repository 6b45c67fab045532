//! Prepared acquisitions (issue #33, item 3; decision 0037): one file holding an acquisition
//! already decoded into the resident's position-tiled layout (`upload::plan`), so that a
//! reopen copies its blocks straight into GPU buffers and decodes nothing. The container
//! (`docs/PREPARED.md`):
//!
//! - a 4096-byte header: the magic `STEM4DP\0`, the version (u32 LE), 4 bytes of zeros, the
//!   description's offset and length (u64 LE each) and its SHA-256;
//! - payload blocks of whole tiles from byte 4096 on, each at a multiple of 4096, each with
//!   its SHA-256 in the description: the tiles as they are (`position-tiled`, version 1
//!   and on), or packed as the compressed resident packs them (`packed-sectors`, version 2,
//!   `packed_sectors`; decision 0044);
//! - the description, JSON, after the last block: shape, dtype, layout, blocks, the
//!   acquisition's bad-pixel mask and calibration, and the provenance of what it was made
//!   from.
//!
//! The samples are those the files hold (no bin, no bad pixel zeroed), so every correction
//! applies to a prepared acquisition as to its files. Every block is checked against its hash
//! before anything of it is used; a corrupted or truncated file is refused by name.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Acquisition, FileSet, Format, OpenOptions, Part, PartKind};
use crate::contract::{Dtype, Shape4};
use crate::error::{Error, Result};
use crate::source::ByteSource;

pub mod packed_sectors;
mod payload;

pub use payload::TiledPayload;

pub const MAGIC: [u8; 8] = *b"STEM4DP\0";
/// The version written: 2 since packed payloads. Version 1 (position-tiled payloads only)
/// is read as well.
pub const VERSION: u32 = 2;
/// Bytes of the header; blocks start here and at multiples of it.
pub const ALIGN: u64 = 4096;
/// The file name ending the CLI and the page give prepared acquisitions.
pub const EXTENSION: &str = ".stem4d";
/// Bytes of the pieces a block's pieces SHA-256 hashes apart, and the piece digests each
/// run of the level above hashes together (decision 0056).
pub const PIECE_BYTES: usize = 4096;
pub const RUN_DIGESTS: usize = 64;

/// A block's pieces SHA-256 (decision 0056): the SHA-256 of the digests of runs of
/// [`RUN_DIGESTS`] consecutive digests of its pieces of [`PIECE_BYTES`] (the last piece and
/// run shorter; an empty block is one empty piece), each a SHA-256, so that a GPU hashes
/// the pieces and the runs side by side where the block was copied (`wgsl/sha256.wgsl`).
pub fn pieces_sha256(bytes: &[u8]) -> [u8; 32] {
    let pieces: Vec<_> = match bytes.is_empty() {
        true => vec![Sha256::digest(bytes)],
        false => bytes.chunks(PIECE_BYTES).map(Sha256::digest).collect(),
    };
    let mut root = Sha256::new();
    for run in pieces.chunks(RUN_DIGESTS) {
        let mut h = Sha256::new();
        run.iter().for_each(|d| h.update(d));
        root.update(h.finalize());
    }
    root.finalize().into()
}

/// The description: what the payload is and where it came from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Description {
    pub container: String,
    pub version: u32,
    /// `[scan rows, scan cols, detector rows, detector cols]`.
    pub shape: [usize; 4],
    pub dtype: String,
    pub layout: Layout,
    pub blocks: Vec<BlockEntry>,
    /// Detector pixels the files flag bad (row-major indices), as the open found them.
    pub pixel_mask: Option<Vec<u32>>,
    /// The acquisition's calibration as `stem4d info` reports it.
    pub calibration: serde_json::Value,
    pub made_from: Provenance,
    /// The settings it was viewed with when it was saved from a session (the page, Python):
    /// a reopen may take them (`OpenRequest::saved_settings`). Absent from the CLI's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SavedSession>,
}

/// What a session saved with its prepared file: its detector bin and bad-pixel masking
/// (the payload itself is always the files' samples) and the BF disk it had fitted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedSession {
    pub bin: usize,
    pub mask_bad_pixels: bool,
    /// `[centre_row, centre_col, radius]` on the binned detector, where it was fitted.
    pub bf_fit: Option<[f64; 3]>,
}

/// The payload's layout: tiles of `tile` scan positions, each `tile_bytes` long, pixel after
/// pixel a 32-byte sector of `bits`-bit samples (`upload::plan`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub kind: LayoutKind,
    pub bits: u32,
    pub tile: u32,
    pub tile_bytes: u64,
    pub tiles: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayoutKind {
    /// Each block its tiles as they are.
    PositionTiled,
    /// Each block its tiles packed into one stand-alone compressed-resident segment
    /// (`packed_sectors`).
    PackedSectors,
}

/// Which payload a prepared acquisition is written with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Payload {
    /// Packed (`packed-sectors`) for counts; float32, which packing does not shorten,
    /// as it is.
    #[default]
    Smallest,
    /// Position-tiled, whatever the samples.
    Raw,
}

impl Layout {
    /// The layout of `frames` scan positions of a `det_len`-pixel detector of `dtype`.
    pub fn of(dtype: Dtype, det_len: usize, frames: usize) -> Layout {
        let bits = bits_of(dtype);
        let tile = 256 / bits;
        Layout {
            kind: LayoutKind::PositionTiled,
            bits,
            tile,
            tile_bytes: det_len as u64 * 32,
            tiles: frames.div_ceil(tile as usize) as u64,
        }
    }

    /// The layout a payload of `payload` takes for samples of `dtype`.
    pub fn for_payload(dtype: Dtype, det_len: usize, frames: usize, payload: Payload) -> Layout {
        let kind = match payload {
            Payload::Smallest if !dtype.is_float() => LayoutKind::PackedSectors,
            _ => LayoutKind::PositionTiled,
        };
        Layout {
            kind,
            ..Layout::of(dtype, det_len, frames)
        }
    }

    /// Whether its blocks are packed (`packed_sectors`).
    pub fn is_packed(&self) -> bool {
        self.kind == LayoutKind::PackedSectors
    }

    /// Bytes of a sample.
    pub fn sample_bytes(&self) -> usize {
        self.bits as usize / 8
    }

    /// Where in a tile pixel `k`'s sample at the tile's position `p` is: its sector's byte
    /// `p · sample` (the words of `upload::plan`, little-endian).
    pub fn sample_at(&self, k: usize, p: usize) -> usize {
        k * 32 + p * self.sample_bytes()
    }
}

/// One payload block: `tiles` tiles from `first_tile`, `bytes` at `offset`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockEntry {
    pub offset: u64,
    pub bytes: u64,
    pub first_tile: u64,
    pub tiles: u64,
    pub sha256: String,
    /// Its pieces SHA-256 ([`pieces_sha256`]): what a GPU checks the block against where it
    /// was copied. Files written before it lack it; their blocks are checked on the CPU.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pieces_sha256: String,
}

/// What a prepared acquisition was made from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Provenance {
    pub format: String,
    pub primary: String,
    pub dataset: String,
    pub files: Vec<super::info::FileInfo>,
    pub scan_shape_source: String,
    /// `[r0, r1, c0, c1]` of the scan as stored, where the acquisition was cropped.
    pub crop: Option<[usize; 4]>,
    pub made_by: String,
}

/// `bits` of a resident sample of `dtype` at native sampling (`ResidentPlan::new`).
pub fn bits_of(dtype: Dtype) -> u32 {
    match dtype {
        Dtype::U8 => 8,
        Dtype::U16 => 16,
        Dtype::U32 | Dtype::F32 => 32,
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes a lowercase or uppercase hexadecimal string spells; `None` where it is not one.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn dtype_named(file: &str, name: &str) -> Result<Dtype> {
    Ok(match name {
        "uint8" => Dtype::U8,
        "uint16" => Dtype::U16,
        "uint32" => Dtype::U32,
        "float32" => Dtype::F32,
        other => {
            return Err(Error::format(
                file,
                format!("prepared acquisition of unknown dtype '{other}'"),
            ))
        }
    })
}

/// Whether `src` starts with the prepared container's magic.
pub fn is_prepared(src: &dyn ByteSource) -> bool {
    let mut head = [0u8; 8];
    src.len() >= 8 && src.read_at(0, &mut head).is_ok() && head == MAGIC
}

/// Read and check the header and description of the prepared acquisition `src`.
pub fn describe(src: &dyn ByteSource) -> Result<Description> {
    let name = src.name();
    let len = src.len();
    let bad = |m: String| Error::format(name, m);
    if len < 64 {
        return Err(bad(format!(
            "a prepared acquisition starts with a 64-byte header; the file is {len} bytes: truncated"
        )));
    }
    let mut head = [0u8; 64];
    src.read_at(0, &mut head)?;
    if head[..8] != MAGIC {
        return Err(bad(
            "not a stem4d prepared acquisition (no STEM4DP magic)".into()
        ));
    }
    let word = |at: usize| u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let long = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let version = word(8);
    if !(1..=VERSION).contains(&version) {
        return Err(bad(format!(
            "prepared with container version {version}; this stem4d reads version {VERSION}: prepare it again"
        )));
    }
    let (at, n) = (long(16), long(24));
    if at.checked_add(n).is_none_or(|end| end > len) || n == 0 {
        return Err(bad(format!(
            "its description ({n} bytes at {at}) lies beyond the file's {len} bytes: truncated"
        )));
    }
    if n > 1 << 30 {
        return Err(bad(format!("a description of {n} bytes is not credible")));
    }
    let json = src.read_vec(at, n)?;
    if Sha256::digest(&json).as_slice() != &head[32..64] {
        return Err(bad(
            "its description does not match the SHA-256 in its header: corrupted".into(),
        ));
    }
    let d: Description = serde_json::from_slice(&json)
        .map_err(|e| bad(format!("its description is not readable: {e}")))?;
    check(name, len, at, &d)?;
    Ok(d)
}

/// The description's layout and blocks against its shape and the file's length.
fn check(name: &str, len: u64, description_at: u64, d: &Description) -> Result<()> {
    let bad = |m: String| Error::format(name, m);
    let dtype = dtype_named(name, &d.dtype)?;
    let [r, c, kr, kc] = d.shape;
    if d.shape.contains(&0) {
        return Err(bad(format!("prepared with an empty shape {:?}", d.shape)));
    }
    let det_len = kr
        .checked_mul(kc)
        .ok_or_else(|| bad("detector too large".into()))?;
    let frames = r
        .checked_mul(c)
        .ok_or_else(|| bad("scan too large".into()))?;
    let l = d.layout;
    let want = Layout {
        kind: l.kind,
        ..Layout::of(dtype, det_len, frames)
    };
    if l.is_packed() && (d.version < 2 || dtype.is_float()) {
        return Err(bad(format!(
            "a packed payload of {} samples in a version {} container: not one stem4d writes",
            d.dtype, d.version
        )));
    }
    if l != want {
        return Err(bad(format!(
            "its layout ({} bits, tiles of {} positions, {} bytes, {} tiles) is not the {}-bit resident's of a {r}x{c} scan of a {kr}x{kc} detector",
            l.bits, l.tile, l.tile_bytes, l.tiles, want.bits
        )));
    }
    let mut next_tile = 0;
    let mut next_byte = ALIGN;
    for (k, b) in d.blocks.iter().enumerate() {
        let end = b.offset.checked_add(b.bytes);
        let raw = b.tiles.checked_mul(l.tile_bytes);
        let sized = match l.is_packed() {
            // Its index, then at most the raw tiles' bytes, in words a u32 addresses.
            true => raw
                .zip(b.tiles.checked_mul(packed_sectors::index_bytes(1, det_len)))
                .is_some_and(|(raw, index)| {
                    b.bytes % 4 == 0
                        && b.bytes >= index
                        && b.bytes - index <= raw
                        && b.bytes / 4 <= u32::MAX as u64
                }),
            false => raw == Some(b.bytes),
        };
        if b.first_tile != next_tile
            || b.tiles == 0
            || b.offset < next_byte
            || b.offset % ALIGN != 0
            || !sized
            || b.sha256.len() != 64
        {
            return Err(bad(format!("payload block {k} is malformed: {b:?}")));
        }
        match end {
            Some(end) if end <= description_at && end <= len => next_byte = end,
            _ => {
                return Err(bad(format!(
                    "payload block {k} ends at byte {}, past the file's {len} bytes or its description: truncated",
                    b.offset.saturating_add(b.bytes)
                )))
            }
        }
        next_tile += b.tiles;
    }
    if next_tile != l.tiles {
        return Err(bad(format!(
            "its blocks hold {next_tile} of its {} tiles",
            l.tiles
        )));
    }
    Ok(())
}

/// Open the prepared acquisition `name` of `files`.
pub(super) fn open(files: FileSet, name: &str, opts: &OpenOptions) -> Result<Acquisition> {
    let (src, _) = super::frames_source(&files, name, "prepared acquisition")?;
    let d = describe(src.as_ref())?;
    if let Some(shape) = opts.scan_shape {
        if shape != [d.shape[0], d.shape[1]] {
            return Err(Error::format(
                name,
                format!(
                    "prepared with a {}x{} scan; --scan-shape {}x{} does not apply (prepare it again with that shape)",
                    d.shape[0], d.shape[1], shape[0], shape[1]
                ),
            ));
        }
    }
    let dtype = dtype_named(name, &d.dtype)?;
    let shape = Shape4 {
        scan: [d.shape[0], d.shape[1]],
        det: [d.shape[2], d.shape[3]],
    };
    let det_len = shape.det_len();
    let pixel_mask = match &d.pixel_mask {
        Some(bad) => {
            let mut mask = vec![false; det_len];
            for &k in bad {
                *mask.get_mut(k as usize).ok_or_else(|| {
                    Error::format(
                        name,
                        format!("bad pixel {k} is off the {det_len}-pixel detector"),
                    )
                })? = true;
            }
            Some(mask)
        }
        None => None,
    };
    let calibration = super::calibration::Calibration::from_json(&d.calibration);
    let payload = Arc::new(TiledPayload::new(&d));
    let m = &d.made_from;
    Ok(Acquisition {
        format: Format::Prepared,
        files: files.clone(),
        primary: name.to_string(),
        dataset_path: String::new(),
        shape,
        dtype,
        scan_shape_source: format!(
            "prepared from {} ({}: {})",
            m.primary, m.format, m.scan_shape_source
        ),
        parts: vec![Part {
            source: src,
            first_frame: 0,
            frames: shape.frames(),
            kind: PartKind::Tiled(payload),
        }],
        pixel_mask,
        calibration,
        crop: None,
        unused_files: super::unused_files(&files, &[name.to_string()]),
    })
}
