//! The wgpu engine shared by the browser and native: device setup within the adapter's
//! limits, the resident acquisition split across buffers, and one kernel per product.
//! Readback is explicit and asynchronous (`map_async` + await), never a blocking wait on the web.

#[cfg(not(target_arch = "wasm32"))]
pub mod kernel_stats;
pub(crate) mod nudge;
pub mod pass_clock;
#[cfg(not(target_arch = "wasm32"))]
pub mod spirv;
#[cfg(target_arch = "wasm32")]
mod web_subgroups;

use std::sync::{Arc, Mutex};

use serde::Serialize;
use wgpu::util::DeviceExt;

use crate::display::gpu as display;
use crate::error::{Error, Result};
use crate::formats::{Acquisition, IndexFeed};
use crate::frames::{ChunkDecoder, Correction, FrameReader, Samples};
use crate::kernels::{self, Kernel};
use crate::products::radial;
use crate::upload::gpu_decode as decode;
use crate::upload::plan::{DeviceLimits, FloatRange, ResidentPlan, UPLOAD_WINDOW};
use crate::upload::set_aside;
#[cfg(target_arch = "wasm32")]
use crate::upload::window_bytes;
use pass_clock::{PassClock, PassTimes};

/// What the user and the profile are told about the adapter.
#[derive(Clone, Debug, Serialize)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    /// SwiftShader, llvmpipe/lavapipe, WARP: correct, never fast; timings are labelled.
    pub software: bool,
    pub limits: DeviceLimits,
}

/// What the page and the load profile report: the adapter, and how masked sums meet on
/// the engine at that moment ([`Engine::masked_sum_path`], which tests switch).
#[derive(Clone, Debug, Serialize)]
pub struct EngineSummary {
    #[serde(flatten)]
    pub adapter: AdapterSummary,
    pub masked_sums: &'static str,
}

pub fn is_software(info: &wgpu::AdapterInfo) -> bool {
    let name = info.name.to_lowercase();
    info.device_type == wgpu::DeviceType::Cpu
        || ["llvmpipe", "lavapipe", "swiftshader", "warp", "softpipe"]
            .iter()
            .any(|s| name.contains(s))
}

/// NVIDIA GPUs run the masked sum faster with sixteen times the atomics than with workgroup
/// memory (H200, BF r=30: 0.56 against 0.83 ms); on other GPUs, whose atomics were not
/// measured, workgroup memory keeps the atomic traffic low. The browser gives no PCI vendor
/// (wgpu 30 fills only the name), so the name is read as well.
fn prefers_atomic_sums(info: &wgpu::AdapterInfo) -> bool {
    const NVIDIA: u32 = 0x10de;
    info.vendor == NVIDIA || info.name.to_lowercase().contains("nvidia")
}

pub struct Engine {
    /// Kept so the browser can create canvas surfaces on the same instance.
    pub instance: wgpu::Instance,
    /// Kept so canvas surfaces can ask which formats they support.
    pub raw_adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: AdapterSummary,
    lost: Arc<Mutex<Option<String>>>,
    /// Each kernel's pipeline and its bind group layout, asked for once: on the web every
    /// `getBindGroupLayout` is a new object sent to the GPU process, and an update binds a
    /// dozen dispatches.
    pipelines: Vec<(&'static str, wgpu::ComputePipeline, wgpu::BindGroupLayout)>,
    /// Whether the subgroup kernels are built and used ([`kernels::SUBGROUP_KERNELS`]).
    subgroups: bool,
    /// Kernels built from SPIR-V with workgroup-scoped barriers (see `spirv`).
    scoped_kernels: Vec<&'static str>,
    /// Without subgroups, masked sums add each invocation's lanes atomically instead of
    /// meeting in workgroup memory ([`Engine::atomic_sums`]).
    atomic_sums: bool,
    /// Decodes the chunks the WGSL decoder does not cover (deflate, shuffle) away from the
    /// uploading thread: the browser's decode Workers. Without one, the reader decodes them
    /// itself (natively on its rayon threads).
    chunk_decoder: Option<Box<dyn ChunkDecoder + Send + Sync>>,
    /// The segments of a resident being replaced, for the next upload ([`set_aside`]).
    set_aside: set_aside::SetAside,
    /// The display's render pipeline per canvas format, made once per device: compiling it
    /// is the GPU process's work, and a new session's first image should not wait for it.
    renderers: Mutex<Vec<(wgpu::TextureFormat, display::Renderer)>>,
    /// Timestamps around every pass while a benchmark asks ([`Engine::time_passes`]).
    clock: Mutex<Option<Arc<PassClock>>>,
    /// The browser's staging ring for the File API's bytes, between uploads: made before
    /// the first ([`Engine::prepare_uploads`]) and kept for the next.
    #[cfg(target_arch = "wasm32")]
    staging: std::cell::RefCell<Option<window_bytes::Staging>>,
}

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
    index: wgpu::SubmissionIndex,
    rx: futures_channel::oneshot::Receiver<()>,
}

pub struct Resident {
    pub plan: ResidentPlan,
    pub buffers: Vec<wgpu::Buffer>,
    pub correction: Correction,
    /// Float32 residents: the binary orders seen at upload (exact-sum bounds).
    pub float: Option<FloatRange>,
    /// Chunks the engine's [`ChunkDecoder`] decoded during the upload.
    pub offloaded_chunks: usize,
    /// Where the upload's time went (milliseconds by step), for the load profile.
    pub upload_times: UploadTimes,
    /// LZ4 blocks the GPU decoder inflated by one invocation each (blocks over 8 KiB, or
    /// with more sequences than their region held) rather than from parsed sequences.
    pub gpu_inflated_in_place: u32,
    /// Windows uploaded from the File API's own buffers (the browser; see `window_bytes`).
    pub file_buffer_windows: u32,
    /// Staging buffers the upload had to make (the browser; see `window_bytes::Staging`).
    pub staging_buffers_made: u32,
    /// Windows read as the file spans of their chunks' B-tree leaves (a deferred index).
    pub leaf_span_windows: u32,
    /// Of those, windows whose chunk headers the Workers that read them walked.
    pub worker_walked_windows: u32,
    /// Ring sums about the BF centre, once made ([`radial::RadialCache::build`]): masked
    /// sums of disks and annuli about it read them instead of most of their pixels.
    pub radial: Option<radial::RadialCache>,
    /// Hot and dead pixels found in this resident's mean pattern and zeroed in it
    /// ([`products::settle_bad_pixels`]), as a mask of its detector.
    pub found_bad: Option<Vec<bool>>,
}

/// The size of a resident segment's buffer of `bytes` (as [`Engine::storage`] makes it).
fn resident_size(bytes: u64) -> u64 {
    bytes.max(16)
}

/// The memory plan of `acq` binned by `bin` under `limits`, its largest chunk counted.
pub fn plan_of(acq: &Acquisition, bin: usize, limits: DeviceLimits) -> Result<ResidentPlan> {
    let (stored, logical) = acq.largest_chunk();
    Ok(
        ResidentPlan::new(acq.shape.binned(bin), acq.dtype, bin > 1, limits)?
            .with_largest_chunk(stored, logical),
    )
}

/// Milliseconds an upload spent in each of its steps, in order of first use.
#[derive(Clone, Debug, Default)]
pub struct UploadTimes(pub Vec<(&'static str, f64)>);

impl UploadTimes {
    /// Add the time since `*since` to `step` and restart the clock.
    pub fn lap(&mut self, step: &'static str, since: &mut f64) {
        let now = crate::clock::now_ms();
        match self.0.iter_mut().find(|(s, _)| *s == step) {
            Some((_, ms)) => *ms += now - *since,
            None => self.0.push((step, now - *since)),
        }
        *since = now;
    }
}

impl Engine {
    /// Pick the best adapter, request its real buffer limits (the defaults silently cap at
    /// 128/256 MiB) and build every pipeline.
    pub async fn new() -> Result<Engine> {
        Engine::with_kernels(&[]).await
    }

    /// [`Engine::new`] building `overrides` — (kernel name, WGSL that follows the common
    /// prelude) — in place of those kernels' embedded texts: kernel variants timed or checked
    /// on a remote GPU without a rebuild (`stem4d bench gpu --kernels DIR`).
    pub async fn with_kernels(overrides: &[(String, String)]) -> Result<Engine> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| {
                Error::Gpu(format!(
                    "no GPU adapter available ({e}); WebGPU/Vulkan/Metal/DX12 needed"
                ))
            })?;
        let info = adapter.get_info();
        let al = adapter.limits();
        let limits = wgpu::Limits {
            max_buffer_size: al.max_buffer_size,
            max_storage_buffer_binding_size: al.max_storage_buffer_binding_size,
            max_compute_workgroups_per_dimension: al.max_compute_workgroups_per_dimension,
            // WebGPU's default is 8; the decode kernels bind up to 6.
            max_storage_buffers_per_shader_stage: al.max_storage_buffers_per_shader_stage.min(8),
            ..wgpu::Limits::downlevel_defaults()
        };
        // Subgroups where the adapter has them (in the browser asked for apart from wgpu:
        // `web_subgroups`), and timestamps for the benchmarks' pass clock.
        let features =
            adapter.features() & (wgpu::Features::SUBGROUP | wgpu::Features::TIMESTAMP_QUERY);
        #[cfg(target_arch = "wasm32")]
        web_subgroups::ask();
        // SPIR-V passed through on Vulkan, for the kernels whose barriers naga scopes wider
        // than WGSL does (see `spirv`).
        let passthrough = wgpu::Features::PASSTHROUGH_SHADERS;
        let spirv_barriers = cfg!(not(target_arch = "wasm32"))
            && info.backend == wgpu::Backend::Vulkan
            && adapter.features().contains(passthrough);
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("stem4d"),
                required_features: if spirv_barriers {
                    features | passthrough
                } else {
                    features
                },
                required_limits: limits,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Gpu(format!("cannot open the GPU device on {}: {e}", info.name)))?;
        #[cfg(target_arch = "wasm32")]
        let device_subgroups = web_subgroups::granted();
        #[cfg(not(target_arch = "wasm32"))]
        let device_subgroups = features.contains(wgpu::Features::SUBGROUP);
        let lost = Arc::new(Mutex::new(None));
        let lost_cb = lost.clone();
        device.set_device_lost_callback(move |reason, msg| {
            if let Ok(mut l) = lost_cb.lock() {
                *l = Some(format!("{reason:?}: {msg}"));
            }
        });
        let adapter_summary = AdapterSummary {
            name: info.name.clone(),
            backend: format!("{:?}", info.backend),
            device_type: format!("{:?}", info.device_type),
            driver: format!("{} {}", info.driver, info.driver_info),
            software: is_software(&info),
            limits: DeviceLimits {
                max_buffer_size: al.max_buffer_size,
                max_storage_binding: al.max_storage_buffer_binding_size as u64,
            },
        };
        #[cfg(not(target_arch = "wasm32"))]
        check_override_sizes(
            overrides,
            device.limits().max_compute_workgroup_storage_size,
            &info.name,
        )?;
        let mut pipelines = if spirv_barriers {
            scoped_pipelines(&device, overrides).await
        } else {
            Vec::new()
        };
        let scoped_kernels: Vec<&'static str> = pipelines.iter().map(|p| p.0).collect();
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        for k in kernels::ALL {
            if !scoped_kernels.contains(&k.name) {
                pipelines.push((k.name, build_pipeline(&device, &k, overrides)));
            }
        }
        if let Some(e) = scope.pop().await {
            let replaced: Vec<&str> = overrides.iter().map(|(n, _)| n.as_str()).collect();
            return Err(Error::Gpu(format!(
                "shader pipeline rejected by {}{}: {e}",
                info.name,
                if replaced.is_empty() {
                    String::new()
                } else {
                    format!(" (replaced kernels: {})", replaced.join(", "))
                }
            )));
        }
        // The subgroup kernels are an optimisation: a driver that rejects them leaves the
        // workgroup-memory kernels in charge.
        let mut subgroups = false;
        if device_subgroups {
            let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
            let extra: Vec<_> = kernels::SUBGROUP_KERNELS
                .iter()
                .map(|k| (k.name, build_pipeline(&device, k, overrides)))
                .collect();
            if scope.pop().await.is_none() {
                pipelines.extend(extra);
                subgroups = true;
            }
        }
        Ok(Engine {
            instance,
            raw_adapter: adapter,
            device,
            queue,
            adapter: adapter_summary,
            lost,
            pipelines: pipelines
                .into_iter()
                .map(|(n, p)| {
                    let layout = p.get_bind_group_layout(0);
                    (n, p, layout)
                })
                .collect(),
            scoped_kernels,
            subgroups,
            atomic_sums: prefers_atomic_sums(&info),
            chunk_decoder: None,
            set_aside: Default::default(),
            renderers: Mutex::new(Vec::new()),
            clock: Mutex::new(None),
            #[cfg(target_arch = "wasm32")]
            staging: Default::default(),
        })
    }

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

    /// The renderer drawing planes into `format` targets (made on first asking; the page
    /// asks when a canvas is attached).
    pub fn renderer(&self, format: wgpu::TextureFormat) -> display::Renderer {
        let mut made = self.renderers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, r)) = made.iter().find(|(f, _)| *f == format) {
            return r.clone();
        }
        let r = display::Renderer::new(self, format);
        made.push((format, r.clone()));
        r
    }

    /// The kernels built from SPIR-V whose storage barriers are workgroup-scoped, as WGSL
    /// defines them, instead of naga's Device scope (Vulkan only; see `spirv`).
    pub fn workgroup_scoped_kernels(&self) -> &[&'static str] {
        &self.scoped_kernels
    }

    /// Whether the kernels that use subgroup operations run (the adapter has subgroups and
    /// they were not turned off).
    pub fn subgroups(&self) -> bool {
        self.subgroups
    }

    /// Whether masked sums without subgroups add every invocation's lanes atomically
    /// (`masked_sum_atomic`) rather than meeting them in workgroup memory first.
    pub fn atomic_sums(&self) -> bool {
        self.atomic_sums
    }

    /// How masked sums meet on this engine, in words (benchmark headers, [`Engine::summary`]).
    pub fn masked_sum_path(&self) -> &'static str {
        if self.subgroups {
            "through subgroups"
        } else if self.atomic_sums {
            "atomically in the output"
        } else {
            "in workgroup memory"
        }
    }

    /// The adapter and how masked sums meet now, as the page and the profile report them.
    pub fn summary(&self) -> EngineSummary {
        EngineSummary {
            adapter: self.adapter.clone(),
            masked_sums: self.masked_sum_path(),
        }
    }

    /// Choose how masked sums meet without subgroups: tests run both ways on one adapter.
    pub fn use_atomic_sums(&mut self, on: bool) {
        self.atomic_sums = on;
    }

    /// Turn the subgroup kernels off (or back on, where built): tests compare both paths.
    pub fn use_subgroups(&mut self, on: bool) {
        self.subgroups = on && self.pipeline(&kernels::MASKED_SUM_SUBGROUP).is_ok();
    }

    /// Time every pass from now on ([`pass_clock`]) where the device has timestamps, and
    /// say whether it does; `false` turns the clock off.
    pub fn time_passes(&self, on: bool) -> bool {
        let mut clock = self.clock.lock().unwrap_or_else(|e| e.into_inner());
        if !on
            || !self
                .device
                .features()
                .contains(wgpu::Features::TIMESTAMP_QUERY)
        {
            *clock = None;
            return false;
        }
        // wgpu's web types are not Send; the page runs the engine on one thread, and native
        // (where it is shared across threads) has Send + Sync types.
        #[allow(clippy::arc_with_non_send_sync)]
        clock.get_or_insert_with(|| Arc::new(PassClock::new(&self.device, &self.queue)));
        true
    }

    pub(crate) fn pass_clock(&self) -> Option<Arc<PassClock>> {
        self.clock.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The passes timed since the last call, once the GPU has run them (None while the
    /// clock is off).
    pub async fn pass_times(&self) -> Result<Option<PassTimes>> {
        let Some(clock) = self.pass_clock() else {
            return Ok(None);
        };
        let mut enc = self.device.create_command_encoder(&Default::default());
        let (labels, untimed) = clock.resolve(&mut enc);
        if labels.is_empty() {
            return clock.times(labels, untimed, &[]).map(Some);
        }
        self.queue.submit([enc.finish()]);
        let bytes = self
            .read_back(clock.resolved(), 16 * labels.len() as u64)
            .await?;
        clock.times(labels, untimed, &bytes).map(Some)
    }

    /// Decode CPU-side chunks with `decoder` from now on (see [`Engine::upload_plan`]).
    pub fn set_chunk_decoder(&mut self, decoder: Box<dyn ChunkDecoder + Send + Sync>) {
        self.chunk_decoder = Some(decoder);
    }

    /// How many decodes the engine's chunk decoder runs at once (0: none set).
    pub fn chunk_decode_workers(&self) -> usize {
        self.chunk_decoder.as_ref().map_or(0, |d| d.workers())
    }

    fn pipeline(&self, k: &Kernel) -> Result<(&wgpu::ComputePipeline, &wgpu::BindGroupLayout)> {
        self.pipelines
            .iter()
            .find(|(n, _, _)| *n == k.name)
            .map(|(_, p, l)| (p, l))
            .ok_or_else(|| Error::Gpu(format!("kernel {} not built", k.name)))
    }

    pub(crate) fn check_alive(&self) -> Result<()> {
        match self.lost.lock().ok().and_then(|l| l.clone()) {
            Some(why) => Err(Error::Gpu(format!(
                "the GPU device was lost ({why}); reopen the acquisition to recover"
            ))),
            None => Ok(()),
        }
    }

    /// Decode (CPU), correct and upload the acquisition, buffer by buffer. Refuses a plan
    /// that does not fit instead of failing halfway.
    pub async fn upload(&self, acq: &Acquisition, corr: Correction) -> Result<Resident> {
        self.upload_with_limits(acq, corr, self.adapter.limits)
            .await
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
        self.upload_from(acq, None, corr, plan, progress)
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
        self.upload_from(acq, Some(feed), corr, plan, progress)
            .await
    }

    async fn upload_from(
        &self,
        acq: &Acquisition,
        feed: Option<&IndexFeed>,
        corr: Correction,
        plan: ResidentPlan,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Option<Resident>> {
        self.check_alive()?;
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
        if decode::supported(acq, corr) {
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
        for seg in &plan.segments {
            let buffer = self.resident_buffer("resident", seg.bytes);
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
                progress(f, total_frames);
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
    fn encode_tiling(
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

    /// Turn an out-of-memory error during upload into the plan's message, else the resident.
    pub(crate) async fn finish_resident(
        &self,
        scope: wgpu::ErrorScopeGuard,
        plan: ResidentPlan,
        buffers: Vec<wgpu::Buffer>,
        correction: Correction,
    ) -> Result<Resident> {
        if let Some(e) = scope.pop().await {
            return Err(Error::Gpu(format!(
                "out of GPU memory for {} bytes resident (peak {}): {} ({e})",
                plan.payload_bytes,
                plan.peak_bytes,
                plan.alternatives()
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
            gpu_inflated_in_place: 0,
            file_buffer_windows: 0,
            staging_buffers_made: 0,
            leaf_span_windows: 0,
            worker_walked_windows: 0,
            radial: None,
            found_bad: None,
        })
    }

    /// The synthetic acquisition made on the GPU (`wgsl/synthetic.wgsl`, the same integers
    /// as `formats::synthetic::sample`): nothing is decoded or uploaded.
    async fn generate_synthetic(
        &self,
        corr: Correction,
        plan: ResidentPlan,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Resident> {
        let shape = plan.shape;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let mut buffers = Vec::with_capacity(plan.segments.len());
        for seg in &plan.segments {
            let buffer = self.resident_buffer("resident (synthetic)", seg.bytes);
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
            progress(seg.first_frame + seg.frames, shape.frames());
        }
        self.finish_resident(scope, plan, buffers, corr).await
    }

    /// Zero detector pixels `pixels` (indices of the resident's detector) at every scan
    /// position of `res`: bad-pixel masking of pixels found after the upload
    /// (`wgsl/zero_pixels.wgsl`). Ring sums made before are dropped.
    pub fn zero_pixels(&self, res: &mut Resident, pixels: &[u32]) -> Result<()> {
        if pixels.is_empty() {
            return Ok(());
        }
        let plan = &res.plan;
        let list = self.input(pixels);
        let mut enc = self.device.create_command_encoder(&Default::default());
        for (seg, buffer) in plan.segments.iter().zip(&res.buffers) {
            let tiles = seg.frames.div_ceil(plan.tile as usize) as u32;
            let words = tiles as u64 * pixels.len() as u64 * 8;
            let groups = kernels::grid(words.div_ceil(256) as u32);
            let params = self.uniform(&kernels::ZeroParams {
                tiles,
                tile_words: plan.tile_words,
                pixels: pixels.len() as u32,
                groups_x: groups.0,
            });
            self.dispatch(
                &mut enc,
                &kernels::ZERO_PIXELS,
                &[&params, &list, buffer],
                groups,
            )?;
        }
        self.queue.submit([enc.finish()]);
        res.radial = None;
        Ok(())
    }

    /// Keep `res`'s segment buffers for the next upload to reuse where its segments have
    /// their sizes ([`set_aside`]); the rest of `res` is freed. Call
    /// [`Engine::release_set_aside`] once that upload is made (or the open failed).
    pub fn set_aside(&self, res: Resident) {
        self.set_aside.keep(res.buffers);
    }

    /// Free the buffers set aside that no upload reused.
    pub fn release_set_aside(&self) {
        self.set_aside.release();
    }

    /// Resident buffers set aside and not yet reused (tests, diagnostics).
    pub fn set_aside_buffers(&self) -> usize {
        self.set_aside.len()
    }

    /// Resident buffers reused from those set aside since the engine started.
    pub fn reused_resident_buffers(&self) -> usize {
        self.set_aside.taken()
    }

    /// Start the resident of `plan` (every upload path, before it makes any buffer): of the
    /// buffers set aside, keep those its segments can reuse and free the others, before
    /// [`Engine::resident_buffer`] makes new ones.
    fn start_resident(&self, plan: &ResidentPlan) {
        self.set_aside
            .keep_only(plan.segments.iter().map(|s| resident_size(s.bytes)));
    }

    /// A buffer for a resident segment of `bytes`: one set aside of its size, else a new
    /// one; cleared either way, in a submission of its own (partial tiles keep what is
    /// there). A new buffer would be cleared anyway, by WebGPU at its first use: in the
    /// first decode window's submission, which then waited for the fresh memory's first
    /// touch. Cleared here, while the host still builds that window, the first load of a
    /// page waited 0.14–0.19 s for the GPU instead of 0.45–0.54 (BENCHMARKS, session 16).
    pub(crate) fn resident_buffer(&self, label: &str, bytes: u64) -> wgpu::Buffer {
        let buffer = self
            .set_aside
            .take(resident_size(bytes))
            .unwrap_or_else(|| self.storage(label, resident_size(bytes)));
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.clear_buffer(&buffer, 0, None);
        self.queue.submit([enc.finish()]);
        buffer
    }

    /// A storage buffer of `size` bytes (at least 16) that copies and clears reach.
    pub fn storage(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(16),
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
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
    fn buffer_with(&self, label: &str, bytes: &[u8], usage: wgpu::BufferUsages) -> wgpu::Buffer {
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
    /// a finished mapping sooner than `onSubmittedWorkDone` (BENCHMARKS, session 12).
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
                    .map_err(|_| Error::Gpu(format!("{what} was cancelled (device lost?)")))
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
            .map_err(|_| Error::Gpu("GPU work was dropped (device lost?)".into()))?;
        self.check_alive()
    }

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

/// Replaced kernels that use more workgroup memory than the device allows, refused by name
/// before they are built (see [`kernels::workgroup_bytes`]).
#[cfg(not(target_arch = "wasm32"))]
fn check_override_sizes(overrides: &[(String, String)], limit: u32, adapter: &str) -> Result<()> {
    for k in kernels::compute_kernels() {
        if !overrides.iter().any(|(name, _)| name == k.name) {
            continue;
        }
        // A text naga cannot read is reported by the build, with the driver's words.
        if let Ok(bytes) = kernels::workgroup_bytes(&k.source_with(overrides), k.entry) {
            if bytes > limit {
                return Err(Error::Gpu(format!(
                    "replaced kernel {} uses {bytes} bytes of workgroup memory; {adapter} allows {limit}",
                    k.name
                )));
            }
        }
    }
    Ok(())
}

/// `k`'s pipeline from its WGSL (replaced by `overrides`); errors surface through the
/// caller's error scope.
fn build_pipeline(
    device: &wgpu::Device,
    k: &Kernel,
    overrides: &[(String, String)],
) -> wgpu::ComputePipeline {
    let text = k.source_with(overrides);
    #[cfg(target_arch = "wasm32")]
    let text = if k.needs_subgroups() {
        format!("{}{text}", web_subgroups::SUBGROUP_DIRECTIVE)
    } else {
        text
    };
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(k.name),
        source: wgpu::ShaderSource::Wgsl(text.into()),
    });
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(k.name),
        layout: None,
        module: &module,
        entry_point: Some(k.entry),
        compilation_options: Default::default(),
        cache: None,
    })
}

/// The kernels built from SPIR-V with their storage barriers workgroup-scoped (see
/// [`scoped_pipeline`]).
#[cfg(not(target_arch = "wasm32"))]
async fn scoped_pipelines(
    device: &wgpu::Device,
    overrides: &[(String, String)],
) -> Vec<(&'static str, wgpu::ComputePipeline)> {
    let mut out = Vec::new();
    for k in kernels::ALL {
        if let Some(p) = scoped_pipeline(device, &k, overrides).await {
            out.push((k.name, p));
        }
    }
    out
}

/// None on the web: the browser translates the WGSL itself.
#[cfg(target_arch = "wasm32")]
async fn scoped_pipelines(
    _: &wgpu::Device,
    _: &[(String, String)],
) -> Vec<(&'static str, wgpu::ComputePipeline)> {
    Vec::new()
}

/// `k`'s pipeline from SPIR-V with its storage barriers workgroup-scoped (see `spirv`), when
/// it has one and the driver takes the module; otherwise none, and `k` is built from its WGSL
/// (whose errors then name a module naga or the driver refused). The text test only spares
/// the other kernels a second translation; the SPIR-V decides.
#[cfg(not(target_arch = "wasm32"))]
async fn scoped_pipeline(
    device: &wgpu::Device,
    k: &Kernel,
    overrides: &[(String, String)],
) -> Option<wgpu::ComputePipeline> {
    let source = k.source_with(overrides);
    if !source.contains("storageBarrier") {
        return None;
    }
    let s = spirv::entry_spirv(&source, k.entry, spirv::Target::ENGINE).ok()?;
    // The engine binds every kernel's buffers as group 0.
    if s.scoped_barriers == 0 || s.bindings.iter().any(|b| b.0 != 0) {
        return None;
    }
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let p = passthrough_pipeline(device, k, s);
    let failed = internal.pop().await.is_some();
    (!(validation.pop().await.is_some() || failed)).then_some(p)
}

/// A pipeline from SPIR-V the driver takes as it is, with the layout of the entry point's
/// own bindings (wgpu does not reflect a passed-through module).
#[cfg(not(target_arch = "wasm32"))]
fn passthrough_pipeline(
    device: &wgpu::Device,
    k: &Kernel,
    s: spirv::EntrySpirv,
) -> wgpu::ComputePipeline {
    let entries: Vec<wgpu::BindGroupLayoutEntry> = s
        .bindings
        .iter()
        .map(|&(_, binding, kind)| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: match kind {
                    spirv::BindingKind::Uniform => wgpu::BufferBindingType::Uniform,
                    spirv::BindingKind::Storage { read_only } => {
                        wgpu::BufferBindingType::Storage { read_only }
                    }
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        })
        .collect();
    let group = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(k.name),
        entries: &entries,
    });
    let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(k.name),
        bind_group_layouts: &[Some(&group)],
        immediate_size: 0,
    });
    let [x, y, z] = s.workgroup_size;
    // SAFETY: naga wrote and validated this module from the kernel's WGSL, with every
    // runtime check wgpu writes; the one change is a barrier's memory scope narrowed to
    // what WGSL specifies for it.
    let module = unsafe {
        device.create_shader_module_passthrough(wgpu::ShaderModuleDescriptorPassthrough {
            label: Some(k.name),
            entry_points: vec![wgpu::PassthroughShaderEntryPoint {
                name: k.entry.into(),
                workgroup_size: (x, y, z),
            }]
            .into(),
            spirv: Some(s.words.into()),
            ..Default::default()
        })
    };
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(k.name),
        layout: Some(&layout),
        module: &module,
        entry_point: Some(k.entry),
        compilation_options: Default::default(),
        cache: None,
    })
}
