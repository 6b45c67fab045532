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
#[cfg(not(target_arch = "wasm32"))]
use crate::source::ByteSource;
use crate::upload::plan::{FloatRange, ResidentPlan};

#[cfg(target_arch = "wasm32")]
mod browser;

/// Blocks read (and checked) together before they are copied: natively one per core.
const BLOCKS_AT_ONCE: usize = 16;

/// Natively, the staging the ring may hold: one batch of raw blocks
/// (`BLOCKS_AT_ONCE · prepare::BLOCK_BYTES`), within the plan's peak where the adapter maps
/// it in device memory (decision 0043).
#[cfg(not(target_arch = "wasm32"))]
const STAGING_BYTES: u64 = BLOCKS_AT_ONCE as u64 * crate::upload::prepare::BLOCK_BYTES;

/// Natively, how a reopen stages its blocks: every slot the size of the largest block (so
/// that none is made again for a larger one), and the sets of `BLOCKS_AT_ONCE` slots that
/// batches take in turn: two where they fit [`STAGING_BYTES`] (packed blocks), so that a
/// batch is read while the GPU copies and expands the one before; else one (decision 0044).
#[cfg(not(target_arch = "wasm32"))]
struct SlotSets {
    slot_bytes: u64,
    sets: usize,
    next: usize,
}

#[cfg(not(target_arch = "wasm32"))]
impl SlotSets {
    fn new(payload: &TiledPayload) -> SlotSets {
        let slot_bytes = payload.largest_block_bytes().next_multiple_of(4).max(4);
        let per_set = slot_bytes * BLOCKS_AT_ONCE as u64;
        SlotSets {
            slot_bytes,
            sets: (STAGING_BYTES / per_set).clamp(1, 2) as usize,
            next: 0,
        }
    }

    /// The slots `blocks` blocks take: whole sets, no more than the blocks.
    fn slots(&self, blocks: usize) -> usize {
        (self.sets * BLOCKS_AT_ONCE).min(blocks)
    }

    /// The first slot of the next batch's set.
    fn next_set(&mut self) -> usize {
        let first = self.next * BLOCKS_AT_ONCE;
        self.next = (self.next + 1) % self.sets;
        first
    }
}

/// A resident segment: its first and last tile in the payload.
type Segment = (u64, u64);

/// Where some of a block's tiles go: the tiles (counted in the block), the segment and the
/// tile of the segment the first of them lands on.
struct Target {
    tiles: std::ops::Range<u64>,
    segment: usize,
    at_tile: u64,
}

impl Target {
    /// The bytes of a position-tiled block these tiles are, and where they go in the
    /// segment's buffer.
    fn bytes(&self, tile_bytes: u64) -> (std::ops::Range<usize>, u64) {
        let (a, z) = (self.tiles.start * tile_bytes, self.tiles.end * tile_bytes);
        (a as usize..z as usize, self.at_tile * tile_bytes)
    }
}

/// Where block `k`'s tiles go, per segment it overlaps.
fn block_targets(payload: &TiledPayload, k: usize, segments: &[Segment]) -> Vec<Target> {
    let b = &payload.blocks[k];
    let (b0, b1) = (b.first_tile, b.first_tile + b.tiles);
    let mut out = Vec::new();
    for (i, (s0, s1)) in segments.iter().enumerate() {
        let (a, z) = (b0.max(*s0), b1.min(*s1));
        if a < z {
            out.push(Target {
                tiles: a - b0..z - b0,
                segment: i,
                at_tile: a - s0,
            });
        }
    }
    out
}

/// The GPU side of a packed payload's reopen: each checked block copied (natively) or
/// written (in the browser) into one of two block buffers, and expanded from there by the
/// unpack kernel into the raw tiles of the segments it covers. Two buffers, so that one
/// block's copy need not wait for the expansion of the block before.
struct Expander {
    blocks: [wgpu::Buffer; 2],
    next: usize,
    /// The unpack's mask of pixels read as zero: none (masking comes after, as for a
    /// position-tiled payload).
    none_zeroed: wgpu::Buffer,
}

impl Expander {
    /// The block buffers for the blocks of `payload`; `None` where one passes the adapter's
    /// binding limit (the frames are then read out of the blocks on the CPU).
    fn new(engine: &Engine, payload: &TiledPayload, plan: &ResidentPlan) -> Option<Expander> {
        let largest = payload.largest_block_bytes();
        if largest > plan.max_binding {
            return None;
        }
        let words = crate::kernels::packed::zeroed_words(plan.shape.det_len());
        Some(Expander {
            blocks: [0, 1].map(|_| engine.storage("prepared packed block", largest)),
            next: 0,
            none_zeroed: engine.storage("prepared: no pixel zeroed", words as u64 * 4),
        })
    }

    /// The block buffer the next block goes into.
    fn take(&mut self) -> &wgpu::Buffer {
        self.next = (self.next + 1) % 2;
        &self.blocks[self.next]
    }

    /// Record the expansion of the block in the block buffer last taken into `targets`.
    fn expand(
        &self,
        engine: &Engine,
        encoder: &mut wgpu::CommandEncoder,
        plan: &ResidentPlan,
        targets: Vec<Target>,
        buffers: &[wgpu::Buffer],
    ) -> Result<()> {
        use crate::kernels::packed::{add_unpack, Unpack};
        let narrow = |v: u64| {
            u32::try_from(v).map_err(|_| {
                crate::error::Error::Gpu("a prepared block has too many tiles to expand".into())
            })
        };
        let mut batch = crate::gpu::Batch::default();
        for t in targets {
            let what = Unpack {
                list: None,
                tiles: (narrow(t.tiles.start)?, narrow(t.tiles.end)?),
                out_tile: narrow(t.at_tile)?,
            };
            let block = &self.blocks[self.next];
            add_unpack(
                engine,
                &mut batch,
                plan,
                block,
                &self.none_zeroed,
                &buffers[t.segment],
                what,
            )?;
        }
        batch.flush(encoder);
        Ok(())
    }
}

/// Natively: blocks `ks` read, checked and staged on every core, each block by one thread
/// in pieces that go from the read through the hash into the staging ring while they are in
/// the CPU's caches; then, every block checked, copied on the GPU into the segments they
/// cover (nothing of a block that fails its SHA-256 reaches a segment). Every batch takes
/// the same slots, one per block: where the adapter maps them in device memory they count
/// in the plan's peak as the queue's staging of a batch did, and their copies are between
/// GPU buffers. Before, blocks were read whole, hashed, and copied into the queue's fresh
/// staging memory (decision 0043). The resident's buffers the batch reaches are waited for
/// only once it is read and checked: a packed payload is read faster than the driver makes
/// them (decision 0044). The float32 range of each block where `float`.
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::too_many_arguments)]
fn copy_blocks(
    engine: &Engine,
    ring: &mut crate::upload::host_staging::HostStaging,
    sets: &mut SlotSets,
    times: &mut UploadTimes,
    payload: &TiledPayload,
    src: &dyn ByteSource,
    ks: std::ops::Range<usize>,
    segments: &[Segment],
    (buffers, made, reach): (
        &mut Vec<wgpu::Buffer>,
        &mut crate::gpu::resident_buffers::ResidentBuffers,
        u64,
    ),
    plan: &ResidentPlan,
    mut expander: Option<&mut Expander>,
    clock: Option<&mut crate::gpu::batch_clock::BatchClock>,
    float: bool,
) -> Result<Vec<Option<FloatRange>>> {
    let tile_bytes = plan.tile_words as u64 * 4;
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
            payload.read_block_in_pieces(src, *k, PIECE, |at, piece| {
                l.view.slice(at..at + piece.len()).copy_from_slice(piece);
                if let Some(r) = range.as_mut() {
                    r.merge(FloatRange::of_bytes(piece));
                }
            })?;
            Ok(range)
        })
        .collect::<Result<Vec<_>>>()?;
    times.lap("read + check + stage", &mut t);
    while buffers.len() < segments.len() && segments[buffers.len()].0 < reach {
        buffers.push(made.next(engine)?);
    }
    times.lap("resident buffers", &mut t);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    let mut slots = Vec::with_capacity(lent.len());
    crate::gpu::batch_clock::stamped(clock, &mut enc, |enc| -> Result<()> {
        for (k, l) in lent {
            slots.push(l.slot);
            let staged = ring.written(l);
            let targets = block_targets(payload, k, segments);
            if let Some(x) = expander.as_deref_mut() {
                let block = x.take();
                enc.copy_buffer_to_buffer(&staged, 0, block, 0, payload.blocks[k].bytes);
                x.expand(engine, enc, plan, targets, buffers)?;
                continue;
            }
            for t in targets {
                let (bytes, at) = t.bytes(tile_bytes);
                let (len, dst) = (bytes.len() as u64, &buffers[t.segment]);
                enc.copy_buffer_to_buffer(&staged, bytes.start as u64, dst, at, len);
            }
        }
        Ok(())
    })?;
    let index = engine.queue.submit([enc.finish()]);
    for k in slots {
        ring.submitted(k, index.clone());
    }
    times.lap("record + submit", &mut t);
    Ok(ranges)
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
        let [Part {
            kind: PartKind::Tiled(payload),
            source,
            ..
        }] = acq.parts.as_slice()
        else {
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
        let total = plan.shape.frames();
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
        let mut times = UploadTimes::default();
        let mut float = acq.dtype.is_float().then(FloatRange::default);
        // The blocks holding the resident's tiles (in tile order, as the open checked).
        let (lo, hi) = (
            segments.first().map_or(0, |s| s.0),
            segments.last().map_or(0, |s| s.1),
        );
        let blocks = &payload.blocks;
        let (Some(first_block), Some(last_block)) = (
            blocks.iter().position(|b| b.first_tile + b.tiles > lo),
            blocks.iter().rposition(|b| b.first_tile < hi),
        ) else {
            return Ok(None);
        };
        let n = last_block + 1;
        let mut expander = match payload.layout.is_packed() {
            true => match Expander::new(self, payload, plan) {
                Some(x) => Some(x),
                None => return Ok(None),
            },
            false => None,
        };
        // Natively the staging slots are made first, then the thread making the segments'
        // buffers starts.
        #[cfg(not(target_arch = "wasm32"))]
        let (mut ring, mut sets) = {
            let mut t = crate::clock::now_ms();
            let mut ring = crate::upload::host_staging::HostStaging::new("prepared staging", 0);
            let sets = SlotSets::new(payload);
            ring.make_ahead(self, sets.slots(n - first_block), sets.slot_bytes)?;
            times.lap("staging slots made", &mut t);
            (ring, sets)
        };
        // The segments' buffers, taken as the blocks reach them.
        let mut made = self.resident_buffers("resident", plan);
        let mut buffers = Vec::with_capacity(segments.len());
        // Natively the GPU's side of each batch (the browser has no timestamps in encoders).
        #[cfg(not(target_arch = "wasm32"))]
        let mut clock = crate::gpu::batch_clock::BatchClock::new(
            self,
            (n - first_block).div_ceil(BLOCKS_AT_ONCE),
        );
        #[cfg(target_arch = "wasm32")]
        let mut reads = browser::BlockReads::new(
            self,
            payload,
            source.as_ref(),
            first_block..n,
            float.is_some(),
        );
        let mut k0 = first_block;
        while k0 < n {
            let k1 = (k0 + BLOCKS_AT_ONCE).min(n);
            let b = &payload.blocks[k1 - 1];
            let reach = (b.first_tile + b.tiles).min(hi);
            #[cfg(not(target_arch = "wasm32"))]
            {
                let ranges = copy_blocks(
                    self,
                    &mut ring,
                    &mut sets,
                    &mut times,
                    payload,
                    source.as_ref(),
                    k0..k1,
                    &segments,
                    (&mut buffers, &mut made, reach),
                    plan,
                    expander.as_mut(),
                    clock.as_mut(),
                    float.is_some(),
                )?;
                if let Some(all) = float.as_mut() {
                    ranges.into_iter().flatten().for_each(|r| all.merge(r));
                }
            }
            #[cfg(target_arch = "wasm32")]
            {
                let mut t = crate::clock::now_ms();
                while buffers.len() < segments.len() && segments[buffers.len()].0 < reach {
                    buffers.push(made.next(self)?);
                }
                times.lap("resident buffers", &mut t);
                let batch = browser::Batch {
                    ks: k0..k1,
                    segments: &segments,
                    buffers: &buffers,
                    plan,
                };
                reads
                    .copy(&mut times, batch, expander.as_mut(), float.as_mut())
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
        while buffers.len() < segments.len() {
            buffers.push(made.next(self)?);
        }
        let mut res = self
            .finish_resident(scope, plan.clone(), buffers, corr)
            .await?;
        times.lap("finish", &mut t);
        // A diagnostic: a failure to read the timestamps back leaves them out.
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(c) = clock {
            res.gpu_batches = c.times(self).await.ok();
        }
        res.float = float;
        if corr.mask_bad_pixels {
            // As the decode masks (C-BAD): the file's bad pixels, and sentinel samples.
            let mut t = crate::clock::now_ms();
            if let Some(mask) = &acq.pixel_mask {
                self.zero_pixels(&mut res, &crate::contract::mask_pixels(mask))?;
            }
            if acq.dtype.sentinel().is_some() {
                self.zero_sentinels(&mut res)?;
            }
            times.lap("bad pixels zeroed", &mut t);
        }
        res.upload_times = times;
        Ok(Some(res))
    }
}
