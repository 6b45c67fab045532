//! Decode on the GPU: bitshuffle+LZ4 (32008) and LZ4 (32004) chunks are uploaded compressed,
//! in windows of whole chunks (`window_reads`); the host only walks the chunk and block
//! headers to build the block table (in the browser the Workers that read the chunks walk
//! them), `wgsl/bslz4.wgsl` inflates the blocks and `wgsl/unshuffle.wgsl` packs the
//! frames (bad pixels zeroed, detector binned) straight into the resident buffers: the
//! unbinned volume never exists (C-DECODE-GPU, C-BAD, C-BIN).
//! Acquisitions it does not cover (deflate/shuffle, chunks that split frames, LZ4 blocks that
//! are not whole words, blocks so small that their tables pass the binding limit) take the
//! CPU path.

use crate::contract::Dtype;
use crate::decode::pipeline::FilterKind;
use crate::decode::walk;
use crate::error::{Error, Result};
use crate::formats::{Acquisition, IndexFeed, PartKind};
use crate::frames::Correction;
use crate::hdf5_index::DatasetIndex;
use crate::upload::plan::{ResidentPlan, DECODE_SEQS, DECODE_WINDOW};

use crate::gpu::{Engine, Resident, UploadTimes};
use crate::kernels::decode::{seq_starts, Decoder, PackTarget, Window};
pub(crate) use crate::upload::chunk_slots::ChunkSlot;
use crate::upload::chunk_slots::{batches, slots, SlotStream};
use crate::upload::segment_slots::SegmentSlots;
use crate::upload::src_slots::SrcSlots;
use crate::upload::window_bytes::{ChunkWalk, WindowBytes};
use crate::upload::window_reads::{pick_window, read_chunks};
#[cfg(not(target_arch = "wasm32"))]
use crate::upload::window_reads::{walk_chunks, walk_jobs};

/// Frames per chunk when the chunks hold whole frames in frame order.
pub(crate) fn chunk_frames(ix: &DatasetIndex, det: [usize; 2]) -> Option<u64> {
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

/// Where the frames of `acq` start among its stored frames, where they are consecutive
/// there: 0 without a crop, the first row's first frame for a crop of whole rows (a block
/// of a streaming pass); `None` for a crop of some columns, whose rows are apart.
pub(crate) fn stored_offset(acq: &Acquisition) -> Option<usize> {
    match &acq.crop {
        None => Some(0),
        Some(c) if c.region.c0 == 0 && c.region.c1 == c.stored_scan[1] => {
            Some(c.region.r0 * c.stored_scan[1])
        }
        Some(_) => None,
    }
}

/// Whether the GPU decoder covers `acq` under `corr`.
pub fn supported(acq: &Acquisition, corr: Correction) -> bool {
    // A crop of some columns reads stored frames through its row runs: the CPU path.
    corr.bin >= 1
        && stored_offset(acq).is_some()
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

/// The named error of a chunk whose stored bytes do not decode (or whose headers do not
/// walk), on any GPU backend.
pub(crate) fn decode_error(slot: &ChunkSlot, message: String) -> Error {
    Error::Decode {
        file: slot.ix.file.clone(),
        chunk: format!("{:?}", slot.chunk.coords),
        message,
    }
}

/// The walk kind of a chunk of `ix` (the GPU decoder takes bitshuffle+LZ4 and LZ4 only).
pub(crate) fn walk_kind(ix: &DatasetIndex) -> u32 {
    match gpu_filter(ix) {
        Some(FilterKind::Lz4) => walk::KIND_LZ4,
        _ => walk::KIND_BSLZ4,
    }
}

/// Logical bytes of one of `acq`'s chunks.
pub(crate) fn logical_bytes(acq: &Acquisition, ix: &DatasetIndex) -> usize {
    let cn = chunk_frames(ix, acq.shape.det).unwrap_or(1) as usize;
    cn * acq.shape.det_len() * acq.dtype.size()
}

/// The header walks of `picked`'s chunks in `src`: those the reading thread did, else (for
/// a span read as it lies in its file) done here on the CPU's threads at once; empty in
/// the browser, whose Workers walk them, and the window builder walks any left one by one.
fn walk_here(
    acq: &Acquisition,
    picked: &[&ChunkSlot<'_>],
    src: &mut WindowBytes,
) -> Vec<ChunkWalk> {
    let done = src.take_walks();
    if done.len() == picked.len() {
        return done;
    }
    match src.host_bytes() {
        #[cfg(not(target_arch = "wasm32"))]
        Some(bytes) => {
            let jobs = walk_jobs(acq, picked, src.file_offset());
            walk_chunks(bytes, acq.dtype.size(), jobs)
        }
        _ => {
            let _ = acq;
            Vec::new()
        }
    }
}

/// Build the window of `mine[range]` from their stored bytes `src`, for the frames of
/// `[s0, s1)`.
#[allow(clippy::too_many_arguments)]
async fn make_window(
    engine: &Engine,
    limit: u64,
    acq: &Acquisition,
    mine: &[&ChunkSlot<'_>],
    range: std::ops::Range<usize>,
    mut src: WindowBytes,
    s0: usize,
    s1: usize,
    slots: &mut SrcSlots,
    times: &mut UploadTimes,
) -> Result<Option<Window>> {
    let mut t = crate::clock::now_ms();
    let det_len = acq.shape.det_len();
    let elem = acq.dtype.size();
    let window_bytes = DECODE_WINDOW.min(limit);
    let start = range.start;
    let picked = &mine[range];
    let (mut blocks, mut chunks, mut frame_map) = (Vec::new(), Vec::new(), Vec::<u32>::new());
    // For each chunk, its first block and its index in `mine` (to name a failure).
    let mut chunk_blocks = Vec::new();
    let mut dst_bytes = 0u64;
    let first_frame = picked[0].first.max(s0);
    let mut last_frame = first_frame;
    let mut src_at = 0usize;
    let mut walked_here = walk_here(acq, picked, &mut src).into_iter();
    for (k, &slot) in picked.iter().enumerate() {
        let cn = chunk_frames(slot.ix, acq.shape.det).unwrap_or(1) as usize;
        let logical = logical_bytes(acq, slot.ix);
        // A window read as one span of its file keeps the bytes between its chunks.
        if let Some(lo) = src.file_offset() {
            src_at = (slot.chunk.offset - lo) as usize;
        }
        let stored = src_at..src_at + slot.chunk.size as usize;
        let (src_base, dst_base) = (src_at as u32, dst_bytes as u32);
        src_at += slot.chunk.size as usize;
        // The header walk, with the CPU decoders' checks: one reading of the format. Done
        // by the Workers that read the window where they could.
        let bad = |e: crate::decode::DecodeError| decode_error(slot, e.0);
        let kind = walk_kind(slot.ix);
        chunk_blocks.push((blocks.len() as u32, start + k));
        let param = match src.walked() {
            Some(w) => {
                if let Some((f, why)) = &w.failed {
                    if *f == k {
                        return Err(decode_error(slot, why.clone()));
                    }
                }
                let (param, words) = w.chunk(k).ok_or_else(|| {
                    decode_error(slot, "the Workers' header walk lacks this chunk".into())
                })?;
                blocks.extend(
                    words
                        .chunks_exact(walk::BLOCK_WORDS)
                        .map(|b| [src_base + b[0], b[1], dst_base + b[2], b[3]]),
                );
                param
            }
            None => {
                let (param, layout) = match walked_here.next() {
                    Some(done) => done,
                    None => walk::chunk_layout(&src.chunk(stored), elem, logical, kind),
                }
                .map_err(bad)?;
                blocks.extend(
                    layout
                        .iter()
                        .map(|b| walk::block_words(b, src_base, dst_base)),
                );
                param
            }
        };
        let (be, plain) = match kind {
            walk::KIND_LZ4 => {
                if param % 4 != 0 && logical > param as usize {
                    // Blocks that are not whole words would share output words on the GPU.
                    return Ok(None);
                }
                (0, 1)
            }
            _ => (param, 0),
        };
        let entry = (chunks.len() / 4) as u32;
        chunks.extend_from_slice(&[dst_base, be, (cn * det_len) as u32, plain]);
        for g in slot.first.max(s0)..(slot.first + slot.frames).min(s1) {
            frame_map.extend_from_slice(&[entry, (g - slot.first) as u32]);
            last_frame = g + 1;
        }
        dst_bytes = (dst_bytes + logical as u64).next_multiple_of(8);
    }
    let frames = last_frame - first_frame;
    let src_bytes = src.len() as u32;
    let bitshuffled = chunks.chunks_exact(4).all(|c| c[3] == 0);
    let seq_at = seq_starts(&blocks, DECODE_SEQS.min(limit) / 8);
    let seq_entries = seq_at.last().copied().unwrap_or(0) as u64;
    if (blocks.len() as u64 * 16).max(seq_entries * 8) > limit {
        // Blocks so small that their tables pass the binding limit: the CPU path.
        return Ok(None);
    }
    times.lap("block tables", &mut t);
    let (src_buffer, staged) = slots
        .fill(engine, &mut src, window_bytes, times, &mut t)
        .await?;
    // Timed apart from the tables' buffers below, which may wait for the driver's allocator
    // while the resident's buffers are being made: not yet measured (decision 0053).
    times.lap("window slots", &mut t);
    src.recycle();
    let [scratch, seqs] = slots.work_buffers(engine, dst_bytes.max(16), (seq_entries * 8).max(16));
    let window = Window {
        src: src_buffer,
        staged,
        blocks: engine.input(&blocks.concat()),
        chunks: engine.input(&chunks),
        frame_map: engine.input(&frame_map),
        scratch,
        seqs,
        seq_at: engine.input(&seq_at),
        bitshuffled,
        chunk_blocks,
        block_base: 0,
        n_blocks: blocks.len() as u32,
        src_bytes,
        dst_bytes: dst_bytes as u32,
        first_frame,
        frames,
        decoded_bytes: (frames * det_len * elem) as u64,
    };
    times.lap("window tables to the GPU", &mut t);
    Ok(Some(window))
}

/// Wait for the windows still on the GPU, then hand the acquisition to the CPU path.
async fn finish_in_flight(
    engine: &Engine,
    in_flight: std::collections::VecDeque<crate::gpu::Submitted>,
) -> Result<Option<Resident>> {
    for prev in in_flight {
        engine.finished(prev).await?;
    }
    Ok(None)
}

/// The first window of `acq` (benchmarks time decoding it repeatedly).
pub async fn first_window(engine: &Engine, acq: &Acquisition) -> Result<Window> {
    let all = slots(acq);
    let mine: Vec<&ChunkSlot> = all.iter().collect();
    if mine.is_empty() {
        return Err(Error::param("no chunks to decode"));
    }
    let (mut slots, mut times) = (SrcSlots::new(), UploadTimes::default());
    let limit = engine.adapter.limits.max_storage_binding;
    let range = pick_window(limit, acq, &mine, &mut 0);
    let src = WindowBytes::Host(read_chunks(&mine[range.clone()]).await?);
    let frames = acq.shape.frames();
    make_window(
        engine, limit, acq, &mine, range, src, 0, frames, &mut slots, &mut times,
    )
    .await?
    .ok_or_else(|| {
        Error::param(
            "these LZ4 blocks are not whole words, or too small for the GPU's tables: CPU decode",
        )
    })
}

/// Decode and upload along `plan`, window by window, calling `progress(frames_done, total)`;
/// `None` when a chunk turns out to need the CPU path (LZ4 blocks that are not whole words,
/// or so small that a window's block or sequence tables would pass the binding limit).
///
/// The chunks of parts whose index an open deferred come from `feed`, batch by batch; `None`
/// also when one of them is not as planned ([`Next::NotAsPlanned`]).
pub async fn upload(
    engine: &Engine,
    acq: &Acquisition,
    feed: Option<&IndexFeed>,
    corr: Correction,
    plan: &ResidentPlan,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Option<Resident>> {
    let mut slots = engine.take_decode_slots();
    // In the browser the staging ring the engine keeps goes back to it whatever the
    // upload's outcome, if the upload left it whole.
    #[cfg(target_arch = "wasm32")]
    {
        slots.staging = engine.take_staging();
    }
    let out = upload_through(engine, acq, feed, corr, plan, progress, &mut slots).await;
    #[cfg(target_arch = "wasm32")]
    let out = {
        let ring = std::mem::replace(
            &mut slots.staging,
            crate::upload::window_bytes::Staging::new(),
        );
        let made = ring.made();
        engine.keep_staging(ring);
        out.map(|res| {
            res.map(|mut res| {
                res.staging_buffers_made = made;
                res
            })
        })
    };
    // Its buffers are reused by later windows only after the work submitted with them.
    if out.is_ok() {
        engine.leave_decode_slots(slots);
    }
    out
}

/// Start the reads of the first windows [`upload`] of `acq` under `corr` reads, and let them
/// go. In the browser the pool's reads stay in flight, and the upload that asks for the
/// same pieces awaits them (`BlobSource`'s reads in flight): a streamed pass starts the next
/// block's reads while this block uploads (decision 0046). Natively nothing is read.
pub async fn start_reads(engine: &Engine, acq: &Acquisition, corr: Correction) -> Result<()> {
    if cfg!(not(target_arch = "wasm32")) {
        return Ok(());
    }
    let plan = crate::gpu::plan_of(acq, corr.bin, engine.adapter.limits)?;
    let (Some(order), Some(offset), Some(seg)) = (
        batches(acq, None),
        stored_offset(acq),
        plan.segments.first(),
    ) else {
        return Ok(());
    };
    let cells: Vec<_> = order.iter().map(|_| std::cell::OnceCell::new()).collect();
    let (s0, s1) = (
        offset + seg.first_frame,
        offset + seg.first_frame + seg.frames,
    );
    let mut stream = SlotStream::new(acq, None, &order, &cells, (plan.max_binding, s0));
    let mut carried: Vec<&ChunkSlot> = Vec::new();
    let mut segment = SegmentSlots::new(acq, plan.max_binding, s0..s1, &mut carried);
    let mut times = UploadTimes::default();
    // The browser's windows take no staging slot as their reads start.
    let stage = (engine, &mut SrcSlots::new());
    segment
        .advance(&mut stream, &mut carried, stage, &mut times)
        .await?;
    Ok(())
}

/// [`upload`] through `slots`.
async fn upload_through(
    engine: &Engine,
    acq: &Acquisition,
    feed: Option<&IndexFeed>,
    corr: Correction,
    plan: &ResidentPlan,
    progress: &mut dyn FnMut(usize, usize),
    slots: &mut SrcSlots,
) -> Result<Option<Resident>> {
    let total = plan.shape.frames();
    let Some(order) = batches(acq, feed) else {
        return Ok(None);
    };
    let cells: Vec<_> = order.iter().map(|_| std::cell::OnceCell::new()).collect();
    let from = stored_offset(acq).unwrap_or(0) + plan.segments.first().map_or(0, |s| s.first_frame);
    let mut stream = SlotStream::new(acq, feed, &order, &cells, (plan.max_binding, from));
    // Slots that reach past the segment being uploaded, for the next.
    let mut carried: Vec<&ChunkSlot> = Vec::new();
    let mut span_windows = 0u32;
    let decoder = Decoder::new(engine, acq);
    decoder.reset(engine);
    let scope = engine
        .device
        .push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let mut buffers = Vec::with_capacity(plan.segments.len());
    let mut done_frames = 0usize;
    // Every chunk's first block in the whole upload (sorted), to name a failing block.
    let mut chunk_at: Vec<(u32, &ChunkSlot)> = Vec::new();
    let mut block_base = 0u32;
    // The host builds the next window while the GPU decodes the last two: their buffers are
    // the slots' two (the plan's peak counts two), reused in queue order, so the wait only
    // keeps the host from running ahead. The status is read once.
    let mut in_flight = std::collections::VecDeque::new();
    let mut times = UploadTimes::default();
    // The GPU's time on each window, where the device stamps inside encoders.
    let mut clock =
        crate::gpu::batch_clock::BatchClock::new(engine, crate::gpu::batch_clock::MOST_BATCHES);
    let (mut file_buffer_windows, mut walked_windows) = (0u32, 0u32);
    // Segments count the acquisition's frames; chunks and windows count stored frames.
    let offset = stored_offset(acq).ok_or_else(|| {
        Error::param(format!(
            "{}: a crop of some scan columns is read by the CPU decoders",
            acq.primary
        ))
    })?;
    let mut t = crate::clock::now_ms();
    let stored: u64 = acq.files.files().iter().map(|f| f.len()).sum();
    slots.make_ahead(engine, stored)?;
    times.lap("staging slots made", &mut t);
    let mut made = engine.resident_buffers("resident", plan);
    for seg in &plan.segments {
        let mut t = crate::clock::now_ms();
        let buffer = made.next(engine)?;
        times.lap("resident buffers", &mut t);
        let (s0, s1) = (
            offset + seg.first_frame,
            offset + seg.first_frame + seg.frames,
        );
        let mut segment = SegmentSlots::new(acq, plan.max_binding, s0..s1, &mut carried);
        if !segment
            .advance(&mut stream, &mut carried, (engine, slots), &mut times)
            .await?
        {
            return finish_in_flight(engine, in_flight).await;
        }
        while let Some((range, reading)) = segment.ahead.pop_front() {
            let mut t = crate::clock::now_ms();
            let src = reading.finish().await?;
            times.lap("read (not overlapped)", &mut t);
            file_buffer_windows += src.is_file_api() as u32;
            walked_windows += src.walked().is_some() as u32;
            // The next windows' reads run while this one is built and submitted.
            if !segment
                .advance(&mut stream, &mut carried, (engine, slots), &mut times)
                .await?
            {
                return finish_in_flight(engine, in_flight).await;
            }
            let mine = &segment.mine;
            let built = make_window(
                engine,
                plan.max_binding,
                acq,
                mine,
                range,
                src,
                s0,
                s1,
                slots,
                &mut times,
            )
            .await?;
            let Some(mut w) = built else {
                return finish_in_flight(engine, in_flight).await;
            };
            if w.frames == 0 {
                continue;
            }
            w.block_base = block_base;
            chunk_at.extend(
                w.chunk_blocks
                    .iter()
                    .map(|&(b, c)| (block_base + b, mine[c])),
            );
            block_base = block_base.checked_add(w.n_blocks).ok_or_else(|| {
                Error::format(
                    &acq.primary,
                    "more than 2^32 compressed blocks in one upload",
                )
            })?;
            let mut t = crate::clock::now_ms();
            let mut enc = engine.device.create_command_encoder(&Default::default());
            let to = PackTarget {
                plan,
                corr,
                seg_first: s0,
                resident: &buffer,
                elem: acq.dtype.size(),
            };
            crate::gpu::batch_clock::stamped(clock.as_mut(), &mut enc, |enc| {
                decoder.encode(engine, enc, &w, &to)
            })?;
            let done = engine.submit_tracked(enc.finish());
            slots.submitted(&done.index);
            times.lap("record + submit", &mut t);
            in_flight.push_back(done);
            if in_flight.len() > 2 {
                if let Some(prev) = in_flight.pop_front() {
                    engine.finished(prev).await?;
                }
            }
            times.lap("wait for the GPU", &mut t);
            done_frames += w.frames;
            engine.note_memory();
            crate::watch::report(progress, crate::watch::UPLOAD, done_frames, total)?;
            times.lap("memory + progress", &mut t);
        }
        span_windows += segment.span_windows;
        buffers.push(buffer);
    }
    if feed.is_some() && done_frames != total {
        // A feed that lists fewer chunks than the plan's frames (not this acquisition's).
        return finish_in_flight(engine, in_flight).await;
    }
    // The status read back waits for every window's decode: waiting for each of the last
    // windows first added Chromium's late `onSubmittedWorkDone` to every streamed block
    // (decision 0046).
    drop(in_flight);
    let mut t = crate::clock::now_ms();
    let (failed, overflow, in_place) = decoder.take_status(engine).await?;
    times.lap("decode status (waits for the GPU)", &mut t);
    if overflow {
        // C-BIN-COMPOSE: a binned sum past u32 is an error, never a wrapped value.
        let b = corr.bin;
        return Err(Error::format(
            &acq.primary,
            format!("a {b}x{b} binned sum exceeds uint32: use a smaller bin"),
        ));
    }
    if let Some(block) = failed {
        let k = chunk_at.partition_point(|&(first, _)| first <= block);
        let culprit = chunk_at.get(k.saturating_sub(1)).map(|&(_, c)| c);
        return Err(match culprit {
            Some(slot) => decode_error(
                slot,
                "corrupt bitshuffle/LZ4 block (found by the GPU decoder)".into(),
            ),
            None => Error::format(&acq.primary, "corrupt bitshuffle/LZ4 block"),
        });
    }
    engine.queue.submit([]);
    let mut res = engine
        .finish_resident(scope, plan.clone(), buffers, corr)
        .await?;
    times.lap("finish", &mut t);
    // A diagnostic: a failure to read the timestamps back leaves them out.
    if let Some(c) = clock {
        res.gpu_batches = c.times(engine).await.ok();
    }
    res.upload_times = times;
    res.gpu_inflated_in_place = in_place;
    res.file_buffer_windows = file_buffer_windows;
    res.leaf_span_windows = span_windows;
    res.worker_walked_windows = walked_windows;
    Ok(Some(res))
}
