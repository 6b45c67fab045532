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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Acquisition, FileSet, Format, OpenOptions, Part, PartKind};
use crate::contract::{Dtype, Shape4};
use crate::error::{Error, Result};
use crate::source::ByteSource;

pub mod packed_sectors;

pub const MAGIC: [u8; 8] = *b"STEM4DP\0";
/// The version written: 2 since packed payloads. Version 1 (position-tiled payloads only)
/// is read as well.
pub const VERSION: u32 = 2;
/// Bytes of the header; blocks start here and at multiples of it.
pub const ALIGN: u64 = 4096;
/// The file name ending the CLI and the page give prepared acquisitions.
pub const EXTENSION: &str = ".stem4d";

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

/// The payload of a prepared acquisition as its part reads it: its blocks, checked against
/// their hashes the first time each is read.
#[derive(Debug)]
pub struct TiledPayload {
    pub layout: Layout,
    pub det_len: usize,
    pub blocks: Vec<BlockEntry>,
    /// The settings a session saved it with, if any.
    pub session: Option<SavedSession>,
    checked: Vec<AtomicBool>,
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

impl TiledPayload {
    pub fn new(d: &Description) -> Self {
        TiledPayload {
            layout: d.layout,
            det_len: d.shape[2] * d.shape[3],
            checked: d.blocks.iter().map(|_| AtomicBool::new(false)).collect(),
            blocks: d.blocks.clone(),
            session: d.session.clone(),
        }
    }

    /// Read block `k` whole and check it against its hash (refused by name and block when
    /// it differs, and never used).
    pub fn read_block(&self, src: &dyn ByteSource, k: usize) -> Result<Vec<u8>> {
        let bytes = self.read_unchecked(src, k)?;
        self.check_block(src.name(), k, &bytes)?;
        self.accept(src.name(), k, &bytes)?;
        Ok(bytes)
    }

    /// The check of a packed block's index (`None` for a position-tiled payload).
    fn index_check(&self, k: usize) -> Option<packed_sectors::IndexCheck> {
        let b = &self.blocks[k];
        self.layout
            .is_packed()
            .then(|| packed_sectors::IndexCheck::new(&self.layout, self.det_len, b.tiles, b.bytes))
    }

    /// Block `k`, whose SHA-256 matched, whole: checked against the structure of a packed
    /// block (nothing to check in a position-tiled one) and then taken as checked. A file
    /// whose index something else made is refused by name, never decoded out of bounds.
    pub fn accept(&self, file: &str, k: usize, bytes: &[u8]) -> Result<()> {
        if let Some(mut c) = self.index_check(k) {
            c.feed(bytes)
                .and_then(|_| c.finish())
                .map_err(|m| self.malformed(file, k, m))?;
        }
        self.checked[k].store(true, Ordering::Relaxed);
        Ok(())
    }

    fn malformed(&self, file: &str, k: usize, m: packed_sectors::Malformed) -> Error {
        Error::format(
            file,
            format!(
                "packed payload block {k} is malformed: {}; prepare the acquisition again",
                m.0
            ),
        )
    }

    /// Block `k` read in pieces of `piece` bytes, each hashed and handed to `sink` with its
    /// offset in the block while it is still in the CPU's caches (the block never lies
    /// whole in memory); then checked against its hash. What `sink` was given is unchecked
    /// until this returns `Ok`: the caller uses none of it before.
    pub fn read_block_in_pieces(
        &self,
        src: &dyn ByteSource,
        k: usize,
        piece: usize,
        mut sink: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        let b = self.block(src.name(), k)?;
        let mut buf = vec![0u8; piece.min(b.bytes as usize).max(1)];
        let mut hash = Sha256::new();
        let mut index = self.index_check(k);
        let mut shaped = Ok(());
        let mut at = 0usize;
        while (at as u64) < b.bytes {
            let n = buf.len().min(b.bytes as usize - at);
            src.read_at(b.offset + at as u64, &mut buf[..n])?;
            hash.update(&buf[..n]);
            if let (Some(c), Ok(())) = (index.as_mut(), &shaped) {
                shaped = c.feed(&buf[..n]);
            }
            sink(at, &buf[..n]);
            at += n;
        }
        self.check_digest(src.name(), k, &hash.finalize())?;
        shaped
            .and_then(|_| index.as_ref().map_or(Ok(()), |c| c.finish()))
            .map_err(|m| self.malformed(src.name(), k, m))?;
        self.checked[k].store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Block `k` as stored, to be checked by the caller before any of it is used (the
    /// browser hashes it with its Web Crypto: `check_digest`).
    pub fn read_unchecked(&self, src: &dyn ByteSource, k: usize) -> Result<Vec<u8>> {
        let b = self.block(src.name(), k)?;
        src.read_vec(b.offset, b.bytes)
    }

    /// Block `k` of the table, or why `file` has none.
    fn block(&self, file: &str, k: usize) -> Result<&BlockEntry> {
        self.blocks
            .get(k)
            .ok_or_else(|| Error::format(file, format!("no payload block {k}")))
    }

    /// Check the bytes of block `k` against its SHA-256.
    pub fn check_block(&self, file: &str, k: usize, bytes: &[u8]) -> Result<()> {
        self.check_digest(file, k, &Sha256::digest(bytes))
    }

    /// Check block `k`'s SHA-256 `digest` (made here, or by the browser's Web Crypto)
    /// against the one the description holds.
    pub fn check_digest(&self, file: &str, k: usize, digest: &[u8]) -> Result<()> {
        let b = &self.blocks[k];
        if hex(digest) != b.sha256 {
            return Err(Error::format(
                file,
                format!(
                    "payload block {k} (tiles {}..{}, {} bytes at {}) does not match its SHA-256: corrupted; prepare the acquisition again",
                    b.first_tile,
                    b.first_tile + b.tiles,
                    b.bytes,
                    b.offset
                ),
            ));
        }
        Ok(())
    }

    /// The tiles `[t0, t1)` as the position-tiled layout holds them (a packed payload's
    /// decoded), each block they touch checked once.
    pub fn read_tiles(&self, src: &dyn ByteSource, t0: u64, t1: u64) -> Result<Vec<u8>> {
        let tb = self.layout.tile_bytes;
        let mut out = Vec::with_capacity(((t1 - t0) * tb) as usize);
        for (k, b) in self.blocks.iter().enumerate() {
            let (b0, b1) = (b.first_tile, b.first_tile + b.tiles);
            let (a, z) = (t0.max(b0), t1.min(b1));
            if a >= z {
                continue;
            }
            if self.layout.is_packed() {
                out.extend_from_slice(&self.read_packed_tiles(src, k, a - b0, z - b0)?);
            } else if !self.checked[k].load(Ordering::Relaxed) {
                let whole = self.read_block(src, k)?;
                out.extend_from_slice(&whole[((a - b0) * tb) as usize..((z - b0) * tb) as usize]);
            } else {
                let at = b.offset + (a - b0) * tb;
                out.extend_from_slice(&src.read_vec(at, (z - a) * tb)?);
            }
        }
        Ok(out)
    }

    /// Tiles `[a, z)` of packed block `k` (counted in the block), decoded: the whole block
    /// read and checked the first time, then only those tiles' index and data.
    fn read_packed_tiles(&self, src: &dyn ByteSource, k: usize, a: u64, z: u64) -> Result<Vec<u8>> {
        let b = &self.blocks[k];
        let gpt = packed_sectors::groups_per_tile(self.det_len) as u64;
        let groups = b.tiles * gpt;
        let words = b.bytes / 4;
        let (g0, g1) = (a * gpt, z * gpt);
        let decode = |index: &[u8], data: &[u8], data_word: u64| {
            packed_sectors::decode(&self.layout, self.det_len, index, data, data_word, z - a)
                .map_err(|m| self.malformed(src.name(), k, m))
        };
        if !self.checked[k].load(Ordering::Relaxed) {
            let whole = self.read_block(src, k)?;
            let (d0, d1) = packed_sectors::data_words(
                &whole,
                groups as usize,
                words,
                g0 as usize,
                g1 as usize,
            );
            let index = &whole[(8 * g0) as usize..(8 * g1) as usize];
            return decode(index, &whole[(4 * d0) as usize..(4 * d1) as usize], d0);
        }
        // The index of the groups read and of the one after them (where their data ends).
        let pairs = (g1 + 1).min(groups) - g0;
        let index = src.read_vec(b.offset + 8 * g0, 8 * pairs)?;
        let (d0, d1) =
            packed_sectors::data_words(&index, pairs as usize, words, 0, (g1 - g0) as usize);
        if d1 < d0 || d1 > words {
            return Err(self.malformed(
                src.name(),
                k,
                packed_sectors::Malformed(format!(
                    "its data words {d0}..{d1} are not within its {words}"
                )),
            ));
        }
        let data = src.read_vec(b.offset + 4 * d0, 4 * (d1 - d0))?;
        decode(&index[..(8 * (g1 - g0)) as usize], &data, d0)
    }

    /// Frames `[l0, l1)` of the payload into `dst`, frame after frame, each pixel's sample
    /// little-endian (as `FrameReader` hands frames on).
    pub fn read_frames(
        &self,
        src: &dyn ByteSource,
        l0: usize,
        l1: usize,
        dst: &mut [u8],
    ) -> Result<()> {
        let tile = self.layout.tile as usize;
        let (t0, t1) = (l0 / tile, l1.div_ceil(tile));
        let tiles = self.read_tiles(src, t0 as u64, t1 as u64)?;
        let l = self.layout;
        let sb = l.sample_bytes();
        let tb = l.tile_bytes as usize;
        let frame_bytes = self.det_len * sb;
        for f in l0..l1 {
            let tile_of = &tiles[(f / tile - t0) * tb..][..tb];
            let out = &mut dst[(f - l0) * frame_bytes..(f - l0 + 1) * frame_bytes];
            for (k, sample) in out.chunks_exact_mut(sb).enumerate() {
                let at = l.sample_at(k, f % tile);
                sample.copy_from_slice(&tile_of[at..at + sb]);
            }
        }
        Ok(())
    }
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
