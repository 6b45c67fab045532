//! Buffers the engine makes (storage, uniforms, inputs), submissions it tracks, and
//! readback: explicit and asynchronous (`map_async` awaited), never a blocking wait on the web.

use super::*;

impl Engine {
    /// A storage buffer of `size` bytes (at least 16) that copies and clears reach.
    pub fn storage(&self, label: &str, size: u64) -> wgpu::Buffer {
        storage_on(&self.device, label, size)
    }

    pub(crate) fn uniform<T: bytemuck::Pod>(&self, v: &T) -> wgpu::Buffer {
        self.buffer_with("params", bytemuck::bytes_of(v), wgpu::BufferUsages::UNIFORM)
    }

    /// Upload `data` as a read-only storage buffer (an empty slice becomes one zero word).
    pub fn input(&self, data: &[u32]) -> wgpu::Buffer {
        let data: &[u32] = if data.is_empty() { &[0] } else { data };
        self.input_bytes(bytemuck::cast_slice(data))
    }

    /// Upload `bytes` (a multiple of 4, at least 4) as a read-only storage buffer.
    pub(crate) fn input_bytes(&self, bytes: &[u8]) -> wgpu::Buffer {
        self.buffer_with("input", bytes, wgpu::BufferUsages::STORAGE)
    }

    /// A buffer holding `bytes` (a multiple of 4). Small ones are written through the queue:
    /// in a browser a buffer mapped at creation costs a shared-memory allocation and a round
    /// of IPC, and every image update makes a dozen parameter buffers, where a queue write
    /// travels inline with the commands (applied before the next submit, which is the first
    /// that can use the buffer).
    pub(crate) fn buffer_with(
        &self,
        label: &str,
        bytes: &[u8],
        usage: wgpu::BufferUsages,
    ) -> wgpu::Buffer {
        const INLINE: usize = 256 << 10;
        if bytes.len() > INLINE {
            return self
                .device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some(label),
                    contents: bytes,
                    usage,
                });
        }
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: (bytes.len() as u64).next_multiple_of(4).max(4),
            usage: usage | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.queue.write_buffer(&buffer, 0, bytes);
        buffer
    }

    /// Submit `commands`, keeping a handle that [`Engine::finished`] waits on.
    pub(crate) fn submit_tracked(&self, commands: wgpu::CommandBuffer) -> Submitted {
        let index = self.queue.submit([commands]);
        Submitted {
            index,
            rx: self.work_done(),
        }
    }

    /// Resolves once everything submitted so far has finished on the GPU (on native, only
    /// while the device is polled).
    pub(crate) fn work_done(&self) -> futures_channel::oneshot::Receiver<()> {
        let (tx, rx) = futures_channel::oneshot::channel();
        self.queue.on_submitted_work_done(move || {
            let _ = tx.send(());
        });
        rx
    }

    #[cfg(target_arch = "wasm32")]
    /// A fence recorded at the end of `enc`: a 4-byte buffer cleared there, mapped (with
    /// [`Engine::all_mapped_for_read`]) once the caller has submitted `enc`. Chromium reports
    /// a finished mapping sooner than `onSubmittedWorkDone` (decision 0011).
    pub(crate) fn fence(&self, enc: &mut wgpu::CommandEncoder) -> wgpu::Buffer {
        let b = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("fence"),
            size: 4,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        enc.clear_buffer(&b, 0, None);
        b
    }

    /// Map `buffer` (MAP_READ) whole and wait for it, asynchronously on the web and nudged
    /// there ([`nudge`]); a failure is `what` failing.
    pub(crate) async fn mapped_for_read(&self, buffer: &wgpu::Buffer, what: &str) -> Result<()> {
        self.all_mapped_for_read(&[buffer], what).await
    }

    /// [`Engine::mapped_for_read`] of several buffers in one wait: mapped together, they
    /// come back in the same round trip (an update's fence and its canvases' pixels).
    pub(crate) async fn all_mapped_for_read(
        &self,
        buffers: &[&wgpu::Buffer],
        what: &str,
    ) -> Result<()> {
        let waits: Vec<_> = buffers
            .iter()
            .map(|buffer| {
                let (tx, rx) = futures_channel::oneshot::channel();
                buffer.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                    let _ = tx.send(r);
                });
                rx
            })
            .collect();
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("waiting for the GPU failed: {e}")))?;
        let all = async {
            let mut out = Ok(());
            for rx in waits {
                let r = rx
                    .await
                    .map_err(|_| Error::DeviceLost(format!("{what} was cancelled (device lost?)")))
                    .and_then(|r| r.map_err(|e| Error::Gpu(format!("{what} failed: {e}"))));
                out = out.and(r);
            }
            out
        };
        nudge::nudged(&self.device, all).await?;
        self.check_alive()
    }

    /// Wait (asynchronously on the web) until a tracked submission has finished on the GPU.
    pub(crate) async fn finished(&self, s: Submitted) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(s.index),
                timeout: None,
            })
            .map_err(|e| Error::Gpu(format!("waiting for the GPU failed: {e}")))?;
        #[cfg(target_arch = "wasm32")]
        let _ = s.index;
        s.rx.await
            .map_err(|_| Error::DeviceLost("GPU work was dropped (device lost?)".into()))?;
        self.check_alive()
    }

    /// Copy `buffer` to a mappable staging buffer and read it back asynchronously.
    pub async fn read_back(&self, buffer: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        self.read_back_range(buffer, 0, bytes).await
    }

    /// Read `bytes` from `offset` of `buffer` (both multiples of 4) asynchronously.
    pub async fn read_back_range(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        bytes: u64,
    ) -> Result<Vec<u8>> {
        let bytes = bytes.max(4).next_multiple_of(4);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, bytes);
        self.queue.submit([encoder.finish()]);
        self.mapped_for_read(&staging, "readback").await?;
        let view = staging
            .get_mapped_range(..)
            .map_err(|e| Error::Gpu(format!("readback mapping failed: {e:?}")))?;
        let out = view.to_vec();
        drop(view);
        staging.unmap();
        Ok(out)
    }
}

/// A storage buffer of `size` bytes (at least 16) that copies and clears reach, made on
/// `device` (from any thread: `resident_buffers` makes them ahead).
pub(crate) fn storage_on(device: &wgpu::Device, label: &str, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size.max(16),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}
