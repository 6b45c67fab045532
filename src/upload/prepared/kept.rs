//! A packed prepared payload kept packed (decision 0055): which blocks join into which
//! segment of a compressed resident and where each block's index and data go there, and the
//! memory plan of that resident, its sizes exact.

use std::ops::Range;

use super::{tiled_part, Segment, SlotSets};
use crate::error::Result;
use crate::formats::prepared::{packed_sectors, BlockEntry};
use crate::formats::Acquisition;
use crate::frames::Correction;
use crate::kernels::sha256::BlockView;
use crate::upload::plan::ResidentPlan;

/// Blocks a kept segment takes at most: 16 blocks of the 64 MiB of raw tiles `prepare`
/// writes are about the 1 GB a compressed build's segment holds, so product kernels
/// dispatch about as often on either (each segment is a dispatch).
const BLOCKS_A_SEGMENT: usize = 16;

/// Raw bytes a kept segment stands for at most (within the adapter's binding limit too).
const SEGMENT_RAW_BYTES: u64 = 1 << 30;

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
pub(super) struct Place {
    pub segment: usize,
    pub index_at: u64,
    pub index_bytes: u64,
    pub data_at: u64,
    pub first_tile: u32,
    pub rebase: u32,
}

impl Place {
    /// Where the block, `bytes` long, lies in its segment: its index, then its data apart.
    pub fn view(&self, bytes: u64) -> Result<BlockView> {
        BlockView::split(bytes, (self.index_bytes, self.index_at), self.data_at)
    }
}

impl Kept {
    /// Where block `k` goes.
    pub fn place(&self, k: usize) -> Option<&Place> {
        self.places.get(k)
    }

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

/// A packed payload kept packed (decision 0055): where its blocks go, the compressed
/// resident's plan (its segments' raw tiles; payload and peak its packed bytes and scratch),
/// and its sizes.
pub(super) struct KeptPlan {
    pub kept: Kept,
    pub plan: ResidentPlan,
    pub packed_bytes: u64,
    pub scratch_bytes: u64,
    pub raw_bytes: u64,
}

impl KeptPlan {
    /// The kept plan of `acq` under `corr` on an adapter of `limits`: `None` unless `acq`
    /// is a whole prepared acquisition with a packed payload, taken at native sampling,
    /// whose blocks each fit a binding.
    pub fn of(
        acq: &Acquisition,
        corr: Correction,
        limits: crate::upload::plan::DeviceLimits,
    ) -> Option<KeptPlan> {
        use crate::upload::packed::kept_scratch_bytes;
        let (payload, _) = tiled_part(acq)?;
        if !payload.layout.is_packed() || corr.bin != 1 || acq.crop.is_some() {
            return None;
        }
        let whole = crate::gpu::plan_of(acq, 1, limits).ok()?;
        let (tile, frames) = (whole.tile as usize, whole.shape.frames());
        let tile_bytes = whole.tile_words as u64 * 4;
        let kept = Kept::of(&payload.blocks, &whole)?;
        let all_tiles = frames.div_ceil(tile) as u64;
        if payload.layout.bits != whole.bits
            || payload.layout.tile_bytes != tile_bytes
            || kept.segments.last().map(|s| s.1) != Some(all_tiles)
        {
            return None;
        }
        let segments: Vec<crate::upload::plan::Segment> = kept
            .segments
            .iter()
            .map(|&(t0, t1)| {
                let first_frame = t0 as usize * tile;
                crate::upload::plan::Segment {
                    first_frame,
                    frames: (t1 as usize * tile).min(frames) - first_frame,
                    bytes: (t1 - t0) * tile_bytes,
                }
            })
            .collect();
        let packed_bytes: u64 = kept.bytes.iter().sum();
        let scratch_bytes = segments
            .iter()
            .map(|s| kept_scratch_bytes(whole.tile_words, s.bytes))
            .max()
            .unwrap_or(16);
        let held = packed_bytes + scratch_bytes;
        // Beside it at the peak: the staging slots (counted as if in device memory, where
        // adapters that map it put them) and the product buffers.
        let sets = SlotSets::new(payload);
        let staging = sets.slots(payload.blocks.len()) as u64 * sets.slot_bytes;
        let plan = ResidentPlan {
            segments,
            payload_bytes: held,
            peak_bytes: held + staging + whole.product_bytes(),
            ..whole.clone()
        };
        Some(KeptPlan {
            kept,
            plan,
            packed_bytes,
            scratch_bytes,
            raw_bytes: whole.payload_bytes,
        })
    }
}

/// The memory plan of a prepared acquisition whose packed payload a compressed resident
/// keeps as it is (decision 0055), its sizes exact; `None` where it is not kept (see
/// `Engine::reopen_packed`).
pub(crate) fn kept_memory_plan(
    acq: &Acquisition,
    corr: Correction,
    limits: crate::upload::plan::DeviceLimits,
    budget: Option<u64>,
) -> Option<crate::upload::memory::MemoryPlan> {
    let k = KeptPlan::of(acq, corr, limits)?;
    let (payload, peak) = (k.plan.payload_bytes, k.plan.peak_bytes);
    let fits = budget.is_none_or(|b| peak <= b);
    let ratio = k.raw_bytes as f64 / k.packed_bytes.max(1) as f64;
    Some(crate::upload::memory::MemoryPlan {
        kind: crate::upload::memory::PlanKind::Compressed,
        bin: 1,
        payload_bytes: payload,
        peak_bytes: peak,
        rows_per_block: None,
        blocks: Some(k.plan.segments.len()),
        gpu_decode: false,
        ring_sums_bytes: None,
        fits,
        note: match fits {
            true => format!(
                "the prepared payload kept packed as it was saved: {} bytes for {} raw ({ratio:.2}x), nothing decoded; frames read back pass through a scratch of {} bytes",
                k.packed_bytes, k.raw_bytes, k.scratch_bytes
            ),
            false => format!(
                "the prepared payload kept packed: its peak of {peak} bytes passes the budget"
            ),
        },
    })
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
