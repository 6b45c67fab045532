//! The chunks of B-tree leaves an open left unread, read batch by batch in frame order. In
//! the browser a 5.6 GB acquisition's index is ~4,100 leaves of 3 KB, and Chromium serves
//! small File API reads ~4,000 a second: read before the load they took a second of it. Read
//! by the GPU upload a few batches ahead of the chunks it reads, they run alongside.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use super::{Acquisition, PartKind};
use crate::error::Result;
use crate::hdf5_index::{ChunkRef, PendingLeaves};

/// Leaves a batch reads at once (one frame a chunk: ~64 chunks a leaf, so ~2,000 chunks, a
/// few tens of MB, a batch).
pub const LEAVES_PER_BATCH: usize = 32;

/// The unread leaves of an acquisition's parts, in batches in frame order.
pub struct IndexFeed {
    batches: Vec<Batch>,
}

struct Batch {
    part: usize,
    leaves: Range<usize>,
    pending: Arc<PendingLeaves>,
    chunks: OnceLock<Vec<ChunkRef>>,
}

impl IndexFeed {
    /// The unread leaves of `acq`, [`LEAVES_PER_BATCH`] a batch.
    pub fn new(acq: &Acquisition) -> IndexFeed {
        IndexFeed::with_batch(acq, LEAVES_PER_BATCH)
    }

    /// The unread leaves of `acq`, `per_batch` (at least one) a batch.
    pub fn with_batch(acq: &Acquisition, per_batch: usize) -> IndexFeed {
        let per_batch = per_batch.max(1);
        let mut batches = Vec::new();
        for (part, p) in acq.parts.iter().enumerate() {
            let PartKind::Hdf5(ix) = &p.kind else {
                continue;
            };
            let Some(pending) = &ix.pending else {
                continue;
            };
            let n = pending.leaves.len();
            batches.extend((0..n).step_by(per_batch).map(|s| Batch {
                part,
                leaves: s..(s + per_batch).min(n),
                pending: pending.clone(),
                chunks: OnceLock::new(),
            }));
        }
        IndexFeed { batches }
    }

    /// Batches, in frame order: parts in order, each part's leaves in key order.
    pub fn len(&self) -> usize {
        self.batches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// The part batch `b` belongs to.
    pub fn part(&self, b: usize) -> Option<usize> {
        self.batches.get(b).map(|x| x.part)
    }

    /// The chunks of batch `b` (checked and sorted as an open's), read the first time.
    pub async fn read(&self, b: usize) -> Result<&[ChunkRef]> {
        let batch = self.batches.get(b).ok_or_else(|| {
            crate::error::Error::param(format!(
                "index batch {b} of {} asked for",
                self.batches.len()
            ))
        })?;
        if let Some(c) = batch.chunks.get() {
            return Ok(c);
        }
        let chunks = batch.pending.read(batch.leaves.clone()).await?;
        Ok(batch.chunks.get_or_init(|| chunks))
    }

    /// Every part's chunks: those of the batches read, and those of the leaves not read yet,
    /// each run of unread leaves read at once (so an error is the one the open that read
    /// them would have found first).
    pub(super) async fn into_chunks(self) -> Result<Vec<(usize, Vec<ChunkRef>)>> {
        let mut out: Vec<(usize, Vec<ChunkRef>)> = Vec::new();
        // A run of unread leaves of one part: its part, leaves and the batches' range.
        let mut run: Option<(usize, Arc<PendingLeaves>, Range<usize>)> = None;
        for batch in self.batches {
            if out.last().is_none_or(|(p, _)| *p != batch.part) {
                out.push((batch.part, Vec::new()));
            }
            match batch.chunks.into_inner() {
                Some(chunks) => {
                    read_run(&mut out, run.take()).await?;
                    if let Some((_, all)) = out.last_mut() {
                        all.extend(chunks);
                    }
                }
                None => {
                    run = match run.take() {
                        Some((p, pending, r)) if p == batch.part && r.end == batch.leaves.start => {
                            Some((p, pending, r.start..batch.leaves.end))
                        }
                        other => {
                            read_run(&mut out, other).await?;
                            Some((batch.part, batch.pending, batch.leaves))
                        }
                    };
                }
            }
        }
        read_run(&mut out, run).await?;
        Ok(out)
    }
}

/// Read the chunks of a run of unread leaves (if any) into its part's list.
async fn read_run(
    out: &mut [(usize, Vec<ChunkRef>)],
    run: Option<(usize, Arc<PendingLeaves>, Range<usize>)>,
) -> Result<()> {
    let Some((p, pending, leaves)) = run else {
        return Ok(());
    };
    let chunks = pending.read(leaves).await?;
    if let Some((_, all)) = out.iter_mut().find(|(q, _)| *q == p) {
        all.extend(chunks);
    }
    Ok(())
}
