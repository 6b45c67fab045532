//! The engine's side of an upload: where an acquisition's bytes go (GPU decode, the CPU
//! reader's windows, or a generated acquisition) and how the resident is finished.

use crate::error::{Error, Result};
use crate::formats::{Acquisition, IndexFeed};
use crate::frames::{Correction, FrameReader, Samples};
use crate::gpu::{plan_of, Engine, Resident, UploadTimes};
use crate::kernels;
use crate::upload::gpu_decode as decode;
use crate::upload::plan::{DeviceLimits, FloatRange, ResidentPlan, UPLOAD_WINDOW};
#[cfg(target_arch = "wasm32")]
use crate::upload::window_bytes;

impl Engine {
    /// Make the staging ring uploads from files go through now, while the page is idle,
    /// instead of in its first load.
    #[cfg(target_arch = "wasm32")]
    pub fn prepare_uploads(&self) {
        let mut ring = self.staging.borrow_mut();
        if ring.is_none() {
            *ring = Some(window_bytes::Staging::made_now(&self.device));
        }
    }

    /// The staging ring for an upload: the one kept, or an empty one that grows as it goes.
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn take_staging(&self) -> window_bytes::Staging {
        let mut ring = self
            .staging
            .borrow_mut()
            .take()
            .unwrap_or_else(window_bytes::Staging::new);
        ring.count_from_now();
        ring
    }

    /// Keep an upload's staging ring for the next, if it is left whole.
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn keep_staging(&self, ring: window_bytes::Staging) {
        if ring.reusable() {
            *self.staging.borrow_mut() = Some(ring);
        }
    }

    /// Decode (CPU), correct and upload the acquisition, buffer by buffer. Refuses a plan
    /// that does not fit instead of failing halfway.
    pub async fn upload(&self, acq: &Acquisition, corr: Correction) -> Result<Resident> {
        self.upload_with_limits(acq, corr, self.adapter.limits)
            .await
    }

    /// Behave as a GPU with `bytes` of memory (`None`: the adapter's own): a resident whose
    /// payload passes them is refused as out of memory, as a driver refuses it. WebGPU says
    /// nothing of the memory it has, so what follows a refusal is tested this way.
    pub fn simulate_memory(&self, bytes: Option<u64>) {
        self.memory_ceiling.store(
            bytes.unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// The ceiling of a simulated GPU memory where `bytes` held would pass it.
    pub(crate) fn simulated_ceiling_passed(&self, bytes: u64) -> Option<u64> {
        let ceiling = self
            .memory_ceiling
            .load(std::sync::atomic::Ordering::Relaxed);
        (bytes > ceiling).then_some(ceiling)
    }

    /// A block of a streamed pass or a compressed build (a crop of scan rows) uploaded as
    /// [`Engine::upload`] uploads it; where its open deferred B-tree leaves, the GPU decoder
    /// reads them from `*feed` as it goes (decision 0047). Where the feed's chunks are not
    /// as planned (leaves out of key order, a chunk the GPU decoder skips), the block's
    /// index is completed from the feed (`Acquisition::complete_index`), `*feed` becomes
    /// `None` (later blocks go through the whole index, as an open that read it) and the
    /// block is uploaded again.
    pub async fn upload_block(
        &self,
        block: &mut Acquisition,
        feed: &mut Option<&IndexFeed>,
        corr: Correction,
    ) -> Result<Resident> {
        if let Some(fed) = feed.filter(|_| block.index_pending()) {
            let plan = plan_of(block, corr.bin, self.adapter.limits)?;
            let quiet = &mut |_, _| {};
            if let Some(res) = self.upload_fed(block, fed, corr, plan, quiet).await? {
                return Ok(res);
            }
            block.complete_index(fed).await?;
            *feed = None;
        }
        self.upload(block, corr).await
    }

    /// [`Engine::upload`] packed on the CPU even where the GPU decoder could take it: its
    /// peak has no decode windows (a streaming block within a small budget).
    pub async fn upload_cpu_packed(&self, acq: &Acquisition, corr: Correction) -> Result<Resident> {
        let plan = plan_of(acq, corr.bin, self.adapter.limits)?;
        self.upload_from(acq, None, corr, plan, &mut |_, _| {}, false)
            .await?
            .ok_or_else(|| {
                Error::param(format!(
                    "{}: the chunk index is not complete (Acquisition::finish_index)",
                    acq.primary
                ))
            })
    }

    /// [`Engine::upload`] under tighter limits than the adapter's (tests force splits).
    pub async fn upload_with_limits(
        &self,
        acq: &Acquisition,
        corr: Correction,
        limits: DeviceLimits,
    ) -> Result<Resident> {
        let plan = plan_of(acq, corr.bin, limits)?;
        self.upload_plan(acq, corr, plan, &mut |_, _| {}).await
    }

    /// Upload along `plan` (made by the caller, e.g. to show it first), calling
    /// `progress(frames_done, frames_total)` after every window.
    pub async fn upload_plan(
        &self,
        acq: &Acquisition,
        corr: Correction,
        plan: ResidentPlan,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Resident> {
        self.upload_from(acq, None, corr, plan, progress, true)
            .await?
            .ok_or_else(|| {
                Error::param(format!(
                    "{}: the chunk index is not complete (Acquisition::finish_index)",
                    acq.primary
                ))
            })
    }

    /// [`Engine::upload_plan`] of an acquisition whose open deferred B-tree leaves: the GPU
    /// decoder reads them from `feed` as it goes. `None` where it cannot take the whole
    /// acquisition as planned: finish the index (`Acquisition::finish_index`), plan again
    /// and upload.
    pub async fn upload_fed(
        &self,
        acq: &Acquisition,
        feed: &IndexFeed,
        corr: Correction,
        plan: ResidentPlan,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Option<Resident>> {
        self.upload_from(acq, Some(feed), corr, plan, progress, true)
            .await
    }

    /// The upload of `acq` along `plan`, through the GPU decoder where it takes the data
    /// and `gpu_decode` allows it.
    pub(crate) async fn upload_from(
        &self,
        acq: &Acquisition,
        feed: Option<&IndexFeed>,
        corr: Correction,
        plan: ResidentPlan,
        progress: &mut dyn FnMut(usize, usize),
        gpu_decode: bool,
    ) -> Result<Option<Resident>> {
        self.check_alive()?;
        if let Some(ceiling) = self.simulated_ceiling_passed(plan.payload_bytes) {
            return Err(Error::GpuOutOfMemory(format!(
                "{} bytes resident do not fit a GPU simulated with {ceiling} bytes: {}",
                plan.payload_bytes,
                plan.alternatives()
            )));
        }
        self.start_resident(&plan);
        let total_frames = plan.shape.frames();
        let generated = matches!(
            acq.parts.as_slice(),
            [crate::formats::Part {
                kind: crate::formats::PartKind::Synthetic,
                ..
            }]
        );
        if generated && acq.crop.is_none() && corr.bin == 1 && plan.bits == 16 {
            return self
                .generate_synthetic(corr, plan, progress)
                .await
                .map(Some);
        }
        if let Some(res) = self.upload_prepared(acq, corr, &plan, progress).await? {
            return Ok(Some(res));
        }
        if gpu_decode && decode::supported(acq, corr) {
            if let Some(res) = decode::upload(self, acq, feed, corr, &plan, progress).await? {
                return Ok(Some(res));
            }
        }
        if acq.index_pending() {
            // The CPU path reads chunks through the whole index (the GPU decoder refuses a
            // deferred index without a feed of it).
            return Ok(None);
        }
        let reader = FrameReader::new(acq);
        let frame_bytes = plan.frame_words as usize * 4;
        // Windows of whole tiles: the GPU tiles each staged window into the resident.
        let tile = plan.tile as usize;
        let window_frames = ((UPLOAD_WINDOW as usize) / frame_bytes / tile).max(1) * tile;
        let staging = self.storage(
            "upload window",
            (window_frames.min(total_frames) * frame_bytes) as u64,
        );
        let mut buffers = Vec::with_capacity(plan.segments.len());
        let mut float = acq.dtype.is_float().then(FloatRange::default);
        let mut offloaded = 0;
        let mut times = UploadTimes::default();
        // Unbinned integer samples are packed straight from their stored bytes.
        let raw_packing = !acq.dtype.is_float() && corr.bin == 1;
        let bad = corr
            .mask_bad_pixels
            .then_some(acq.pixel_mask.as_deref())
            .flatten();
        let sentinel = corr.mask_bad_pixels.then(|| acq.dtype.sentinel()).flatten();
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let mut made = self.resident_buffers("resident", &plan);
        for seg in &plan.segments {
            let buffer = made.next(self)?;
            let mut f = seg.first_frame;
            let end = seg.first_frame + seg.frames;
            let mut words = Vec::new();
            while f < end {
                let f1 = (f + window_frames).min(end);
                let mut t = crate::clock::now_ms();
                if let Some(decoder) = &self.chunk_decoder {
                    offloaded += reader.predecode(f, f1, decoder.as_ref()).await?;
                    times.lap("read + worker decode", &mut t);
                }
                words.clear();
                if raw_packing {
                    let raw = reader.read_raw(f, f1)?;
                    times.lap("read + decode", &mut t);
                    plan.pack_raw_frames(&raw, bad, sentinel, &mut words);
                } else {
                    let block = reader.block(f, f1, corr)?;
                    times.lap("read + decode", &mut t);
                    match &block.samples {
                        Samples::Int(samples) => plan.pack_frames(samples, &mut words),
                        Samples::Float(samples) => {
                            float.get_or_insert_with(FloatRange::default).take(samples);
                            plan.pack_float_frames(samples, &mut words);
                        }
                    }
                }
                times.lap("correct + pack", &mut t);
                self.queue
                    .write_buffer(&staging, 0, bytemuck::cast_slice(&words));
                self.encode_tiling(&plan, &staging, &buffer, f - seg.first_frame, f1 - f)?;
                times.lap("write to the GPU", &mut t);
                f = f1;
                self.note_memory();
                crate::watch::report(progress, crate::watch::UPLOAD, f, total_frames)?;
            }
            buffers.push(buffer);
        }
        self.queue.submit([]);
        let mut res = self.finish_resident(scope, plan, buffers, corr).await?;
        res.float = float;
        res.offloaded_chunks = offloaded;
        res.upload_times = times;
        Ok(Some(res))
    }

    /// Submit tiling `frames` staged frames (packed frame after frame) into `resident` from
    /// segment position `first` on (a tile boundary).
    pub(crate) fn encode_tiling(
        &self,
        plan: &ResidentPlan,
        staged: &wgpu::Buffer,
        resident: &wgpu::Buffer,
        first: usize,
        frames: usize,
    ) -> Result<()> {
        let words = frames.div_ceil(plan.tile as usize) as u64 * plan.tile_words as u64;
        let groups = kernels::grid(words.div_ceil(256) as u32);
        let params = self.uniform(&kernels::TileParams {
            frames: frames as u32,
            first_tile: (first / plan.tile as usize) as u32,
            frame_words: plan.frame_words,
            tile_words: plan.tile_words,
            bits: plan.bits,
            groups_x: groups.0,
            det_len: plan.shape.det_len() as u32,
            ..Default::default()
        });
        let mut enc = self.device.create_command_encoder(&Default::default());
        self.dispatch(
            &mut enc,
            &kernels::TILE_FRAMES,
            &[&params, staged, resident],
            groups,
        )?;
        self.queue.submit([enc.finish()]);
        Ok(())
    }

    /// Turn an out-of-memory error during upload into the plan's message (its sizes and the
    /// alternatives: C-MEM), else the resident.
    pub(crate) async fn finish_resident(
        &self,
        scope: wgpu::ErrorScopeGuard,
        plan: ResidentPlan,
        buffers: Vec<wgpu::Buffer>,
        correction: Correction,
    ) -> Result<Resident> {
        if let Some(e) = scope.pop().await {
            return Err(Error::GpuOutOfMemory(format!(
                "{} ({e})",
                crate::gpu::out_of_memory(&plan)
            )));
        }
        self.check_alive()?;
        Ok(Resident {
            plan,
            buffers,
            correction,
            float: None,
            offloaded_chunks: 0,
            upload_times: UploadTimes::default(),
            gpu_batches: None,
            gpu_inflated_in_place: 0,
            file_buffer_windows: 0,
            staging_buffers_made: 0,
            leaf_span_windows: 0,
            worker_walked_windows: 0,
            radial: None,
            found_bad: None,
            packed: None,
        })
    }

    /// The synthetic acquisition made on the GPU (`wgsl/synthetic.wgsl`, the same integers
    /// as `formats::synthetic::sample`): nothing is decoded or uploaded.
    pub(crate) async fn generate_synthetic(
        &self,
        corr: Correction,
        plan: ResidentPlan,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Resident> {
        let shape = plan.shape;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let mut buffers = Vec::with_capacity(plan.segments.len());
        let mut made = self.resident_buffers("resident (synthetic)", &plan);
        for seg in &plan.segments {
            let buffer = made.next(self)?;
            let words = seg.bytes / 4;
            let groups = kernels::grid(words.div_ceil(256) as u32);
            let params = self.uniform(&kernels::SynthParams {
                frames: seg.frames as u32,
                first_frame: seg.first_frame as u32,
                tile_words: plan.tile_words,
                det_rows: shape.det[0] as u32,
                det_cols: shape.det[1] as u32,
                scan_cols: shape.scan[1] as u32,
                groups_x: groups.0,
                ..Default::default()
            });
            let mut enc = self.device.create_command_encoder(&Default::default());
            self.dispatch(&mut enc, &kernels::SYNTHETIC, &[&params, &buffer], groups)?;
            self.queue.submit([enc.finish()]);
            buffers.push(buffer);
            self.note_memory();
            progress(seg.first_frame + seg.frames, shape.frames());
        }
        self.finish_resident(scope, plan, buffers, corr).await
    }
}
