//! Decode on the GPU: bitshuffle+LZ4 (32008) and LZ4 (32004) chunks are uploaded compressed,
//! in windows of whole chunks; the host only walks the chunk and block headers to build the
//! block table, `wgsl/bslz4.wgsl` inflates the blocks and packs the frames (bad pixels zeroed,
//! detector binned) straight into the resident buffers: the unbinned volume never exists.
//! Acquisitions it does not cover (deflate/shuffle, chunks that split frames, LZ4 blocks that
//! are not whole words) take the CPU path.

use crate::contract::Dtype;
use crate::decode::pipeline::FilterKind;
use crate::error::{Error, Result};
use crate::formats::{Acquisition, Part, PartKind};
use crate::frames::Correction;
use crate::hdf5_index::{ChunkRef, DatasetIndex};
use crate::resident::{ResidentPlan, DECODE_SCRATCH, DECODE_WINDOW};

use super::kernels::{self, grid, DecodeParams};
use super::{Engine, Resident};

/// Frames per chunk when the chunks hold whole frames in frame order.
fn chunk_frames(ix: &DatasetIndex, det: [usize; 2]) -> Option<u64> {
    let det = [det[0] as u64, det[1] as u64];
    match (ix.shape.len(), ix.chunk_shape()?) {
        (3, [n, kr, kc]) if [*kr, *kc] == det => Some(*n),
        (4, [1, 1, kr, kc]) if [*kr, *kc] == det => Some(1),
        _ => None,
    }
}

/// The single filter the GPU decoder handles for this data set, if it is one of them.
fn gpu_filter(ix: &DatasetIndex) -> Option<FilterKind> {
    match ix.filters.as_slice() {
        [f] if matches!(f.kind, FilterKind::BitshuffleLz4 | FilterKind::Lz4) => Some(f.kind),
        _ => None,
    }
}

/// Whether the GPU decoder covers `acq` under `corr`.
pub fn supported(acq: &Acquisition, corr: Correction) -> bool {
    corr.bin >= 1
        && matches!(acq.dtype, Dtype::U8 | Dtype::U16 | Dtype::U32)
        && !acq.parts.is_empty()
        && acq.parts.iter().all(|p| match &p.kind {
            PartKind::Hdf5(ix) => {
                gpu_filter(ix).is_some()
                    && ix.chunks.iter().all(|c| c.filter_mask == 0)
                    && chunk_frames(ix, acq.shape.det).is_some()
            }
            _ => false,
        })
}

/// One chunk in frame order: its part, reference, and global frames it holds.
struct ChunkSlot<'a> {
    part: &'a Part,
    ix: &'a DatasetIndex,
    chunk: &'a ChunkRef,
    /// Global frame of the chunk's first frame (may be past the data set's end for padding).
    first: usize,
    frames: usize,
}

fn slots(acq: &Acquisition) -> Vec<ChunkSlot<'_>> {
    let mut out = Vec::new();
    for part in &acq.parts {
        let PartKind::Hdf5(ix) = &part.kind else {
            continue;
        };
        let Some(cn) = chunk_frames(ix, acq.shape.det) else {
            continue;
        };
        for chunk in &ix.chunks {
            let local = match ix.shape.len() {
                3 => chunk.coords.first().copied().unwrap_or(0),
                _ => {
                    let c = &chunk.coords;
                    c.first().copied().unwrap_or(0) * ix.shape.get(1).copied().unwrap_or(1)
                        + c.get(1).copied().unwrap_or(0)
                }
            } as usize;
            let frames = (cn as usize).min(part.frames.saturating_sub(local));
            if frames > 0 {
                out.push(ChunkSlot {
                    part,
                    ix,
                    chunk,
                    first: part.first_frame + local,
                    frames,
                });
            }
        }
    }
    out.sort_by_key(|s| s.first);
    out
}

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| {
            let mut b = [0u8; 4];
            b[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(b)
        })
        .collect()
}

fn decode_error(slot: &ChunkSlot, message: String) -> Error {
    Error::Decode {
        file: slot.ix.file.clone(),
        chunk: format!("{:?}", slot.chunk.coords),
        message,
    }
}

/// Block table entries of one LZ4 (32004) chunk, after the CPU decoder's header checks;
/// `None` when its blocks are not whole words (they would share output words on the GPU).
fn lz4_chunk_blocks(
    slot: &ChunkSlot,
    chunk: &[u8],
    logical: usize,
    src_base: u32,
    dst_base: u32,
    out: &mut Vec<[u32; 4]>,
) -> Result<Option<()>> {
    let bad = |m: String| decode_error(slot, m);
    let be = |at: usize| {
        chunk
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| bad(format!("truncated: LZ4 header expected at byte {at}")))
    };
    let total = (be(0)? as u64) << 32 | be(4)? as u64;
    if total != logical as u64 {
        return Err(bad(format!(
            "LZ4 header claims a decoded size of {total} bytes but the chunk's logical size is {logical} bytes"
        )));
    }
    let block = be(8)?;
    if block == 0 && logical > 0 {
        return Err(bad("LZ4 block size is 0".into()));
    }
    if block % 4 != 0 && logical > block {
        return Ok(None);
    }
    let (mut pos, mut done) = (12usize, 0usize);
    while done < logical {
        let raw_len = (logical - done).min(block);
        let clen = be(pos)?;
        pos += 4;
        if pos + clen > chunk.len() {
            return Err(bad(format!(
                "truncated: LZ4 block at byte {} claims {clen} bytes, {} remain",
                pos - 4,
                chunk.len() - pos
            )));
        }
        let raw_flag = if clen == raw_len { 1u32 << 31 } else { 0 };
        out.push([
            src_base + pos as u32,
            clen as u32,
            dst_base + done as u32,
            raw_len as u32 | raw_flag,
        ]);
        pos += clen;
        done += raw_len;
    }
    Ok(Some(()))
}

/// Block table entries of one bitshuffle chunk (bytes `chunk` at `src_base` of the window,
/// output at `dst_base`), after the header checks of the CPU decoder.
fn chunk_blocks(
    slot: &ChunkSlot,
    chunk: &[u8],
    elem: usize,
    logical: usize,
    src_base: u32,
    dst_base: u32,
    out: &mut Vec<[u32; 4]>,
) -> Result<usize> {
    let bad = |m: String| decode_error(slot, m);
    let h = crate::decode::bslz4::header(chunk, elem).map_err(|e| bad(e.0))?;
    if h.total_bytes != logical as u64 {
        return Err(bad(format!(
            "bitshuffle header claims a decoded size of {} bytes but the chunk's logical size is {logical} bytes",
            h.total_bytes
        )));
    }
    let n = logical / elem;
    let compressed = n - n % 8;
    let mut pos = 12usize;
    let mut done = 0usize;
    while done < compressed {
        let elems = (compressed - done).min(h.block_elems);
        let len = chunk
            .get(pos..pos + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| bad(format!("truncated: block header expected at byte {pos}")))?
            as usize;
        pos += 4;
        if pos + len > chunk.len() {
            return Err(bad(format!(
                "truncated: block at byte {} claims {len} compressed bytes, {} remain",
                pos - 4,
                chunk.len() - pos
            )));
        }
        out.push([
            src_base + pos as u32,
            len as u32,
            dst_base + (done * elem) as u32,
            (elems * elem) as u32,
        ]);
        pos += len;
        done += elems;
    }
    let tail = (n - done) * elem;
    if tail > 0 {
        if pos + tail > chunk.len() {
            return Err(bad(format!(
                "truncated: {tail} raw tail bytes expected at byte {pos}, {} remain",
                chunk.len() - pos
            )));
        }
        out.push([
            src_base + pos as u32,
            tail as u32,
            dst_base + (done * elem) as u32,
            tail as u32 | 1 << 31,
        ]);
    }
    Ok(h.block_elems)
}

/// One upload window: whole chunks' compressed bytes and tables on the GPU, ready to decode
/// the frames `[first_frame, first_frame + frames)` into a resident segment.
pub struct Window {
    src: wgpu::Buffer,
    blocks: wgpu::Buffer,
    chunks: wgpu::Buffer,
    frame_map: wgpu::Buffer,
    scratch: wgpu::Buffer,
    block_src: Vec<u32>,
    n_blocks: u32,
    src_bytes: u32,
    dst_bytes: u32,
    pub first_frame: usize,
    pub frames: usize,
    /// Decoded bytes the window produces (benchmarks).
    pub decoded_bytes: u64,
}

/// Decode-time inputs shared by every window of an upload.
pub struct Decoder {
    bad: wgpu::Buffer,
    status: wgpu::Buffer,
    /// The stored (unbinned) detector.
    det: [usize; 2],
}

impl Decoder {
    pub fn new(engine: &Engine, acq: &Acquisition) -> Decoder {
        let det_len = acq.shape.det_len();
        let mut bad_bits = vec![0u32; det_len.div_ceil(32).max(1)];
        if let Some(mask) = &acq.pixel_mask {
            for (k, &b) in mask.iter().enumerate() {
                if b {
                    bad_bits[k / 32] |= 1 << (k % 32);
                }
            }
        }
        Decoder {
            bad: engine.input(&bad_bits),
            status: engine.storage("decode status", 16),
            det: acq.shape.det,
        }
    }

    /// Record decoding `w` into `resident` (the segment starting at frame `seg_first`).
    #[allow(clippy::too_many_arguments)]
    pub fn encode(
        &self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        w: &Window,
        plan: &ResidentPlan,
        corr: Correction,
        seg_first: usize,
        resident: &wgpu::Buffer,
        elem: usize,
    ) -> Result<()> {
        let groups = grid(w.n_blocks.div_ceil(64));
        let params = engine.uniform(&DecodeParams {
            blocks: w.n_blocks,
            groups_x: groups.0,
            src_bytes: w.src_bytes,
            dst_bytes: w.dst_bytes,
            ..Default::default()
        });
        engine.dispatch_at(
            enc,
            &kernels::LZ4_BLOCKS,
            &[
                (0, &params),
                (1, &w.src),
                (2, &w.blocks),
                (3, &w.scratch),
                (4, &self.status),
            ],
            groups,
        )?;
        let groups = grid((w.frames as u32 * plan.frame_words).div_ceil(64));
        let params = engine.uniform(&DecodeParams {
            groups_x: groups.0,
            frames: w.frames as u32,
            first_frame: w.first_frame as u32,
            seg_first_frame: seg_first as u32,
            frame_words: plan.frame_words,
            bits: plan.bits,
            det_len: (self.det[0] * self.det[1]) as u32,
            elem: elem as u32,
            bin: corr.bin as u32,
            det_rows: self.det[0] as u32,
            det_cols: self.det[1] as u32,
            out_cols: plan.shape.det[1] as u32,
            mask_bad: corr.mask_bad_pixels as u32,
            ..Default::default()
        });
        engine.dispatch_at(
            enc,
            &kernels::UNSHUFFLE_PACK,
            &[
                (0, &params),
                (1, &w.frame_map),
                (2, &w.chunks),
                (3, &w.scratch),
                (4, &self.status),
                (5, &self.bad),
                (6, resident),
            ],
            groups,
        )
    }

    /// The lowest failing block of the last decode, if any, and whether a binned sum passed
    /// u32 (reset for the next window).
    async fn take_failure(&self, engine: &Engine) -> Result<(Option<u32>, bool)> {
        let st = engine.read_back(&self.status, 8).await?;
        self.reset(engine);
        let failed = u32::from_le_bytes([st[0], st[1], st[2], st[3]]);
        let overflow = u32::from_le_bytes([st[4], st[5], st[6], st[7]]) != 0;
        Ok(((failed != u32::MAX).then_some(failed), overflow))
    }

    fn reset(&self, engine: &Engine) {
        engine
            .queue
            .write_buffer(&self.status, 0, bytemuck::cast_slice(&[u32::MAX, 0, 0, 0]));
    }
}

/// Build the window that starts at `mine[*i]` (advancing `*i` past its chunks) for the
/// frames of `[s0, s1)`.
fn build_window(
    engine: &Engine,
    acq: &Acquisition,
    mine: &[&ChunkSlot],
    i: &mut usize,
    s0: usize,
    s1: usize,
) -> Result<Option<Window>> {
    let det_len = acq.shape.det_len();
    let elem = acq.dtype.size();
    let limit = engine.adapter.limits.max_storage_binding;
    let (window_bytes, scratch_bytes) = (DECODE_WINDOW.min(limit), DECODE_SCRATCH.min(limit));
    let (mut src, mut blocks, mut chunks, mut frame_map) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::<u32>::new());
    let mut dst_bytes = 0u64;
    let first_frame = mine[*i].first.max(s0);
    let mut last_frame = first_frame;
    while *i < mine.len() {
        let slot = mine[*i];
        let cn = chunk_frames(slot.ix, acq.shape.det).unwrap_or(1) as usize;
        let logical = cn * det_len * elem;
        let fits = src.len() as u64 + slot.chunk.size <= window_bytes
            && dst_bytes + logical as u64 <= scratch_bytes;
        if !chunks.is_empty() && !fits {
            break;
        }
        let bytes = slot
            .part
            .source
            .read_vec(slot.chunk.offset, slot.chunk.size)?;
        let (src_base, dst_base) = (src.len() as u32, dst_bytes as u32);
        let (be, plain) = match gpu_filter(slot.ix) {
            Some(FilterKind::Lz4) => {
                match lz4_chunk_blocks(slot, &bytes, logical, src_base, dst_base, &mut blocks)? {
                    Some(()) => (0, 1),
                    None => return Ok(None),
                }
            }
            _ => (
                chunk_blocks(slot, &bytes, elem, logical, src_base, dst_base, &mut blocks)?,
                0,
            ),
        };
        src.extend_from_slice(&bytes);
        let entry = (chunks.len() / 4) as u32;
        chunks.extend_from_slice(&[dst_base, be as u32, (cn * det_len) as u32, plain]);
        for g in slot.first.max(s0)..(slot.first + slot.frames).min(s1) {
            frame_map.extend_from_slice(&[entry, (g - slot.first) as u32]);
            last_frame = g + 1;
        }
        dst_bytes = (dst_bytes + logical as u64).next_multiple_of(8);
        *i += 1;
    }
    let frames = last_frame - first_frame;
    Ok(Some(Window {
        src: engine.input(&words(&src)),
        blocks: engine.input(&blocks.concat()),
        chunks: engine.input(&chunks),
        frame_map: engine.input(&frame_map),
        scratch: engine.storage("decode scratch", dst_bytes.max(16)),
        block_src: blocks.iter().map(|b| b[0]).collect(),
        n_blocks: blocks.len() as u32,
        src_bytes: src.len() as u32,
        dst_bytes: dst_bytes as u32,
        first_frame,
        frames,
        decoded_bytes: (frames * det_len * elem) as u64,
    }))
}

/// The first window of `acq` (benchmarks time decoding it repeatedly).
pub fn first_window(engine: &Engine, acq: &Acquisition) -> Result<Window> {
    let all = slots(acq);
    let mine: Vec<&ChunkSlot> = all.iter().collect();
    if mine.is_empty() {
        return Err(Error::param("no chunks to decode"));
    }
    build_window(engine, acq, &mine, &mut 0, 0, acq.shape.frames())?
        .ok_or_else(|| Error::param("these LZ4 blocks are not whole words: CPU decode"))
}

/// Decode and upload along `plan`, window by window, calling `progress(frames_done, total)`;
/// `None` when a chunk turns out to need the CPU path (LZ4 blocks that are not whole words).
pub async fn upload(
    engine: &Engine,
    acq: &Acquisition,
    corr: Correction,
    plan: &ResidentPlan,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Option<Resident>> {
    let total = plan.shape.frames();
    let all = slots(acq);
    let decoder = Decoder::new(engine, acq);
    decoder.reset(engine);
    let scope = engine
        .device
        .push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let mut buffers = Vec::with_capacity(plan.segments.len());
    let mut done_frames = 0usize;
    for seg in &plan.segments {
        let buffer = engine.storage("resident", seg.bytes.max(4));
        let (s0, s1) = (seg.first_frame, seg.first_frame + seg.frames);
        let mine: Vec<&ChunkSlot> = all
            .iter()
            .filter(|s| s.first < s1 && s.first + s.frames > s0)
            .collect();
        let mut i = 0;
        while i < mine.len() {
            let window_start = i;
            let Some(w) = build_window(engine, acq, &mine, &mut i, s0, s1)? else {
                return Ok(None);
            };
            if w.frames == 0 {
                continue;
            }
            let mut enc = engine.device.create_command_encoder(&Default::default());
            decoder.encode(
                engine,
                &mut enc,
                &w,
                plan,
                corr,
                s0,
                &buffer,
                acq.dtype.size(),
            )?;
            engine.queue.submit([enc.finish()]);
            let (failed, overflow) = decoder.take_failure(engine).await?;
            if overflow {
                let b = corr.bin;
                return Err(Error::format(
                    &acq.primary,
                    format!("a {b}x{b} binned sum exceeds uint32: use a smaller bin"),
                ));
            }
            if let Some(block) = failed {
                // Name the chunk the failing block's bytes belong to.
                let at = w.block_src.get(block as usize).copied().unwrap_or(0) as u64;
                let mut start = 0u64;
                let mut culprit = mine[window_start];
                for s in &mine[window_start..i] {
                    if start + s.chunk.size > at {
                        culprit = s;
                        break;
                    }
                    start += s.chunk.size;
                }
                return Err(decode_error(
                    culprit,
                    "corrupt bitshuffle/LZ4 block (found by the GPU decoder)".into(),
                ));
            }
            done_frames += w.frames;
            progress(done_frames, total);
        }
        buffers.push(buffer);
    }
    engine.queue.submit([]);
    engine
        .finish_resident(scope, plan.clone(), buffers, corr)
        .await
        .map(Some)
}
