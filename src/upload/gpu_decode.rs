//! Decode on the GPU: bitshuffle+LZ4 (32008) and LZ4 (32004) chunks are uploaded compressed,
//! in windows of whole chunks (`window_reads`); the host only walks the chunk and block
//! headers to build the block table (in the browser the Workers that read the chunks walk
//! them), `wgsl/bslz4.wgsl` inflates the blocks and `wgsl/unshuffle.wgsl` packs the
//! frames (bad pixels zeroed, detector binned) straight into the resident buffers: the
//! unbinned volume never exists.
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

use crate::gpu::{Batch, Engine, Resident, UploadTimes};
use crate::kernels::{self, grid, DecodeParams};
pub(crate) use crate::upload::chunk_slots::ChunkSlot;
use crate::upload::chunk_slots::{batches, slots, Next, SlotStream};
use crate::upload::window_bytes::WindowBytes;
use crate::upload::window_reads::{
    pick_window, read_ahead, read_chunks, slots_wanted, Prefetch, ReadWindows,
};

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

/// Whether the GPU decoder covers `acq` under `corr`.
pub fn supported(acq: &Acquisition, corr: Correction) -> bool {
    // A scan crop reads stored frames through its row runs: the CPU path.
    corr.bin >= 1
        && acq.crop.is_none()
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

fn decode_error(slot: &ChunkSlot, message: String) -> Error {
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

/// Largest LZ4 block inflated from parsed sequences (`LOCAL_BYTES` in `wgsl/bslz4.wgsl`);
/// larger ones are inflated in place by one invocation.
const LOCAL_BYTES: u32 = 8192;
/// Sequences one block's region holds at most (`SEQ_CAP` in `wgsl/bslz4.wgsl`).
const SEQ_CAP: u32 = 512;
/// Detector pixels of a tile an `unshuffle_tiles` workgroup packs (`PACK_PIXELS` in
/// `wgsl/unshuffle.wgsl`).
const PACK_PIXELS: u32 = 1024;

/// Entries of the sequence region `lz4_parse` writes for block `e` (a block table entry):
/// a count word and room for as many sequences as the block can hold — every sequence but
/// the last takes at least 3 source bytes (token, offset) and makes at least 4 output bytes
/// — up to `SEQ_CAP`, and up to `room` beyond its count word (a block that finds too little
/// room is inflated in place). None for raw and large blocks, which are not parsed.
fn seq_region(e: &[u32; 4], room: u64) -> u64 {
    let (src_len, len, raw) = (e[1], e[3] & 0x7fff_ffff, e[3] >> 31 != 0);
    if raw || len > LOCAL_BYTES {
        return 0;
    }
    let bound = SEQ_CAP.min(len / 4 + 1).min(src_len / 3 + 1) as u64;
    1 + if bound <= room { bound } else { 0 }
}

/// Every block's first sequence entry, then the total: regions back to back, all of them
/// within `budget` entries (the count words first, then whole regions while they fit).
fn seq_starts(blocks: &[[u32; 4]], budget: u64) -> Vec<u32> {
    let counts = blocks.iter().filter(|e| seq_region(e, 0) > 0).count() as u64;
    let mut room = budget.saturating_sub(counts);
    let mut at = Vec::with_capacity(blocks.len() + 1);
    let mut total = 0u64;
    for e in blocks {
        at.push(total as u32);
        let r = seq_region(e, room);
        room -= r.saturating_sub(1);
        total += r;
    }
    at.push(total as u32);
    at
}

/// One upload window: whole chunks' compressed bytes and tables on the GPU, ready to decode
/// the frames `[first_frame, first_frame + frames)` into a resident segment.
pub struct Window {
    src: wgpu::Buffer,
    /// Where `src`'s bytes wait to be copied in (the browser's staging buffers).
    staged: Staged,
    blocks: wgpu::Buffer,
    chunks: wgpu::Buffer,
    frame_map: wgpu::Buffer,
    scratch: wgpu::Buffer,
    /// Per block: where its parsed sequences go (`seq_starts`), and the sequences.
    seq_at: wgpu::Buffer,
    seqs: wgpu::Buffer,
    /// Every chunk bit-shuffled (not plain LZ4): the tiled unshuffle applies unbinned.
    bitshuffled: bool,
    /// Per chunk: its first block in the window and its index in the slots the window was
    /// built from (to name the chunk of a failing block).
    chunk_blocks: Vec<(u32, usize)>,
    /// The window's first block among all blocks of the upload.
    block_base: u32,
    n_blocks: u32,
    src_bytes: u32,
    dst_bytes: u32,
    pub first_frame: usize,
    pub frames: usize,
    /// Decoded bytes the window produces (benchmarks).
    pub decoded_bytes: u64,
}

/// Reused storage buffers for the compressed windows: written through the queue, or in the
/// browser copied on the GPU from the staging ring the File API's buffers go into (a buffer
/// mapped at creation per window was a fresh shared-memory allocation in Chromium, 3.9 s of
/// a 5.6 GB load on the H200; wgpu's own mapped ranges copy through wasm memory, 5.5 s).
/// Two slots: the host fills the next window while the GPU decodes the last ones (writes
/// and copies are queue operations ordered after the work already submitted, so a slot is
/// never overwritten under a running decode).
pub struct SrcSlots {
    slots: [Option<wgpu::Buffer>; 2],
    next: usize,
    /// The slot [`SrcSlots::fill`] filled last: its window's work buffers go with it.
    filled: usize,
    /// The windows' scratch and sequence buffers, reused the same way and cleared before
    /// each window (as a new buffer would be): in Chromium a new 220 MB buffer per window
    /// cost more than its clear on the GPU.
    scratch: [Option<wgpu::Buffer>; 2],
    seqs: [Option<wgpu::Buffer>; 2],
    #[cfg(target_arch = "wasm32")]
    staging: crate::upload::window_bytes::Staging,
}

/// A window's bytes waiting in a staging buffer: copied into its storage buffer first.
type Staged = Option<(wgpu::Buffer, u64)>;

/// The buffer in `slot`, replaced by `make()` when there is none or it is under `need` bytes.
fn reuse(
    slot: &mut Option<wgpu::Buffer>,
    need: u64,
    make: impl FnOnce() -> wgpu::Buffer,
) -> wgpu::Buffer {
    if slot.as_ref().is_some_and(|b| b.size() < need) {
        *slot = None;
    }
    slot.get_or_insert_with(make).clone()
}

impl SrcSlots {
    pub fn new() -> SrcSlots {
        SrcSlots {
            slots: [None, None],
            next: 0,
            filled: 0,
            scratch: [None, None],
            seqs: [None, None],
            #[cfg(target_arch = "wasm32")]
            staging: crate::upload::window_bytes::Staging::new(),
        }
    }

    /// A storage buffer holding `bytes` (zero-padded to whole words) from the next submit on,
    /// and the staging buffer to copy them from first when they came from the File API.
    /// `times` and `t` as [`UploadTimes::lap`] takes them: the browser's waits for a staging
    /// buffer are timed apart from the copies.
    async fn fill(
        &mut self,
        engine: &Engine,
        bytes: &WindowBytes,
        capacity: u64,
        times: &mut UploadTimes,
        t: &mut f64,
    ) -> Result<(wgpu::Buffer, Staged)> {
        let need = (bytes.len() as u64).next_multiple_of(4).max(4);
        let k = self.next % 2;
        (self.next, self.filled) = (self.next + 1, k);
        // Room for a full window, unless this one is small (a small acquisition).
        let size = need.next_power_of_two().min(capacity).max(need);
        let src = reuse(&mut self.slots[k], need, || {
            engine.storage("decode window", size)
        });
        #[cfg(target_arch = "wasm32")]
        if let WindowBytes::Js(j) = bytes {
            if let Some(staged) = self.staging.fill(&engine.device, j, times, t).await? {
                return Ok((src, Some(staged)));
            }
        }
        let _ = (times, t);
        bytes.write_to(&engine.queue, &src);
        Ok((src, None))
    }

    /// The scratch and sequence buffers of the window [`SrcSlots::fill`] filled last, at
    /// least `scratch` and `seqs` bytes (cleared by [`Decoder::encode`]).
    fn work_buffers(&mut self, engine: &Engine, scratch: u64, seqs: u64) -> [wgpu::Buffer; 2] {
        let k = self.filled;
        [
            reuse(&mut self.scratch[k], scratch, || {
                engine.storage("decode scratch", scratch)
            }),
            reuse(&mut self.seqs[k], seqs, || {
                engine.storage("decode sequences", seqs)
            }),
        ]
    }

    /// The window filled last is submitted: its staging buffer may be mapped again.
    fn submitted(&mut self) {
        #[cfg(target_arch = "wasm32")]
        self.staging.release();
    }
}

impl Default for SrcSlots {
    fn default() -> Self {
        Self::new()
    }
}

/// Where and how a window's frames are packed: the resident segment buffer holding frames
/// from `seg_first` on, laid out by `plan`, corrected by `corr`, from `elem`-byte samples.
#[derive(Clone, Copy)]
pub struct PackTarget<'a> {
    pub plan: &'a ResidentPlan,
    pub corr: Correction,
    pub seg_first: usize,
    pub resident: &'a wgpu::Buffer,
    pub elem: usize,
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
            status: engine.storage("decode status", 12),
            det: acq.shape.det,
        }
    }

    /// Record decoding `w` into `to`.
    pub fn encode(
        &self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        w: &Window,
        to: &PackTarget<'_>,
    ) -> Result<()> {
        if let Some((staging, bytes)) = &w.staged {
            enc.copy_buffer_to_buffer(staging, 0, &w.src, 0, *bytes);
        }
        enc.clear_buffer(&w.scratch, 0, None);
        enc.clear_buffer(&w.seqs, 0, None);
        self.encode_inflate(engine, enc, w)?;
        self.encode_pack(engine, enc, w, to)
    }

    /// The window's parameters for a kernel over `groups`.
    fn block_params(&self, engine: &Engine, w: &Window, groups: (u32, u32)) -> wgpu::Buffer {
        engine.uniform(&DecodeParams {
            blocks: w.n_blocks,
            groups_x: groups.0,
            block_base: w.block_base,
            src_bytes: w.src_bytes,
            dst_bytes: w.dst_bytes,
            ..Default::default()
        })
    }

    /// The bindings every LZ4 kernel takes, with `params` and `extra`.
    fn lz4_bindings<'a>(
        &'a self,
        params: &'a wgpu::Buffer,
        w: &'a Window,
        extra: &[(u32, &'a wgpu::Buffer)],
    ) -> Vec<(u32, &'a wgpu::Buffer)> {
        let mut b = vec![
            (0, params),
            (1, &w.src),
            (2, &w.blocks),
            (4, &self.status),
            (9, &w.seq_at),
        ];
        b.extend_from_slice(extra);
        b
    }

    /// Queue parsing the window's LZ4 blocks into their sequence regions.
    fn add_parse(&self, engine: &Engine, batch: &mut Batch, w: &Window) -> Result<()> {
        let groups = grid(w.n_blocks.div_ceil(64));
        let params = self.block_params(engine, w, groups);
        let bindings = self.lz4_bindings(&params, w, &[(7, &w.seqs)]);
        batch.add(engine, &kernels::LZ4_PARSE, &bindings, groups)
    }

    /// Record parsing the window's LZ4 blocks alone (benchmarks).
    pub fn encode_parse(
        &self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        w: &Window,
    ) -> Result<()> {
        let mut batch = Batch::default();
        self.add_parse(engine, &mut batch, w)?;
        batch.flush(enc);
        Ok(())
    }

    /// Record inflating the window's LZ4 blocks into its scratch buffer: parse, inflate the
    /// blocks that cannot be parsed into their regions in place, copy the others.
    pub fn encode_inflate(
        &self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        w: &Window,
    ) -> Result<()> {
        let mut batch = Batch::default();
        self.add_parse(engine, &mut batch, w)?;
        // `lz4_serial`: an invocation a block; `lz4_blocks`: a workgroup a block. Both read
        // the parse's sequences and write disjoint blocks of the scratch.
        let serial = grid(w.n_blocks.div_ceil(64));
        for (kernel, groups) in [
            (&kernels::LZ4_SERIAL, serial),
            (&kernels::LZ4_BLOCKS, grid(w.n_blocks)),
        ] {
            let params = self.block_params(engine, w, groups);
            let bindings = self.lz4_bindings(&params, w, &[(3, &w.scratch), (8, &w.seqs)]);
            batch.add(engine, kernel, &bindings, groups)?;
        }
        batch.flush(enc);
        Ok(())
    }

    /// Record unshuffling, correcting and packing the window's frames into `to`.
    pub fn encode_pack(
        &self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        w: &Window,
        to: &PackTarget<'_>,
    ) -> Result<()> {
        let PackTarget {
            plan,
            corr,
            seg_first,
            resident,
            elem,
        } = *to;
        let (rel0, rel1) = (
            w.first_frame - seg_first,
            w.first_frame + w.frames - seg_first,
        );
        let tile = plan.tile as usize;
        let tiles = (rel1.div_ceil(tile) - rel0 / tile) as u32;
        let det_len = plan.shape.det_len() as u32;
        // Unbinned bit planes: a workgroup per tile and PACK_PIXELS pixels; otherwise one
        // invocation per resident pixel's sector of the tiles the window's frames touch.
        let tiled = corr.bin <= 1 && w.bitshuffled;
        let (kernel, groups) = if tiled {
            (
                &kernels::UNSHUFFLE_TILES,
                grid(tiles * det_len.div_ceil(PACK_PIXELS)),
            )
        } else {
            (
                &kernels::UNSHUFFLE_PACK,
                grid((tiles * det_len).div_ceil(64)),
            )
        };
        let params = engine.uniform(&DecodeParams {
            groups_x: groups.0,
            frames: w.frames as u32,
            first_frame: w.first_frame as u32,
            seg_first_frame: seg_first as u32,
            tile_words: plan.tile_words,
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
        let mut bindings = vec![
            (0, &params),
            (1, &w.frame_map),
            (2, &w.chunks),
            (3, &w.scratch),
            (5, &self.bad),
        ];
        if tiled {
            // Whole sectors as vectors.
            bindings.push((10, resident));
        } else {
            // Binned sums report an overflow; words are or-ed in atomically.
            bindings.extend([(4, &self.status), (6, resident)]);
        }
        engine.dispatch_at(enc, kernel, &bindings, groups)
    }

    /// The lowest failing block of the last decode, if any, whether a binned sum passed
    /// u32, and how many blocks were inflated in place (reset for the next upload).
    async fn take_status(&self, engine: &Engine) -> Result<(Option<u32>, bool, u32)> {
        let st = engine.read_back(&self.status, 12).await?;
        self.reset(engine);
        let word =
            |i: usize| u32::from_le_bytes([st[4 * i], st[4 * i + 1], st[4 * i + 2], st[4 * i + 3]]);
        let failed = word(0);
        Ok((
            (failed != u32::MAX).then_some(failed),
            word(1) != 0,
            word(2),
        ))
    }

    fn reset(&self, engine: &Engine) {
        engine
            .queue
            .write_buffer(&self.status, 0, bytemuck::cast_slice(&[u32::MAX, 0, 0]));
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
    src: WindowBytes,
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
                let bytes = src.chunk(stored);
                let (param, layout) =
                    walk::chunk_layout(&bytes, elem, logical, kind).map_err(bad)?;
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
        .fill(engine, &src, window_bytes, times, &mut t)
        .await?;
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
    times.lap("copy to the GPU", &mut t);
    Ok(Some(window))
}

/// The slots of one resident segment's frames `[s0, s1)`, as the stream hands them out.
struct SegmentSlots<'s, 'a> {
    acq: &'a Acquisition,
    /// The binding limit the windows are planned under.
    limit: u64,
    s0: usize,
    s1: usize,
    /// Windows taken as read already (leaf spans).
    span_windows: u32,
    mine: Vec<&'s ChunkSlot<'a>>,
    /// Windows of `mine` read already (batches of leaves read as their file spans).
    read: ReadWindows<'s>,
    /// The stream has handed out every slot of the segment.
    complete: bool,
}

impl<'s, 'a: 's> SegmentSlots<'s, 'a> {
    /// Start with the slots of earlier segments that reach into this one (`carried`, which
    /// keeps those that reach past it).
    fn new(
        acq: &'a Acquisition,
        limit: u64,
        frames: std::ops::Range<usize>,
        carried: &mut Vec<&'s ChunkSlot<'a>>,
    ) -> Self {
        let mut seg = SegmentSlots {
            acq,
            limit,
            s0: frames.start,
            s1: frames.end,
            span_windows: 0,
            mine: Vec::new(),
            read: ReadWindows::new(),
            complete: false,
        };
        for s in std::mem::take(carried) {
            seg.take(s, carried);
        }
        seg
    }

    /// Keep `s` if it holds frames of the segment; pass it on in `later` if it holds frames
    /// of a later one (slots come in frame order, so the segment then has all of its own).
    fn take(&mut self, s: &'s ChunkSlot<'a>, later: &mut Vec<&'s ChunkSlot<'a>>) {
        let end = s.first + s.frames;
        if s.first < self.s1 && end > self.s0 {
            self.mine.push(s);
        }
        if end > self.s1 {
            later.push(s);
            self.complete = true;
        }
    }

    /// Take slots from `stream` until those from `mine[*i]` on hold enough stored bytes for
    /// the windows read ahead ([`slots_wanted`]) or the segment has them all, then start
    /// reading those windows; false when the stream found a chunk not as planned.
    async fn advance(
        &mut self,
        stream: &mut SlotStream<'s, 'a>,
        later: &mut Vec<&'s ChunkSlot<'a>>,
        i: &mut usize,
        ahead: &mut std::collections::VecDeque<(std::ops::Range<usize>, Prefetch<'s>)>,
        times: &mut UploadTimes,
    ) -> Result<bool> {
        if !self.fill(stream, *i, later, times).await? {
            return Ok(false);
        }
        let (acq, limit) = (self.acq, self.limit);
        self.span_windows += read_ahead(limit, acq, &self.mine, &mut self.read, i, ahead);
        Ok(true)
    }

    /// The slot-taking half of [`SegmentSlots::advance`].
    async fn fill(
        &mut self,
        stream: &mut SlotStream<'s, 'a>,
        i: usize,
        later: &mut Vec<&'s ChunkSlot<'a>>,
        times: &mut UploadTimes,
    ) -> Result<bool> {
        let wanted = slots_wanted(self.limit);
        let mut t = crate::clock::now_ms();
        let mut unread: u64 = self.mine[i.min(self.mine.len())..]
            .iter()
            .map(|s| s.chunk.size)
            .sum();
        while !self.complete && unread < wanted {
            let next = stream.next().await?;
            if stream.fed() {
                // Waiting for a leaf span is waiting for a window's read.
                let what = match &next {
                    Next::Slots(_, Some(_)) => "read (not overlapped)",
                    _ => "chunk index (not overlapped)",
                };
                times.lap(what, &mut t);
            }
            match next {
                Next::Slots(batch, window) => {
                    let start = self.mine.len();
                    for s in batch {
                        let before = self.mine.len();
                        self.take(s, later);
                        if self.mine.len() > before {
                            unread += s.chunk.size;
                        }
                    }
                    let taken = self.mine.len() - start;
                    if let Some(w) = window.filter(|_| taken > 0) {
                        self.read.push_back((start, taken, w));
                    }
                }
                Next::Done => self.complete = true,
                Next::NotAsPlanned => return Ok(false),
            }
        }
        Ok(true)
    }
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
    let mut slots = SrcSlots::new();
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
    out
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
    let mut stream = SlotStream::new(acq, feed, &order, &cells, plan.max_binding);
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
    let (mut file_buffer_windows, mut walked_windows) = (0u32, 0u32);
    for seg in &plan.segments {
        let buffer = engine.resident_buffer("resident", seg.bytes);
        let (s0, s1) = (seg.first_frame, seg.first_frame + seg.frames);
        let mut segment = SegmentSlots::new(acq, plan.max_binding, s0..s1, &mut carried);
        let mut i = 0;
        let mut ahead = std::collections::VecDeque::new();
        if !segment
            .advance(&mut stream, &mut carried, &mut i, &mut ahead, &mut times)
            .await?
        {
            return finish_in_flight(engine, in_flight).await;
        }
        while let Some((range, reading)) = ahead.pop_front() {
            let mut t = crate::clock::now_ms();
            let src = reading.finish().await?;
            times.lap("read (not overlapped)", &mut t);
            file_buffer_windows += src.is_file_api() as u32;
            walked_windows += src.walked().is_some() as u32;
            // The next windows' reads run while this one is built and submitted.
            if !segment
                .advance(&mut stream, &mut carried, &mut i, &mut ahead, &mut times)
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
            let mut enc = engine.device.create_command_encoder(&Default::default());
            let to = PackTarget {
                plan,
                corr,
                seg_first: s0,
                resident: &buffer,
                elem: acq.dtype.size(),
            };
            decoder.encode(engine, &mut enc, &w, &to)?;
            let done = engine.submit_tracked(enc.finish());
            slots.submitted();
            let mut t = crate::clock::now_ms();
            in_flight.push_back(done);
            if in_flight.len() > 2 {
                if let Some(prev) = in_flight.pop_front() {
                    engine.finished(prev).await?;
                }
            }
            times.lap("wait for the GPU", &mut t);
            done_frames += w.frames;
            progress(done_frames, total);
        }
        span_windows += segment.span_windows;
        buffers.push(buffer);
    }
    if feed.is_some() && done_frames != total {
        // A feed that lists fewer chunks than the plan's frames (not this acquisition's).
        return finish_in_flight(engine, in_flight).await;
    }
    for prev in in_flight.drain(..) {
        engine.finished(prev).await?;
    }
    let (failed, overflow, in_place) = decoder.take_status(engine).await?;
    if overflow {
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
    res.upload_times = times;
    res.gpu_inflated_in_place = in_place;
    res.file_buffer_windows = file_buffer_windows;
    res.leaf_span_windows = span_windows;
    res.worker_walked_windows = walked_windows;
    Ok(Some(res))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The constant `name` of the decode kernels' WGSL text (inflate or unshuffle).
    fn wgsl_const(name: &str) -> u32 {
        let decl = format!("const {name}: u32 = ");
        let rest = [kernels::LZ4_BLOCKS.body, kernels::UNSHUFFLE_TILES.body]
            .into_iter()
            .find_map(|t| t.find(&decl).map(|at| &t[at..]))
            .unwrap_or_else(|| panic!("{name} in bslz4.wgsl or unshuffle.wgsl"));
        let value = &rest[rest.find('=').unwrap() + 1..rest.find("u;").unwrap()];
        value.trim().parse().unwrap()
    }

    #[test]
    fn region_bounds_match_the_kernels() {
        assert_eq!(wgsl_const("SEQ_CAP"), SEQ_CAP);
        assert_eq!(wgsl_const("LOCAL_BYTES"), LOCAL_BYTES);
        assert_eq!(wgsl_const("PACK_PIXELS"), PACK_PIXELS);
    }

    #[test]
    fn regions_hold_what_a_block_can_hold() {
        let lz4 = |src_len: u32, len: u32| [0, src_len, 0, len];
        // Raw and large blocks are not parsed.
        assert_eq!(seq_region(&[0, 64, 0, 64 | 1 << 31], u64::MAX), 0);
        assert_eq!(seq_region(&lz4(100, LOCAL_BYTES + 8), u64::MAX), 0);
        // A count word, then the least of the cap, len / 4 + 1 and src / 3 + 1.
        assert_eq!(seq_region(&lz4(9000, 8192), u64::MAX), 1 + 512);
        assert_eq!(seq_region(&lz4(9000, 400), u64::MAX), 1 + 101);
        assert_eq!(seq_region(&lz4(30, 8192), u64::MAX), 1 + 11);
        // Too little room: the count word alone (the block is inflated in place).
        assert_eq!(seq_region(&lz4(30, 8192), 10), 1);
        let blocks = [
            lz4(30, 8192),
            [0, 8, 0, 8 | 1 << 31],
            lz4(30, 8192),
            lz4(30, 8192),
        ];
        // The count words come out of the budget first: 3 of 23, then one region of 11.
        assert_eq!(seq_starts(&blocks, 23), vec![0, 12, 12, 13, 14]);
        assert_eq!(seq_starts(&blocks, 36), vec![0, 12, 12, 24, 36]);
    }
}
