//! Decode on the GPU: bitshuffle+LZ4 chunks are uploaded compressed, in windows of whole
//! chunks; the host only walks the chunk and block headers (a few bytes per 8 KiB block) to
//! build the block table, `wgsl/bslz4.wgsl` inflates the blocks and packs the frames (bad
//! pixels zeroed) straight into the resident buffers. Acquisitions it does not cover (other
//! filters, chunks that split frames, binning) take the CPU path.

use crate::contract::Dtype;
use crate::decode::pipeline::FilterKind;
use crate::error::{Error, Result};
use crate::formats::{Acquisition, Part, PartKind};
use crate::frames::Correction;
use crate::hdf5_index::{ChunkRef, DatasetIndex};
use crate::resident::ResidentPlan;

use super::kernels::{self, grid, DecodeParams};
use super::{Engine, Resident};

/// Compressed bytes per upload window.
const WINDOW_BYTES: u64 = 32 << 20;
/// Decoded bytes per window (the scratch the blocks inflate into).
const SCRATCH_BYTES: u64 = 96 << 20;

/// Frames per chunk when the chunks hold whole frames in frame order.
fn chunk_frames(ix: &DatasetIndex, det: [usize; 2]) -> Option<u64> {
    let det = [det[0] as u64, det[1] as u64];
    match (ix.shape.len(), ix.chunk_shape()?) {
        (3, [n, kr, kc]) if [*kr, *kc] == det => Some(*n),
        (4, [1, 1, kr, kc]) if [*kr, *kc] == det => Some(1),
        _ => None,
    }
}

/// Whether the GPU decoder covers `acq` under `corr`.
pub fn supported(acq: &Acquisition, corr: Correction) -> bool {
    corr.bin == 1
        && matches!(acq.dtype, Dtype::U8 | Dtype::U16 | Dtype::U32)
        && !acq.parts.is_empty()
        && acq.parts.iter().all(|p| match &p.kind {
            PartKind::Hdf5(ix) => {
                ix.filters.len() == 1
                    && ix.filters[0].kind == FilterKind::BitshuffleLz4
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

/// Block table entries of one chunk (bytes `chunk` at `src_base` of the window, output at
/// `dst_base`), after the header checks of the CPU decoder.
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

/// Decode and upload along `plan`, window by window, calling `progress(frames_done, total)`.
pub async fn upload(
    engine: &Engine,
    acq: &Acquisition,
    corr: Correction,
    plan: ResidentPlan,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Resident> {
    let shape = plan.shape;
    let det_len = shape.det_len();
    let elem = acq.dtype.size();
    let total = shape.frames();
    let all = slots(acq);
    let mut bad_bits = vec![0u32; det_len.div_ceil(32).max(1)];
    if let Some(mask) = &acq.pixel_mask {
        for (k, &b) in mask.iter().enumerate() {
            if b {
                bad_bits[k / 32] |= 1 << (k % 32);
            }
        }
    }
    let bad = engine.input(&bad_bits);
    let status = engine.storage("decode status", 16);
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
            // A window of whole chunks: mine[window_start..i] once filled.
            let window_start = i;
            let (mut src, mut blocks, mut chunks, mut frame_map) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::<u32>::new());
            let mut dst_bytes = 0u64;
            let first_frame = mine[i].first.max(s0);
            let mut last_frame = first_frame;
            while i < mine.len() {
                let slot = mine[i];
                let cn = chunk_frames(slot.ix, shape.det).unwrap_or(1) as usize;
                let logical = cn * det_len * elem;
                let fits = src.len() as u64 + slot.chunk.size <= WINDOW_BYTES
                    && dst_bytes + logical as u64 <= SCRATCH_BYTES;
                if !chunks.is_empty() && !fits {
                    break;
                }
                let bytes = slot
                    .part
                    .source
                    .read_vec(slot.chunk.offset, slot.chunk.size)?;
                let src_base = src.len() as u32;
                let dst_base = dst_bytes as u32;
                let be =
                    chunk_blocks(slot, &bytes, elem, logical, src_base, dst_base, &mut blocks)?;
                src.extend_from_slice(&bytes);
                let entry = (chunks.len() / 4) as u32;
                chunks.extend_from_slice(&[dst_base, be as u32, (cn * det_len) as u32, 0]);
                for g in slot.first.max(s0)..(slot.first + slot.frames).min(s1) {
                    frame_map.extend_from_slice(&[entry, (g - slot.first) as u32]);
                    last_frame = g + 1;
                }
                dst_bytes = (dst_bytes + logical as u64).next_multiple_of(8);
                i += 1;
            }
            let frames = last_frame - first_frame;
            if frames == 0 {
                continue;
            }
            let src_buf = engine.input(&words(&src));
            let block_buf = engine.input(&blocks.concat());
            let chunk_buf = engine.input(&chunks);
            let map_buf = engine.input(&frame_map);
            let scratch = engine.storage("decode scratch", dst_bytes.max(16));
            engine
                .queue
                .write_buffer(&status, 0, bytemuck::cast_slice(&[u32::MAX; 4]));
            let mut enc = engine.device.create_command_encoder(&Default::default());
            let n_blocks = blocks.len() as u32;
            let groups = grid(n_blocks.div_ceil(64));
            let params = engine.uniform(&DecodeParams {
                blocks: n_blocks,
                groups_x: groups.0,
                src_bytes: src.len() as u32,
                dst_bytes: dst_bytes as u32,
                ..Default::default()
            });
            engine.dispatch_at(
                &mut enc,
                &kernels::LZ4_BLOCKS,
                &[
                    (0, &params),
                    (1, &src_buf),
                    (2, &block_buf),
                    (3, &scratch),
                    (4, &status),
                ],
                groups,
            )?;
            let words_out = frames as u32 * plan.frame_words;
            let groups = grid(words_out.div_ceil(64));
            let params = engine.uniform(&DecodeParams {
                groups_x: groups.0,
                frames: frames as u32,
                first_frame: first_frame as u32,
                seg_first_frame: s0 as u32,
                frame_words: plan.frame_words,
                bits: plan.bits,
                det_len: det_len as u32,
                elem: elem as u32,
                mask_bad: corr.mask_bad_pixels as u32,
                ..Default::default()
            });
            engine.dispatch_at(
                &mut enc,
                &kernels::UNSHUFFLE_PACK,
                &[
                    (0, &params),
                    (1, &map_buf),
                    (2, &chunk_buf),
                    (3, &scratch),
                    (5, &bad),
                    (6, &buffer),
                ],
                groups,
            )?;
            engine.queue.submit([enc.finish()]);
            let st = engine.read_back(&status, 4).await?;
            let failed = u32::from_le_bytes([st[0], st[1], st[2], st[3]]);
            if failed != u32::MAX {
                // Name the chunk the failing block belongs to.
                let src_at = blocks.get(failed as usize).map(|b| b[0]).unwrap_or(0) as u64;
                let mut start = 0u64;
                let mut culprit = mine[window_start];
                for s in &mine[window_start..i] {
                    if start + s.chunk.size > src_at {
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
            done_frames += frames;
            progress(done_frames, total);
        }
        buffers.push(buffer);
    }
    engine.queue.submit([]);
    engine.finish_resident(scope, plan, buffers, corr).await
}
