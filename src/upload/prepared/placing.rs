//! Where a checked block of a prepared payload goes on the GPU, natively and in the browser
//! alike: a position-tiled block's tiles into the raw resident's segments; a packed block
//! expanded into them (decision 0044); or a packed block kept packed, as a run of a
//! compressed resident's segment (`kept`, decision 0055).

use std::ops::Range;

use super::kept::Kept;
use super::Segment;
use crate::error::{Error, Result};
use crate::formats::prepared::TiledPayload;
use crate::gpu::{Batch, Engine};
use crate::kernels::sha256::BlockHashes;
use crate::upload::plan::ResidentPlan;

/// Puts bytes `r` of the block being placed into a buffer at a byte offset: a copy from the
/// staging buffer the block lies in, or a queue write from host memory.
pub(super) type Put<'p> =
    dyn FnMut(&mut wgpu::CommandEncoder, &wgpu::Buffer, u64, Range<usize>) + 'p;

/// How the checked blocks of a reopen reach its resident.
pub(super) enum Placing {
    /// Position-tiled blocks: their tiles copied into the raw segments they cover.
    Tiles,
    /// Packed blocks expanded into the raw segments.
    Expand(Expander),
    /// Packed blocks kept packed, each a run of a compressed resident's segment; those
    /// copied whose hash and rebase are still to be recorded ([`Placing::finish`]).
    Keep(Kept, Vec<usize>),
}

impl Placing {
    /// Record block `k`'s bytes (`put`) and whatever the GPU does with them next into
    /// `enc`; `segments` are the tiles of `buffers` in the payload.
    #[allow(clippy::too_many_arguments)]
    pub fn place(
        &mut self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        (payload, plan): (&TiledPayload, &ResidentPlan),
        k: usize,
        segments: &[Segment],
        buffers: &[wgpu::Buffer],
        put: &mut Put<'_>,
        hashes: Option<&BlockHashes>,
    ) -> Result<()> {
        let n = payload.blocks[k].bytes as usize;
        match self {
            Placing::Tiles | Placing::Expand(_) if hashes.is_some() => Err(Error::Gpu(
                "only kept blocks are hashed where they are copied; others on the CPU".into(),
            )),
            Placing::Tiles => {
                let tile_bytes = plan.tile_words as u64 * 4;
                for t in block_targets(payload, k, segments) {
                    let (r, at) = t.bytes(tile_bytes);
                    put(enc, &buffers[t.segment], at, r);
                }
                Ok(())
            }
            Placing::Expand(x) => {
                let block = x.take().clone();
                put(enc, &block, 0, 0..n);
                let targets = block_targets(payload, k, segments);
                x.expand(engine, enc, plan, targets, buffers)
            }
            Placing::Keep(kept, pending) => {
                let p = kept_place(kept, k)?;
                let to = segment_buffer(buffers, p.segment)?;
                let index = p.index_bytes as usize;
                put(enc, to, p.index_at, 0..index);
                put(enc, to, p.data_at, index..n);
                // Hashed (where the GPU hashes) and rebased with the blocks copied beside it.
                pending.push(k);
                Ok(())
            }
        }
    }

    /// Record what the blocks placed since the last call still need, once their copies
    /// are recorded: kept blocks hashed where they lie (where `hashes`), the blocks of a
    /// segment together (three dispatches, decision 0057), and then their indices rebased
    /// (the hash reads the index as the file holds it).
    pub fn finish(
        &mut self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        (payload, plan): (&TiledPayload, &ResidentPlan),
        buffers: &[wgpu::Buffer],
        hashes: Option<&BlockHashes>,
    ) -> Result<()> {
        let Placing::Keep(kept, pending) = self else {
            return Ok(());
        };
        let placed = std::mem::take(pending)
            .into_iter()
            .map(|k| Ok((k, kept_place(kept, k)?)))
            .collect::<Result<Vec<_>>>()?;
        let mut batch = Batch::default();
        for group in placed.chunk_by(|(_, a), (_, b)| a.segment == b.segment) {
            let to = segment_buffer(buffers, group[0].1.segment)?;
            if let Some(h) = hashes {
                let views = group
                    .iter()
                    .map(|&(k, p)| Ok((p.view(payload.blocks[k].bytes)?, k)))
                    .collect::<Result<Vec<_>>>()?;
                h.add(engine, &mut batch, to, &views)?;
            }
            for &(k, p) in group {
                add_rebase(engine, &mut batch, payload, plan, (p, to), k)?;
            }
        }
        batch.flush(enc);
        Ok(())
    }

    /// Whether blocks wait for [`Placing::finish`].
    pub fn unfinished(&self) -> bool {
        matches!(self, Placing::Keep(_, pending) if !pending.is_empty())
    }
}

/// Where kept block `k` goes.
fn kept_place(kept: &Kept, k: usize) -> Result<&super::kept::Place> {
    kept.place(k).ok_or_else(|| {
        Error::Gpu(format!(
            "prepared block {k} has no place in the compressed resident"
        ))
    })
}

/// The buffer of a compressed resident's segment `segment`.
fn segment_buffer(buffers: &[wgpu::Buffer], segment: usize) -> Result<&wgpu::Buffer> {
    buffers
        .get(segment)
        .ok_or_else(|| Error::Gpu("a compressed resident's segment was not made".into()))
}

/// Queue the rebase of kept block `k`'s index, lying at `p` in `to`: its data starts moved
/// to where its data now lies.
fn add_rebase(
    engine: &Engine,
    batch: &mut Batch,
    payload: &TiledPayload,
    plan: &ResidentPlan,
    (p, to): (&super::kept::Place, &wgpu::Buffer),
    k: usize,
) -> Result<()> {
    let run = (p.first_tile, payload.blocks[k].tiles as u32);
    crate::kernels::packed::add_rebase(engine, batch, (plan, to), run, p.rebase)
}

/// Where some of a block's tiles go: the tiles (counted in the block), the segment and the
/// tile of the segment the first of them lands on.
pub(super) struct Target {
    tiles: Range<u64>,
    segment: usize,
    at_tile: u64,
}

impl Target {
    /// The bytes of a position-tiled block these tiles are, and where they go in the
    /// segment's buffer.
    fn bytes(&self, tile_bytes: u64) -> (Range<usize>, u64) {
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

/// The GPU side of a packed payload's reopen into a raw resident: each checked block copied
/// (natively) or written (in the browser) into one of two block buffers, and expanded from
/// there by the unpack kernel into the raw tiles of the segments it covers. Two buffers, so
/// that one block's copy need not wait for the expansion of the block before.
pub(super) struct Expander {
    blocks: [wgpu::Buffer; 2],
    next: usize,
    /// The unpack's mask of pixels read as zero: none (masking comes after, as for a
    /// position-tiled payload).
    none_zeroed: wgpu::Buffer,
}

impl Expander {
    /// The block buffers for the blocks of `payload`; `None` where one passes the adapter's
    /// binding limit (the frames are then read out of the blocks on the CPU).
    pub fn new(engine: &Engine, payload: &TiledPayload, plan: &ResidentPlan) -> Option<Expander> {
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
            u32::try_from(v)
                .map_err(|_| Error::Gpu("a prepared block has too many tiles to expand".into()))
        };
        let mut batch = Batch::default();
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
