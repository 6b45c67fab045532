//! Decode stage on the CPU: read the stored bytes of a range of frames, decode the chunks
//! (in parallel on native), zero bad pixels and bin the detector — the frames every CPU
//! product consumes. The GPU engine does the same in WGSL; this is its reference.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::contract::{Dtype, Shape4};
use crate::decode::{decode_chunk, Filter};
use crate::error::{Error, Result};
use crate::formats::{Acquisition, Part, PartKind, RawSamples};
use crate::hdf5_index::{ChunkRef, DatasetIndex, Layout};
pub use crate::source::LocalFuture;

mod correct;
pub use correct::{bin_block, correct};

/// What happens to frames between decode and products: a setting of the whole acquisition
/// (a GPU resident is uploaded with one), never of a single product. The CLI's flags and the
/// page's JSON keys (`bin`, `maskBadPixels`) are derived from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(clap::Args))]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Correction {
    /// Zero the file's pixel mask, saturated values and the hot and dead pixels found in the
    /// mean pattern before the product (docs/CONTRACT.md "Bad pixels").
    #[cfg_attr(not(target_arch = "wasm32"), arg(long))]
    pub mask_bad_pixels: bool,
    /// Count-preserving detector bin (1 = none).
    #[cfg_attr(not(target_arch = "wasm32"), arg(long, default_value_t = 1))]
    pub bin: usize,
}

impl Default for Correction {
    fn default() -> Self {
        Correction {
            mask_bad_pixels: false,
            bin: 1,
        }
    }
}

impl Correction {
    /// The page's JSON keys of a correction.
    pub const KEYS: [&str; 2] = ["bin", "maskBadPixels"];

    /// Whether `shape`'s detector can be corrected so; errors name the field.
    pub fn validate(&self, shape: Shape4) -> Result<()> {
        if self.bin == 0 {
            return Err(Error::product_param("bin", "'bin' must be >= 1"));
        }
        if self.bin > shape.det[0].max(shape.det[1]) {
            return Err(Error::product_param(
                "bin",
                format!(
                    "'bin' {} is larger than the {}x{} detector",
                    self.bin, shape.det[0], shape.det[1]
                ),
            ));
        }
        Ok(())
    }
}

/// Corrected samples: integer sources widen to u32 (binned sums too), floats stay f32.
#[derive(Clone, Debug, PartialEq)]
pub enum Samples {
    Int(Vec<u32>),
    Float(Vec<f32>),
}

/// `count` consecutive frames from `first`, each `det` pixels, row-major.
pub struct FrameBlock {
    pub first: usize,
    pub count: usize,
    pub det: [usize; 2],
    pub samples: Samples,
}

impl FrameBlock {
    /// Zero the pixels `mask` flags (a mask of `det`) in every frame.
    pub fn zero_pixels(&mut self, mask: &[bool]) {
        let n = self.det[0] * self.det[1];
        match &mut self.samples {
            Samples::Int(v) => v
                .iter_mut()
                .enumerate()
                .filter(|(k, _)| mask[k % n])
                .for_each(|(_, x)| *x = 0),
            Samples::Float(v) => v
                .iter_mut()
                .enumerate()
                .filter(|(k, _)| mask[k % n])
                .for_each(|(_, x)| *x = 0.0),
        }
    }
}

/// One stored chunk handed to a [`ChunkDecoder`]: its bytes and how to decode them.
pub struct ChunkJob {
    pub filters: Arc<[Filter]>,
    pub filter_mask: u32,
    pub raw: Vec<u8>,
    /// The chunk's logical size in bytes.
    pub expected: usize,
    /// Bytes per sample (the shuffle and bitshuffle element size).
    pub elem: usize,
}

/// Decodes chunks away from the thread that reads them (the browser's decode Workers;
/// natively the reader's own rayon pool does it). Result `i` answers job `i`.
pub trait ChunkDecoder {
    fn decode<'a>(&'a self, jobs: Vec<ChunkJob>) -> LocalFuture<'a, Vec<Result<Vec<u8>, String>>>;
    /// How many decodes can run at once.
    fn workers(&self) -> usize;
}

/// (part, chunk-table index): one stored chunk of an acquisition.
type ChunkKey = (usize, usize);

/// Frames of one acquisition, decoded on demand.
pub struct FrameReader<'a> {
    acq: &'a Acquisition,
    /// Per part: chunk grid coordinates → index in the chunk table.
    chunk_maps: Vec<HashMap<Vec<u64>, usize>>,
    /// Chunks a [`ChunkDecoder`] decoded ahead of the window that reads them.
    predecoded: Mutex<HashMap<ChunkKey, Arc<Vec<u8>>>>,
    /// Pixels of the corrected (binned) detector zeroed after correction when bad-pixel
    /// masking is on: the hot and dead pixels found in the mean pattern (`pattern`,
    /// C-BAD-FOUND).
    found_bad: Option<Vec<bool>>,
    /// Decoded bytes per block of [`FrameReader::for_each_block`]: what bounds the memory
    /// of a pass over the frames, whatever the acquisition's size.
    block_bytes: usize,
}

/// Decoded bytes per block of a pass over the frames unless a reader is given another.
pub const BLOCK_BYTES: usize = 64 << 20;

impl<'a> FrameReader<'a> {
    pub fn new(acq: &'a Acquisition) -> Self {
        let chunk_maps = acq
            .parts
            .iter()
            .map(|p| match &p.kind {
                PartKind::Hdf5(ix) => ix
                    .chunks
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (c.coords.clone(), i))
                    .collect(),
                PartKind::Raw { .. } | PartKind::Synthetic | PartKind::Tiled(_) => HashMap::new(),
            })
            .collect();
        FrameReader {
            acq,
            chunk_maps,
            predecoded: Mutex::new(HashMap::new()),
            found_bad: None,
            block_bytes: BLOCK_BYTES,
        }
    }

    /// Also zero `found` (a mask of the corrected detector) in every block read with
    /// bad-pixel masking on.
    pub fn with_found_bad(mut self, found: Option<Vec<bool>>) -> Self {
        self.found_bad = found;
        self
    }

    /// Passes over the frames in blocks of about `bytes` decoded bytes (at least a frame).
    pub fn with_block_bytes(mut self, bytes: usize) -> Self {
        self.block_bytes = bytes.max(1);
        self
    }

    pub fn acquisition(&self) -> &Acquisition {
        self.acq
    }

    /// Raw little-endian samples of frames `[f0, f1)`: `(f1 − f0)·Kr·Kc` values (frames of
    /// the cropped scan when the acquisition is cropped).
    pub fn read_raw(&self, f0: usize, f1: usize) -> Result<Vec<u8>> {
        let shape = self.acq.shape;
        let frame_bytes = shape.det_len() * self.acq.dtype.size();
        if f0 > f1 || f1 > shape.frames() {
            return Err(Error::param(format!(
                "frames [{f0}, {f1}) outside the {} frames",
                shape.frames()
            )));
        }
        let mut out = vec![0u8; (f1 - f0) * frame_bytes];
        for (s0, s1, at) in self.stored_runs(f0, f1) {
            let dst = &mut out[(at - f0) * frame_bytes..(at - f0 + s1 - s0) * frame_bytes];
            self.read_stored(s0, s1, dst)?;
        }
        Ok(out)
    }

    /// Frames `[f0, f1)` of the (cropped) scan as runs `(s0, s1, f)` of consecutive stored
    /// frames, `f` being the run's first frame: each row of a crop is one run, and only
    /// those frames are read (C-CROP).
    fn stored_runs(&self, f0: usize, f1: usize) -> Vec<(usize, usize, usize)> {
        let Some(crop) = &self.acq.crop else {
            return vec![(f0, f1, f0)];
        };
        let width = self.acq.shape.scan[1];
        let mut runs = Vec::new();
        let mut f = f0;
        while f < f1 {
            let (r, c) = (f / width, f % width);
            let n = (width - c).min(f1 - f);
            let s0 = (crop.region.r0 + r) * crop.stored_scan[1] + crop.region.c0 + c;
            runs.push((s0, s0 + n, f));
            f += n;
        }
        runs
    }

    /// The parts holding stored frames `[f0, f1)`: `(part index, part, local l0, local l1,
    /// stored frame of l0)`.
    fn part_spans(
        &self,
        f0: usize,
        f1: usize,
    ) -> impl Iterator<Item = (usize, &'a Part, usize, usize, usize)> {
        self.acq
            .parts
            .iter()
            .enumerate()
            .filter_map(move |(pi, part)| {
                let p0 = part.first_frame.max(f0);
                let p1 = (part.first_frame + part.frames).min(f1);
                (p0 < p1).then(|| (pi, part, p0 - part.first_frame, p1 - part.first_frame, p0))
            })
    }

    /// Stored frames `[f0, f1)` (indices of the scan as stored) into `out`.
    fn read_stored(&self, f0: usize, f1: usize, out: &mut [u8]) -> Result<()> {
        let stored = self.acq.stored_shape();
        let frame_bytes = stored.det_len() * self.acq.dtype.size();
        for (pi, part, l0, l1, p0) in self.part_spans(f0, f1) {
            let p1 = p0 + (l1 - l0);
            let dst = &mut out[(p0 - f0) * frame_bytes..(p1 - f0) * frame_bytes];
            match &part.kind {
                PartKind::Raw {
                    offset,
                    stride,
                    stored_rows: _,
                    samples: RawSamples::MibRaw(raw),
                } => {
                    // Each frame's counters read whole, then put in the detector's order.
                    let mut stored = vec![0u8; raw.stored_bytes()];
                    for (k, f) in (l0..l1).enumerate() {
                        let at = offset + f as u64 * stride;
                        part.source.read_at(at, &mut stored)?;
                        raw.decode(&stored, &mut dst[k * frame_bytes..(k + 1) * frame_bytes]);
                    }
                }
                PartKind::Raw {
                    offset,
                    stride,
                    stored_rows: _,
                    samples,
                } => {
                    for (k, f) in (l0..l1).enumerate() {
                        let at = offset + f as u64 * stride;
                        part.source
                            .read_at(at, &mut dst[k * frame_bytes..(k + 1) * frame_bytes])?;
                    }
                    if *samples == RawSamples::Big {
                        // Samples as every later stage reads them: little-endian.
                        let size = self.acq.dtype.size();
                        if size > 1 {
                            for sample in dst.chunks_exact_mut(size) {
                                sample.reverse();
                            }
                        }
                    }
                }
                PartKind::Hdf5(ix) => self.read_hdf5(pi, part, ix, l0, l1, dst)?,
                PartKind::Synthetic => crate::formats::synthetic::frames_bytes(stored, p0, p1, dst),
                PartKind::Tiled(t) => t.read_frames(part.source.as_ref(), l0, l1, dst)?,
            }
        }
        Ok(())
    }

    fn read_hdf5(
        &self,
        pi: usize,
        part: &Part,
        ix: &DatasetIndex,
        l0: usize,
        l1: usize,
        dst: &mut [u8],
    ) -> Result<()> {
        let shape = self.acq.shape;
        let esize = self.acq.dtype.size();
        let frame_bytes = shape.det_len() * esize;
        match &ix.layout {
            Layout::Contiguous { offset, .. } => {
                part.source.read_at(offset + (l0 * frame_bytes) as u64, dst)
            }
            Layout::Compact { bytes } => {
                let src = bytes
                    .get(l0 * frame_bytes..l1 * frame_bytes)
                    .ok_or_else(|| {
                        Error::format(&ix.file, "compact data set is shorter than its shape")
                    })?;
                dst.copy_from_slice(src);
                Ok(())
            }
            Layout::Chunked { chunk_shape } => {
                let needed = self.chunks_for(pi, ix, chunk_shape, l0, l1)?;
                let decoded = self.decode_chunks(pi, part, ix, chunk_shape, esize, &needed)?;
                for (ci, bytes) in needed.iter().zip(decoded) {
                    scatter(
                        &ix.chunks[*ci],
                        chunk_shape,
                        &ix.shape,
                        &bytes,
                        esize,
                        l0,
                        l1,
                        dst,
                    );
                }
                Ok(())
            }
        }
    }

    /// Chunk-table indices of the chunks holding frames `[l0, l1)` of this part.
    fn chunks_for(
        &self,
        pi: usize,
        ix: &DatasetIndex,
        cs: &[u64],
        l0: usize,
        l1: usize,
    ) -> Result<Vec<usize>> {
        let rank = ix.shape.len();
        let det_grid = [
            ix.shape[rank - 2].div_ceil(cs[rank - 2]),
            ix.shape[rank - 1].div_ceil(cs[rank - 1]),
        ];
        // Chunk-grid ranges along the frame axes.
        let frame_axes: Vec<(u64, u64)> = if rank == 3 {
            vec![(l0 as u64 / cs[0], (l1 as u64 - 1) / cs[0])]
        } else {
            let rc = ix.shape[1];
            let (r0, r1) = (l0 as u64 / rc, (l1 as u64 - 1) / rc);
            vec![(r0 / cs[0], r1 / cs[0]), (0, (rc - 1) / cs[1])]
        };
        let mut out = Vec::new();
        let mut grid: Vec<Vec<u64>> = vec![vec![]];
        for (a, b) in frame_axes
            .iter()
            .copied()
            .chain([(0, det_grid[0] - 1), (0, det_grid[1] - 1)])
        {
            grid = grid
                .into_iter()
                .flat_map(|g| {
                    (a..=b).map(move |v| {
                        let mut g = g.clone();
                        g.push(v);
                        g
                    })
                })
                .collect();
        }
        for g in grid {
            let coords: Vec<u64> = g.iter().zip(cs).map(|(i, c)| i * c).collect();
            if rank == 4 {
                // Skip chunks whose frames all lie outside [l0, l1).
                let rc = ix.shape[1];
                let first = coords[0] * rc + coords[1];
                let last = ((coords[0] + cs[0]).min(ix.shape[0]) - 1) * rc
                    + (coords[1] + cs[1]).min(rc)
                    - 1;
                if last < l0 as u64 || first >= l1 as u64 {
                    continue;
                }
            }
            let ci = self.chunk_maps[pi].get(&coords).copied().ok_or_else(|| {
                Error::format(
                    &ix.file,
                    format!("data set {}: chunk at {coords:?} is not stored", ix.path),
                )
            })?;
            out.push(ci);
        }
        Ok(out)
    }

    /// Read and decode the listed chunks of part `pi` (in parallel on native); chunks a
    /// [`ChunkDecoder`] decoded ahead are taken as they are.
    fn decode_chunks(
        &self,
        pi: usize,
        part: &Part,
        ix: &DatasetIndex,
        cs: &[u64],
        esize: usize,
        needed: &[usize],
    ) -> Result<Vec<Arc<Vec<u8>>>> {
        let logical = cs.iter().product::<u64>() as usize * esize;
        let ready = self
            .predecoded
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default();
        let one = |ci: &usize| -> Result<Arc<Vec<u8>>> {
            if let Some(bytes) = ready.get(&(pi, *ci)) {
                return Ok(bytes.clone());
            }
            let c = &ix.chunks[*ci];
            let raw = part.source.read_vec(c.offset, c.size)?;
            decode_chunk(&ix.filters, c.filter_mask, &raw, logical, esize)
                .map(Arc::new)
                .map_err(|e| chunk_error(ix, c, e.0))
        };
        #[cfg(not(target_arch = "wasm32"))]
        {
            use rayon::prelude::*;
            needed.par_iter().map(one).collect()
        }
        #[cfg(target_arch = "wasm32")]
        {
            needed.iter().map(one).collect()
        }
    }

    /// Decode the filtered chunks behind frames `[f0, f1)` with `decoder`, ahead of the
    /// [`Self::block`] call that then only scatters them; chunks no longer needed are
    /// dropped. Returns how many chunks `decoder` decoded.
    pub async fn predecode(
        &self,
        f0: usize,
        f1: usize,
        decoder: &dyn ChunkDecoder,
    ) -> Result<usize> {
        let mut wanted: Vec<(ChunkKey, &'a Part, &'a DatasetIndex, usize)> = Vec::new();
        for (s0, s1, _) in self.stored_runs(f0, f1) {
            for (pi, part, l0, l1, _) in self.part_spans(s0, s1) {
                let PartKind::Hdf5(ix) = &part.kind else {
                    continue;
                };
                let Layout::Chunked { chunk_shape } = &ix.layout else {
                    continue;
                };
                if ix.filters.is_empty() {
                    continue;
                }
                let logical = chunk_shape.iter().product::<u64>() as usize;
                for ci in self.chunks_for(pi, ix, chunk_shape, l0, l1)? {
                    wanted.push(((pi, ci), part, ix, logical));
                }
            }
        }
        wanted.sort_by_key(|w| w.0);
        wanted.dedup_by_key(|w| w.0);
        let missing: Vec<_> = {
            let mut ready = self.predecoded.lock().map_err(|_| {
                Error::param("the decoded-chunk cache was poisoned by a failed read")
            })?;
            ready.retain(|k, _| wanted.binary_search_by_key(k, |w| w.0).is_ok());
            wanted
                .into_iter()
                .filter(|w| !ready.contains_key(&w.0))
                .collect()
        };
        if missing.is_empty() {
            return Ok(0);
        }
        let ranges: Vec<_> = missing
            .iter()
            .map(|&((_, ci), part, ix, _)| (&part.source, ix.chunks[ci].offset, ix.chunks[ci].size))
            .collect();
        let stored = crate::source::read_coalesced(&ranges).await?;
        let esize = self.acq.dtype.size();
        let mut filters: HashMap<usize, Arc<[Filter]>> = HashMap::new();
        let mut at = 0usize;
        let jobs = missing
            .iter()
            .map(|&((pi, ci), _, ix, logical)| {
                let n = ix.chunks[ci].size as usize;
                at += n;
                ChunkJob {
                    filters: filters
                        .entry(pi)
                        .or_insert_with(|| Arc::from(ix.filters.as_slice()))
                        .clone(),
                    filter_mask: ix.chunks[ci].filter_mask,
                    raw: stored[at - n..at].to_vec(),
                    expected: logical * esize,
                    elem: esize,
                }
            })
            .collect();
        drop(stored);
        let results = decoder.decode(jobs).await;
        if results.len() != missing.len() {
            return Err(Error::Io {
                file: self.acq.primary.clone(),
                message: format!(
                    "the chunk decoders answered {} of {} chunks",
                    results.len(),
                    missing.len()
                ),
            });
        }
        let mut ready = self
            .predecoded
            .lock()
            .map_err(|_| Error::param("the decoded-chunk cache was poisoned by a failed read"))?;
        for (&((pi, ci), _, ix, _), r) in missing.iter().zip(results) {
            let bytes = r.map_err(|e| chunk_error(ix, &ix.chunks[ci], e))?;
            ready.insert((pi, ci), Arc::new(bytes));
        }
        Ok(missing.len())
    }

    /// Decode frames `[f0, f1)` and apply the correction.
    pub fn block(&self, f0: usize, f1: usize, corr: Correction) -> Result<FrameBlock> {
        let raw = self.read_raw(f0, f1)?;
        let mut block = correct(self.acq, &raw, f0, f1 - f0, corr)?;
        // C-BAD-FOUND: after the correction (and its bin), the pixels found are zeroed too.
        if let Some(found) = self.found_bad.as_deref().filter(|_| corr.mask_bad_pixels) {
            block.zero_pixels(found);
        }
        Ok(block)
    }

    /// Visit every frame in blocks of about the reader's block bytes (decoded), in frame
    /// order: one block is held at a time.
    pub fn for_each_block(
        &self,
        corr: Correction,
        mut f: impl FnMut(&FrameBlock) -> Result<()>,
    ) -> Result<()> {
        let block_bytes = self.block_bytes;
        let frames = self.acq.shape.frames();
        let per_frame = self.acq.shape.det_len() * self.acq.dtype.size();
        let step = (block_bytes / per_frame.max(1)).clamp(1, frames.max(1));
        let mut f0 = 0;
        while f0 < frames {
            let f1 = (f0 + step).min(frames);
            f(&self.block(f0, f1, corr)?)?;
            crate::watch::step(crate::watch::CPU, f1 as u64, frames as u64)?;
            f0 = f1;
        }
        Ok(())
    }
}

/// A decode failure named by file and chunk (grid coordinates and file offset).
fn chunk_error(ix: &DatasetIndex, c: &ChunkRef, message: String) -> Error {
    Error::Decode {
        file: ix.file.clone(),
        chunk: format!("{:?} at offset {}", c.coords, c.offset),
        message,
    }
}

/// Copy the parts of a decoded chunk that fall in frames `[l0, l1)` into `dst`.
#[allow(clippy::too_many_arguments)]
fn scatter(
    c: &ChunkRef,
    cs: &[u64],
    shape: &[u64],
    bytes: &[u8],
    esize: usize,
    l0: usize,
    l1: usize,
    dst: &mut [u8],
) {
    let rank = shape.len();
    let (kr, kc) = (shape[rank - 2] as usize, shape[rank - 1] as usize);
    let (ckr, ckc) = (cs[rank - 2] as usize, cs[rank - 1] as usize);
    let (or, oc) = (c.coords[rank - 2] as usize, c.coords[rank - 1] as usize);
    let rows = ckr.min(kr - or);
    let cols = ckc.min(kc - oc);
    // Frame axes of the chunk: (a) for rank 3, (a, b) for rank 4.
    let (na, nb, rc) = if rank == 3 {
        (cs[0] as usize, 1, 1)
    } else {
        (cs[0] as usize, cs[1] as usize, shape[1] as usize)
    };
    for a in 0..na {
        for b in 0..nb {
            let frame = if rank == 3 {
                let f = c.coords[0] as usize + a;
                if f >= shape[0] as usize {
                    continue;
                }
                f
            } else {
                let (r, col) = (c.coords[0] as usize + a, c.coords[1] as usize + b);
                if r >= shape[0] as usize || col >= rc {
                    continue;
                }
                r * rc + col
            };
            if frame < l0 || frame >= l1 {
                continue;
            }
            let chunk_frame = (a * nb + b) * ckr * ckc;
            for i in 0..rows {
                let s = (chunk_frame + i * ckc) * esize;
                let d = ((frame - l0) * kr * kc + (or + i) * kc + oc) * esize;
                dst[d..d + cols * esize].copy_from_slice(&bytes[s..s + cols * esize]);
            }
        }
    }
}
