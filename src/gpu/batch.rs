//! Recording work: batches of dispatches sharing one encoder, a recorder for kernels that
//! record several passes, and dispatch within the adapter's workgroup-count limit.

use super::*;

/// An acquisition resident on the GPU.
/// Dispatches recorded into one compute pass. A pass costs Chromium ~0.25 ms, more than
/// many of these kernels take (an iDPC is ~40 dispatches), and nothing is gained by a pass
/// per dispatch: WebGPU orders the dispatches of a pass and makes each see the writes of
/// the ones before. `flush` before any copy or clear, and at the end.
#[derive(Default)]
pub(crate) struct Batch {
    steps: Vec<(
        &'static str,
        wgpu::ComputePipeline,
        wgpu::BindGroup,
        (u32, u32),
    )>,
    /// The engine's pass clock while it runs ([`Engine::time_passes`]): each dispatch is
    /// then a timed pass of its own.
    clock: Option<Arc<PassClock>>,
}

impl Batch {
    /// Bind `k`'s buffers (binding numbers explicit) and queue one dispatch of `groups`.
    pub(crate) fn add(
        &mut self,
        engine: &Engine,
        k: &Kernel,
        bindings: &[(u32, &wgpu::Buffer)],
        groups: (u32, u32),
    ) -> Result<()> {
        let (pipeline, layout) = engine.pipeline(k)?;
        let entries: Vec<wgpu::BindGroupEntry> = bindings
            .iter()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: *i,
                resource: b.as_entire_binding(),
            })
            .collect();
        let bind = engine.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(k.name),
            layout,
            entries: &entries,
        });
        if self.steps.is_empty() {
            self.clock = engine.pass_clock();
        }
        self.steps.push((k.name, pipeline.clone(), bind, groups));
        Ok(())
    }

    /// Record the queued dispatches as one compute pass.
    pub(crate) fn flush(&mut self, encoder: &mut wgpu::CommandEncoder) {
        if self.steps.is_empty() {
            return;
        }
        if let Some(clock) = self.clock.take() {
            for (name, pipeline, bind, groups) in self.steps.drain(..) {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(name),
                    timestamp_writes: clock.compute_writes(name),
                });
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bind, &[]);
                pass.dispatch_workgroups(groups.0, groups.1, 1);
            }
            return;
        }
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("stem4d"),
            timestamp_writes: None,
        });
        for (_, pipeline, bind, groups) in self.steps.drain(..) {
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(groups.0, groups.1, 1);
        }
    }
}

/// An encoder whose dispatches go into shared compute passes ([`Batch`]): a copy ends the
/// current pass, [`Recorder::finish`] the last.
pub(crate) struct Recorder<'a> {
    pub(crate) engine: &'a Engine,
    encoder: &'a mut wgpu::CommandEncoder,
    batch: Batch,
}

impl<'a> Recorder<'a> {
    pub(crate) fn new(engine: &'a Engine, encoder: &'a mut wgpu::CommandEncoder) -> Self {
        Recorder {
            engine,
            encoder,
            batch: Batch::default(),
        }
    }

    pub(crate) fn dispatch(
        &mut self,
        k: &Kernel,
        bindings: &[(u32, &wgpu::Buffer)],
        groups: (u32, u32),
    ) -> Result<()> {
        self.batch.add(self.engine, k, bindings, groups)
    }

    pub(crate) fn copy(&mut self, src: &wgpu::Buffer, dst: &wgpu::Buffer, bytes: u64) {
        self.batch.flush(self.encoder);
        self.encoder.copy_buffer_to_buffer(src, 0, dst, 0, bytes);
    }

    pub(crate) fn finish(mut self) {
        self.batch.flush(self.encoder);
    }
}

/// A submission [`Engine::finished`] can wait for.
pub(crate) struct Submitted {
    pub(crate) index: wgpu::SubmissionIndex,
    pub(super) rx: futures_channel::oneshot::Receiver<()>,
}

impl Engine {
    /// Record one dispatch of `k` over a 2-D grid of `groups` workgroups, buffer `i` bound
    /// at binding `i`.
    pub(crate) fn dispatch(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        k: &Kernel,
        bindings: &[&wgpu::Buffer],
        groups: (u32, u32),
    ) -> Result<()> {
        let at: Vec<(u32, &wgpu::Buffer)> = bindings
            .iter()
            .enumerate()
            .map(|(i, b)| (i as u32, *b))
            .collect();
        self.dispatch_at(encoder, k, &at, groups)
    }

    /// [`Engine::dispatch`] with explicit binding numbers (entry points of a shared module
    /// use only some of its bindings; the automatic layout holds only those).
    pub(crate) fn dispatch_at(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        k: &Kernel,
        bindings: &[(u32, &wgpu::Buffer)],
        groups: (u32, u32),
    ) -> Result<()> {
        let mut batch = Batch::default();
        batch.add(self, k, bindings, groups)?;
        batch.flush(encoder);
        Ok(())
    }
}
