//! GPU decode on the CUDA backend (C-DECODE-GPU): bitshuffle+LZ4 and LZ4 chunks of whole
//! frames are read in batches of chunks, their headers walked on the CPU's threads into
//! the block table every GPU backend uses (`decode::walk`), the compressed bytes copied
//! once, inflated one LZ4 block a thread (`wgsl/bslz4.cu`) and bit-unshuffled
//! (`wgsl/unshuffle.cu`) on the device into the batch's frames, which the caller moves into
//! the resident (raw or binned). The frames never pass through the CPU decoder; a block
//! the GPU finds malformed sends the batch to it, so the error names the file and chunk.
//! Acquisitions it does not cover (what `upload::gpu_decode::supported` leaves out, a crop,
//! an index still being read) are decoded on the CPU (`resident.rs`).

use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};
use rayon::prelude::*;

use super::engine::{driver_error, CudaEngine};
use super::resident::{alloc, read};
use crate::decode::walk::{self, block_words};
use crate::error::{Error, Result};
use crate::formats::{Acquisition, PartKind};
use crate::frames::{Correction, FrameReader};
use crate::upload::chunk_slots::{slots, ChunkSlot};
use crate::upload::gpu_decode::{decode_error, logical_bytes, walk_kind};

/// Decoded bytes a batch of chunks makes at most (one chunk may be larger alone).
const BATCH_BYTES: usize = 512 << 20;

/// Whether the GPU decoder takes `acq` under `corr` on this backend.
pub fn supported(acq: &Acquisition, corr: Correction) -> bool {
    crate::upload::gpu_decode::supported(acq, corr)
        && acq.crop.is_none()
        && acq.parts.iter().all(|p| match &p.kind {
            PartKind::Hdf5(ix) => ix.pending.is_none(),
            _ => false,
        })
}

/// A batch: chunks `[c0, c1)` of the slots, of one walk kind, the frames they hold, the
/// bytes they store and decode to (padding frames of a last chunk included).
struct Batch {
    kind: u32,
    c0: usize,
    c1: usize,
    f0: usize,
    f1: usize,
    stored: usize,
    decoded: usize,
}

fn batches(acq: &Acquisition, slots: &[ChunkSlot]) -> Vec<Batch> {
    let frame_bytes = acq.shape.det_len() * acq.dtype.size();
    let frames = acq.shape.frames();
    let mut out: Vec<Batch> = Vec::new();
    for (k, s) in slots.iter().enumerate() {
        let logical = logical_bytes(acq, s.ix);
        let stored = s.chunk.size as usize;
        let kind = walk_kind(s.ix);
        match out.last_mut() {
            Some(b)
                if (s.first - b.f0) * frame_bytes + logical <= BATCH_BYTES
                    && s.first == b.f1
                    && kind == b.kind =>
            {
                b.c1 = k + 1;
                b.f1 = (s.first + s.frames).min(frames);
                b.stored += stored;
                b.decoded = (s.first - b.f0) * frame_bytes + logical;
            }
            _ => out.push(Batch {
                kind,
                c0: k,
                c1: k + 1,
                f0: s.first,
                f1: (s.first + s.frames).min(frames),
                stored,
                decoded: logical,
            }),
        }
    }
    out
}

/// The stored bytes of `slots` one after another, read as the wgpu decoder's windows are
/// (`source::read_coalesced`: neighbouring chunks in one span, its pieces read together),
/// and where each starts.
fn read_chunks(slots: &[ChunkSlot]) -> Result<(Vec<u8>, Vec<usize>)> {
    let ranges: Vec<_> = slots
        .iter()
        .map(|s| (&s.part.source, s.chunk.offset, s.chunk.size))
        .collect();
    let bytes = pollster::block_on(crate::source::read_coalesced(&ranges))?;
    let at = slots
        .iter()
        .scan(0usize, |start, s| {
            let at = *start;
            *start += s.chunk.size as usize;
            Some(at)
        })
        .collect();
    Ok((bytes, at))
}

/// The block table of the batch: each chunk walked (on the CPU's threads), its blocks'
/// sources offset by where the chunk lies in `bytes`, their outputs by its first frame.
fn block_table(
    acq: &Acquisition,
    slots: &[ChunkSlot],
    bytes: &[u8],
    at: &[usize],
    f0: usize,
) -> Result<Vec<u32>> {
    let elem = acq.dtype.size();
    let frame_bytes = acq.shape.det_len() * elem;
    let tables: Vec<Vec<u32>> = slots
        .par_iter()
        .zip(at)
        .map(|(s, &a)| {
            let chunk = &bytes[a..a + s.chunk.size as usize];
            let (_, blocks) =
                walk::chunk_layout(chunk, elem, logical_bytes(acq, s.ix), walk_kind(s.ix))
                    .map_err(|e| decode_error(s, e.to_string()))?;
            let (src, dst) = (a as u32, ((s.first - f0) * frame_bytes) as u32);
            Ok(blocks
                .iter()
                .flat_map(|b| block_words(b, src, dst))
                .collect())
        })
        .collect::<Result<_>>()?;
    Ok(tables.concat())
}

/// Every frame of `acq` decoded on the device, batch by batch: `sink(f0, f1, frames)` with
/// the stored samples of frames `[f0, f1)` at the start of `frames`.
pub fn decode_frames<T: DeviceRepr + ValidAsZeroBits>(
    engine: &CudaEngine,
    acq: &Acquisition,
    mut sink: impl FnMut(usize, usize, &CudaSlice<T>) -> Result<()>,
) -> Result<()> {
    let slots = slots(acq);
    let batches = batches(acq, &slots);
    let elem = std::mem::size_of::<T>();
    let most = |f: fn(&Batch) -> usize| batches.iter().map(f).max().unwrap_or(0);
    let (stored_max, decoded_max) = (most(|b| b.stored), most(|b| b.decoded));
    let mut bufs = Buffers {
        src: alloc::<u8>(engine, stored_max, "the compressed chunks")?,
        planes: alloc::<u8>(engine, decoded_max, "the bit planes")?,
        frames: alloc::<T>(engine, decoded_max.div_ceil(elem), "the decoded frames")?,
        failed: alloc::<u32>(engine, 1, "the decode flag")?,
    };
    let total = acq.shape.frames() as u64;
    // One thread reads and walks the next batch while this one is copied and decoded.
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<(Vec<u8>, Vec<u32>)>>(1);
        let (slots, batches_ref) = (&slots, &batches);
        scope.spawn(move || {
            for b in batches_ref {
                let mine = &slots[b.c0..b.c1];
                let ready = read_chunks(mine).and_then(|(bytes, at)| {
                    let table = block_table(acq, mine, &bytes, &at, b.f0)?;
                    Ok((bytes, table))
                });
                let stop = ready.is_err();
                // The decoding side stopped (an error, a cancel): nothing more to read.
                if tx.send(ready).is_err() || stop {
                    return;
                }
            }
        });
        for b in &batches {
            let (bytes, table) = rx
                .recv()
                .map_err(|_| Error::Gpu("CUDA: the chunk reader stopped".into()))??;
            decode_batch(engine, acq, b, &bytes, &table, &mut bufs, &mut sink)?;
            crate::watch::step(crate::watch::UPLOAD, b.f1 as u64, total)?;
        }
        Ok(())
    })?;
    engine.synchronize()
}

/// The device buffers a decode reuses batch after batch.
struct Buffers<T> {
    src: CudaSlice<u8>,
    planes: CudaSlice<u8>,
    frames: CudaSlice<T>,
    failed: CudaSlice<u32>,
}

/// Copy one batch's chunks to the device, inflate and unshuffle them into `bufs.frames`,
/// and give them to `sink`.
fn decode_batch<T: DeviceRepr>(
    engine: &CudaEngine,
    acq: &Acquisition,
    b: &Batch,
    bytes: &[u8],
    table: &[u32],
    bufs: &mut Buffers<T>,
    sink: &mut impl FnMut(usize, usize, &CudaSlice<T>) -> Result<()>,
) -> Result<()> {
    let elem = std::mem::size_of::<T>();
    let Buffers {
        src,
        planes,
        frames,
        failed,
    } = bufs;
    let n_blocks = (table.len() / walk::BLOCK_WORDS) as u32;
    engine
        .stream
        .memcpy_htod(bytes, &mut src.slice_mut(0..bytes.len()))
        .map_err(driver_error("upload the chunks"))?;
    let table = engine
        .stream
        .clone_htod(table)
        .map_err(driver_error("block table"))?;
    let shuffled = (b.kind == walk::KIND_BSLZ4) as u32;
    let f = engine.function("lz4_blocks")?;
    let mut l = engine.stream.launch_builder(&f);
    l.arg(&*src)
        .arg(&table)
        .arg(&n_blocks)
        .arg(&shuffled)
        .arg(&mut *planes)
        .arg(&mut *frames)
        .arg(&mut *failed);
    let cfg = LaunchConfig {
        grid_dim: ((n_blocks.div_ceil(128)).max(1), 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the arguments match lz4_blocks's signature (wgsl/bslz4.cu); the walk
    // checked every block's source within the batch's bytes and every output within
    // its chunk's logical bytes, which `frames` and `planes` hold.
    unsafe { l.launch(cfg) }.map_err(driver_error("lz4_blocks"))?;
    if shuffled == 1 {
        let f = engine.function("bitunshuffle")?;
        let elem32 = elem as u32;
        let mut l = engine.stream.launch_builder(&f);
        l.arg(&*planes)
            .arg(&table)
            .arg(&n_blocks)
            .arg(&elem32)
            .arg(&mut *frames);
        let cfg = LaunchConfig {
            grid_dim: (n_blocks.clamp(1, 1 << 20), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments match bitunshuffle's signature (wgsl/unshuffle.cu).
        unsafe { l.launch(cfg) }.map_err(driver_error("bitunshuffle"))?;
    }
    if read(engine, failed)?.first().is_some_and(|&v| v != 0) {
        // The CPU decoder names the chunk; if it finds nothing, the GPU is wrong.
        FrameReader::new(acq).read_raw(b.f0, b.f1)?;
        return Err(Error::Gpu(format!(
            "CUDA: the GPU decoder refused frames {}..{} that the CPU decodes: a decoder bug",
            b.f0, b.f1
        )));
    }
    sink(b.f0, b.f1, frames)
}
