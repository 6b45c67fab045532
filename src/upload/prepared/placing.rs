//! Where a checked block of a prepared payload goes on the GPU, natively and in the browser
//! alike: a position-tiled block's tiles into the raw resident's segments; a packed block
//! expanded into them (decision 0044); or a packed block kept packed, as a run of a
//! compressed resident's segment (decision 0055).

use std::ops::Range;

use super::Segment;
use crate::error::{Error, Result};
use crate::formats::prepared::{packed_sectors, BlockEntry, TiledPayload};
use crate::gpu::{Batch, Engine};
use crate::kernels::sha256::{BlockHashes, BlockView};
use crate::upload::plan::ResidentPlan;

/// Blocks a kept segment takes at most: 16 blocks of the 64 MiB of raw tiles `prepare`
/// writes are about the 1 GB a compressed build's segment holds, so product kernels
/// dispatch about as often on either (each segment is a dispatch).
const BLOCKS_A_SEGMENT: usize = 16;

/// Raw bytes a kept segment stands for at most (within the adapter's binding limit too).
const SEGMENT_RAW_BYTES: u64 = 1 << 30;

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
    /// Packed blocks kept packed, each a run of a compressed resident's segment.
    Keep(Kept),
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
        // The block's pieces SHA-256 checked where it was copied, before anything reads it.
        let hash = |enc: &mut wgpu::CommandEncoder, at: &wgpu::Buffer, view| -> Result<()> {
            let Some(h) = hashes else { return Ok(()) };
            let mut batch = Batch::default();
            h.add(engine, &mut batch, at, view, k)?;
            batch.flush(enc);
            Ok(())
        };
        match self {
            Placing::Tiles if hashes.is_some() => Err(Error::Gpu(
                "position-tiled blocks are checked on the CPU, not where they are copied".into(),
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
                hash(enc, &block, BlockView::whole(n as u64, 0)?)?;
                let targets = block_targets(payload, k, segments);
                x.expand(engine, enc, plan, targets, buffers)
            }
            Placing::Keep(kept) => {
                let p = kept.places.get(k).ok_or_else(|| {
                    Error::Gpu(format!(
                        "prepared block {k} has no place in the compressed resident"
                    ))
                })?;
                let to = buffers.get(p.segment).ok_or_else(|| {
                    Error::Gpu("a compressed resident's segment was not made".into())
                })?;
                let index = p.index_bytes as usize;
                put(enc, to, p.index_at, 0..index);
                put(enc, to, p.data_at, index..n);
                let view = BlockView {
                    words: words_u32(n as u64)?,
                    head_words: words_u32(p.index_bytes)?,
                    head_at: words_u32(p.index_at)?,
                    tail_at: words_u32(p.data_at)?,
                };
                hash(enc, to, view)?;
                let mut batch = Batch::default();
                let tiles = payload.blocks[k].tiles as u32;
                let run = (p.first_tile, tiles);
                crate::kernels::packed::add_rebase(engine, &mut batch, (plan, to), run, p.rebase)?;
                batch.flush(enc);
                Ok(())
            }
        }
    }
}

/// Words of `bytes` (whole words, within a binding) as a kernel counts them.
fn words_u32(bytes: u64) -> Result<u32> {
    u32::try_from(bytes / 4).map_err(|_| Error::Gpu("a prepared block passes 2^32 words".into()))
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

/// A packed payload kept packed (decision 0055): its blocks, in order, joined into
/// segments of a compressed resident. A segment's buffer is the index of all its tiles,
/// then the data of its blocks one after another; each block's index is copied to its tiles
/// and its data starts moved on by the kernel `packed_rebase`.
#[derive(Debug)]
pub(super) struct Kept {
    /// Per block of the payload, where it goes.
    places: Vec<Place>,
    /// Per segment, its first and last tile in the payload.
    pub segments: Vec<Segment>,
    /// Per segment, the bytes of its buffer.
    pub bytes: Vec<u64>,
}

/// Where one block goes in its segment: its index (of `index_bytes`) at byte `index_at`,
/// from the segment's tile `first_tile`; its data at byte `data_at`, every data start
/// moved on by `rebase` words.
#[derive(Debug)]
struct Place {
    segment: usize,
    index_at: u64,
    index_bytes: u64,
    data_at: u64,
    first_tile: u32,
    rebase: u32,
}

impl Kept {
    /// The segments of the blocks of a packed payload (each of whole words, their tiles in
    /// order from the first) under `plan` (the raw resident's, for its tiles and binding
    /// limit); `None` where a block alone passes the limit.
    pub fn of(blocks: &[BlockEntry], plan: &ResidentPlan) -> Option<Kept> {
        let tile_bytes = plan.tile_words as u64 * 4;
        let det_len = plan.shape.det_len();
        let raw_limit = SEGMENT_RAW_BYTES.min(plan.max_binding);
        let mut runs: Vec<Range<usize>> = Vec::new();
        let (mut raw, mut bytes, mut next_tile) = (0u64, 0u64, 0u64);
        for (k, b) in blocks.iter().enumerate() {
            let b_raw = b.tiles * tile_bytes;
            let whole_words = b.bytes % 4 == 0;
            let index = packed_sectors::index_bytes(b.tiles, det_len);
            if b.first_tile != next_tile || !whole_words || index > b.bytes {
                return None;
            }
            if b_raw > plan.max_binding || b.bytes > plan.max_binding {
                return None;
            }
            next_tile += b.tiles;
            let joins = runs.last().is_some_and(|r| {
                r.len() < BLOCKS_A_SEGMENT
                    && raw + b_raw <= raw_limit
                    && bytes + b.bytes <= plan.max_binding
            });
            if joins {
                runs.last_mut()?.end = k + 1;
                (raw, bytes) = (raw + b_raw, bytes + b.bytes);
            } else {
                runs.push(k..k + 1);
                (raw, bytes) = (b_raw, b.bytes);
            }
        }
        let mut kept = Kept {
            places: Vec::with_capacity(blocks.len()),
            segments: Vec::with_capacity(runs.len()),
            bytes: Vec::with_capacity(runs.len()),
        };
        let per_tile = packed_sectors::index_bytes(1, det_len);
        for (segment, run) in runs.into_iter().enumerate() {
            let run = &blocks[run];
            let first = run.first()?.first_tile;
            let tiles: u64 = run.iter().map(|b| b.tiles).sum();
            let index_total = packed_sectors::index_bytes(tiles, det_len);
            let (mut index_at, mut data_at) = (0u64, index_total);
            for b in run {
                let index_bytes = packed_sectors::index_bytes(b.tiles, det_len);
                kept.places.push(Place {
                    segment,
                    index_at,
                    index_bytes,
                    data_at,
                    first_tile: u32::try_from(index_at / per_tile.max(1)).ok()?,
                    // Words from where the block said its data starts to where it is now.
                    rebase: u32::try_from((data_at - index_bytes) / 4).ok()?,
                });
                index_at += index_bytes;
                data_at += b.bytes - index_bytes;
            }
            kept.segments.push((first, first + tiles));
            kept.bytes.push(data_at);
        }
        Some(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Dtype, Shape4};
    use crate::upload::plan::DeviceLimits;

    fn blocks(tiles: &[u64], det_len: usize, data_bytes: u64) -> Vec<BlockEntry> {
        let mut blocks = Vec::new();
        let (mut first, mut offset) = (0u64, 0u64);
        for &t in tiles {
            let bytes = packed_sectors::index_bytes(t, det_len) + data_bytes;
            blocks.push(BlockEntry {
                offset,
                bytes,
                first_tile: first,
                tiles: t,
                sha256: String::new(),
                pieces_sha256: String::new(),
            });
            (first, offset) = (first + t, offset + bytes);
        }
        blocks
    }

    /// The raw plan of a u16 scan of `frames` positions, a 7 × 5 detector (tiles of 16
    /// positions, 1120 bytes), whose bindings take `max_binding` bytes.
    fn plan(frames: usize, max_binding: u64) -> ResidentPlan {
        let shape = Shape4 {
            scan: [1, frames],
            det: [7, 5],
        };
        let limits = DeviceLimits {
            max_storage_binding: 1 << 30,
            max_buffer_size: 1 << 30,
        };
        let mut plan = ResidentPlan::new(shape, Dtype::U16, false, limits).unwrap();
        plan.max_binding = max_binding;
        plan
    }

    #[test]
    fn blocks_join_into_segments_with_their_indexes_first_and_data_rebased() {
        // 7 × 5 detector: 5 groups a tile, 40 index bytes a tile.
        let b = blocks(&[3, 2, 4], 35, 12);
        let kept = Kept::of(&b, &plan(9 * 16, 1 << 30)).unwrap();
        assert_eq!(kept.segments, vec![(0, 9)]);
        let index = 9 * 40;
        assert_eq!(kept.bytes, vec![index + 3 * 12]);
        let at: Vec<_> = kept
            .places
            .iter()
            .map(|p| (p.index_at, p.data_at, p.first_tile, p.rebase))
            .collect();
        // Block 1's data started after its own 80 index bytes (word 20); now it starts
        // after the segment's index and block 0's data: byte 372, word 93.
        assert_eq!(
            at,
            vec![
                (0, index, 0, (index - 120) as u32 / 4),
                (120, index + 12, 3, (index + 12 - 80) as u32 / 4),
                (200, index + 24, 5, (index + 24 - 160) as u32 / 4),
            ]
        );
    }

    #[test]
    fn a_segment_ends_at_sixteen_blocks_or_at_the_binding_limit() {
        let b = blocks(&[1; 20], 35, 8);
        let kept = Kept::of(&b, &plan(20 * 16, 1 << 30)).unwrap();
        assert_eq!(kept.segments, vec![(0, 16), (16, 20)]);
        assert_eq!(kept.bytes, vec![16 * 48, 4 * 48]);
        // A binding of 2300 bytes holds the raw tiles of two blocks (1120 bytes each).
        let kept = Kept::of(&b, &plan(20 * 16, 2300)).unwrap();
        assert_eq!(kept.segments.len(), 10);
        assert!(kept.bytes.iter().all(|&b| b == 96));
        // A block whose raw tiles alone pass the limit is not kept.
        assert!(Kept::of(&b, &plan(20 * 16, 1000)).is_none());
        // Nor are blocks out of order.
        let mut swapped = b.clone();
        swapped.swap(0, 1);
        assert!(Kept::of(&swapped, &plan(20 * 16, 1 << 30)).is_none());
    }
}
