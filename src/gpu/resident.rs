//! An acquisition resident on the GPU: its buffers, the plan they follow, and their reuse
//! when another acquisition replaces it (`upload::set_aside`).

use super::*;

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
    /// Natively, what the GPU did with the upload's batches, where they were timed
    /// (`batch_clock`: a prepared reopen's, a GPU decode's windows).
    pub gpu_batches: Option<batch_clock::GpuBatchTimes>,
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
    /// A compressed resident's packed segments (`upload::packed`, decision 0025); its
    /// `buffers` are then one small scratch, cloned per segment, that frames read back are
    /// unpacked into first ([`Resident::unpack`]; kernels decode the sectors themselves).
    pub packed: Option<Packed>,
}

/// The packed part of a compressed resident (`wgsl/packed.wgsl`).
pub struct Packed {
    /// One per segment of the resident's plan.
    pub buffers: Vec<wgpu::Buffer>,
    /// Bytes of the packed buffers, and of the raw resident they stand for.
    pub packed_bytes: u64,
    pub raw_bytes: u64,
    /// Bytes of the scratch segment.
    pub scratch_bytes: u64,
    /// One bit per detector pixel: pixels read as 0 (found bad after the upload, or a kept
    /// prepared payload's bad pixels where masking is on).
    pub zeroed: wgpu::Buffer,
    pub zeroed_bits: Vec<u32>,
}

impl Packed {
    /// The raw resident's bytes over the packed ones.
    pub fn ratio(&self) -> f64 {
        self.raw_bytes as f64 / self.packed_bytes.max(1) as f64
    }
}

impl Resident {
    /// What a product kernel binds to read segment `seg`: the raw samples at `raw`, or on a
    /// compressed resident (whose kernels decode in place) its packed segment at
    /// `packed.0` and the pixels found bad after the upload at `packed.1`.
    pub(crate) fn segment_bindings(
        &self,
        seg: usize,
        raw: u32,
        packed: (u32, u32),
    ) -> Result<Vec<(u32, &wgpu::Buffer)>> {
        match &self.packed {
            Some(p) => {
                let segment = p.buffers.get(seg).ok_or_else(|| {
                    crate::error::Error::Gpu("a compressed resident lacks a packed segment".into())
                })?;
                Ok(vec![(packed.0, segment), (packed.1, &p.zeroed)])
            }
            None => {
                let buffer = self
                    .buffers
                    .get(seg)
                    .ok_or_else(|| crate::error::Error::Gpu("a resident lacks a segment".into()))?;
                Ok(vec![(raw, buffer)])
            }
        }
    }

    /// Queue, before segment `seg` of this resident is read, what will be read of it: on a
    /// compressed resident the pixels of `list` (`None`: all) of tiles `[t0, t1)` unpacked
    /// into the scratch, tile `t0` first (as many tiles as the scratch holds, else an
    /// error); on a raw one nothing.
    pub(crate) fn unpack(
        &self,
        engine: &Engine,
        batch: &mut Batch,
        seg: usize,
        list: Option<(&wgpu::Buffer, u32)>,
        tiles: (u32, u32),
    ) -> Result<()> {
        let (Some(packed), Some(scratch)) = (&self.packed, self.buffers.get(seg)) else {
            return Ok(());
        };
        let holds = scratch.size() / (self.plan.tile_words as u64 * 4).max(1);
        if tiles.1.saturating_sub(tiles.0) as u64 > holds {
            return Err(crate::error::Error::Gpu(format!(
                "tiles {}..{} do not fit the compressed resident's scratch of {holds} tiles",
                tiles.0, tiles.1
            )));
        }
        crate::kernels::packed::add_unpack(
            engine,
            batch,
            &self.plan,
            &packed.buffers[seg],
            &packed.zeroed,
            scratch,
            crate::kernels::packed::Unpack {
                list,
                tiles,
                out_tile: 0,
            },
        )
    }
}

/// The size of a resident segment's buffer of `bytes` (as [`Engine::storage`] makes it).
pub(super) fn resident_size(bytes: u64) -> u64 {
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

/// The memory plans of `acq` under `corr` on this adapter within `budget` bytes (`None`:
/// the adapter's own), in order of preference (`upload::memory`). A prepared acquisition
/// with a packed payload prefers it kept packed, as it was saved (decision 0055): exact
/// sizes, nothing decoded, about a quarter of the raw resident's memory; the raw resident,
/// which expands it, comes next.
pub fn memory_plans(
    acq: &Acquisition,
    corr: Correction,
    limits: DeviceLimits,
    budget: Option<u64>,
) -> Vec<crate::upload::memory::MemoryPlan> {
    use crate::upload::memory::PlanKind;
    let mut plans = computed_plans(acq, corr, limits, budget);
    if let Some(kept) = crate::upload::prepared::kept_memory_plan(acq, corr, limits, budget) {
        let Some(at) = plans
            .iter()
            .position(|p| p.kind == PlanKind::Compressed && p.bin == kept.bin)
        else {
            return plans;
        };
        plans.remove(at);
        // First where it holds less than the raw resident (a small acquisition's scratch
        // may be most of it), else where the computed plan was.
        let raw = plans
            .iter()
            .find(|p| p.kind == PlanKind::Resident && p.bin == kept.bin);
        let smaller = raw.is_none_or(|r| kept.payload_bytes < r.payload_bytes);
        plans.insert(if smaller { 0 } else { at }, kept);
    }
    plans
}

fn computed_plans(
    acq: &Acquisition,
    corr: Correction,
    limits: DeviceLimits,
    budget: Option<u64>,
) -> Vec<crate::upload::memory::MemoryPlan> {
    crate::upload::memory::plans(
        acq.shape,
        acq.dtype,
        corr.bin,
        limits,
        budget,
        acq.largest_chunk(),
        crate::upload::gpu_decode::supported(acq, corr),
    )
}

/// Milliseconds an upload spent in each of its steps, in order of first use.
#[derive(Clone, Debug, Default)]
pub struct UploadTimes(pub Vec<(&'static str, f64)>);

impl UploadTimes {
    /// Add the time since `*since` to `step` and restart the clock.
    pub fn lap(&mut self, step: &'static str, since: &mut f64) {
        let now = crate::clock::now_ms();
        self.add(step, now - *since);
        *since = now;
    }

    /// Add `ms` to `step`.
    pub fn add(&mut self, step: &'static str, ms: f64) {
        match self.0.iter_mut().find(|(s, _)| *s == step) {
            Some((_, total)) => *total += ms,
            None => self.0.push((step, ms)),
        }
    }
}

impl Engine {
    /// Keep `res`'s segment buffers for the next upload to reuse where its segments have
    /// their sizes ([`set_aside`]); the rest of `res` is freed. Call
    /// [`Engine::release_set_aside`] once that upload is made (or the open failed).
    pub fn set_aside(&self, res: Resident) {
        if res.packed.is_some() {
            // Its buffers are one scratch segment, kept by no later upload.
            return;
        }
        self.set_aside.keep(res.buffers);
    }

    /// GPU memory the device's allocator holds now (bytes of its memory blocks), where the
    /// backend reports it (Vulkan and DX12 natively; never in a browser, whose WebGPU does
    /// not say).
    pub fn gpu_memory_bytes(&self) -> Option<u64> {
        self.device
            .generate_allocator_report()
            .map(|r| r.total_reserved_bytes)
    }

    /// Sample [`Engine::gpu_memory_bytes`] into the measured peak: uploads call it where
    /// they hold the most (a window decoded, a block packed).
    pub fn note_memory(&self) {
        if let Some(now) = self.gpu_memory_bytes() {
            self.memory_peak
                .fetch_max(now, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Start measuring a new peak (an open, a benchmark's upload).
    pub fn reset_memory_peak(&self) {
        self.memory_peak
            .store(0, std::sync::atomic::Ordering::Relaxed);
        self.note_memory();
    }

    /// The measured peak since [`Engine::reset_memory_peak`]: `None` where the backend does
    /// not report its memory.
    pub fn memory_peak(&self) -> Option<u64> {
        self.note_memory();
        match self.memory_peak.load(std::sync::atomic::Ordering::Relaxed) {
            0 => None,
            b => Some(b),
        }
    }

    /// Free the buffers set aside that no upload reused, and the decode slots kept
    /// ([`Engine::keep_decode_slots`]), which later uploads make anew.
    pub fn release_set_aside(&self) {
        self.set_aside.release();
        if let Ok(mut kept) = self.decode_slots.lock() {
            *kept = (false, None);
        }
    }

    /// From now until [`Engine::release_set_aside`], each GPU-decoded upload leaves its
    /// decode slots (window, scratch and sequence buffers; natively its staging ring) for
    /// the next. A streamed pass or a compressed build uploads block after block, and each
    /// made its slots anew: about 0.7 GB of buffers a block, which Chromium and wgpu
    /// allocate and clear before use (decision 0046). The plans' peaks count these slots
    /// beside each block already.
    pub fn keep_decode_slots(&self) {
        if let Ok(mut kept) = self.decode_slots.lock() {
            kept.0 = true;
        }
    }

    /// Whether decode slots are held for the next upload (tests, diagnostics).
    pub fn decode_slots_kept(&self) -> bool {
        self.decode_slots.lock().is_ok_and(|kept| kept.1.is_some())
    }

    /// The decode slots the last upload left, if kept; else new ones.
    pub(crate) fn take_decode_slots(&self) -> crate::upload::src_slots::SrcSlots {
        self.decode_slots
            .lock()
            .ok()
            .and_then(|mut kept| kept.1.take())
            .unwrap_or_default()
    }

    /// Leave an upload's decode slots for the next, where they are kept.
    pub(crate) fn leave_decode_slots(&self, slots: crate::upload::src_slots::SrcSlots) {
        if let Ok(mut kept) = self.decode_slots.lock() {
            if kept.0 {
                kept.1 = Some(slots);
            }
        }
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
    pub(crate) fn start_resident(&self, plan: &ResidentPlan) {
        self.start_buffers(plan.segments.iter().map(|s| s.bytes));
    }

    /// [`Engine::start_resident`] for buffers of `sizes` bytes (a compressed resident's
    /// packed segments).
    pub(crate) fn start_buffers(&self, sizes: impl Iterator<Item = u64>) {
        self.set_aside.keep_only(sizes.map(resident_size));
    }
}
