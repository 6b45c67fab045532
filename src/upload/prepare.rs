//! Writing a prepared acquisition (`formats::prepared`, decision 0037; `stem4d prepare`,
//! the page's *Prepared .stem4d*): the frames read through the CPU frame reader as the
//! files hold them, laid out in tiles of the resident's layout (on every core natively),
//! each block hashed. Natively into a temporary file renamed into place once whole (never a
//! half-written container under the name asked for); in the page the Worker hands the
//! pieces to the page, which writes them.

#[cfg(not(target_arch = "wasm32"))]
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::formats::info::FileInfo;
use crate::formats::prepared::{
    hex, packed_sectors, BlockEntry, Description, Layout, Payload, Provenance, SavedSession, ALIGN,
    MAGIC, VERSION,
};
use crate::formats::Acquisition;
use crate::frames::FrameReader;

/// Raw bytes of a payload block (whole tiles, at least one): large enough for the reads to
/// stream, small enough that a reopen checks blocks on every core. A packed block holds
/// these tiles in a quarter to a half of the bytes for counting data.
pub const BLOCK_BYTES: u64 = 64 << 20;

/// A prepared acquisition made piece by piece, wherever it is written (a file natively, a
/// file the browser's File System Access API or a download gives): the payload blocks, then
/// the description, then the header, each with the byte it goes at.
pub struct Preparer {
    acq: Acquisition,
    layout: Layout,
    per_block: u64,
    next_tile: u64,
    at: u64,
    blocks: Vec<BlockEntry>,
    /// Once the blocks are written: the description, and where its JSON went (offset,
    /// length, SHA-256), which the header holds.
    described: Option<(Description, u64, u64, [u8; 32])>,
    header_written: bool,
    /// The settings of the session it is saved from (`Preparer::from_session`).
    session: Option<SavedSession>,
}

impl Preparer {
    /// A preparer of `acq` in blocks of about `block_bytes` raw bytes, its payload the
    /// smallest there is for its samples (packed counts, float32 as it is).
    pub fn new(acq: Acquisition, block_bytes: u64) -> Preparer {
        Preparer::with_payload(acq, block_bytes, Payload::Smallest)
    }

    /// A preparer that writes a payload of `payload`.
    pub fn with_payload(acq: Acquisition, block_bytes: u64, payload: Payload) -> Preparer {
        let (det_len, frames) = (acq.shape.det_len(), acq.shape.frames());
        let layout = Layout::for_payload(acq.dtype, det_len, frames, payload);
        Preparer {
            acq,
            layout,
            per_block: (block_bytes / layout.tile_bytes).max(1),
            next_tile: 0,
            at: ALIGN,
            blocks: Vec::new(),
            described: None,
            header_written: false,
            session: None,
        }
    }

    /// A preparer that also saves `session`, the settings the acquisition is viewed with.
    pub fn from_session(acq: Acquisition, block_bytes: u64, session: SavedSession) -> Preparer {
        Preparer::new(acq, block_bytes).saving(Some(session))
    }

    /// Save `session` with it (see [`Preparer::from_session`]).
    pub fn saving(self, session: Option<SavedSession>) -> Preparer {
        Preparer { session, ..self }
    }

    /// Scan positions written so far, and in all.
    pub fn progress(&self) -> (usize, usize) {
        let frames = self.acq.shape.frames();
        let done = self.next_tile as usize * self.layout.tile as usize;
        (done.min(frames), frames)
    }

    /// The next piece and the byte it goes at: blocks, the description, the header (at 0);
    /// `None` once the header was given. Gaps between pieces are zeros.
    pub fn next_piece(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        if self.next_tile < self.layout.tiles {
            return self.block().map(Some);
        }
        let Some((_, at, len, sha)) = &self.described else {
            let mut d = describe_acquisition(&self.acq, self.layout, self.blocks.clone())?;
            d.session = self.session.clone();
            let json = serde_json::to_vec_pretty(&d)
                .map_err(|e| Error::param(format!("the description does not serialise: {e}")))?;
            let sha = Sha256::digest(&json).into();
            self.described = Some((d, self.at, json.len() as u64, sha));
            return Ok(Some((self.at, json)));
        };
        if self.header_written {
            return Ok(None);
        }
        self.header_written = true;
        let mut head = vec![0u8; ALIGN as usize];
        head[..8].copy_from_slice(&MAGIC);
        head[8..12].copy_from_slice(&VERSION.to_le_bytes());
        head[16..24].copy_from_slice(&at.to_le_bytes());
        head[24..32].copy_from_slice(&len.to_le_bytes());
        head[32..64].copy_from_slice(sha);
        Ok(Some((0, head)))
    }

    /// The next block of whole tiles: the frames read as the files hold them and tiled,
    /// then packed where the payload is.
    fn block(&mut self) -> Result<(u64, Vec<u8>)> {
        let l = self.layout;
        let (t0, t1) = (
            self.next_tile,
            (self.next_tile + self.per_block).min(l.tiles),
        );
        let frames = self.acq.shape.frames();
        let tile = l.tile as usize;
        let sample = l.sample_bytes();
        let frame_bytes = self.acq.shape.det_len() * sample;
        let (f0, f1) = (t0 as usize * tile, (t1 as usize * tile).min(frames));
        let raw = FrameReader::new(&self.acq).read_raw(f0, f1)?;
        let mut bytes = vec![0u8; ((t1 - t0) * l.tile_bytes) as usize];
        let fill = |(t, out): (usize, &mut [u8])| {
            let first = (t0 as usize + t) * tile;
            for f in first..(first + tile).min(f1) {
                let src = &raw[(f - f0) * frame_bytes..(f - f0 + 1) * frame_bytes];
                for (k, s) in src.chunks_exact(sample).enumerate() {
                    let at = l.sample_at(k, f - first);
                    out[at..at + sample].copy_from_slice(s);
                }
            }
        };
        #[cfg(not(target_arch = "wasm32"))]
        {
            use rayon::prelude::*;
            bytes
                .par_chunks_mut(l.tile_bytes as usize)
                .enumerate()
                .for_each(fill);
        }
        #[cfg(target_arch = "wasm32")]
        bytes
            .chunks_mut(l.tile_bytes as usize)
            .enumerate()
            .for_each(fill);
        if l.is_packed() {
            bytes = packed_sectors::encode(&l, self.acq.shape.det_len(), &bytes);
        }
        let at = self.at;
        self.blocks.push(BlockEntry {
            offset: at,
            bytes: bytes.len() as u64,
            first_tile: t0,
            tiles: t1 - t0,
            sha256: hex(&Sha256::digest(&bytes)),
            pieces_sha256: hex(&crate::formats::prepared::pieces_sha256(&bytes)),
        });
        self.at = (at + bytes.len() as u64).next_multiple_of(ALIGN);
        self.next_tile = t1;
        Ok((at, bytes))
    }

    /// The description, once every piece before the header was given.
    pub fn description(&self) -> Option<&Description> {
        self.described.as_ref().map(|(d, ..)| d)
    }
}

/// Write `acq` as a prepared acquisition at `out`, in blocks of about `block_bytes`, with
/// the settings of the session it is saved from (if any), calling
/// `progress(frames_done, frames)` after each block; the description written. The payload
/// is the smallest there is for its samples ([`Payload::Smallest`]).
#[cfg(not(target_arch = "wasm32"))]
pub fn write(
    acq: &Acquisition,
    out: &Path,
    block_bytes: u64,
    session: Option<SavedSession>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Description> {
    let p = Preparer::new(acq.clone(), block_bytes).saving(session);
    write_with(p, out, progress)
}

/// Write what `p` prepares at `out` (see [`write`]).
#[cfg(not(target_arch = "wasm32"))]
pub fn write_with(
    mut p: Preparer,
    out: &Path,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Description> {
    use std::io::{Seek, SeekFrom, Write};
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
        while let Some((at, bytes)) = p.next_piece()? {
            file.seek(SeekFrom::Start(at))
                .and_then(|_| file.write_all(&bytes))
                .map_err(|e| io(e, "cannot write"))?;
            let (done, all) = p.progress();
            progress(done, all);
            // A watcher (the Python package's Ctrl-C) hears it, and may stop it here.
            crate::watch::step(crate::watch::PREPARE, done as u64, all as u64)?;
        }
        file.sync_all().map_err(|e| io(e, "cannot write"))?;
        p.description()
            .cloned()
            .ok_or_else(|| Error::param("the prepared file was left without a description"))
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
        pixel_mask: acq.pixel_mask.as_deref().map(crate::contract::mask_pixels),
        calibration: value(serde_json::to_value(&acq.calibration))?,
        session: None,
        made_from: Provenance {
            format: format.as_str().unwrap_or("unknown").to_string(),
            primary: acq.primary.clone(),
            dataset: acq.dataset_path.clone(),
            files: FileInfo::list(&acq.files),
            scan_shape_source: acq.scan_shape_source.clone(),
            crop: acq
                .crop
                .map(|c| [c.region.r0, c.region.r1, c.region.c0, c.region.c1]),
            made_by: format!("stem4d {}", env!("CARGO_PKG_VERSION")),
        },
    })
}
