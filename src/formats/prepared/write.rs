//! Writing a prepared acquisition (`stem4d prepare`): the frames read through the CPU frame
//! reader as the files hold them, laid out in tiles of the resident's layout on the CPU's
//! cores, each block hashed, into a temporary file renamed into place once whole (never a
//! half-written container under the name asked for).

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::{
    bits_of, hex, BlockEntry, Description, Layout, LayoutKind, Provenance, SourceFile, ALIGN,
    MAGIC, VERSION,
};
use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::frames::FrameReader;

/// Bytes of a payload block (whole tiles, at least one): large enough for the reads to
/// stream, small enough that a reopen checks blocks on every core.
pub const BLOCK_BYTES: u64 = 64 << 20;

/// Write `acq` as a prepared acquisition at `out`, in blocks of about `block_bytes`, calling
/// `progress(frames_done, frames)` after each block; the description written.
pub fn write(
    acq: &Acquisition,
    out: &Path,
    block_bytes: u64,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Description> {
    let shape = acq.shape;
    let frames = shape.frames();
    let det_len = shape.det_len();
    let bits = bits_of(acq.dtype);
    let sample = bits as usize / 8;
    let tile = (256 / bits) as usize;
    let tile_bytes = det_len as u64 * 32;
    let tiles = frames.div_ceil(tile) as u64;
    let per_block = (block_bytes / tile_bytes).max(1);
    // Beside the output, hidden, as the CLI's other outputs are written (`write_new_file`).
    let name = out
        .file_name()
        .ok_or_else(|| Error::param(format!("{}: names no file", out.display())))?;
    let mut hidden = std::ffi::OsString::from(".");
    hidden.push(name);
    hidden.push(format!(".{}.partial", std::process::id()));
    let partial: PathBuf = out.with_file_name(hidden);
    let io =
        |e: std::io::Error, what: &str| Error::param(format!("{}: {what}: {e}", partial.display()));
    let mut file = std::fs::File::create(&partial).map_err(|e| io(e, "cannot create"))?;
    let written = (|| -> Result<Description> {
        let reader = FrameReader::new(acq);
        let frame_bytes = det_len * sample;
        let mut blocks = Vec::new();
        let mut at = ALIGN;
        let mut t0 = 0u64;
        while t0 < tiles {
            let t1 = (t0 + per_block).min(tiles);
            let (f0, f1) = (t0 as usize * tile, (t1 as usize * tile).min(frames));
            let raw = reader.read_raw(f0, f1)?;
            let mut bytes = vec![0u8; ((t1 - t0) * tile_bytes) as usize];
            // Tile by tile on every core: pixel k's sector holds its samples at the tile's
            // positions, position p at byte p · sample (`upload::plan`).
            bytes
                .par_chunks_mut(tile_bytes as usize)
                .enumerate()
                .for_each(|(t, out)| {
                    let first = (t0 as usize + t) * tile;
                    for f in first..(first + tile).min(f1) {
                        let src = &raw[(f - f0) * frame_bytes..(f - f0 + 1) * frame_bytes];
                        let p = (f - first) * sample;
                        for (k, s) in src.chunks_exact(sample).enumerate() {
                            out[k * 32 + p..k * 32 + p + sample].copy_from_slice(s);
                        }
                    }
                });
            let sha256 = hex(&Sha256::digest(&bytes));
            file.seek(SeekFrom::Start(at))
                .and_then(|_| file.write_all(&bytes))
                .map_err(|e| io(e, "cannot write"))?;
            blocks.push(BlockEntry {
                offset: at,
                bytes: bytes.len() as u64,
                first_tile: t0,
                tiles: t1 - t0,
                sha256,
            });
            at = (at + bytes.len() as u64).next_multiple_of(ALIGN);
            t0 = t1;
            progress(f1, frames);
        }
        let description = describe_acquisition(
            acq,
            Layout {
                kind: LayoutKind::PositionTiled,
                bits,
                tile: tile as u32,
                tile_bytes,
                tiles,
            },
            blocks,
        )?;
        let json = serde_json::to_vec_pretty(&description)
            .map_err(|e| Error::param(format!("the description does not serialise: {e}")))?;
        let mut head = vec![0u8; ALIGN as usize];
        head[..8].copy_from_slice(&MAGIC);
        head[8..12].copy_from_slice(&VERSION.to_le_bytes());
        head[16..24].copy_from_slice(&at.to_le_bytes());
        head[24..32].copy_from_slice(&(json.len() as u64).to_le_bytes());
        head[32..64].copy_from_slice(&Sha256::digest(&json));
        file.seek(SeekFrom::Start(at))
            .and_then(|_| file.write_all(&json))
            .and_then(|_| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(&head))
            .and_then(|_| file.sync_all())
            .map_err(|e| io(e, "cannot write"))?;
        Ok(description)
    })();
    drop(file);
    match written {
        Ok(d) => {
            std::fs::rename(&partial, out).map_err(|e| {
                Error::param(format!("{}: cannot move into place: {e}", out.display()))
            })?;
            Ok(d)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(e)
        }
    }
}

/// The description of `acq` prepared in `layout` and `blocks`.
fn describe_acquisition(
    acq: &Acquisition,
    layout: Layout,
    blocks: Vec<BlockEntry>,
) -> Result<Description> {
    let value = |v: serde_json::Result<serde_json::Value>| {
        v.map_err(|e| Error::param(format!("the description does not serialise: {e}")))
    };
    let format = value(serde_json::to_value(acq.format))?;
    Ok(Description {
        container: "stem4d prepared acquisition".into(),
        version: VERSION,
        shape: acq.shape.as_array(),
        dtype: acq.dtype.name().into(),
        layout,
        blocks,
        pixel_mask: acq.pixel_mask.as_ref().map(|m| {
            m.iter()
                .enumerate()
                .filter(|(_, &b)| b)
                .map(|(k, _)| k as u32)
                .collect()
        }),
        calibration: value(serde_json::to_value(&acq.calibration))?,
        made_from: Provenance {
            format: format.as_str().unwrap_or("unknown").to_string(),
            primary: acq.primary.clone(),
            dataset: acq.dataset_path.clone(),
            files: acq
                .files
                .files()
                .iter()
                .map(|f| SourceFile {
                    name: f.name().to_string(),
                    bytes: f.len(),
                })
                .collect(),
            scan_shape_source: acq.scan_shape_source.clone(),
            crop: acq
                .crop
                .map(|c| [c.region.r0, c.region.r1, c.region.c0, c.region.c1]),
            made_by: format!("stem4d {}", env!("CARGO_PKG_VERSION")),
        },
    })
}
