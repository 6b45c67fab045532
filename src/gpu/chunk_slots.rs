//! The chunks an upload decodes, in frame order ([`ChunkSlot`]): from the parts' chunk
//! indexes, or for a part whose index an open deferred ([`crate::formats::IndexFeed`]) batch
//! by batch as its B-tree leaves are read, a few batches ahead of the windows that need them
//! ([`SlotStream`]).

use std::cell::OnceCell;
use std::collections::VecDeque;

use crate::error::Result;
use crate::formats::{Acquisition, IndexFeed, Part, PartKind};
use crate::hdf5_index::{ChunkRef, DatasetIndex};
use crate::resident::DECODE_WINDOW;
use crate::source::Started;

use super::decode::chunk_frames;

/// One chunk in frame order: its part, reference, and global frames it holds.
pub(super) struct ChunkSlot<'a> {
    pub(super) part: &'a Part,
    pub(super) ix: &'a DatasetIndex,
    pub(super) chunk: &'a ChunkRef,
    /// Global frame of the chunk's first frame (may be past the data set's end for padding).
    pub(super) first: usize,
    pub(super) frames: usize,
}

/// The slots of `chunks` of `part` (sorted by coordinates), in frame order.
fn part_slots<'a>(acq: &Acquisition, part: &'a Part, chunks: &'a [ChunkRef]) -> Vec<ChunkSlot<'a>> {
    let PartKind::Hdf5(ix) = &part.kind else {
        return Vec::new();
    };
    let Some(cn) = chunk_frames(ix, acq.shape.det) else {
        return Vec::new();
    };
    let mut out: Vec<ChunkSlot> = chunks
        .iter()
        .filter_map(|chunk| {
            let local = match ix.shape.len() {
                3 => chunk.coords.first().copied().unwrap_or(0),
                _ => {
                    let c = &chunk.coords;
                    c.first().copied().unwrap_or(0) * ix.shape.get(1).copied().unwrap_or(1)
                        + c.get(1).copied().unwrap_or(0)
                }
            } as usize;
            let frames = (cn as usize).min(part.frames.saturating_sub(local));
            (frames > 0).then_some(ChunkSlot {
                part,
                ix,
                chunk,
                first: part.first_frame + local,
                frames,
            })
        })
        .collect();
    out.sort_by_key(|s| s.first);
    out
}

/// Every chunk of `acq`'s parts, in frame order.
pub(super) fn slots(acq: &Acquisition) -> Vec<ChunkSlot<'_>> {
    let mut out: Vec<ChunkSlot> = acq
        .parts
        .iter()
        .flat_map(|part| match &part.kind {
            PartKind::Hdf5(ix) => part_slots(acq, part, &ix.chunks),
            _ => Vec::new(),
        })
        .collect();
    out.sort_by_key(|s| s.first);
    out
}

/// Where the slots of one batch of a [`SlotStream`] come from.
#[derive(Clone, Copy)]
pub(super) enum BatchOf {
    /// A part whose chunk index is complete: all of its chunks.
    Part(usize),
    /// A batch of the feed (leaves of a part whose index was deferred).
    Feed(usize),
}

/// The batches of `acq`'s chunks, in frame order.
pub(super) fn batches(acq: &Acquisition, feed: Option<&IndexFeed>) -> Vec<BatchOf> {
    let mut out = Vec::new();
    for (p, part) in acq.parts.iter().enumerate() {
        match &part.kind {
            PartKind::Hdf5(ix) if ix.pending.is_some() => {
                let feed_batches = feed.map_or(0, |f| f.len());
                out.extend(
                    (0..feed_batches)
                        .filter(|&b| feed.and_then(|f| f.part(b)) == Some(p))
                        .map(BatchOf::Feed),
                );
            }
            PartKind::Hdf5(_) => out.push(BatchOf::Part(p)),
            _ => {}
        }
    }
    out
}

/// What [`SlotStream::next`] found.
pub(super) enum Next<'s, 'a> {
    Slots(&'s [ChunkSlot<'a>]),
    Done,
    /// A chunk the GPU decoder does not take as planned (a filter skipped, a chunk larger
    /// than a window), or leaves out of key order: the whole index is read and the CPU path
    /// (or a new plan) takes the acquisition.
    NotAsPlanned,
}

/// Feed batches read ahead of the one being used: a window of ~61 MB needs ~45 leaves of
/// one-frame chunks, two windows are read ahead, so eight batches of 32 leaves keep the
/// leaves' reads ahead of the chunks' (~250 small File API reads in flight).
const FEED_AHEAD: usize = 8;

/// An upload's chunk slots, batch by batch in frame order. The slots live in `cells` (one a
/// batch, made by the caller), so that the slots handed out stay put while more come.
pub(super) struct SlotStream<'s, 'a> {
    acq: &'a Acquisition,
    feed: Option<&'a IndexFeed>,
    order: &'s [BatchOf],
    cells: &'s [OnceCell<Vec<ChunkSlot<'a>>>],
    next: usize,
    reading: VecDeque<(usize, Started<'a, Result<&'a [ChunkRef]>>)>,
    /// The frame the last batch handed out ended at (batches must follow each other).
    end: usize,
    /// The largest chunk the GPU decoder takes as planned.
    largest: u64,
}

impl<'s, 'a> SlotStream<'s, 'a> {
    pub(super) fn new(
        acq: &'a Acquisition,
        feed: Option<&'a IndexFeed>,
        order: &'s [BatchOf],
        cells: &'s [OnceCell<Vec<ChunkSlot<'a>>>],
        limit: u64,
    ) -> SlotStream<'s, 'a> {
        let mut stream = SlotStream {
            acq,
            feed,
            order,
            cells,
            next: 0,
            reading: VecDeque::new(),
            end: 0,
            largest: DECODE_WINDOW.min(limit),
        };
        stream.read_ahead();
        stream
    }

    /// Whether some of the slots come from a feed (the leaves of a deferred index).
    pub(super) fn fed(&self) -> bool {
        self.order.iter().any(|b| matches!(b, BatchOf::Feed(_)))
    }

    /// Start reading the feed batches among the next [`FEED_AHEAD`].
    fn read_ahead(&mut self) {
        let Some(feed) = self.feed else {
            return;
        };
        let from = self.reading.back().map_or(self.next, |(k, _)| k + 1);
        for k in from..(self.next + FEED_AHEAD).min(self.order.len()) {
            if let BatchOf::Feed(b) = self.order[k] {
                self.reading
                    .push_back((k, Started::new(Box::pin(feed.read(b)))));
            }
        }
    }

    pub(super) async fn next(&mut self) -> Result<Next<'s, 'a>> {
        let Some(&batch) = self.order.get(self.next) else {
            return Ok(Next::Done);
        };
        let k = self.next;
        self.next += 1;
        let slots = match batch {
            BatchOf::Part(p) => match &self.acq.parts[p].kind {
                PartKind::Hdf5(ix) => part_slots(self.acq, &self.acq.parts[p], &ix.chunks),
                _ => Vec::new(),
            },
            BatchOf::Feed(b) => {
                let chunks = match self.reading.pop_front() {
                    Some((at, read)) if at == k => read.finish().await?,
                    // Batches are read ahead in order; a feed batch not started is read now.
                    _ => match self.feed {
                        Some(f) => f.read(b).await?,
                        None => return Ok(Next::NotAsPlanned),
                    },
                };
                let as_planned = chunks
                    .iter()
                    .all(|c| c.filter_mask == 0 && c.size <= self.largest);
                let part = self.feed.and_then(|f| f.part(b));
                match (as_planned, part.and_then(|p| self.acq.parts.get(p))) {
                    (true, Some(part)) => part_slots(self.acq, part, chunks),
                    _ => return Ok(Next::NotAsPlanned),
                }
            }
        };
        self.read_ahead();
        if slots.first().is_some_and(|s| s.first < self.end) {
            return Ok(Next::NotAsPlanned);
        }
        if let Some(last) = slots.last() {
            self.end = last.first + last.frames;
        }
        Ok(Next::Slots(self.cells[k].get_or_init(|| slots)))
    }
}
