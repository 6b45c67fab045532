//! Which chunks make a GPU-decode window, and how its stored bytes are read: chunks of one
//! file within the window's budgets ([`pick_window`]), read ahead of the window being built
//! ([`read_ahead`]), in the browser as spans of the File API's buffers whose pieces the
//! reading Workers walk ([`read_window`]), natively on a thread of its own per window that
//! walks the chunk headers too and writes the bytes straight into a staging slot lent to it
//! ([`read_staged`]).

use crate::error::Result;
use crate::formats::Acquisition;
use crate::upload::plan::{DECODE_SCRATCH, DECODE_WINDOW};

use crate::decode::walk;
use crate::upload::chunk_slots::ChunkSlot;
use crate::upload::gpu_decode::logical_bytes;
use crate::upload::gpu_decode::walk_kind;
#[cfg(not(target_arch = "wasm32"))]
use crate::upload::window_bytes::ChunkWalk;
use crate::upload::window_bytes::WindowBytes;

/// The compressed bytes of `slots`, back to back, in as few reads as possible.
pub(crate) async fn read_chunks(slots: &[&ChunkSlot<'_>]) -> Result<Vec<u8>> {
    let ranges: Vec<_> = slots
        .iter()
        .map(|s| (&s.part.source, s.chunk.offset, s.chunk.size))
        .collect();
    crate::source::read_coalesced(&ranges).await
}

/// The window of `slots`: in the browser, chunks that lie in order in one file, at most
/// [`crate::source::SPAN_GAP`] apart, come as one span of the File API's own buffers (the
/// bytes between them included: a file's B-tree nodes sit among its chunks), in pieces cut
/// between chunks so that the Workers reading them walk their headers; anything else is
/// read into memory, back to back. (Natively: `prefetch`'s reading thread.)
#[cfg(target_arch = "wasm32")]
async fn read_window(
    acq: &Acquisition,
    slots: &[&ChunkSlot<'_>],
    limit: u64,
) -> Result<WindowBytes> {
    if let Some((f, lo, n)) = file_span(slots, limit) {
        let pieces = walked_pieces(acq, slots, lo, n, f.js_piece());
        if let Some(read) = pieces.and_then(|p| f.read_js(p)) {
            let bytes = crate::upload::window_bytes::JsBytes::new(read.await?, lo)?;
            return Ok(WindowBytes::Js(bytes));
        }
    }
    Ok(WindowBytes::Host(read_chunks(slots).await?))
}

/// The bytes `span` of `src` as they lie in the file: in the browser the File API's buffers,
/// in pieces the pool's Workers read, cut at `cuts` (the addresses of the span's B-tree
/// leaves, which no chunk lies across) so that each piece holds whole chunks. Nobody walks
/// their headers yet: the chunks are not known before the leaves are read ([`walk_span`]).
pub(crate) async fn read_span(
    src: &std::sync::Arc<dyn crate::source::ByteSource>,
    span: std::ops::Range<u64>,
    cuts: &[u64],
) -> Result<WindowBytes> {
    #[cfg(target_arch = "wasm32")]
    {
        let pieces = span_pieces(span.clone(), src.js_piece().max(1), cuts)
            .into_iter()
            .map(|r| crate::source::JsPiece {
                offset: r.start,
                len: r.end - r.start,
                walk: None,
                check: None,
            })
            .collect();
        if let Some(read) = src.read_js(pieces) {
            let bytes = crate::upload::window_bytes::JsBytes::new(read.await?, span.start)?;
            return Ok(WindowBytes::Js(bytes));
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    let _ = cuts;
    let bytes = src.read_vec(span.start, span.end - span.start)?;
    Ok(WindowBytes::HostSpan(bytes, span.start))
}

/// `span` in consecutive pieces cut at some of `cuts` (ascending), each as long as it can
/// be within `piece` bytes; longer where no cut falls within `piece` bytes of its start.
#[cfg(any(test, target_arch = "wasm32"))]
fn span_pieces(span: std::ops::Range<u64>, piece: u64, cuts: &[u64]) -> Vec<std::ops::Range<u64>> {
    let mut out = Vec::new();
    let (mut start, mut fits) = (span.start, None);
    for &c in cuts.iter().filter(|&&c| c > span.start && c < span.end) {
        if c <= start {
            continue;
        }
        if c - start > piece {
            if let Some(at) = fits.take() {
                out.push(start..at);
                start = at;
            }
            if c - start > piece {
                out.push(start..c);
                start = c;
                continue;
            }
        }
        fits = Some(c);
    }
    if let Some(at) = fits.filter(|_| span.end - start > piece) {
        out.push(start..at);
        start = at;
    }
    if start < span.end || out.is_empty() {
        out.push(start..span.end);
    }
    out
}

/// The window `bytes` of a leaf span with its chunks `slots` known: in the browser its
/// pieces go back to the pool's Workers, which walk the headers of the chunks each holds, as
/// they do for the windows they read knowing them (the viewer's Worker walking leaf
/// spans itself took 0.54–0.58 s of the 5.6 GB file's load: decision 0014). The window as it is
/// where a chunk lies across two pieces, or the chunks are not in file order.
pub(crate) fn walk_span<'a>(
    acq: &Acquisition,
    src: &'a std::sync::Arc<dyn crate::source::ByteSource>,
    slots: &[ChunkSlot<'_>],
    bytes: WindowBytes,
) -> Prefetch<'a> {
    #[cfg(target_arch = "wasm32")]
    if let WindowBytes::Js(js) = &bytes {
        let lo = js.file_offset();
        let chunks: Option<Vec<walk::Job>> = slots.iter().map(|s| walk_job(acq, s, lo)).collect();
        let pieces = chunks.and_then(|c| js.piece_jobs(acq.dtype.size(), c.into_iter()));
        if let Some(pieces) = pieces {
            if let Some(walked) = src.walk_js(pieces) {
                return crate::source::Started::new(Box::pin(async move {
                    let bytes = crate::upload::window_bytes::JsBytes::new(walked.await?, lo)?;
                    Ok(WindowBytes::Js(bytes))
                }));
            }
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (acq, src, slots);
    crate::source::Started::Done(Ok(bytes))
}

/// The header walk of `s`'s chunk in a piece that starts at file offset `from`; `None` where
/// the chunk starts before the piece or lies beyond what a `usize` reaches.
#[cfg(target_arch = "wasm32")]
fn walk_job(acq: &Acquisition, s: &ChunkSlot<'_>, from: u64) -> Option<walk::Job> {
    Some(walk::Job {
        at: usize::try_from(s.chunk.offset.checked_sub(from)?).ok()?,
        stored: usize::try_from(s.chunk.size).ok()?,
        logical: logical_bytes(acq, s.ix),
        kind: walk_kind(s.ix),
    })
}

/// The span `[lo, lo + n)` holding `slots` in pieces of about `piece` bytes cut where a
/// chunk starts (a gap goes with the chunk before it), each with the walk jobs of its chunks;
/// `None` where a job cannot be made ([`walk_job`]: the window is then read into memory).
#[cfg(target_arch = "wasm32")]
fn walked_pieces(
    acq: &Acquisition,
    slots: &[&ChunkSlot<'_>],
    lo: u64,
    n: u64,
    piece: u64,
) -> Option<Vec<crate::source::JsPiece>> {
    let elem = acq.dtype.size();
    let mut pieces = Vec::new();
    let (mut start, mut jobs) = (lo, Vec::new());
    let mut cut = |start: u64, end: u64, jobs: &mut Vec<walk::Job>| {
        pieces.push(crate::source::JsPiece {
            offset: start,
            len: end - start,
            walk: Some(walk::encode_jobs(elem, jobs)),
            check: None,
        });
        jobs.clear();
    };
    for s in slots {
        let end = s.chunk.offset + s.chunk.size;
        if !jobs.is_empty() && end - start > piece {
            cut(start, s.chunk.offset, &mut jobs);
            start = s.chunk.offset;
        }
        jobs.push(walk_job(acq, s, start)?);
    }
    cut(start, lo + n, &mut jobs);
    Some(pieces)
}

/// The file, offset and length of the span holding `slots`, when they lie in order in one
/// file with small gaps ([`pick_window`] keeps such a span within a window, unless it is a
/// single chunk).
#[cfg(target_arch = "wasm32")]
fn file_span<'a>(
    slots: &[&ChunkSlot<'a>],
    limit: u64,
) -> Option<(&'a std::sync::Arc<dyn crate::source::ByteSource>, u64, u64)> {
    let first = slots.first()?;
    let (mut end, mut stored) = (first.chunk.offset, 0u64);
    for s in slots {
        let same = std::sync::Arc::ptr_eq(&s.part.source, &first.part.source);
        if !same || s.chunk.offset < end || s.chunk.offset - end > crate::source::SPAN_GAP {
            return None;
        }
        end = s.chunk.offset.checked_add(s.chunk.size)?;
        stored += s.chunk.size;
    }
    let span = end - first.chunk.offset;
    let bound = DECODE_WINDOW.min(limit);
    (span == stored || span <= bound).then_some((&first.part.source, first.chunk.offset, span))
}

/// The window that starts at `mine[*i]`: as many whole chunks of its file as fit the
/// compressed and decoded budgets (at least one). Advances `*i` past them. The compressed
/// budget counts the bytes between chunks that lie in order close together, which the
/// browser reads with them as one span: so a window's bytes as read, and its source and
/// staging buffers, stay within [`DECODE_WINDOW`] as the memory plan counts them (unless
/// one chunk alone is larger).
pub(crate) fn pick_window(
    limit: u64,
    acq: &Acquisition,
    mine: &[&ChunkSlot<'_>],
    i: &mut usize,
) -> std::ops::Range<usize> {
    let first = mine.get(*i).map(|s| &s.part.source);
    let chunks = mine[*i..].iter().map(|slot| {
        WindowChunk {
            offset: slot.chunk.offset,
            size: slot.chunk.size,
            logical: logical_bytes(acq, slot.ix) as u64,
            // A window holds one file's chunks: the browser reads it as one span of that file.
            same_file: first.is_some_and(|f| std::sync::Arc::ptr_eq(&slot.part.source, f)),
        }
    });
    let n = window_len(chunks, DECODE_WINDOW.min(limit), DECODE_SCRATCH.min(limit));
    let start = *i;
    *i += n;
    start..*i
}

/// A chunk as [`window_len`] weighs it.
struct WindowChunk {
    offset: u64,
    size: u64,
    logical: u64,
    same_file: bool,
}

/// How many of `chunks` (at least one) the window takes: while they are in the first one's
/// file and fit `window_bytes` read (the bytes between chunks that lie in order at most
/// [`crate::source::SPAN_GAP`] apart included) and `scratch_bytes` decoded.
fn window_len(
    chunks: impl Iterator<Item = WindowChunk>,
    window_bytes: u64,
    scratch_bytes: u64,
) -> usize {
    let (mut n, mut src_len, mut dst_len) = (0usize, 0u64, 0u64);
    let mut end: Option<u64> = None;
    for c in chunks {
        let gap = end
            .and_then(|e| c.offset.checked_sub(e))
            .filter(|&g| g <= crate::source::SPAN_GAP)
            .unwrap_or(0);
        let read = gap + c.size;
        let fits = src_len + read <= window_bytes && dst_len + c.logical <= scratch_bytes;
        if n > 0 && !(fits && c.same_file) {
            break;
        }
        src_len += read;
        dst_len = (dst_len + c.logical).next_multiple_of(8);
        end = Some(c.offset + c.size);
        n += 1;
    }
    n
}

/// What walking each of `slots`' chunks needs: where its stored bytes lie in a window
/// starting at `file_offset` in their file (`None`: the chunks back to back), its decoded
/// size and its walk kind.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn walk_jobs(
    acq: &Acquisition,
    slots: &[&ChunkSlot<'_>],
    file_offset: Option<u64>,
) -> Vec<(std::ops::Range<usize>, usize, u32)> {
    let mut at = 0usize;
    slots
        .iter()
        .map(|slot| {
            if let Some(lo) = file_offset {
                at = (slot.chunk.offset - lo) as usize;
            }
            let stored = at..at + slot.chunk.size as usize;
            at += slot.chunk.size as usize;
            (stored, logical_bytes(acq, slot.ix), walk_kind(slot.ix))
        })
        .collect()
}

/// The header walks of `jobs` ([`walk_jobs`]) in `bytes` of samples `elem` bytes wide, on
/// the CPU's threads at once: one thread walked the 262,144 chunks of the 5.6 GB file at
/// about 1 GB/s of stored bytes (decision 0024).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn walk_chunks(
    bytes: &[u8],
    elem: usize,
    jobs: Vec<(std::ops::Range<usize>, usize, u32)>,
) -> Vec<ChunkWalk> {
    use rayon::prelude::*;
    jobs.into_par_iter()
        .map(|(stored, logical, kind)| walk::chunk_layout(&bytes[stored], elem, logical, kind))
        .collect()
}

/// A window's stored bytes being read: started at once (the browser's reads run in the
/// pool's Workers while the host builds the window before), finished when awaited.
pub(crate) type Prefetch<'a> = crate::source::Started<'a, Result<WindowBytes>>;

/// Natively, a staging slot lent to the thread that reads a window ahead (`SrcSlots::lend`);
/// in the browser nothing: its windows are staged as they are built, and none is asked for.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) type StageSlot = crate::upload::host_staging::Lent;
#[cfg(target_arch = "wasm32")]
pub(crate) type StageSlot = ();

/// What lends a window read ahead its staging slot, given the window's stored bytes.
pub(crate) type Lend<'l> = dyn FnMut(u64) -> Result<StageSlot> + 'l;

/// Start reading the window of `slots` (its own list: the caller's may grow meanwhile).
/// Natively on a thread of its own, so the window's reads overlap the building and copying
/// of the windows before it (the host's reads took a third of the 5.6 GB file's load when
/// they ran in turn: decision 0024), into the staging slot `lend` gives it.
fn prefetch<'a>(
    acq: &'a Acquisition,
    slots: Vec<&'a ChunkSlot<'a>>,
    limit: u64,
    lend: &mut Lend<'_>,
) -> Prefetch<'a> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = limit;
        let ranges: Vec<_> = slots
            .iter()
            .map(|s| (s.part.source.clone(), s.chunk.offset, s.chunk.size))
            .collect();
        let slot = lend(ranges.iter().map(|r| r.2).sum());
        // The chunks' header walks too, once read: off the thread that builds the windows.
        let (elem, jobs) = (acq.dtype.size(), walk_jobs(acq, &slots, None));
        let reading = std::thread::spawn(move || read_staged(&ranges, elem, &jobs, slot?));
        // Joined when awaited, never before (`Started::Running` is not polled at once).
        crate::source::Started::Running(Box::pin(async move {
            reading.join().unwrap_or_else(|_| {
                Err(crate::error::Error::Gpu(
                    "the thread reading a decode window stopped".into(),
                ))
            })
        }))
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = lend;
        crate::source::Started::new(Box::pin(
            async move { read_window(acq, &slots, limit).await },
        ))
    }
}

/// Stored bytes one thread reads, walks and stages at a time in [`read_staged`] (a chunk
/// larger is taken whole): within a core's L2 cache, as the prepared reopen's pieces are.
#[cfg(not(target_arch = "wasm32"))]
const STAGE_PIECE: usize = 1 << 20;

/// The chunks `ranges` of a window, back to back, read straight into the staging slot
/// `slot` (the padding to its last word zeroed) with their header walks `jobs`
/// ([`walk_jobs`]): in groups of whole chunks that lie back to back in their file, each
/// read by one thread into a buffer of its own, walked there and copied into the slot.
/// The bytes cross the host's memory once on their way to the GPU; read into a window's
/// buffer and copied into the slot by the thread that builds the windows, they crossed it
/// twice, and that copy was a third of the 5.6 GB file's load (decision 0053).
#[cfg(not(target_arch = "wasm32"))]
fn read_staged(
    ranges: &[(std::sync::Arc<dyn crate::source::ByteSource>, u64, u64)],
    elem: usize,
    jobs: &[(std::ops::Range<usize>, usize, u32)],
    mut slot: StageSlot,
) -> Result<WindowBytes> {
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    for (k, (source, offset, _)) in ranges.iter().enumerate() {
        let joins = groups.last().is_some_and(|g| {
            let (s, o, n) = &ranges[k - 1];
            std::sync::Arc::ptr_eq(s, source)
                && o + n == *offset
                && jobs[k].0.end - jobs[g.start].0.start <= STAGE_PIECE
        });
        match groups.last_mut() {
            Some(g) if joins => g.end = k + 1,
            _ => groups.push(k..k + 1),
        }
    }
    let total = jobs.last().map_or(0, |j| j.0.end);
    let ends = groups.iter().map(|g| jobs[g.end - 1].0.end);
    let walks =
        crate::upload::host_staging::fill_in_parallel(slot.view.slice(..), ends, |i, dst| {
            let g = groups[i].clone();
            let at = jobs[g.start].0.start;
            let (source, offset, _) = &ranges[g.start];
            with_piece_buffer(jobs[g.end - 1].0.end - at, |bytes| {
                source.read_at(*offset, bytes)?;
                dst.copy_from_slice(bytes);
                Ok(jobs[g]
                    .iter()
                    .map(|(stored, logical, kind)| {
                        let mine = stored.start - at..stored.end - at;
                        walk::chunk_layout(&bytes[mine], elem, *logical, *kind)
                    })
                    .collect::<Vec<_>>())
            })
        });
    let mut walked = Vec::with_capacity(jobs.len());
    for w in walks {
        walked.extend(w?);
    }
    Ok(WindowBytes::Staged(Some(slot), total, walked))
}

/// `f` of a buffer of `len` bytes: the thread's own, kept for its next piece, where `len`
/// is within [`STAGE_PIECE`]; a chunk larger is read into one of its own.
#[cfg(not(target_arch = "wasm32"))]
fn with_piece_buffer<T>(len: usize, f: impl FnOnce(&mut [u8]) -> T) -> T {
    thread_local! {
        static PIECE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    if len > STAGE_PIECE {
        let mut own = crate::source::buffer(len);
        let out = f(&mut own);
        crate::source::recycle(own);
        return out;
    }
    PIECE.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < len {
            p.resize(STAGE_PIECE, 0);
        }
        f(&mut p[..len])
    })
}

/// Windows whose reads are in flight while the host builds the current one: two keep the
/// pool's Workers reading through the block tables, the copy and the wait for the GPU
/// (three, four, six and eight loaded the 5.6 GB file on the H200 no faster: decision 0013).
pub(crate) const READ_AHEAD: usize = 2;

/// Windows of `mine` whose bytes were read already, as leaf spans (`chunk_slots`): the
/// window's first slot, its slots, and its bytes (their headers perhaps still walked).
pub(crate) type ReadWindows<'a> = std::collections::VecDeque<(usize, usize, Prefetch<'a>)>;

/// Start reading the windows after `mine[*i]` until [`READ_AHEAD`] are in flight (natively
/// each into the staging slot `lend` gives it); a window read already (`done`) is taken as
/// it is. Returns how many were.
pub(crate) fn read_ahead<'a>(
    limit: u64,
    acq: &'a Acquisition,
    mine: &[&'a ChunkSlot<'a>],
    done: &mut ReadWindows<'a>,
    i: &mut usize,
    ahead: &mut std::collections::VecDeque<(std::ops::Range<usize>, Prefetch<'a>)>,
    lend: &mut Lend<'_>,
) -> u32 {
    let mut taken = 0;
    while ahead.len() < READ_AHEAD && *i < mine.len() {
        while done.front().is_some_and(|d| d.0 < *i) {
            done.pop_front();
        }
        if done.front().is_some_and(|d| d.0 == *i) {
            if let Some((start, n, bytes)) = done.pop_front() {
                *i = start + n;
                ahead.push_back((start..*i, bytes));
                taken += 1;
                continue;
            }
        }
        // Windows to pick stop where a window read already starts.
        let stop = done.front().map_or(mine.len(), |d| d.0.min(mine.len()));
        let range = pick_window(limit, acq, &mine[..stop], i);
        let reading = prefetch(acq, mine[range.clone()].to_vec(), limit, lend);
        ahead.push_back((range, reading));
    }
    taken
}

/// Stored bytes of chunks a segment's windows must have before [`read_ahead`] picks them,
/// unless the segment has no more: the windows read ahead, and the one after, are whole.
pub(crate) fn slots_wanted(limit: u64) -> u64 {
    (READ_AHEAD as u64 + 1) * DECODE_WINDOW.min(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window of bitshuffle/LZ4 chunks from two files — small ones back to back, one
    /// larger than a piece, gaps between, one that is not bitshuffle/LZ4 at all — read into
    /// a staging slot reaches the GPU as the chunks back to back, the padding zeroed, with
    /// the walks the window's buffer would have had.
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn a_window_read_into_its_staging_slot_is_its_chunks_with_their_walks() {
        use crate::source::{ByteSource, MemSource};
        use std::sync::Arc;
        let Some(engine) = crate::upload::host_staging::test_engine() else {
            return;
        };
        let elem = 2;
        // Frame k: samples that compress a little and differ from every other frame's.
        let frame = |k: usize, samples: usize| -> Vec<u8> {
            (0..samples)
                .flat_map(|i| (((i * 7919 + k * 104_729) % 4099) as u16).to_le_bytes())
                .collect()
        };
        // Samples that hardly compress: the chunk stays larger than a piece.
        let noise = |samples: usize| -> Vec<u8> {
            let mut x = 0x2545_f491_4f6c_dd1du64;
            (0..samples)
                .flat_map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x as u16).to_le_bytes()
                })
                .collect()
        };
        let mut chunks = Vec::new();
        for k in 0..57 {
            chunks.push(crate::decode::bslz4::encode(&frame(k, 333 + k), elem, 64));
        }
        // Larger than a piece: read on its own.
        chunks.insert(
            20,
            crate::decode::bslz4::encode(&noise(700_001), elem, 2048),
        );
        assert!(chunks[20].len() > STAGE_PIECE);
        let junk = b"not a bitshuffle/LZ4 chunk";
        chunks.insert(31, junk.to_vec());
        // The decoded size a chunk's header gives (the junk's: anything).
        let logical = |c: &[u8]| match c.first_chunk::<8>() {
            Some(h) if c != junk => u64::from_be_bytes(*h) as usize,
            _ => 64,
        };
        // Files: chunks 0..40 in a (a gap before 25), the rest in b (a gap before 50).
        let (mut a, mut b, mut ranges) = (vec![7u8; 5], vec![9u8; 3], Vec::new());
        for (k, c) in chunks.iter().enumerate() {
            let file = if k < 40 { &mut a } else { &mut b };
            if k == 25 || k == 50 {
                file.extend_from_slice(&[1, 2, 3]);
            }
            ranges.push((k < 40, file.len() as u64, c.len() as u64));
            file.extend_from_slice(c);
        }
        let a: Arc<dyn ByteSource> = Arc::new(MemSource::new("a.h5", a));
        let b: Arc<dyn ByteSource> = Arc::new(MemSource::new("b.h5", b));
        let ranges: Vec<_> = ranges
            .into_iter()
            .map(|(in_a, o, n)| (if in_a { a.clone() } else { b.clone() }, o, n))
            .collect();
        let mut at = 0;
        let jobs: Vec<_> = chunks
            .iter()
            .map(|c| {
                at += c.len();
                (at - c.len()..at, logical(c), walk::KIND_BSLZ4)
            })
            .collect();
        let want = chunks.concat();
        let need = (want.len() as u64).next_multiple_of(4) + 4;
        let mut ring = crate::upload::host_staging::HostStaging::new("test staging", 64);
        // The slot held other bytes before: the padding is zeroed, not left as it was.
        let mut slot = ring.take(&engine, 0, need).expect("a staging slot");
        let before = vec![0xab; need as usize];
        crate::upload::host_staging::copy_in_parallel(slot.view.slice(..), &before);
        ring.written(slot);
        let slot = ring.take(&engine, 0, need).expect("the staging slot again");
        let mut read = read_staged(&ranges, elem, &jobs, slot).expect("the window read");
        assert_eq!(read.len(), want.len());
        assert_eq!(read.take_walks(), walk_chunks(&want, elem, jobs.clone()));
        let staged = ring.written(read.take_staged().expect("its staging slot"));
        let dst = engine.storage("test destination", need);
        let mut enc = engine.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&staged, 0, &dst, 0, need);
        engine.queue.submit([enc.finish()]);
        let got = pollster::block_on(engine.read_back(&dst, need)).expect("read back");
        let mut padded = want.clone();
        padded.resize(need as usize, 0);
        let differs = got.iter().zip(&padded).position(|(g, w)| g != w);
        assert_eq!(
            (got.len(), differs),
            (padded.len(), None),
            "the staged bytes"
        );
        // A chunk past the end of its file is an error naming the file.
        let mut short = ranges.clone();
        short[45].2 += 1 << 20;
        let mut long_jobs = jobs.clone();
        long_jobs[45].0.end += 1 << 20;
        let slot = ring
            .take(&engine, 1, need + (1 << 20))
            .expect("a staging slot");
        match read_staged(&short[..46], elem, &long_jobs[..46], slot) {
            Err(e) => assert!(e.to_string().contains("b.h5"), "{e}"),
            Ok(_) => panic!("a read past the end of b.h5 was taken"),
        }
    }

    fn chunk(offset: u64, size: u64) -> WindowChunk {
        WindowChunk {
            offset,
            size,
            logical: 100,
            same_file: true,
        }
    }

    #[test]
    fn spans_are_cut_at_leaves_into_pieces_of_whole_chunks() {
        // Cuts every 10 bytes, pieces of 25: two leaves a piece.
        let cuts: Vec<u64> = (1..10).map(|k| 100 + 10 * k).collect();
        assert_eq!(
            span_pieces(95..200, 25, &cuts),
            vec![95..120, 120..140, 140..160, 160..180, 180..200]
        );
        // No cut within a piece: the piece runs to the next cut, or to the end.
        assert_eq!(
            span_pieces(0..100, 10, &[50, 60]),
            vec![0..50, 50..60, 60..100]
        );
        assert_eq!(span_pieces(0..100, 10, &[]), vec![0..100]);
        // Cuts outside the span, at its ends or out of order are not taken.
        assert_eq!(
            span_pieces(10..30, 5, &[0, 10, 20, 15, 30, 40]),
            vec![10..20, 20..30]
        );
        assert_eq!(span_pieces(7..7, 5, &[]), vec![7..7]);
    }

    #[test]
    fn span_pieces_cover_the_span_in_order_at_cuts() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for _ in 0..500 {
            let lo = next(1000);
            let hi = lo + next(5000);
            let mut cuts: Vec<u64> = (0..next(40)).map(|_| next(7000)).collect();
            cuts.sort_unstable();
            let piece = 1 + next(800);
            let got = span_pieces(lo..hi, piece, &cuts);
            assert_eq!(got.first().map(|r| r.start), Some(lo));
            assert_eq!(got.last().map(|r| r.end), Some(hi));
            for w in got.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert!(w[0].start < w[0].end);
                assert!(cuts.binary_search(&w[0].end).is_ok(), "{w:?} cut at a leaf");
            }
            for r in &got {
                // Longer than a piece only where no cut falls within one of its start.
                let within = cuts
                    .iter()
                    .any(|&c| c > r.start && c - r.start <= piece && c < hi);
                assert!(
                    r.end - r.start <= piece || !within,
                    "{r:?} of {piece} in {cuts:?}"
                );
            }
        }
    }

    #[test]
    fn windows_count_the_bytes_read_between_their_chunks() {
        // Back to back: 10 of 10 bytes fit 100.
        let tight = (0..20).map(|k| chunk(10 * k, 10));
        assert_eq!(window_len(tight, 100, u64::MAX), 10);
        // 6 bytes between chunks are read with them: 16 a chunk but the first.
        let gapped = (0..20).map(|k| chunk(16 * k, 10));
        assert_eq!(window_len(gapped, 100, u64::MAX), 6);
        // Far apart or out of order: the span is not read, the chunks come back to back.
        let far = (0..20).map(|k| chunk((crate::source::SPAN_GAP + 20) * k, 10));
        assert_eq!(window_len(far, 100, u64::MAX), 10);
        let backwards = (0..20).map(|k| chunk(1000 - 10 * k, 10));
        assert_eq!(window_len(backwards, 100, u64::MAX), 10);
    }

    #[test]
    fn windows_stop_at_the_decoded_budget_a_file_or_take_one_chunk_at_least() {
        assert_eq!(window_len((0..20).map(|k| chunk(10 * k, 10)), 1000, 350), 3);
        let mut files = (0..20).map(|k| WindowChunk {
            same_file: k < 4,
            ..chunk(10 * k, 10)
        });
        assert_eq!(window_len(&mut files, 1000, u64::MAX), 4);
        assert_eq!(window_len([chunk(0, 500)].into_iter(), 100, 10), 1);
        assert_eq!(window_len(std::iter::empty(), 100, 10), 0);
    }
}
