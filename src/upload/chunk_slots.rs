//! The chunks an upload decodes, in frame order ([`ChunkSlot`]): from the parts' chunk
//! indexes, or for a part whose index an open deferred ([`crate::formats::IndexFeed`]) batch
//! by batch as its B-tree leaves are read, a few batches ahead of the windows that need them
//! ([`SlotStream`]).

use std::cell::OnceCell;
use std::collections::VecDeque;

use crate::error::Result;
use crate::formats::{Acquisition, IndexFeed, Part, PartKind};
use crate::hdf5_index::{ChunkRef, DatasetIndex};
use crate::source::Started;
use crate::upload::plan::{DECODE_SCRATCH, DECODE_WINDOW};

use crate::upload::gpu_decode::{chunk_frames, logical_bytes};
use crate::upload::window_bytes::WindowBytes;
use crate::upload::window_reads::{read_span, walk_span, Prefetch};

/// One chunk in frame order: its part, reference, and global frames it holds.
pub(crate) struct ChunkSlot<'a> {
    pub(crate) part: &'a Part,
    pub(crate) ix: &'a DatasetIndex,
    pub(crate) chunk: &'a ChunkRef,
    /// Global frame of the chunk's first frame (may be past the data set's end for padding).
    pub(crate) first: usize,
    pub(crate) frames: usize,
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
pub(crate) fn slots(acq: &Acquisition) -> Vec<ChunkSlot<'_>> {
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
pub(crate) enum BatchOf {
    /// A part whose chunk index is complete: all of its chunks.
    Part(usize),
    /// A batch of the feed (leaves of a part whose index was deferred).
    Feed(usize),
}

/// The batches of `acq`'s chunks, in frame order; `None` where a part whose index an open
/// deferred has none in `feed` (its chunks would be missing).
pub(crate) fn batches(acq: &Acquisition, feed: Option<&IndexFeed>) -> Option<Vec<BatchOf>> {
    let mut out = Vec::new();
    for (p, part) in acq.parts.iter().enumerate() {
        match &part.kind {
            PartKind::Hdf5(ix) if ix.pending.is_some() => {
                let feed = feed?;
                let before = out.len();
                out.extend(
                    (0..feed.len())
                        .filter(|&b| feed.part(b) == Some(p))
                        .map(BatchOf::Feed),
                );
                if out.len() == before {
                    return None;
                }
            }
            PartKind::Hdf5(_) => out.push(BatchOf::Part(p)),
            _ => {}
        }
    }
    Some(out)
}

/// What [`SlotStream::next`] found.
pub(crate) enum Next<'s, 'a> {
    /// A batch's slots, with the window of their file span where it was read as one (its
    /// chunks' headers being walked).
    Slots(&'s [ChunkSlot<'a>], Option<Prefetch<'a>>),
    Done,
    /// A chunk the GPU decoder does not take as planned (a filter skipped, a chunk larger
    /// than a window), or leaves out of key order: the whole index is read and the CPU path
    /// (or a new plan) takes the acquisition, exactly as an open that read it (C-INCOMPLETE).
    NotAsPlanned,
}

/// Feed batches read ahead of the one being used: a window of ~61 MB needs ~45 leaves of
/// one-frame chunks, two windows are read ahead, so eight batches of 32 leaves keep the
/// leaves' reads ahead of the chunks' (~250 small File API reads in flight).
const FEED_AHEAD: usize = 8;
/// Batches read as their file spans (a decode window each) ahead of the one being used.
const SPANS_AHEAD: usize = 3;

/// A feed batch being read: its leaves alone, or its file span (leaves and chunks).
enum Reading<'a> {
    Leaves(Started<'a, Result<&'a [ChunkRef]>>),
    Span(Started<'a, Result<WindowBytes>>),
}

/// An upload's chunk slots, batch by batch in frame order. The slots live in `cells` (one a
/// batch, made by the caller), so that the slots handed out stay put while more come.
pub(crate) struct SlotStream<'s, 'a> {
    acq: &'a Acquisition,
    feed: Option<&'a IndexFeed>,
    order: &'s [BatchOf],
    cells: &'s [OnceCell<Vec<ChunkSlot<'a>>>],
    next: usize,
    reading: VecDeque<(usize, Reading<'a>)>,
    /// The frame the last batch handed out ended at (batches must follow each other).
    end: usize,
    /// The largest chunk, and window, the GPU decoder takes as planned.
    largest: u64,
    /// The decoded bytes a window holds at most.
    scratch: u64,
    /// The first stored frame the upload wants: feed batches read already that end before
    /// it are passed over (a streamed pass's later blocks; decision 0047).
    from: usize,
}

impl<'s, 'a> SlotStream<'s, 'a> {
    pub(crate) fn new(
        acq: &'a Acquisition,
        feed: Option<&'a IndexFeed>,
        order: &'s [BatchOf],
        cells: &'s [OnceCell<Vec<ChunkSlot<'a>>>],
        (limit, from): (u64, usize),
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
            scratch: DECODE_SCRATCH.min(limit),
            from,
        };
        stream.read_ahead();
        stream
    }

    /// Whether some of the slots come from a feed (the leaves of a deferred index).
    pub(crate) fn fed(&self) -> bool {
        self.order.iter().any(|b| matches!(b, BatchOf::Feed(_)))
    }

    /// The span to read feed batch `b` as, if it is one window's.
    fn span_of(
        &self,
        b: usize,
    ) -> Option<(
        std::ops::Range<u64>,
        &'a std::sync::Arc<dyn crate::source::ByteSource>,
    )> {
        let feed = self.feed?;
        let span = feed.span(b)?;
        (span.end - span.start <= self.largest).then_some((span, feed.source(b)?))
    }

    /// Start reading the feed batches among the next [`FEED_AHEAD`] ([`SPANS_AHEAD`] for
    /// those read as spans), in order. A batch read already (by an earlier upload of the
    /// same feed) is not read again: its chunks are read as windows of their own.
    fn read_ahead(&mut self) {
        let Some(feed) = self.feed else {
            return;
        };
        let from = self.reading.back().map_or(self.next, |(k, _)| k + 1);
        for k in from..(self.next + FEED_AHEAD).min(self.order.len()) {
            let BatchOf::Feed(b) = self.order[k] else {
                continue;
            };
            if feed.is_read(b) {
                continue;
            }
            let read = match self.span_of(b) {
                Some(_) if k >= self.next + SPANS_AHEAD => break,
                Some((span, src)) => {
                    let cuts = feed.leaf_addresses(b);
                    Reading::Span(Started::new(Box::pin(read_span(src, span, cuts))))
                }
                None => Reading::Leaves(Started::new(Box::pin(feed.read(b)))),
            };
            self.reading.push_back((k, read));
        }
    }

    pub(crate) async fn next(&mut self) -> Result<Next<'s, 'a>> {
        let Some(&batch) = self.order.get(self.next) else {
            return Ok(Next::Done);
        };
        let k = self.next;
        self.next += 1;
        let (slots, window) = match batch {
            BatchOf::Part(p) => match &self.acq.parts[p].kind {
                PartKind::Hdf5(ix) => (part_slots(self.acq, &self.acq.parts[p], &ix.chunks), None),
                _ => (Vec::new(), None),
            },
            BatchOf::Feed(b) => {
                let Some(feed) = self.feed else {
                    return Ok(Next::NotAsPlanned);
                };
                let reading = match self.reading.front() {
                    Some((at, _)) if *at == k => self.reading.pop_front().map(|r| r.1),
                    _ => None,
                };
                let (chunks, window) = match reading {
                    Some(Reading::Span(read)) => {
                        let bytes = read.finish().await?;
                        let lo = bytes.file_offset().unwrap_or(0);
                        let node = |addr: u64, len: usize| {
                            bytes.copy_out(addr.checked_sub(lo)? as usize, len)
                        };
                        match feed.read_from(b, &node)? {
                            Some(chunks) => (chunks, Some(bytes)),
                            None => (feed.read(b).await?, None),
                        }
                    }
                    Some(Reading::Leaves(read)) => (read.finish().await?, None),
                    // Batches are read ahead in order; one not started is read now.
                    None => (feed.read(b).await?, None),
                };
                let as_planned = chunks
                    .iter()
                    .all(|c| c.filter_mask == 0 && c.size <= self.largest);
                let part = feed.part(b).and_then(|p| self.acq.parts.get(p));
                let Some(part) = part.filter(|_| as_planned) else {
                    return Ok(Next::NotAsPlanned);
                };
                // A batch wholly before the frames wanted gives none (its last chunk says).
                let last = chunks.len().saturating_sub(1);
                let before = part_slots(self.acq, part, &chunks[last..])
                    .first()
                    .is_some_and(|s| s.first + s.frames <= self.from);
                let slots = match before {
                    true => Vec::new(),
                    false => part_slots(self.acq, part, chunks),
                };
                let window = window.filter(|w| self.whole_window(&slots, w));
                let walked = match (window, feed.source(b)) {
                    (Some(w), Some(src)) => Some(walk_span(self.acq, src, &slots, w)),
                    _ => None,
                };
                (slots, walked)
            }
        };
        self.read_ahead();
        if slots.first().is_some_and(|s| s.first < self.end) {
            return Ok(Next::NotAsPlanned);
        }
        if let Some(last) = slots.last() {
            self.end = last.first + last.frames;
        }
        Ok(Next::Slots(self.cells[k].get_or_init(|| slots), window))
    }

    /// Whether `window`, a span read, holds every chunk of `slots` within one window's
    /// decoded budget (else they are read as windows of their own, as in any other file).
    fn whole_window(&self, slots: &[ChunkSlot], window: &WindowBytes) -> bool {
        let (Some(lo), Some(first)) = (window.file_offset(), slots.first()) else {
            return false;
        };
        let hi = lo + window.len() as u64;
        let inside = slots
            .iter()
            .all(|s| s.chunk.offset >= lo && s.chunk.offset + s.chunk.size <= hi);
        let decoded = slots.len() as u64 * logical_bytes(self.acq, first.ix) as u64;
        inside && decoded <= self.scratch
    }
}
