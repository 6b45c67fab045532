//! The load profile and provenance (`stem4d.profile()`): stages, memory, bad pixels.

use super::*;

/// The load profile and provenance shown after loading (`stem4d.profile()`).
#[derive(Clone, Debug, Serialize)]
pub struct Profile {
    pub stages: Vec<Stage>,
    pub total_ms: f64,
    pub files: Vec<String>,
    pub shape: [usize; 4],
    pub dtype: &'static str,
    pub compressed_bytes: u64,
    pub logical_bytes: u64,
    pub bin: usize,
    pub mask_bad_pixels: bool,
    /// The scan crop `[r0, r1, c0, c1]` of the scan as stored, if any.
    pub scan_crop: Option<[usize; 4]>,
    /// Resident payload and predicted peak, bytes; absent when products run on the CPU.
    pub resident_payload_bytes: Option<u64>,
    pub resident_peak_bytes: Option<u64>,
    /// The most GPU memory the device's allocator held during the open, sampled as windows
    /// and blocks were uploaded (`Engine::note_memory`); absent where the backend does not
    /// say (a browser's WebGPU).
    pub measured_peak_bytes: Option<u64>,
    pub resident_buffers: Option<usize>,
    pub products_on: &'static str,
    /// The GPU memory budget asked for (bytes), the plan taken within it and every plan
    /// listed (`upload::memory`).
    pub memory_budget: Option<u64>,
    pub memory_plan: crate::upload::memory::MemoryPlan,
    pub memory_plans: Vec<crate::upload::memory::MemoryPlan>,
    /// A compressed resident's sizes (`upload::packed`); absent for any other plan.
    pub compressed: Option<CompressedReport>,
    /// Chunks the WGSL decoder does not take (deflate, shuffle), decoded in parallel by the
    /// engine's chunk decoder (the page's decode Workers), and how many of those run.
    pub worker_decoded_chunks: usize,
    pub decode_workers: usize,
    /// LZ4 blocks the GPU decoder inflated one invocation each (over 8 KiB, or more
    /// sequences than its table held) instead of a workgroup each: its slow path, which
    /// Dectris's 8 KiB blocks do not take.
    pub gpu_inflated_in_place_blocks: u32,
    /// Decode windows uploaded from the File API's own buffers, never copied into wasm
    /// memory (the browser with its pool of Workers; 0 elsewhere).
    pub file_buffer_windows: u32,
    /// Staging buffers those uploads had to make: none where the page made its staging ring
    /// while idle, or kept it from the load before (the browser; 0 elsewhere).
    pub staging_buffers_made: u32,
    /// Decode windows read as the file span of their chunks' B-tree leaves, the leaves
    /// parsed out of it (a deferred index; the pool's Workers walk these windows' chunk
    /// headers once the leaves are parsed, where each chunk lies in one of their pieces).
    pub leaf_span_windows: u32,
    /// Of the File API windows, windows whose chunk headers the pool's Workers walked as
    /// they read them (or, for leaf spans, once their leaves were parsed).
    pub worker_walked_windows: u32,
    /// Resident buffers reused from the acquisition this one replaced ([`Engine::set_aside`]).
    pub reused_resident_buffers: usize,
    /// Rounds of gathered metadata reads the page's open took (each fetches what the last
    /// attempt missed, all at once); 0 where files are read as they are parsed.
    pub index_read_rounds: usize,
    /// File API reads a streamed pass started ahead (the next block's first windows) that
    /// an upload then took while in flight (the browser; 0 elsewhere: decision 0046).
    pub reads_taken_in_flight: u64,
    pub adapter: EngineSummary,
    pub warnings: Vec<String>,
    /// A streamed session's ring sums about the BF centre (decision 0036).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streamed_ring_sums: Option<super::streamed::StreamedRingSums>,
    /// Products computed by a pass over the files since the open (a streamed session).
    pub streamed_passes: std::cell::Cell<u64>,
    /// What bad-pixel masking zeroes, or would: the file's mask, saturated values and the
    /// hot and dead pixels found in the mean pattern.
    pub bad_pixels: Option<BadPixelReport>,
}

/// What a compressed resident holds (bytes) and its ratio to the raw resident's payload.
#[derive(Clone, Debug, Serialize)]
pub struct CompressedReport {
    pub raw_bytes: u64,
    pub packed_bytes: u64,
    pub scratch_bytes: u64,
    /// Raw payload ÷ packed bytes.
    pub ratio: f64,
}

impl CompressedReport {
    pub fn of(res: &Resident) -> Option<CompressedReport> {
        let p = res.packed.as_ref()?;
        Some(CompressedReport {
            raw_bytes: p.raw_bytes,
            packed_bytes: p.packed_bytes,
            scratch_bytes: p.scratch_bytes,
            ratio: p.ratio(),
        })
    }
}

/// Bad pixels as provenance states them (lists of pixels capped at [`BadPixelReport::LISTED`]).
#[derive(Clone, Debug, Serialize)]
pub struct BadPixelReport {
    /// Whether they are zeroed before every product.
    pub masked: bool,
    /// Pixels the file's pixel mask flags.
    pub file_mask: usize,
    /// Integer data: samples of this value (saturated) are zeroed.
    pub saturated_value: Option<u32>,
    pub rule: &'static str,
    pub hot_count: usize,
    pub dead_count: usize,
    /// `[row, col]` on the detector products see (binned when binned).
    pub hot: Vec<[usize; 2]>,
    pub dead: Vec<[usize; 2]>,
    /// The scales the rule used: the mean pattern's robust noise and its BF contrast.
    pub noise: f64,
    pub contrast: f64,
}

impl BadPixelReport {
    const LISTED: usize = 64;

    pub(super) fn new(
        acq: &Acquisition,
        corr: Correction,
        found: crate::pattern::BadPixels,
    ) -> Self {
        let capped = |v: &[[usize; 2]]| v.iter().take(Self::LISTED).copied().collect();
        BadPixelReport {
            masked: corr.mask_bad_pixels,
            file_mask: acq
                .pixel_mask
                .as_ref()
                .map_or(0, |m| m.iter().filter(|&&b| b).count()),
            saturated_value: acq.dtype.sentinel(),
            rule: crate::pattern::RULE,
            hot_count: found.hot.len(),
            dead_count: found.dead.len(),
            hot: capped(&found.hot),
            dead: capped(&found.dead),
            noise: found.noise,
            contrast: found.contrast,
        }
    }
}

impl Profile {
    /// `total_ms` as the sum of the top-level stages (those not "of which" another).
    pub(super) fn sum_stages(&mut self) {
        self.total_ms = self
            .stages
            .iter()
            .filter(|s| !s.name.starts_with("of which"))
            .map(|s| s.ms)
            .sum();
    }
}
