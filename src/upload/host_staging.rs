//! Natively, a ring of mappable buffers that uploads stage their bytes in and the GPU copies
//! from: each buffer is mapped again once the submission that copies from it has finished,
//! so its memory is written over, never allocated afresh as `Queue::write_buffer_with`'s
//! staging is per write; and a lent buffer's view can be filled by any thread (the blocks of
//! a prepared reopen go into it piece by piece from their reads; decision 0043). The
//! browser's ring is `window_bytes::Staging`.

use crate::error::{Error, Result};
use crate::gpu::Engine;

/// `bytes` at the start of `to`, in pieces written by the CPU's threads at once (one thread
/// copied the 5.6 GB file's windows at about 5 GB/s: decision 0024), the rest of `to` zeroed.
pub(crate) fn copy_in_parallel(to: wgpu::WriteOnly<'_, [u8]>, bytes: &[u8]) {
    const PIECE: usize = 4 << 20;
    let ends = (1..=bytes.len().div_ceil(PIECE)).map(|k| (k * PIECE).min(bytes.len()));
    fill_in_parallel(to, ends, |i, dst| {
        let at = i * PIECE;
        dst.copy_from_slice(&bytes[at..(at + PIECE).min(bytes.len())]);
    });
}

/// `to` cut at `ends` (ascending, the last within it) into pieces that the CPU's threads
/// write at once, piece `i` (from the end before it) by `fill(i, piece)`; what lies past
/// the last end is zeroed. The pieces' results, in order.
pub(crate) fn fill_in_parallel<T: Send>(
    mut to: wgpu::WriteOnly<'_, [u8]>,
    ends: impl IntoIterator<Item = usize>,
    fill: impl Fn(usize, &mut wgpu::WriteOnly<'_, [u8]>) -> T + Sync,
) -> Vec<T> {
    use rayon::prelude::*;
    let (mut pieces, mut at) = (Vec::new(), 0);
    for end in ends {
        let (dst, tail) = to.split_at(end - at);
        pieces.push(StagingPiece(dst));
        (to, at) = (tail, end);
    }
    to.fill(0);
    pieces
        .into_par_iter()
        .enumerate()
        .map(|(i, mut dst)| fill(i, &mut dst.0))
        .collect()
}

/// A disjoint piece of a staging view, written by another thread.
struct StagingPiece<'a>(wgpu::WriteOnly<'a, [u8]>);

// SAFETY: a `WriteOnly<[u8]>` is exclusive access to its bytes (wgpu implements `Send` for
// sized `T: Send` only, a bound its slices miss); the pieces are disjoint (`split_at`), so
// each thread writes bytes no other sees, as `[u8]: Send` allows.
unsafe impl Send for StagingPiece<'_> {}

/// Where a ring buffer is.
enum State {
    /// Mapped: lent out by [`HostStaging::take`] next.
    Mapped,
    /// Lent out: its view may be being written (the buffer is mapped).
    Lent,
    /// Written and unmapped: copied from by work not yet submitted.
    Written,
    /// Asked to be mapped once the submission `index` (which copies from it) has finished.
    Mapping(Mapping, wgpu::SubmissionIndex),
}

struct Slot {
    buffer: wgpu::Buffer,
    state: State,
}

/// A ring buffer lent out: its mapped view (`Send`: the thread that fills it may be
/// another), given back with [`HostStaging::written`].
pub(crate) struct Lent {
    pub(crate) slot: usize,
    pub(crate) view: wgpu::BufferViewMut,
}

/// The ring. Buffers are made as they are first needed, at least `min_bytes` each.
pub(crate) struct HostStaging {
    ring: Vec<Slot>,
    min_bytes: u64,
    label: &'static str,
}

impl HostStaging {
    pub(crate) fn new(label: &'static str, min_bytes: u64) -> HostStaging {
        HostStaging {
            ring: Vec::new(),
            min_bytes,
            label,
        }
    }

    /// Slot `k` (made when the ring has fewer), mapped, at least `need` bytes (a multiple of
    /// 4), its first `need` bytes lent out. Waits for the submission that copies from it last.
    pub(crate) fn take(&mut self, engine: &Engine, k: usize, need: u64) -> Result<Lent> {
        let size = need.max(self.min_bytes).next_multiple_of(4);
        let fresh = || fresh_slot(engine, self.label, size);
        while self.ring.len() <= k {
            self.ring.push(fresh());
        }
        if self.ring[k].buffer.size() < need {
            // A larger one takes its place, mapped at creation; the old one goes once the
            // GPU is done with it.
            self.ring[k] = fresh();
        }
        match std::mem::replace(&mut self.ring[k].state, State::Lent) {
            // Lent before, its view let go unwritten (a block that failed): still mapped.
            State::Mapped | State::Lent => {}
            State::Mapping(rx, index) => mapped_after(engine, rx, Some(index))?,
            // Written but never submitted (a window with no frames of its segment).
            State::Written => mapped_after(engine, map_for_write(&self.ring[k].buffer), None)?,
        }
        let view = self.ring[k]
            .buffer
            .slice(..need)
            .get_mapped_range_mut()
            .map_err(|e| Error::Gpu(format!("a staging buffer's mapping: {e}")))?;
        Ok(Lent { slot: k, view })
    }

    /// Slots up to `count`, of `bytes` each, made now on every core, before anything else
    /// makes buffers: wgpu zeroes a new buffer's mapped memory on the thread that makes it,
    /// and the thread that makes a resident's buffers holds the driver's allocator for tens
    /// of milliseconds a buffer. A prepared reopen that made its 32 slots of 17.5 MB as its
    /// first batches took them spent 0.42–0.62 s there (decision 0052).
    /// Error scopes are a thread's own: each slot is checked on the thread that made it.
    pub(crate) fn make_ahead(&mut self, engine: &Engine, count: usize, bytes: u64) -> Result<()> {
        use rayon::prelude::*;
        let size = bytes.max(self.min_bytes).next_multiple_of(4);
        let label = self.label;
        let made = (self.ring.len()..count)
            .into_par_iter()
            .map(|_| {
                let scope = engine
                    .device
                    .push_error_scope(wgpu::ErrorFilter::OutOfMemory);
                let slot = fresh_slot(engine, label, size);
                match pollster::block_on(scope.pop()) {
                    Some(e) => Err(Error::Gpu(format!(
                        "out of GPU memory for a staging buffer of {size} bytes: {e}"
                    ))),
                    None => Ok(slot),
                }
            })
            .collect::<Result<Vec<Slot>>>()?;
        self.ring.extend(made);
        Ok(())
    }

    /// Slots `ks` made ready to lend: the submission copying from the first of them still
    /// in use waited for once, and every mapping that resolved then taken, so that [`take`]
    /// polls the device for none of those (a batch's slots are copied from in one
    /// submission; any other is waited for by `take`). Not faster than a poll a slot, but
    /// its wait is timed apart from the slots' making (decision 0052).
    ///
    /// [`take`]: HostStaging::take
    pub(crate) fn ready(&mut self, engine: &Engine, ks: std::ops::Range<usize>) -> Result<()> {
        let n = self.ring.len();
        let slots = &mut self.ring[ks.start.min(n)..ks.end.min(n)];
        let Some(first) = slots.iter().find_map(|s| match &s.state {
            State::Mapping(_, index) => Some(index.clone()),
            _ => None,
        }) else {
            return Ok(());
        };
        engine
            .device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(first),
                timeout: None,
            })
            .map_err(|e| Error::Gpu(format!("mapping a staging buffer again: {e}")))?;
        for slot in slots {
            if let State::Mapping(rx, _) = &mut slot.state {
                if let Some(r) = resolved(rx)? {
                    r?;
                    slot.state = State::Mapped;
                }
            }
        }
        Ok(())
    }

    /// Lent slot written: unmapped, its buffer to copy from in work to submit.
    pub(crate) fn written(&mut self, lent: Lent) -> wgpu::Buffer {
        drop(lent.view);
        let slot = &mut self.ring[lent.slot];
        slot.buffer.unmap();
        slot.state = State::Written;
        slot.buffer.clone()
    }

    /// The work copying from slot `k` is submitted as `index`: map it again once it is done.
    pub(crate) fn submitted(&mut self, k: usize, index: wgpu::SubmissionIndex) {
        let Some(slot) = self.ring.get_mut(k) else {
            return;
        };
        if !matches!(slot.state, State::Written) {
            return;
        }
        slot.state = State::Mapping(map_for_write(&slot.buffer), index);
    }
}

/// A new slot of `size` bytes, mapped at creation.
fn fresh_slot(engine: &Engine, label: &'static str, size: u64) -> Slot {
    Slot {
        buffer: engine.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        }),
        state: State::Mapped,
    }
}

/// The mapping of `buffer` for writing, asked for now.
fn map_for_write(buffer: &wgpu::Buffer) -> Mapping {
    let (tx, rx) = futures_channel::oneshot::channel();
    buffer.slice(..).map_async(wgpu::MapMode::Write, move |r| {
        let _ = tx.send(r);
    });
    rx
}

/// A mapping asked for, resolved in a poll of the device.
type Mapping = futures_channel::oneshot::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>;

/// Wait until the mapping `rx`, asked for after submission `index` (the last that uses
/// the buffer) where there is one, is done.
fn mapped_after(
    engine: &Engine,
    mut rx: Mapping,
    index: Option<wgpu::SubmissionIndex>,
) -> Result<()> {
    let failed = |e: String| Error::Gpu(format!("mapping a staging buffer again: {e}"));
    // Mapped in an earlier poll already (`ready`): nothing to wait for.
    if let Some(r) = resolved(&mut rx)? {
        return r;
    }
    // The mapping's callback runs in a poll once `index` has finished; waiting for
    // everything submitted is the fallback.
    let first = index.map(|i| wgpu::PollType::Wait {
        submission_index: Some(i),
        timeout: None,
    });
    for poll in first
        .into_iter()
        .chain([wgpu::PollType::wait_indefinitely()])
    {
        engine
            .device
            .poll(poll)
            .map_err(|e| failed(e.to_string()))?;
        if let Some(r) = resolved(&mut rx)? {
            return r;
        }
    }
    Err(failed("not mapped once the GPU was idle".into()))
}

/// The outcome of mapping `rx` where its callback has run (in some earlier poll).
fn resolved(rx: &mut Mapping) -> Result<Option<Result<()>>> {
    let failed = |e: String| Error::Gpu(format!("mapping a staging buffer again: {e}"));
    match rx.try_recv() {
        Ok(Some(r)) => Ok(Some(r.map_err(|e| failed(e.to_string())))),
        Ok(None) => Ok(None),
        Err(_) => Err(failed("the mapping was dropped (device lost?)".into())),
    }
}

/// The engine on whatever adapter there is, for the upload's unit tests (lavapipe in CI,
/// where `STEM4D_REQUIRE_GPU=1` makes its absence a failure).
#[cfg(test)]
pub(crate) fn test_engine() -> Option<Engine> {
    match pollster::block_on(Engine::new()) {
        Ok(e) => Some(e),
        Err(e) if std::env::var("STEM4D_REQUIRE_GPU").is_ok_and(|v| v == "1") => {
            panic!("{e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round `r`'s bytes: `len` of them, none zero, unlike every other round's.
    fn round_bytes(r: usize, len: usize) -> Vec<u8> {
        (0..len).map(|i| (1 + (r * 37 + i) % 251) as u8).collect()
    }

    #[test]
    fn slots_go_round_and_every_round_reaches_the_gpu_whole() {
        let Some(engine) = test_engine() else { return };
        const SLOTS: usize = 3;
        const AT: u64 = 64;
        let mut ring = HostStaging::new("test staging", AT);
        // Two slots made ahead, on other threads; the third when first taken.
        ring.make_ahead(&engine, SLOTS - 1, AT)
            .expect("slots made ahead");
        let dst = engine.storage("test destination", 4 * AT);
        let mut want = vec![0u8; 4 * AT as usize];
        for r in 0..11 {
            // Odd lengths: the rest of the slot's word-padded range is zeroed.
            let len = [61usize, 64, 1, 33][r % 4];
            let k = r % SLOTS;
            if r % 2 == 1 {
                // Every slot made ready at once (one poll), some not yet made.
                ring.ready(&engine, 0..SLOTS + 1).expect("the slots ready");
            }
            let mut lent = ring.take(&engine, k, AT).expect("a slot");
            copy_in_parallel(lent.view.slice(..), &round_bytes(r, len));
            let staged = ring.written(lent);
            if r == 4 {
                // Written and never submitted: the slot is mapped anew when it comes round.
                continue;
            }
            let at = (r % 4) as u64 * AT;
            let mut enc = engine.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&staged, 0, &dst, at, AT);
            let index = engine.queue.submit([enc.finish()]);
            ring.submitted(k, index);
            let w = &mut want[at as usize..(at + AT) as usize];
            w.fill(0);
            w[..len].copy_from_slice(&round_bytes(r, len));
        }
        // A slot asked for more than it holds is made anew, larger.
        let lent = ring.take(&engine, 1, 4 * AT).expect("a larger slot");
        assert_eq!(lent.view.len(), 4 * AT as usize);
        drop(lent);
        // Lent and let go unwritten: still mapped, lent again as it is.
        let lent = ring.take(&engine, 1, AT).expect("the same slot again");
        drop(lent);
        let got = pollster::block_on(engine.read_back(&dst, 4 * AT)).expect("read back");
        assert_eq!(got, want);
    }
}
