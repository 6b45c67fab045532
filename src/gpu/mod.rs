//! The wgpu engine shared by the browser and native: the device and its pipelines within the
//! adapter's limits (`device`), batches of dispatches (`batch`), buffers and asynchronous
//! readback (`buffers`), and the resident acquisition's buffers (`resident`). What runs on it
//! lives in `kernels`; how data gets there, in `upload`.

mod api;
mod batch;
pub mod batch_clock;
mod buffers;
mod device;
#[cfg(not(target_arch = "wasm32"))]
pub mod kernel_stats;
pub(crate) mod nudge;
pub mod pass_clock;
mod resident;
pub(crate) mod resident_buffers;
#[cfg(not(target_arch = "wasm32"))]
pub mod spirv;
#[cfg(target_arch = "wasm32")]
mod web_subgroups;

use std::sync::{Arc, Mutex};

use serde::Serialize;
use wgpu::util::DeviceExt;

use crate::display::gpu as display;
use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::frames::{ChunkDecoder, Correction};
use crate::kernels::ring_sum as radial;
use crate::kernels::{self, Kernel};
use crate::upload::plan::{DeviceLimits, FloatRange, ResidentPlan};
use crate::upload::set_aside;
#[cfg(target_arch = "wasm32")]
use crate::upload::window_bytes;
use pass_clock::{PassClock, PassTimes};

pub use api::{adapters, AdapterLine, GpuApi};
pub(crate) use batch::{Batch, Recorder, Submitted};
pub use device::is_software;
pub use resident::{memory_plans, plan_of, Packed, Resident, UploadTimes};
pub(crate) use resident_buffers::out_of_memory;

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
    pub(crate) chunk_decoder: Option<Box<dyn ChunkDecoder + Send + Sync>>,
    /// The segments of a resident being replaced, for the next upload ([`set_aside`]).
    set_aside: set_aside::SetAside,
    /// While a pass uploads block after block ([`Engine::keep_decode_slots`]): the GPU
    /// decoder's window buffers (and natively its staging ring) the last upload left, for
    /// the next; `None` inside, until then or when not kept.
    pub(crate) decode_slots: Mutex<(bool, Option<crate::upload::src_slots::SrcSlots>)>,
    /// A GPU with this many bytes, simulated: a resident whose payload passes it is refused
    /// as out of memory ([`Engine::simulate_memory`]; tests of what follows that).
    pub(crate) memory_ceiling: std::sync::atomic::AtomicU64,
    /// The most GPU memory the device's allocator held at the moments sampled since
    /// [`Engine::reset_memory_peak`] ([`Engine::note_memory`]); 0: never sampled.
    memory_peak: std::sync::atomic::AtomicU64,
    /// The display's render pipeline per canvas format, made once per device: compiling it
    /// is the GPU process's work, and a new session's first image should not wait for it.
    renderers: Mutex<Vec<(wgpu::TextureFormat, display::Renderer)>>,
    /// Timestamps around every pass while a benchmark asks ([`Engine::time_passes`]).
    clock: Mutex<Option<Arc<PassClock>>>,
    /// Whether uploads time their batches on the GPU ([`Engine::time_upload_batches`]).
    batch_clock: std::sync::atomic::AtomicBool,
    /// The browser's staging ring for the File API's bytes, between uploads: made before
    /// the first ([`Engine::prepare_uploads`]) and kept for the next.
    #[cfg(target_arch = "wasm32")]
    pub(crate) staging: std::cell::RefCell<Option<window_bytes::Staging>>,
}

impl Engine {
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
    /// A compressed resident's kernel has no atomic variant: without subgroups it meets in
    /// workgroup memory.
    pub fn masked_sum_path(&self) -> &'static str {
        if self.subgroups {
            "through subgroups"
        } else if self.atomic_sums {
            "atomically in the output (a compressed resident's in workgroup memory)"
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

    /// Time each upload's batches on the GPU from now on (`batch_clock`), where the device
    /// stamps inside encoders, and say whether it does; `false` turns it off. Off by
    /// default: the times are read back at the end of each upload, one more round trip.
    pub fn time_upload_batches(&self, on: bool) -> bool {
        let able = self.device.features().contains(
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS,
        );
        self.batch_clock
            .store(on && able, std::sync::atomic::Ordering::Relaxed);
        on && able
    }

    pub(crate) fn times_upload_batches(&self) -> bool {
        self.batch_clock.load(std::sync::atomic::Ordering::Relaxed)
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
}
