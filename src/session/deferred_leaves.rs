//! When an open's deferred B-tree leaves are read (decision 0047): by the blocks of a
//! streamed pass or a compressed build as they upload, or before anything else reads the
//! acquisition. Measured rule, apart from the open that applies it.

use super::Stage;
use crate::clock::now_ms;
use crate::error::Result;
use crate::formats::{Acquisition, IndexFeed};
use crate::upload::memory::{MemoryPlan, PlanKind};

/// Deferred B-tree leaves a block of several must have for the blocks to read them in the
/// file spans of their chunks rather than before the first block. Read first, leaves cost
/// about 0.3 ms each in Chromium (16,400 in 5.6–6.3 s, 4,100 in 1.2–1.3 s); read by the
/// blocks, each block about 25 ms more (decision 0047: within 4 GiB the u8 file's 335 a
/// block gained 4–5 s, the 512² u16 file's 64 a block within 2 GiB lost 0.5 s).
pub(super) const FED_LEAVES_PER_BLOCK: usize = 100;

/// Whether the blocks of `plan` (a streamed pass or a compressed build) read the `leaves`
/// an open deferred as they go, in the file spans of their chunks where `spans`, rather
/// than the open reading them first (decision 0047).
pub(super) fn blocks_read_leaves(plan: &MemoryPlan, leaves: usize, spans: bool) -> bool {
    let blocks = match plan.kind {
        PlanKind::Streaming | PlanKind::Compressed => plan.blocks.unwrap_or(1),
        _ => return false,
    };
    let many = leaves >= FED_LEAVES_PER_BLOCK.saturating_mul(blocks);
    plan.gpu_decode && (blocks <= 1 || (spans && many))
}

/// The leaves an open deferred, read before anything else reads the acquisition (a plan
/// whose blocks do not read them as they go), timed as a stage of the load.
pub(super) async fn read_leaves(
    acq: &mut Acquisition,
    feed: &mut Option<IndexFeed>,
    stages: &mut Vec<Stage>,
) -> Result<()> {
    if let Some(feed) = feed.take() {
        let t = now_ms();
        acq.finish_index(feed).await?;
        stages.push(Stage {
            name: "chunk index leaves".into(),
            ms: now_ms() - t,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan of `kind` in `blocks` blocks, GPU-decoded where `gpu`.
    fn plan(kind: PlanKind, blocks: usize, gpu: bool) -> MemoryPlan {
        MemoryPlan {
            kind,
            blocks: Some(blocks),
            gpu_decode: gpu,
            ..crate::upload::memory::cpu_plan(1)
        }
    }

    #[test]
    fn blocks_read_the_leaves_where_one_block_or_many_leaves_a_block() {
        use PlanKind::*;
        // The u8 file within 4 GiB (16,400 leaves, 49 blocks) and the 8 GiB compressed
        // build of the u16 file (4,100 leaves, 19 blocks): fed in spans.
        assert!(blocks_read_leaves(&plan(Streaming, 49, true), 16_400, true));
        assert!(blocks_read_leaves(&plan(Compressed, 19, true), 4_100, true));
        // The u16 file within 2 GiB (64 blocks): read first; so are leaves read alone.
        assert!(!blocks_read_leaves(&plan(Streaming, 64, true), 4_100, true));
        assert!(!blocks_read_leaves(
            &plan(Streaming, 49, true),
            16_400,
            false
        ));
        // One block, spans or not; never without the GPU decoder, nor for other plans.
        assert!(blocks_read_leaves(&plan(Streaming, 1, true), 10, false));
        assert!(!blocks_read_leaves(&plan(Streaming, 1, false), 10, true));
        assert!(!blocks_read_leaves(&plan(Cpu, 1, true), 10, true));
        assert!(!blocks_read_leaves(&plan(Resident, 1, true), 10, true));
    }
}
