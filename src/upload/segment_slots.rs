//! A resident segment's chunk slots, as the upload's slot stream hands them out: the slots
//! of its frames, those reaching into the next segment passed on, and the windows read ahead
//! once enough stored bytes are known.

use crate::error::Result;
use crate::formats::Acquisition;
use crate::gpu::{Engine, UploadTimes};
use crate::upload::chunk_slots::{ChunkSlot, Next, SlotStream};
use crate::upload::src_slots::SrcSlots;
use crate::upload::window_reads::{read_ahead, slots_wanted, Prefetch, ReadWindows};

/// The slots of one resident segment's frames `[s0, s1)`, as the stream hands them out.
pub(crate) struct SegmentSlots<'s, 'a> {
    acq: &'a Acquisition,
    /// The binding limit the windows are planned under.
    limit: u64,
    s0: usize,
    s1: usize,
    /// Windows taken as read already (leaf spans).
    pub(crate) span_windows: u32,
    /// The slots of the segment's frames, in stream order.
    pub(crate) mine: Vec<&'s ChunkSlot<'a>>,
    /// Windows of `mine` read already (batches of leaves read as their file spans).
    read: ReadWindows<'s>,
    /// The stream has handed out every slot of the segment.
    complete: bool,
    /// The next of `mine` to read.
    next_read: usize,
    /// Windows being read, in order: their slots in `mine` and their reads.
    pub(crate) ahead: std::collections::VecDeque<(std::ops::Range<usize>, Prefetch<'s>)>,
}

impl<'s, 'a: 's> SegmentSlots<'s, 'a> {
    /// Start with the slots of earlier segments that reach into this one (`carried`, which
    /// keeps those that reach past it).
    pub(crate) fn new(
        acq: &'a Acquisition,
        limit: u64,
        frames: std::ops::Range<usize>,
        carried: &mut Vec<&'s ChunkSlot<'a>>,
    ) -> Self {
        let mut seg = SegmentSlots {
            acq,
            limit,
            s0: frames.start,
            s1: frames.end,
            span_windows: 0,
            mine: Vec::new(),
            read: ReadWindows::new(),
            complete: false,
            next_read: 0,
            ahead: std::collections::VecDeque::new(),
        };
        for s in std::mem::take(carried) {
            seg.take(s, carried);
        }
        seg
    }

    /// Keep `s` if it holds frames of the segment; pass it on in `later` if it holds frames
    /// of a later one (slots come in frame order, so the segment then has all of its own).
    fn take(&mut self, s: &'s ChunkSlot<'a>, later: &mut Vec<&'s ChunkSlot<'a>>) {
        let end = s.first + s.frames;
        if s.first < self.s1 && end > self.s0 {
            self.mine.push(s);
        }
        if end > self.s1 {
            later.push(s);
            self.complete = true;
        }
    }

    /// Take slots from `stream` until those not yet read hold enough stored bytes for the
    /// windows read ahead ([`slots_wanted`]) or the segment has them all, then start reading
    /// those windows into [`SegmentSlots::ahead`] (natively each into a staging slot of
    /// `slots`); false when the stream found a chunk not as planned.
    pub(crate) async fn advance(
        &mut self,
        stream: &mut SlotStream<'s, 'a>,
        later: &mut Vec<&'s ChunkSlot<'a>>,
        (engine, slots): (&Engine, &mut SrcSlots),
        times: &mut UploadTimes,
    ) -> Result<bool> {
        if !self.fill(stream, self.next_read, later, times).await? {
            return Ok(false);
        }
        let (acq, limit) = (self.acq, self.limit);
        let mut t = crate::clock::now_ms();
        let lend = &mut |bytes| slots.lend(engine, bytes);
        let (read, i, ahead) = (&mut self.read, &mut self.next_read, &mut self.ahead);
        self.span_windows += read_ahead(limit, acq, &self.mine, read, i, ahead, lend);
        // Reads that finish as they start (native files) are done here.
        times.lap("start reads", &mut t);
        Ok(true)
    }

    /// The slot-taking half of [`SegmentSlots::advance`].
    async fn fill(
        &mut self,
        stream: &mut SlotStream<'s, 'a>,
        i: usize,
        later: &mut Vec<&'s ChunkSlot<'a>>,
        times: &mut UploadTimes,
    ) -> Result<bool> {
        let wanted = slots_wanted(self.limit);
        let mut t = crate::clock::now_ms();
        let mut unread: u64 = self.mine[i.min(self.mine.len())..]
            .iter()
            .map(|s| s.chunk.size)
            .sum();
        while !self.complete && unread < wanted {
            let next = stream.next().await?;
            if stream.fed() {
                // Waiting for a leaf span is waiting for a window's read.
                let what = match &next {
                    Next::Slots(_, Some(_)) => "read (not overlapped)",
                    _ => "chunk index (not overlapped)",
                };
                times.lap(what, &mut t);
            }
            match next {
                Next::Slots(batch, window) => {
                    let start = self.mine.len();
                    for s in batch {
                        let before = self.mine.len();
                        self.take(s, later);
                        if self.mine.len() > before {
                            unread += s.chunk.size;
                        }
                    }
                    let taken = self.mine.len() - start;
                    if let Some(w) = window.filter(|_| taken > 0) {
                        self.read.push_back((start, taken, w));
                    }
                }
                Next::Done => self.complete = true,
                Next::NotAsPlanned => return Ok(false),
            }
        }
        Ok(true)
    }
}
