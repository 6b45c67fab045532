//! The buffers of a resident's segments, handed out in order as an upload reaches them.
//! Natively those not set aside are made on a thread of their own from the start: the
//! driver took about 35 ms to make each 2 GB buffer on an H100, 0.35 s of the 5.6 GB file's
//! load when made in turn on the thread that builds the windows (decision 0043). In the
//! browser each is made when it is reached.

use super::*;

pub(crate) struct ResidentBuffers {
    #[cfg(target_arch = "wasm32")]
    label: &'static str,
    /// Per segment still to hand out, in order: its size, and the buffer set aside for it.
    next: std::collections::VecDeque<(u64, Option<wgpu::Buffer>)>,
    /// What a failure to make one says (the plan's sizes and alternatives).
    oom: String,
    #[cfg(not(target_arch = "wasm32"))]
    made: Option<std::sync::mpsc::Receiver<std::result::Result<wgpu::Buffer, String>>>,
}

impl Engine {
    /// The buffers of `plan`'s segments: set aside ones where there are, new ones else
    /// (natively made ahead). Call after [`Engine::start_resident`].
    pub(crate) fn resident_buffers(
        &self,
        label: &'static str,
        plan: &ResidentPlan,
    ) -> ResidentBuffers {
        let sizes = plan.segments.iter().map(|s| s.bytes);
        self.buffers_ahead(label, sizes, out_of_memory(plan))
    }

    /// Buffers of `sizes` bytes in turn, as [`Engine::resident_buffers`] hands them out;
    /// `oom` says what a failure to make one means.
    pub(crate) fn buffers_ahead(
        &self,
        label: &'static str,
        sizes: impl Iterator<Item = u64>,
        oom: String,
    ) -> ResidentBuffers {
        let next: std::collections::VecDeque<_> = sizes
            .map(|bytes| {
                let size = resident::resident_size(bytes);
                (size, self.set_aside.take(size))
            })
            .collect();
        #[cfg(not(target_arch = "wasm32"))]
        let made = {
            let sizes: Vec<u64> = next
                .iter()
                .filter(|(_, kept)| kept.is_none())
                .map(|(size, _)| *size)
                .collect();
            (!sizes.is_empty()).then(|| {
                let (tx, rx) = std::sync::mpsc::channel();
                let device = self.device.clone();
                std::thread::spawn(move || {
                    for size in sizes {
                        // Error scopes are the thread's own: each buffer checked here.
                        let scope = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
                        let b = super::buffers::storage_on(&device, label, size);
                        let made = match pollster::block_on(scope.pop()) {
                            Some(e) => Err(e.to_string()),
                            None => Ok(b),
                        };
                        let failed = made.is_err();
                        // The upload stopped, or this one failed: make no more.
                        if tx.send(made).is_err() || failed {
                            return;
                        }
                    }
                });
                rx
            })
        };
        ResidentBuffers {
            #[cfg(target_arch = "wasm32")]
            label,
            next,
            oom,
            #[cfg(not(target_arch = "wasm32"))]
            made,
        }
    }
}

/// What a resident that did not fit says: its sizes and the alternatives.
pub(crate) fn out_of_memory(plan: &ResidentPlan) -> String {
    format!(
        "out of GPU memory for {} bytes resident (peak {}): {}",
        plan.payload_bytes,
        plan.peak_bytes,
        plan.alternatives()
    )
}

impl ResidentBuffers {
    /// The next segment's buffer, cleared in a submission of its own (partial tiles keep
    /// what is there): a new buffer would be cleared anyway, by WebGPU at its first use, in
    /// the first decode window's submission, which then waited for the fresh memory's first
    /// touch; cleared here, while the host still builds that window, the first load of a
    /// page waited 0.14–0.19 s for the GPU instead of 0.45–0.54 (decision 0016).
    pub(crate) fn next(&mut self, engine: &Engine) -> Result<wgpu::Buffer> {
        let (size, kept) = self
            .next
            .pop_front()
            .ok_or_else(|| Error::Gpu("a resident asked for more buffers than its plan".into()))?;
        let buffer = match kept {
            Some(b) => b,
            None => self.made(engine, size)?,
        };
        let mut enc = engine.device.create_command_encoder(&Default::default());
        enc.clear_buffer(&buffer, 0, None);
        engine.queue.submit([enc.finish()]);
        Ok(buffer)
    }

    /// A new buffer of `size` bytes: natively the next the thread made.
    fn made(&mut self, engine: &Engine, size: u64) -> Result<wgpu::Buffer> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = (engine, size);
            let made = self.made.as_ref().and_then(|rx| rx.recv().ok());
            match made {
                Some(Ok(b)) => Ok(b),
                Some(Err(e)) => Err(Error::GpuOutOfMemory(format!("{} ({e})", self.oom))),
                None => Err(Error::Gpu(
                    "the thread making the resident's buffers stopped".into(),
                )),
            }
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = &self.oom;
            Ok(super::buffers::storage_on(&engine.device, self.label, size))
        }
    }
}
