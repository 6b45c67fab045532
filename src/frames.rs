//! Decode stage on the CPU: read the stored bytes of a range of frames, decode the chunks
//! (in parallel on native), zero bad pixels and bin the detector — the frames every CPU
//! product consumes. The GPU engine does the same in WGSL; this is its reference.

use std::collections::HashMap;

use crate::contract::{Dtype, Shape4};
use crate::decode::decode_chunk;
use crate::error::{Error, Result};
use crate::formats::{Acquisition, Part, PartKind};
use crate::hdf5_index::{ChunkRef, DatasetIndex, Layout};

/// What happens to frames between decode and products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Correction {
    /// Zero pixels flagged in the file's pixel mask and saturation sentinels `2^bits − 1`.
    pub mask_bad_pixels: bool,
    /// Count-preserving detector bin (1 = none).
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

/// Frames of one acquisition, decoded on demand.
pub struct FrameReader<'a> {
    acq: &'a Acquisition,
    /// Per part: chunk grid coordinates → index in the chunk table.
    chunk_maps: Vec<HashMap<Vec<u64>, usize>>,
}

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
                PartKind::Raw { .. } | PartKind::Synthetic => HashMap::new(),
            })
            .collect();
        FrameReader { acq, chunk_maps }
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
        let Some(crop) = &self.acq.crop else {
            self.read_stored(f0, f1, &mut out)?;
            return Ok(out);
        };
        // Each row of the crop is one run of consecutive stored frames.
        let width = shape.scan[1];
        let mut f = f0;
        while f < f1 {
            let (r, c) = (f / width, f % width);
            let n = (width - c).min(f1 - f);
            let s0 = (crop.region.r0 + r) * crop.stored_scan[1] + crop.region.c0 + c;
            let dst = &mut out[(f - f0) * frame_bytes..(f - f0 + n) * frame_bytes];
            self.read_stored(s0, s0 + n, dst)?;
            f += n;
        }
        Ok(out)
    }

    /// Stored frames `[f0, f1)` (indices of the scan as stored) into `out`.
    fn read_stored(&self, f0: usize, f1: usize, out: &mut [u8]) -> Result<()> {
        let stored = self.acq.stored_shape();
        let frame_bytes = stored.det_len() * self.acq.dtype.size();
        for (pi, part) in self.acq.parts.iter().enumerate() {
            let p0 = part.first_frame.max(f0);
            let p1 = (part.first_frame + part.frames).min(f1);
            if p0 >= p1 {
                continue;
            }
            let dst = &mut out[(p0 - f0) * frame_bytes..(p1 - f0) * frame_bytes];
            let (l0, l1) = (p0 - part.first_frame, p1 - part.first_frame);
            match &part.kind {
                PartKind::Raw {
                    offset,
                    stride,
                    stored_rows: _,
                } => {
                    for (k, f) in (l0..l1).enumerate() {
                        let at = offset + f as u64 * stride;
                        part.source
                            .read_at(at, &mut dst[k * frame_bytes..(k + 1) * frame_bytes])?;
                    }
                }
                PartKind::Hdf5(ix) => self.read_hdf5(pi, part, ix, l0, l1, dst)?,
                PartKind::Synthetic => crate::formats::synthetic::frames_bytes(stored, p0, p1, dst),
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
                let decoded = decode_chunks(part, ix, chunk_shape, esize, &needed)?;
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

    /// Decode frames `[f0, f1)` and apply the correction.
    pub fn block(&self, f0: usize, f1: usize, corr: Correction) -> Result<FrameBlock> {
        let raw = self.read_raw(f0, f1)?;
        correct(self.acq, &raw, f0, f1 - f0, corr)
    }

    /// Visit every frame in blocks of about `block_bytes` decoded bytes, in frame order.
    pub fn for_each_block(
        &self,
        corr: Correction,
        block_bytes: usize,
        mut f: impl FnMut(&FrameBlock) -> Result<()>,
    ) -> Result<()> {
        let frames = self.acq.shape.frames();
        let per_frame = self.acq.shape.det_len() * self.acq.dtype.size();
        let step = (block_bytes / per_frame.max(1)).clamp(1, frames.max(1));
        let mut f0 = 0;
        while f0 < frames {
            let f1 = (f0 + step).min(frames);
            f(&self.block(f0, f1, corr)?)?;
            f0 = f1;
        }
        Ok(())
    }
}

/// Read and decode the listed chunks (in parallel on native).
fn decode_chunks(
    part: &Part,
    ix: &DatasetIndex,
    cs: &[u64],
    esize: usize,
    needed: &[usize],
) -> Result<Vec<Vec<u8>>> {
    let logical = cs.iter().product::<u64>() as usize * esize;
    let one = |ci: &usize| -> Result<Vec<u8>> {
        let c = &ix.chunks[*ci];
        let raw = part.source.read_vec(c.offset, c.size)?;
        decode_chunk(&ix.filters, c.filter_mask, &raw, logical, esize).map_err(|e| Error::Decode {
            file: ix.file.clone(),
            chunk: format!("{:?} at offset {}", c.coords, c.offset),
            message: e.0,
        })
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

/// Widen, zero bad pixels, then bin: the contract's order.
pub fn correct(
    acq: &Acquisition,
    raw: &[u8],
    first: usize,
    count: usize,
    corr: Correction,
) -> Result<FrameBlock> {
    let det = acq.shape.det;
    let n = acq.shape.det_len();
    let bad = corr
        .mask_bad_pixels
        .then_some(acq.pixel_mask.as_deref())
        .flatten();
    let sentinel = if corr.mask_bad_pixels {
        acq.dtype.sentinel()
    } else {
        None
    };
    let is_bad = |k: usize| bad.is_some_and(|m| m[k % n]);
    let samples = match acq.dtype {
        Dtype::F32 => Samples::Float(
            raw.chunks_exact(4)
                .enumerate()
                .map(|(k, b)| {
                    if is_bad(k) {
                        0.0
                    } else {
                        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
                    }
                })
                .collect(),
        ),
        dt => {
            let widen = |k: usize, v: u32| {
                if is_bad(k) || Some(v) == sentinel {
                    0
                } else {
                    v
                }
            };
            Samples::Int(match dt {
                Dtype::U8 => raw
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| widen(k, v as u32))
                    .collect(),
                Dtype::U16 => raw
                    .chunks_exact(2)
                    .enumerate()
                    .map(|(k, b)| widen(k, u16::from_le_bytes([b[0], b[1]]) as u32))
                    .collect(),
                _ => raw
                    .chunks_exact(4)
                    .enumerate()
                    .map(|(k, b)| widen(k, u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                    .collect(),
            })
        }
    };
    let block = FrameBlock {
        first,
        count,
        det,
        samples,
    };
    if corr.bin > 1 {
        bin_block(&block, corr.bin, &acq.primary)
    } else {
        Ok(block)
    }
}

/// Count-preserving `b × b` detector bin; partial edge blocks are kept.
pub fn bin_block(block: &FrameBlock, b: usize, file: &str) -> Result<FrameBlock> {
    let [kr, kc] = block.det;
    let out_shape = Shape4 {
        scan: [1, 1],
        det: block.det,
    }
    .binned(b);
    let [or, oc] = out_shape.det;
    let samples = match &block.samples {
        Samples::Int(v) => {
            let mut out = vec![0u64; block.count * or * oc];
            for f in 0..block.count {
                for i in 0..kr {
                    for j in 0..kc {
                        out[f * or * oc + (i / b) * oc + j / b] +=
                            v[f * kr * kc + i * kc + j] as u64;
                    }
                }
            }
            let mut narrow = Vec::with_capacity(out.len());
            for v in out {
                narrow.push(u32::try_from(v).map_err(|_| {
                    Error::format(
                        file,
                        format!("a {b}x{b} binned sum ({v}) exceeds uint32: use a smaller bin"),
                    )
                })?);
            }
            Samples::Int(narrow)
        }
        Samples::Float(v) => {
            let mut out = vec![0f64; block.count * or * oc];
            for f in 0..block.count {
                for i in 0..kr {
                    for j in 0..kc {
                        out[f * or * oc + (i / b) * oc + j / b] +=
                            v[f * kr * kc + i * kc + j] as f64;
                    }
                }
            }
            Samples::Float(out.into_iter().map(|x| x as f32).collect())
        }
    };
    Ok(FrameBlock {
        first: block.first,
        count: block.count,
        det: [or, oc],
        samples,
    })
}
