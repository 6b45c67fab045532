//! The chunks of B-tree leaves an open left unread, read batch by batch in frame order. In
//! the browser a 5.6 GB acquisition's index is ~4,100 leaves of 3 KB, and Chromium serves
//! small File API reads ~4,000 a second: read before the load they took a second of it. Read
//! by the GPU upload a few batches ahead of the chunks it reads, they run alongside, but
//! share Chromium's read capacity with them; read as the file spans that hold them and
//! their chunks ([`IndexFeed::with_spans`]), they cost no read of their own. The leaves then
//! pass the checks an open's would (C-INCOMPLETE).

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use super::{Acquisition, PartKind};
use crate::error::Result;
use crate::hdf5_index::{ChunkRef, DatasetIndex, PendingLeaves};

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
    /// The file bytes from the batch's first leaf to the next batch's: where a file written
    /// chunk by chunk keeps these leaves and the chunks they list.
    span: Option<Range<u64>>,
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
        for (part, _, pending) in pending_parts(acq) {
            let n = pending.leaves.len();
            batches.extend((0..n).step_by(per_batch).map(|s| Batch {
                part,
                leaves: s..(s + per_batch).min(n),
                pending: pending.clone(),
                chunks: OnceLock::new(),
                span: None,
            }));
        }
        IndexFeed { batches }
    }

    /// The unread leaves of `acq` in batches whose spans ([`IndexFeed::span`]) are at most
    /// `max_span` bytes, where the leaves lie in the file in key order (as a file written
    /// chunk by chunk keeps them, each among the chunks it lists: from a little before it
    /// to the next leaf); [`LEAVES_PER_BATCH`] a batch without spans elsewhere, and for a
    /// part's last leaves, which no later leaf bounds.
    pub fn with_spans(acq: &Acquisition, max_span: u64) -> IndexFeed {
        let mut batches = Vec::new();
        for (part, ix, pending) in pending_parts(acq) {
            let at = &pending.leaves;
            // A span is decoded as one window: as many leaves as a usual leaf's 64 chunks
            // fill the decoded budget with (larger leaves make windows of their own).
            let chunk = ix.chunk_bytes().unwrap_or(1).max(1);
            let most =
                (crate::upload::plan::DECODE_SCRATCH / chunk.saturating_mul(64)).max(1) as usize;
            let batch = |leaves: Range<usize>, span: Option<Range<u64>>| Batch {
                part,
                leaves,
                pending: pending.clone(),
                chunks: OnceLock::new(),
                span,
            };
            // Leaves not in a span, gathered into batches of their own.
            let mut plain: Option<Range<usize>> = None;
            let flush = |plain: &mut Option<Range<usize>>, batches: &mut Vec<Batch>| {
                if let Some(r) = plain.take() {
                    batches.push(batch(r, None));
                }
            };
            let n = at.len();
            // The first leaf is the tree's first root moved aside when it split: it lies after
            // the chunks it lists. Read on its own.
            batches.push(batch(0..n.min(1), None));
            let mut s = 1;
            while s < n {
                // The last leaf that still bounds a span of at most `max_span` bytes (its
                // margin included), the leaves before it in the file in key order.
                let e = (s + 1..n.min(s + most + 1))
                    .take_while(|&e| {
                        at[e] > at[e - 1]
                            && at[e] <= pending.file_len()
                            && (at[e] - at[s]) / 4 * 5 <= max_span
                    })
                    .last();
                match e {
                    Some(e) => {
                        flush(&mut plain, &mut batches);
                        // A leaf split off a full one (HDF5 splits the last leaf at 90%) took
                        // the last chunks of the full one, which lie before it.
                        let margin = (at[e] - at[s]) / (e - s) as u64 / 4;
                        batches.push(batch(s..e, Some(at[s].saturating_sub(margin)..at[e])));
                        s = e;
                    }
                    None => {
                        let r = plain.get_or_insert(s..s);
                        r.end = s + 1;
                        if r.len() == LEAVES_PER_BATCH {
                            flush(&mut plain, &mut batches);
                        }
                        s += 1;
                    }
                }
            }
            flush(&mut plain, &mut batches);
        }
        IndexFeed { batches }
    }

    /// The bytes of the file that hold batch `b`'s leaves (and, presumably, their chunks).
    pub fn span(&self, b: usize) -> Option<Range<u64>> {
        self.batches.get(b).and_then(|x| x.span.clone())
    }

    /// The file addresses of batch `b`'s leaves: no chunk lies across one, so a span is cut
    /// there into pieces that each hold whole chunks.
    pub fn leaf_addresses(&self, b: usize) -> &[u64] {
        self.batches
            .get(b)
            .and_then(|x| x.pending.leaves.get(x.leaves.clone()))
            .unwrap_or(&[])
    }

    /// The chunks of batch `b` from its leaves' bytes at hand (`node(addr, len)`); `None`
    /// where they do not hold every leaf whole (read the batch instead).
    pub fn read_from(
        &self,
        b: usize,
        node: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
    ) -> Result<Option<&[ChunkRef]>> {
        let Some(batch) = self.batches.get(b) else {
            return Ok(None);
        };
        if let Some(c) = batch.chunks.get() {
            return Ok(Some(c));
        }
        Ok(batch
            .pending
            .read_from(batch.leaves.clone(), node)?
            .map(|chunks| batch.chunks.get_or_init(|| chunks).as_slice()))
    }

    /// Whether batch `b`'s chunks were read (by an upload before, or [`IndexFeed::read`]).
    pub fn is_read(&self, b: usize) -> bool {
        self.batches
            .get(b)
            .is_some_and(|x| x.chunks.get().is_some())
    }

    /// The file of batch `b`'s leaves.
    pub fn source(&self, b: usize) -> Option<&Arc<dyn crate::source::ByteSource>> {
        self.batches.get(b).map(|x| x.pending.source())
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
        gather(
            self.batches
                .into_iter()
                .map(|b| (b.part, b.pending, b.leaves, b.chunks.into_inner())),
        )
        .await
    }

    /// [`IndexFeed::into_chunks`] of a feed still in use: the chunks read are copied (a
    /// streamed pass whose blocks took some of them goes on without the feed).
    pub(super) async fn chunks(&self) -> Result<Vec<(usize, Vec<ChunkRef>)>> {
        gather(self.batches.iter().map(|b| {
            let read = b.chunks.get().cloned();
            (b.part, b.pending.clone(), b.leaves.clone(), read)
        }))
        .await
    }
}

/// A batch's part, leaves and chunks where they were read ([`IndexFeed::into_chunks`]).
type BatchChunks = (
    usize,
    Arc<PendingLeaves>,
    Range<usize>,
    Option<Vec<ChunkRef>>,
);

/// Every part's chunks from `batches` in order: those read, and each run of unread leaves
/// read at once.
async fn gather(batches: impl Iterator<Item = BatchChunks>) -> Result<Vec<(usize, Vec<ChunkRef>)>> {
    let mut out: Vec<(usize, Vec<ChunkRef>)> = Vec::new();
    // A run of unread leaves of one part: its part, leaves and the batches' range.
    let mut run: Option<(usize, Arc<PendingLeaves>, Range<usize>)> = None;
    for (part, pending, leaves, read) in batches {
        if out.last().is_none_or(|(p, _)| *p != part) {
            out.push((part, Vec::new()));
        }
        match read {
            Some(chunks) => {
                read_run(&mut out, run.take()).await?;
                if let Some((_, all)) = out.last_mut() {
                    all.extend(chunks);
                }
            }
            None => {
                run = match run.take() {
                    Some((p, pending, r)) if p == part && r.end == leaves.start => {
                        Some((p, pending, r.start..leaves.end))
                    }
                    other => {
                        read_run(&mut out, other).await?;
                        Some((part, pending, leaves))
                    }
                };
            }
        }
    }
    read_run(&mut out, run).await?;
    Ok(out)
}

/// The parts of `acq` whose chunk index has unread leaves: their place, index and leaves.
fn pending_parts(
    acq: &Acquisition,
) -> impl Iterator<Item = (usize, &DatasetIndex, &Arc<PendingLeaves>)> {
    acq.parts
        .iter()
        .enumerate()
        .filter_map(|(part, p)| match &p.kind {
            PartKind::Hdf5(ix) => ix.pending.as_ref().map(|pending| (part, ix, pending)),
            _ => None,
        })
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
