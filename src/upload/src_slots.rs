//! Source slots: the GPU buffers compressed windows are uploaded into, and the decode's
//! work buffers, reused from window to window and grown only when a window needs more.

use crate::error::Result;
use crate::gpu::{Engine, UploadTimes};
use crate::kernels::decode::Staged;
use crate::upload::window_bytes::WindowBytes;

/// Reused storage buffers for the compressed windows: written through the queue, or in the
/// browser copied on the GPU from the staging ring the File API's buffers go into (a buffer
/// mapped at creation per window was a fresh shared-memory allocation in Chromium, 3.9 s of
/// a 5.6 GB load on the H200; wgpu's own mapped ranges copy through wasm memory, 5.5 s).
/// Two slots: the host fills the next window while the GPU decodes the last ones (writes
/// and copies are queue operations ordered after the work already submitted, so a slot is
/// never overwritten under a running decode).
pub struct SrcSlots {
    slots: [Option<wgpu::Buffer>; 2],
    next: usize,
    /// The slot [`SrcSlots::fill`] filled last: its window's work buffers go with it.
    filled: usize,
    /// The windows' scratch and sequence buffers, reused the same way and cleared before
    /// each window (as a new buffer would be): in Chromium a new 220 MB buffer per window
    /// cost more than its clear on the GPU.
    scratch: [Option<wgpu::Buffer>; 2],
    seqs: [Option<wgpu::Buffer>; 2],
    #[cfg(target_arch = "wasm32")]
    pub(crate) staging: crate::upload::window_bytes::Staging,
    /// Natively, the ring the windows are staged in, and the slot filled last.
    #[cfg(not(target_arch = "wasm32"))]
    host: crate::upload::host_staging::HostStaging,
    #[cfg(not(target_arch = "wasm32"))]
    host_filled: Option<usize>,
    /// Natively, the ring's slots lent so far.
    #[cfg(not(target_arch = "wasm32"))]
    host_next: usize,
}

/// The buffer in `slot`, replaced by `make()` when there is none or it is under `need` bytes.
pub(crate) fn reuse(
    slot: &mut Option<wgpu::Buffer>,
    need: u64,
    make: impl FnOnce() -> wgpu::Buffer,
) -> wgpu::Buffer {
    if slot.as_ref().is_some_and(|b| b.size() < need) {
        *slot = None;
    }
    slot.get_or_insert_with(make).clone()
}

impl SrcSlots {
    pub fn new() -> SrcSlots {
        SrcSlots {
            slots: [None, None],
            next: 0,
            filled: 0,
            scratch: [None, None],
            seqs: [None, None],
            #[cfg(target_arch = "wasm32")]
            staging: crate::upload::window_bytes::Staging::new(),
            #[cfg(not(target_arch = "wasm32"))]
            host: crate::upload::host_staging::HostStaging::new(
                "decode staging",
                crate::upload::plan::DECODE_WINDOW,
            ),
            #[cfg(not(target_arch = "wasm32"))]
            host_filled: None,
            #[cfg(not(target_arch = "wasm32"))]
            host_next: 0,
        }
    }

    /// Natively, the staging slots an upload of at most `stored_bytes` will take, made now
    /// on every core before the resident's buffers are made on their thread: a slot made
    /// while that thread holds the driver's allocator waits for it (decision 0052 found this
    /// in the prepared reopen; the load stages the same way). In the browser, nothing.
    pub(crate) fn make_ahead(&mut self, engine: &Engine, stored_bytes: u64) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let window = crate::upload::plan::DECODE_WINDOW;
            let count = (stored_bytes.div_ceil(window) as usize)
                .clamp(1, crate::upload::plan::DECODE_STAGING_SLOTS);
            self.host.make_ahead(engine, count, window)
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = (engine, stored_bytes);
            Ok(())
        }
    }

    /// Natively, the staging slot of a window read ahead of `stored_bytes` (its reading
    /// thread fills it); in the browser nothing (its windows are staged as they are built).
    pub(crate) fn lend(
        &mut self,
        engine: &Engine,
        stored_bytes: u64,
    ) -> Result<crate::upload::window_reads::StageSlot> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            self.lend_next(engine, stored_bytes.next_multiple_of(4).max(4))
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = (engine, stored_bytes);
            Ok(())
        }
    }

    /// The ring's next slot, `need` bytes of it lent. The windows go round the ring in the
    /// order they take slots: those read ahead when their reads start, the others as they
    /// are built. A slot comes round again once two windows are on the GPU, one is being
    /// built and the others are read ahead, so its last window is one the upload has
    /// waited for already (it waits for all but two submissions).
    #[cfg(not(target_arch = "wasm32"))]
    fn lend_next(
        &mut self,
        engine: &Engine,
        need: u64,
    ) -> Result<crate::upload::host_staging::Lent> {
        let k = self.host_next % crate::upload::plan::DECODE_STAGING_SLOTS;
        self.host_next += 1;
        self.host.take(engine, k, need)
    }

    /// A storage buffer holding `bytes` (zero-padded to whole words) from the next submit on,
    /// and the staging buffer to copy them from first when they came from the File API.
    /// `times` and `t` as [`UploadTimes::lap`] takes them: the browser's waits for a staging
    /// buffer are timed apart from the copies.
    pub(crate) async fn fill(
        &mut self,
        engine: &Engine,
        bytes: &mut WindowBytes,
        capacity: u64,
        times: &mut UploadTimes,
        t: &mut f64,
    ) -> Result<(wgpu::Buffer, Staged)> {
        let need = (bytes.len() as u64).next_multiple_of(4).max(4);
        let k = self.next % 2;
        (self.next, self.filled) = (self.next + 1, k);
        // Room for a full window, unless this one is small (a small acquisition).
        let size = need.next_power_of_two().min(capacity).max(need);
        let src = reuse(&mut self.slots[k], need, || {
            engine.storage("decode window", size)
        });
        #[cfg(target_arch = "wasm32")]
        if let WindowBytes::Js(j) = bytes {
            if let Some(staged) = self.staging.fill(&engine.device, j, times, t).await? {
                return Ok((src, Some(staged)));
            }
        }
        #[cfg(target_arch = "wasm32")]
        {
            bytes.write_to(&engine.queue, &src);
            times.lap("copy to the GPU", t);
            Ok((src, None))
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            // A window read ahead is in its slot already; any other is copied into the next.
            let lent = match bytes.take_staged() {
                Some(lent) => lent,
                None => {
                    let host = bytes.host_bytes().ok_or_else(|| {
                        crate::error::Error::Gpu("a window's staging slot was given back".into())
                    })?;
                    let mut lent = self.lend_next(engine, need)?;
                    times.lap("staging slot waits", t);
                    crate::upload::host_staging::copy_in_parallel(lent.view.slice(..), host);
                    times.lap("copies into staging", t);
                    lent
                }
            };
            self.host_filled = Some(lent.slot);
            Ok((src, Some((self.host.written(lent), need))))
        }
    }

    /// The scratch and sequence buffers of the window [`SrcSlots::fill`] filled last, at
    /// least `scratch` and `seqs` bytes (cleared by [`Decoder::encode`]).
    pub(crate) fn work_buffers(
        &mut self,
        engine: &Engine,
        scratch: u64,
        seqs: u64,
    ) -> [wgpu::Buffer; 2] {
        let k = self.filled;
        [
            reuse(&mut self.scratch[k], scratch, || {
                engine.storage("decode scratch", scratch)
            }),
            reuse(&mut self.seqs[k], seqs, || {
                engine.storage("decode sequences", seqs)
            }),
        ]
    }

    /// The window filled last is submitted as `index`: its staging buffer may be mapped
    /// again once that is done.
    pub(crate) fn submitted(&mut self, index: &wgpu::SubmissionIndex) {
        #[cfg(target_arch = "wasm32")]
        {
            let _ = index;
            self.staging.release();
        }
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(k) = self.host_filled.take() {
            self.host.submitted(k, index.clone());
        }
    }
}

impl Default for SrcSlots {
    fn default() -> Self {
        Self::new()
    }
}
