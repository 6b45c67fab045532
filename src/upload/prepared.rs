//! The upload of a prepared acquisition (`formats::prepared`, decision 0037): its payload is
//! the resident's own layout, so each block is read, checked against its SHA-256 and copied
//! into the segments it covers; nothing is decoded or tiled on the CPU. A packed payload's
//! block (decision 0044) is copied into a block buffer and expanded there by the
//! compressed resident's unpack kernel into the raw tiles it holds. Taken where the
//! resident is the payload or a run of its tiles (no bin; the whole scan, or blocks of
//! whole scan rows on tile boundaries, as streaming and the compressed build read), bad-pixel
//! masking then applied on the GPU (the file's pixels and sentinel samples zeroed);
//! otherwise the frames are read back out of the tiles on the CPU
//! and uploaded as any raw frames are.

use crate::error::Result;
use crate::formats::prepared::TiledPayload;
use crate::formats::{Acquisition, Part, PartKind};
use crate::frames::Correction;
use crate::gpu::{Engine, Resident, UploadTimes};
use crate::kernels::sha256::BlockHashes;
use crate::source::ByteSource;
use crate::upload::plan::{FloatRange, ResidentPlan};

#[cfg(target_arch = "wasm32")]
mod browser;
mod kept;
mod placing;

pub(crate) use kept::kept_memory_plan;
use kept::KeptPlan;
use placing::{Expander, Placing};

/// Blocks read (and checked) together before they are copied: natively one per core.
const BLOCKS_AT_ONCE: usize = 16;

/// The staging the ring may hold: one batch of raw blocks (`BLOCKS_AT_ONCE ·
/// prepare::BLOCK_BYTES`), within the plan's peak where the adapter maps it in device
/// memory (decision 0043).
const STAGING_BYTES: u64 = BLOCKS_AT_ONCE as u64 * crate::upload::prepare::BLOCK_BYTES;

/// Natively, how a reopen stages its blocks: every slot the size of the largest block (so
/// that none is made again for a larger one), and the sets of `BLOCKS_AT_ONCE` slots that
/// batches take in turn: two where they fit [`STAGING_BYTES`] (packed blocks), so that a
/// batch is read while the GPU copies and expands the one before; else one (decision 0044).
/// (The kept plan counts the same slots in its peak, on either target.)
struct SlotSets {
    slot_bytes: u64,
    sets: usize,
    #[cfg(not(target_arch = "wasm32"))]
    next: usize,
}

impl SlotSets {
    fn new(payload: &TiledPayload) -> SlotSets {
        let slot_bytes = payload.largest_block_bytes().next_multiple_of(4).max(4);
        let per_set = slot_bytes * BLOCKS_AT_ONCE as u64;
        SlotSets {
            slot_bytes,
            sets: (STAGING_BYTES / per_set).clamp(1, 2) as usize,
            #[cfg(not(target_arch = "wasm32"))]
            next: 0,
        }
    }

    /// The slots `blocks` blocks take: whole sets, no more than the blocks.
    fn slots(&self, blocks: usize) -> usize {
        (self.sets * BLOCKS_AT_ONCE).min(blocks)
    }

    /// The first slot of the next batch's set.
    #[cfg(not(target_arch = "wasm32"))]
    fn next_set(&mut self) -> usize {
        let first = self.next * BLOCKS_AT_ONCE;
        self.next = (self.next + 1) % self.sets;
        first
    }
}

/// A resident segment: its first and last tile in the payload.
type Segment = (u64, u64);

/// What a reopen's blocks are written into: the resident's `plan` (the raw one's layout
/// either way), each buffer's first and last tile in the payload, the buffers made so far
/// and those still to come, and how a block is placed.
struct Destination<'p> {
    plan: &'p ResidentPlan,
    segments: Vec<Segment>,
    buffers: Vec<wgpu::Buffer>,
    made: crate::gpu::resident_buffers::ResidentBuffers,
    placing: Placing,
}

impl Destination<'_> {
    /// Wait for the buffers of the segments that start before payload tile `tile`.
    fn reach(&mut self, engine: &Engine, tile: u64) -> Result<()> {
        let segments = &self.segments;
        while self.buffers.len() < segments.len() && segments[self.buffers.len()].0 < tile {
            self.buffers.push(self.made.next(engine)?);
        }
        Ok(())
    }

    /// Record checked block `k`, whose bytes `put` copies or writes, into its place.
    #[allow(clippy::too_many_arguments)]
    fn place(
        &mut self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        payload: &TiledPayload,
        k: usize,
        put: &mut placing::Put<'_>,
        hashes: Option<&BlockHashes>,
    ) -> Result<()> {
        let (segments, buffers) = (&self.segments, &self.buffers);
        let at = (payload, self.plan);
        self.placing
            .place(engine, enc, at, k, segments, buffers, put, hashes)
    }

    /// Record what the blocks placed since the last call still need before `enc` is
    /// submitted ([`Placing::finish`]).
    fn finish(
        &mut self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        payload: &TiledPayload,
        hashes: Option<&BlockHashes>,
    ) -> Result<()> {
        let at = (payload, self.plan);
        self.placing.finish(engine, enc, at, &self.buffers, hashes)
    }

    /// Every buffer, those no block reached made now.
    fn all_buffers(mut self, engine: &Engine) -> Result<Vec<wgpu::Buffer>> {
        if self.placing.unfinished() {
            return Err(crate::error::Error::Gpu(
                "blocks of a reopen were placed but not finished (hashed, rebased)".into(),
            ));
        }
        self.reach(engine, u64::MAX)?;
        Ok(self.buffers)
    }
}

/// Natively: blocks `ks` read, checked and staged on every core, each block by one thread
/// in pieces that go from the read through the hash into the staging ring while they are in
/// the CPU's caches; then, every block checked, copied on the GPU into their places
/// (nothing of a block that fails its SHA-256 reaches a segment). Every batch takes
/// the same slots, one per block: where the adapter maps them in device memory they count
/// in the plan's peak as the queue's staging of a batch did, and their copies are between
/// GPU buffers. Before, blocks were read whole, hashed, and copied into the queue's fresh
/// staging memory (decision 0043). The resident's buffers the batch reaches (to payload
/// tile `reach`) are waited for only once it is read and checked: a packed payload is read
/// faster than the driver makes them (decision 0044). The float32 range of each block
/// where `float`.
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::too_many_arguments)]
fn copy_blocks(
    engine: &Engine,
    (ring, sets): (&mut crate::upload::host_staging::HostStaging, &mut SlotSets),
    times: &mut UploadTimes,
    (payload, src): (&TiledPayload, &dyn ByteSource),
    ks: std::ops::Range<usize>,
    (dest, reach): (&mut Destination, u64),
    clock: Option<&mut crate::gpu::batch_clock::BatchClock>,
    (float, hashes): (bool, Option<&BlockHashes>),
) -> Result<Vec<Option<FloatRange>>> {
    use rayon::prelude::*;
    /// Bytes read, hashed and staged at a time: within a core's L2 cache.
    const PIECE: usize = 1 << 20;
    let mut t = crate::clock::now_ms();
    let mut lent = Vec::with_capacity(ks.len());
    let first = sets.next_set();
    ring.ready(engine, first..first + ks.len())?;
    times.lap("staging slots: waits for the GPU", &mut t);
    for (i, k) in ks.clone().enumerate() {
        lent.push((k, ring.take(engine, first + i, sets.slot_bytes)?));
    }
    times.lap("staging slots", &mut t);
    let ranges = lent
        .par_iter_mut()
        .map(|(k, l)| {
            let mut range = float.then(FloatRange::default);
            let sink = |at: usize, piece: &[u8]| {
                l.view.slice(at..at + piece.len()).copy_from_slice(piece);
                if let Some(r) = range.as_mut() {
                    r.merge(FloatRange::of_bytes(piece));
                }
            };
            match hashes {
                // Hashed on the GPU where it is copied (decision 0056).
                Some(_) => payload.read_block_in_pieces_unhashed(src, *k, PIECE, sink)?,
                None => payload.read_block_in_pieces(src, *k, PIECE, sink)?,
            }
            Ok(range)
        })
        .collect::<Result<Vec<_>>>()?;
    times.lap(
        match hashes {
            Some(_) => "read + check structure + stage",
            None => "read + check + stage",
        },
        &mut t,
    );
    dest.reach(engine, reach)?;
    times.lap("resident buffers", &mut t);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    let mut slots = Vec::with_capacity(lent.len());
    crate::gpu::batch_clock::stamped(clock, &mut enc, |enc| -> Result<()> {
        for (k, l) in lent {
            slots.push(l.slot);
            let staged = ring.written(l);
            let mut put = |enc: &mut wgpu::CommandEncoder,
                           to: &wgpu::Buffer,
                           at,
                           r: std::ops::Range<usize>| {
                let len = (r.end - r.start) as u64;
                enc.copy_buffer_to_buffer(&staged, r.start as u64, to, at, len)
            };
            dest.place(engine, enc, payload, k, &mut put, hashes)?;
        }
        dest.finish(engine, enc, payload, hashes)
    })?;
    let index = engine.queue.submit([enc.finish()]);
    for k in slots {
        ring.submitted(k, index.clone());
    }
    times.lap("record + submit", &mut t);
    Ok(ranges)
}

/// A prepared acquisition's one part: its payload and where it is read from.
fn tiled_part(acq: &Acquisition) -> Option<(&TiledPayload, &dyn crate::source::ByteSource)> {
    match acq.parts.as_slice() {
        [Part {
            kind: PartKind::Tiled(payload),
            source,
            ..
        }] => Some((payload, source.as_ref())),
        _ => None,
    }
}

/// What copying a payload's blocks gave beside the buffers: where the time went, the GPU's
/// side of the batches (natively, where timed), and the range of float32 samples.
struct Copied {
    times: UploadTimes,
    #[cfg(not(target_arch = "wasm32"))]
    clock: Option<crate::gpu::batch_clock::BatchClock>,
    float: Option<FloatRange>,
}

impl Engine {
    /// The resident of a prepared acquisition copied from its blocks along `plan`; `None`
    /// where this path does not take it (see the module).
    pub(crate) async fn upload_prepared(
        &self,
        acq: &Acquisition,
        corr: Correction,
        plan: &ResidentPlan,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Option<Resident>> {
        let Some((payload, src)) = tiled_part(acq) else {
            return Ok(None);
        };
        let tile_bytes = plan.tile_words as u64 * 4;
        let tile = plan.tile as u64;
        if corr.bin != 1
            || payload.layout.bits != plan.bits
            || payload.layout.tile_bytes != tile_bytes
        {
            return Ok(None);
        }
        // The payload's tile the resident's tile 0 is: 0, or that of a block of whole scan
        // rows (a streaming or compressed build) that starts on a tile and ends on one or at
        // the end of the scan (whose last tile the payload pads with zeros, as a resident).
        let first_tile = match &acq.crop {
            None => 0,
            Some(c) => {
                let cols = c.stored_scan[1] as u64;
                let full_rows = c.region.c0 == 0 && c.region.c1 == c.stored_scan[1];
                let (f0, f1) = (c.region.r0 as u64 * cols, c.region.r1 as u64 * cols);
                let ends = f1 % tile == 0 || c.region.r1 == c.stored_scan[0];
                if !full_rows || f0 % tile != 0 || !ends {
                    return Ok(None);
                }
                f0 / tile
            }
        };
        let placing = match payload.layout.is_packed() {
            true => match Expander::new(self, payload, plan) {
                Some(x) => Placing::Expand(x),
                None => return Ok(None),
            },
            false => Placing::Tiles,
        };
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        // Each segment's first and last tile in the payload.
        let segments: Vec<Segment> = plan
            .segments
            .iter()
            .map(|s| {
                let first = first_tile + s.first_frame as u64 / tile;
                (first, first + s.bytes / tile_bytes)
            })
            .collect();
        let lo_hi = (
            segments.first().map_or(0, |s| s.0),
            segments.last().map_or(0, |s| s.1),
        );
        let dest = || Destination {
            plan,
            segments,
            buffers: Vec::new(),
            made: self.resident_buffers("resident", plan),
            placing,
        };
        let float = acq.dtype.is_float();
        let copied = self.copy_payload((payload, src), lo_hi, dest, float, progress);
        let Some((buffers, mut copied)) = copied.await? else {
            return Ok(None);
        };
        let mut t = crate::clock::now_ms();
        let mut res = self
            .finish_resident(scope, plan.clone(), buffers, corr)
            .await?;
        copied.times.lap("finish", &mut t);
        self.finish_copied(acq, corr, copied, &mut res).await?;
        Ok(Some(res))
    }

    /// The compressed resident of a prepared acquisition whose payload is packed, its blocks
    /// kept as they are (decision 0055): each checked block's index and data copied into
    /// the segment it joins, its index moved to the segment's data; nothing decoded,
    /// expanded or encoded again. `None` where this path does not take it (a bin, a crop, a
    /// position-tiled payload, a block past the binding limit); refused as out of memory
    /// where its segments and scratch pass `budget`, known exactly before anything is made.
    pub(crate) async fn reopen_packed(
        &self,
        acq: &Acquisition,
        corr: Correction,
        budget: Option<crate::upload::packed::PackBudget>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Option<Resident>> {
        let Some((payload, src)) = tiled_part(acq) else {
            return Ok(None);
        };
        let Some(KeptPlan {
            kept,
            plan,
            packed_bytes,
            scratch_bytes,
            raw_bytes,
        }) = KeptPlan::of(acq, corr, self.adapter.limits)
        else {
            return Ok(None);
        };
        let all_tiles = plan.shape.frames().div_ceil(plan.tile as usize) as u64;
        let file = acq.primary.as_str();
        let held = plan.payload_bytes;
        if let Some(b) = budget {
            let rows = plan.shape.scan[0];
            b.check(file, held, (rows, rows))?;
        }
        if let Some(ceiling) = self.simulated_ceiling_passed(held) {
            return Err(crate::error::Error::GpuOutOfMemory(format!(
                "{file}: {held} bytes of compressed resident do not fit a GPU simulated with {ceiling} bytes"
            )));
        }
        self.check_alive()?;
        self.start_buffers(kept.bytes.iter().copied());
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let oom = format!(
            "out of GPU memory for the compressed resident of {file}: {packed_bytes} bytes \
             packed and a scratch of {scratch_bytes}"
        );
        let (tiles, sizes) = (kept.segments.clone(), kept.bytes.clone());
        let dest = || Destination {
            plan: &plan,
            segments: tiles,
            buffers: Vec::new(),
            made: self.buffers_ahead("packed resident", sizes.into_iter(), oom),
            placing: Placing::Keep(kept, Vec::new()),
        };
        let copied = self.copy_payload((payload, src), (0, all_tiles), dest, false, progress);
        let Some((packed, mut copied)) = copied.await? else {
            return Ok(None);
        };
        let mut t = crate::clock::now_ms();
        let scratch = self.storage("packed scratch", scratch_bytes);
        let zeroed_bits = vec![0u32; crate::kernels::packed::zeroed_words(plan.shape.det_len())];
        let zeroed = self.storage("packed zeroed pixels", zeroed_bits.len() as u64 * 4);
        let n = plan.segments.len();
        let mut res = self
            .finish_resident(scope, plan, vec![scratch; n], corr)
            .await?;
        res.packed = Some(crate::gpu::Packed {
            buffers: packed,
            packed_bytes,
            raw_bytes,
            scratch_bytes,
            zeroed,
            zeroed_bits,
        });
        copied.times.lap("finish", &mut t);
        self.finish_copied(acq, corr, copied, &mut res).await?;
        Ok(Some(res))
    }

    /// Copy the blocks of `payload` that hold its tiles `[lo, hi)` (those of `dest()`'s
    /// segments) into them, batch by batch (natively, its staging slots made before `dest()`
    /// starts making the resident's buffers, decision 0052); the buffers, with every one
    /// made. `None` where the payload lacks those tiles.
    async fn copy_payload<'p>(
        &self,
        (payload, src): (&TiledPayload, &dyn ByteSource),
        (lo, hi): (u64, u64),
        dest: impl FnOnce() -> Destination<'p>,
        float: bool,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Option<(Vec<wgpu::Buffer>, Copied)>> {
        let mut times = UploadTimes::default();
        let mut float = float.then(FloatRange::default);
        // The blocks holding tiles `[lo, hi)` (in tile order, as the open checked).
        let blocks = &payload.blocks;
        let (Some(first_block), Some(last_block)) = (
            blocks.iter().position(|b| b.first_tile + b.tiles > lo),
            blocks.iter().rposition(|b| b.first_tile < hi),
        ) else {
            return Ok(None);
        };
        let n = last_block + 1;
        // Natively the staging slots come first: made before the thread making the
        // segments' buffers starts, none waits behind a large allocation.
        #[cfg(not(target_arch = "wasm32"))]
        let (mut ring, mut sets) = {
            let mut t = crate::clock::now_ms();
            let mut ring = crate::upload::host_staging::HostStaging::new("prepared staging", 0);
            let sets = SlotSets::new(payload);
            ring.make_ahead(self, sets.slots(n - first_block), sets.slot_bytes)?;
            times.lap("staging slots made", &mut t);
            (ring, sets)
        };
        let mut dest = dest();
        // A packed payload kept packed whose blocks state their pieces SHA-256 is hashed
        // on the GPU where each block is copied, the CPU's cores (the page's pool) only
        // reading, checking its structure and staging it (decision 0056). Expanded, its
        // blocks are hashed on the CPU: one at a time on the GPU, between expansions,
        // they kept it busier than the CPU's cores were (decision 0057).
        let digests = match dest.placing {
            Placing::Keep(..) => payload.pieces_digests(),
            _ => None,
        };
        let (tile, total) = (dest.plan.tile as u64, dest.plan.shape.frames());
        // Natively the GPU's side of each batch (the browser has no timestamps in encoders).
        #[cfg(not(target_arch = "wasm32"))]
        let mut clock = crate::gpu::batch_clock::BatchClock::new(
            self,
            (n - first_block).div_ceil(BLOCKS_AT_ONCE),
        );
        #[cfg(target_arch = "wasm32")]
        let (mut reads, digests) = {
            let how = (float.is_some(), digests.is_some());
            let reads = browser::BlockReads::new(self, payload, src, first_block..n, how);
            // Read one at a time (no pool, or float32), the blocks are hashed on the CPU.
            let digests = digests.filter(|_| reads.gpu_hashes());
            (reads, digests)
        };
        let hashes = digests.map(|d| {
            let largest = payload.largest_block_bytes();
            BlockHashes::new(self, &d, largest, BLOCKS_AT_ONCE)
        });
        let mut k0 = first_block;
        while k0 < n {
            let k1 = (k0 + BLOCKS_AT_ONCE).min(n);
            let b = &payload.blocks[k1 - 1];
            let reach = (b.first_tile + b.tiles).min(hi);
            #[cfg(not(target_arch = "wasm32"))]
            {
                let ranges = copy_blocks(
                    self,
                    (&mut ring, &mut sets),
                    &mut times,
                    (payload, src),
                    k0..k1,
                    (&mut dest, reach),
                    clock.as_mut(),
                    (float.is_some(), hashes.as_ref()),
                )?;
                if let Some(all) = float.as_mut() {
                    ranges.into_iter().flatten().for_each(|r| all.merge(r));
                }
            }
            #[cfg(target_arch = "wasm32")]
            {
                let mut t = crate::clock::now_ms();
                dest.reach(self, reach)?;
                times.lap("resident buffers", &mut t);
                reads
                    .copy(
                        &mut times,
                        k0..k1,
                        (&mut dest, hashes.as_ref()),
                        float.as_mut(),
                    )
                    .await?;
            }
            k0 = k1;
            self.note_memory();
            let done = ((b.first_tile + b.tiles).min(hi) - lo) * tile;
            crate::watch::report(
                progress,
                crate::watch::UPLOAD,
                (done as usize).min(total),
                total,
            )?;
        }
        let mut t = crate::clock::now_ms();
        let buffers = dest.all_buffers(self)?;
        times.lap("resident buffers", &mut t);
        // Nothing of a block whose pieces SHA-256 differs is used: the whole reopen is
        // refused, by name and block.
        if let Some(h) = &hashes {
            let verdicts = h.verdicts(self).await?;
            times.lap("blocks' SHA-256 on the GPU (waited)", &mut t);
            if let Some(k) = (first_block..n).find(|&k| verdicts.get(k) != Some(&1)) {
                return Err(payload.corrupted(src.name(), k));
            }
        }
        let copied = Copied {
            times,
            #[cfg(not(target_arch = "wasm32"))]
            clock,
            float,
        };
        Ok(Some((buffers, copied)))
    }

    /// The copy's times, batches and float range handed to `res`, then bad-pixel masking
    /// as the decode applies it (C-BAD): the file's pixels and sentinel samples zeroed.
    async fn finish_copied(
        &self,
        acq: &Acquisition,
        corr: Correction,
        copied: Copied,
        res: &mut Resident,
    ) -> Result<()> {
        let Copied {
            mut times, float, ..
        } = copied;
        // A diagnostic: a failure to read the timestamps back leaves them out.
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(c) = copied.clock {
            res.gpu_batches = c.times(self).await.ok();
        }
        res.float = float;
        if corr.mask_bad_pixels {
            let mut t = crate::clock::now_ms();
            if let Some(mask) = &acq.pixel_mask {
                self.zero_pixels(res, &crate::contract::mask_pixels(mask))?;
            }
            if acq.dtype.sentinel().is_some() {
                self.zero_sentinels(res)?;
            }
            times.lap("bad pixels zeroed", &mut t);
        }
        res.upload_times = times;
        Ok(())
    }
}
