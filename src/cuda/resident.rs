//! An acquisition resident on the CUDA device: its stored samples made there
//! (`upload.rs`), then the hot and dead pixels of its mean pattern zeroed (`zero_listed_*`).
//! And the kernels' host side: masked sums (over a [`MaskedSet`]), CoM moments, pattern
//! reductions and frames read back; the launch shapes they share.

use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};

use super::detector_set::{MaskedSet, WORD_BYTES};
use super::engine::{driver_error, CudaEngine};
use super::packed::Packed;
use crate::contract::{Region, Shape4};
use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::frames::Correction;
use crate::upload::memory::CudaHeld;
use crate::upload::plan::FloatRange;

/// Threads of a block in every kernel.
const THREADS: u32 = 256;

/// The stored samples: the source's type, or u32 once binned (C-BIN widens); float32 as
/// its bits (binned on the CPU as the frame pipeline bins it, C-BIN-COMPOSE); or integer
/// samples compressed (`packed.rs`, decision 0064).
pub enum Stored {
    U8(CudaSlice<u8>),
    U16(CudaSlice<u16>),
    U32(CudaSlice<u32>),
    F32(CudaSlice<u32>),
    Packed(Packed),
}

/// A frame-major kernel asked of a compressed resident: each caller takes the packed form
/// first, so this is a bug, said rather than panicked.
fn packed_here(what: &str) -> Error {
    Error::Gpu(format!(
        "CUDA: {what} was asked of a compressed resident's frame-major samples"
    ))
}

/// Run `$body` with `$s` the stored slice and `$t` its kernels' suffix: every sample type's
/// own, float32's bits as `u32` (zeroing and reading frames do not look at the values).
macro_rules! on_stored {
    ($stored:expr, $s:ident, $t:ident => $body:expr) => {
        match $stored {
            Stored::U8($s) => {
                let $t = "u8";
                $body
            }
            Stored::U16($s) => {
                let $t = "u16";
                $body
            }
            Stored::U32($s) | Stored::F32($s) => {
                let $t = "u32";
                $body
            }
            Stored::Packed(_) => return Err(packed_here("a frame-major kernel")),
        }
    };
}

/// As `on_stored!` for the integer kernels (exact 64-bit sums); a float32 resident is
/// summed by the wide kernels instead (`resident_float.rs`).
macro_rules! on_int_stored {
    ($stored:expr, $s:ident, $t:ident => $body:expr) => {
        match $stored {
            Stored::F32(_) => {
                return Err(Error::Gpu(
                    "CUDA: an integer kernel was asked to sum float32 samples".into(),
                ))
            }
            stored => on_stored!(stored, $s, $t => $body),
        }
    };
}

pub struct CudaResident {
    pub stored: Stored,
    /// The acquisition's shape, binned as `correction` says.
    pub shape: Shape4,
    pub correction: Correction,
    /// The hot and dead pixels found in the mean pattern and zeroed (bad-pixel masking).
    pub found_bad: Option<Vec<bool>>,
    /// Bits of a stored sample (32 once binned): the CoM moments' bound.
    pub bits: u32,
    /// Float32 data: the audited range of the samples (their sums are exact in 128 bits).
    pub float: Option<FloatRange>,
    /// Whether the frames were decoded on the device (`decode.rs`) rather than the CPU.
    pub decoded_on_gpu: bool,
    /// The bytes the samples take unpacked (frame-major), beside `stored_bytes`.
    pub raw_bytes: u64,
}

/// A grid-stride launch over `n` items.
pub(super) fn over(n: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(THREADS as u64).clamp(1, 1 << 20) as u32, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The pattern reductions' grid: `threads` along the detector, and shares of the `roi_len`
/// positions, enough blocks to fill the device, each share at least 16 positions; and the
/// positions a share takes.
pub(super) fn reduce_grid(threads: u64, roi_len: u64) -> (LaunchConfig, u64) {
    let pixel_blocks = threads.div_ceil(THREADS as u64);
    let shares = (4096 / pixel_blocks)
        .clamp(1, roi_len.div_ceil(16))
        .min(65_535);
    let cfg = LaunchConfig {
        grid_dim: (pixel_blocks as u32, shares as u32, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    (cfg, roi_len.div_ceil(shares))
}

/// One warp per frame (`THREADS / 32` frames a block), grid-stride over `frames`.
pub(super) fn per_frame(frames: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (
            frames.div_ceil(THREADS as u64 / 32).clamp(1, 1 << 16) as u32,
            1,
            1,
        ),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// `src` read back to the host once the stream is done with it.
pub(super) fn read<T: DeviceRepr>(engine: &CudaEngine, src: &CudaSlice<T>) -> Result<Vec<T>> {
    let out = engine
        .stream
        .clone_dtoh(src)
        .map_err(driver_error("read back"))?;
    engine.synchronize()?;
    Ok(out)
}

pub(super) fn alloc<T: DeviceRepr + ValidAsZeroBits>(
    engine: &CudaEngine,
    n: usize,
    what: &str,
) -> Result<CudaSlice<T>> {
    engine.stream.alloc_zeros::<T>(n.max(1)).map_err(|e| {
        Error::GpuOutOfMemory(format!(
            "CUDA: {what} ({} bytes): {e}",
            n * std::mem::size_of::<T>()
        ))
    })
}

impl CudaResident {
    /// Upload `acq` with the correction `corr`, then zero the hot and dead pixels its mean
    /// pattern shows where bad-pixel masking is on (C-BAD-FOUND).
    pub fn upload(
        engine: &CudaEngine,
        acq: &Acquisition,
        corr: Correction,
    ) -> Result<CudaResident> {
        Self::upload_as(engine, acq, corr, false, usize::MAX)
    }

    /// [`CudaResident::upload`] held as `held` says: raw, or compressed (decision 0064)
    /// where the samples are integers; float32 is kept raw (`is_compressed` says which).
    pub fn upload_held(
        engine: &CudaEngine,
        acq: &Acquisition,
        corr: Correction,
        held: CudaHeld,
    ) -> Result<CudaResident> {
        Self::upload_as(engine, acq, corr, held == CudaHeld::Compressed, usize::MAX)
    }

    /// The compressed resident (`upload_held`) from windows of at most `window_frames` frames
    /// (tests make tiles span windows, as they do in a large acquisition).
    pub fn upload_compressed_in_windows(
        engine: &CudaEngine,
        acq: &Acquisition,
        corr: Correction,
        window_frames: usize,
    ) -> Result<CudaResident> {
        Self::upload_as(engine, acq, corr, true, window_frames)
    }

    fn upload_as(
        engine: &CudaEngine,
        acq: &Acquisition,
        corr: Correction,
        compressed: bool,
        window_frames: usize,
    ) -> Result<CudaResident> {
        corr.validate(acq.shape)?;
        let bits = match acq.dtype {
            _ if corr.bin > 1 => 32,
            dt => 8 * dt.size() as u32,
        };
        let made = super::upload::stored_frames(engine, acq, corr, compressed, window_frames)?;
        let shape = acq.shape.binned(corr.bin);
        let mut res = CudaResident {
            stored: made.stored,
            shape,
            correction: corr,
            found_bad: None,
            bits,
            float: made.float,
            decoded_on_gpu: made.on_gpu,
            raw_bytes: (shape.frames() * shape.det_len()) as u64 * bits as u64 / 8,
        };
        res.settle_bad_pixels(engine, acq)?;
        Ok(res)
    }

    /// The hot and dead pixels of the mean pattern, zeroed where masking is on.
    fn settle_bad_pixels(&mut self, engine: &CudaEngine, acq: &Acquisition) -> Result<()> {
        let mean = self.mean_pattern(engine, &acq.primary)?;
        let (_, zero) =
            crate::products::gpu::found_in_mean(acq, self.correction, &mean, self.shape.det);
        if let Some(mask) = zero {
            if let Stored::Packed(p) = &mut self.stored {
                p.zero_listed(engine, &crate::contract::mask_pixels(&mask))?;
                self.found_bad = Some(mask);
                return Ok(());
            }
            let pixels = engine
                .stream
                .clone_htod(&crate::contract::mask_pixels(&mask))
                .map_err(driver_error("found bad pixels"))?;
            let n_pixels = pixels.len() as u32;
            let (frame_len, frames) = (self.shape.det_len() as u64, self.shape.frames() as u64);
            on_stored!(&mut self.stored, s, t => {
                let f = engine.function(&format!("zero_listed_{t}"))?;
                let mut l = engine.stream.launch_builder(&f);
                l.arg(s).arg(&frame_len).arg(&frames).arg(&pixels).arg(&n_pixels);
                // SAFETY: the arguments match zero_listed's signature (wgsl/zero_pixels.cu).
                unsafe { l.launch(over(frames * n_pixels as u64)) }
                    .map_err(driver_error("zero_listed"))?;
            });
            engine.synchronize()?;
            self.found_bad = Some(mask);
        }
        Ok(())
    }

    /// Each frame's exact sum over the detector pixels `pixels` (row-major indices).
    pub fn masked_sums(&self, engine: &CudaEngine, pixels: &[u32]) -> Result<Vec<u64>> {
        let frames = self.shape.frames();
        if pixels.is_empty() {
            return Ok(vec![0; frames]);
        }
        let mut out = alloc::<u64>(engine, frames, "masked sums")?;
        let set = self.masked_set(engine, pixels)?;
        self.launch_masked_sum(engine, &set, &mut out)?;
        read(engine, &out)
    }

    /// `pixels` in the form the masked-sum kernels read this resident's frames in.
    pub(super) fn masked_set(&self, engine: &CudaEngine, pixels: &[u32]) -> Result<MaskedSet> {
        if let Stored::Packed(p) = &self.stored {
            return Ok(MaskedSet::Groups(p.group_set(engine, pixels)?));
        }
        let sample = self.sample_bytes();
        MaskedSet::upload(engine, pixels, sample, sample * self.shape.det_len() as u64)
    }

    /// Queue the masked sum over the detector set `set` into `out` (one u64 per frame).
    pub(super) fn launch_masked_sum(
        &self,
        engine: &CudaEngine,
        set: &MaskedSet,
        out: &mut CudaSlice<u64>,
    ) -> Result<()> {
        let (frame_len, n_frames) = (self.shape.det_len() as u64, self.shape.frames() as u64);
        if let (Stored::Packed(p), MaskedSet::Groups(set)) = (&self.stored, set) {
            return p.launch_masked_sum(engine, set, out);
        }
        on_int_stored!(&self.stored, s, t => match set {
            MaskedSet::Samples(set) => {
                let f = engine.function(&format!("masked_sum_{t}"))?;
                let mut l = engine.stream.launch_builder(&f);
                l.arg(s).arg(&frame_len).arg(&n_frames).arg(&set.spans).arg(&set.n_spans)
                    .arg(&set.pixels).arg(&set.n_pixels).arg(out);
                // SAFETY: the arguments match masked_sum's signature (wgsl/masked_sum.cu).
                unsafe { l.launch(per_frame(n_frames)) }.map_err(driver_error("masked_sum"))?;
            }
            MaskedSet::Words(set) => {
                let frame_words = frame_len * self.sample_bytes() / WORD_BYTES;
                let f = engine.function(&format!("masked_sum_words_{t}"))?;
                let mut l = engine.stream.launch_builder(&f);
                l.arg(s).arg(&frame_words).arg(&n_frames).arg(&set.spans).arg(&set.n_spans)
                    .arg(&set.words).arg(&set.n_words).arg(out);
                // SAFETY: the arguments match masked_sum_words's signature
                // (wgsl/masked_sum.cu); `MaskedSet::upload` chose this form only for frames
                // a whole number of 16-byte words long, and the allocation is aligned.
                unsafe { l.launch(per_frame(n_frames)) }
                    .map_err(driver_error("masked_sum_words"))?;
            }
            MaskedSet::Groups(_) => return Err(packed_here("a packed detector set")),
        });
        Ok(())
    }

    /// Each frame's (Σ I, Σ row·I, Σ col·I), exact where [`CudaResident::moment_bound`] is
    /// below 2^64 (else refused, as the wgpu engine refuses it).
    pub fn com_moments(&self, engine: &CudaEngine) -> Result<Vec<[u64; 3]>> {
        Ok(self.com_moments_kept(engine)?.1)
    }

    /// The moments as [`CudaResident::com_moments`], also kept on the device (three u64 per
    /// frame) for the iDPC pack, which reads them there.
    pub fn com_moments_kept(&self, engine: &CudaEngine) -> Result<(CudaSlice<u64>, Vec<[u64; 3]>)> {
        if self.moment_bound() >= 1u128 << 64 {
            return Err(Error::GpuUnsupported(
                "centre-of-mass moments of this detector could exceed 64 bits; use --backend cpu"
                    .into(),
            ));
        }
        let mut out = alloc::<u64>(engine, 3 * self.shape.frames(), "CoM moments")?;
        self.launch_com_moments(engine, &mut out)?;
        let flat = read(engine, &out)?;
        let parsed = flat.chunks_exact(3).map(|m| [m[0], m[1], m[2]]).collect();
        Ok((out, parsed))
    }

    /// What the host's pattern products need of this resident.
    pub fn facts(&self) -> crate::products::gpu::PatternFacts<'_> {
        crate::products::gpu::PatternFacts {
            det: self.shape.det,
            correction: self.correction,
            found_bad: self.found_bad.as_deref(),
        }
    }

    /// Queue `com_moments` into `out` (three u64 per frame).
    pub(super) fn launch_com_moments(
        &self,
        engine: &CudaEngine,
        out: &mut CudaSlice<u64>,
    ) -> Result<()> {
        let [kr, kc] = self.shape.det.map(|d| d as u32);
        let n_frames = self.shape.frames() as u64;
        if let Stored::Packed(p) = &self.stored {
            return p.launch_com_moments(engine, kc, out);
        }
        on_int_stored!(&self.stored, s, t => {
            let f = engine.function(&format!("com_moments_{t}"))?;
            let mut l = engine.stream.launch_builder(&f);
            l.arg(s).arg(&n_frames).arg(&kr).arg(&kc).arg(out);
            // SAFETY: the arguments match com_moments's signature (wgsl/com_moments.cu).
            unsafe { l.launch(per_frame(n_frames)) }.map_err(driver_error("com_moments"))?;
        });
        Ok(())
    }

    /// The largest moment a frame could have (`kernels::com_moments::moment_bound_of`).
    pub fn moment_bound(&self) -> u128 {
        crate::kernels::com_moments::moment_bound_of(self.bits, self.shape.det)
    }

    /// Exact per-pixel sums and maxima over the scan positions of `roi`.
    pub fn pattern_reduce(&self, engine: &CudaEngine, roi: Region) -> Result<(Vec<u64>, Vec<u32>)> {
        let det_len = self.shape.det_len();
        let mut sum = alloc::<u64>(engine, det_len, "sum pattern")?;
        let mut max = alloc::<u32>(engine, det_len, "max pattern")?;
        self.launch_pattern_reduce(engine, roi, &mut sum, &mut max)?;
        Ok((read(engine, &sum)?, read(engine, &max)?))
    }

    /// Queue `pattern_reduce` over `roi` into `sum` and `max` (zeroed first: the kernel's
    /// shares meet there by atomics).
    pub(super) fn launch_pattern_reduce(
        &self,
        engine: &CudaEngine,
        roi: Region,
        sum: &mut CudaSlice<u64>,
        max: &mut CudaSlice<u32>,
    ) -> Result<()> {
        let det_len = self.shape.det_len();
        engine
            .stream
            .memset_zeros(sum)
            .map_err(driver_error("clear the sum pattern"))?;
        engine
            .stream
            .memset_zeros(max)
            .map_err(driver_error("clear the max pattern"))?;
        let roi_len = roi.len() as u64;
        if roi_len == 0 {
            return Ok(());
        }
        if let Stored::Packed(p) = &self.stored {
            return p.launch_pattern_reduce(engine, self.shape.scan[1], roi, sum, max);
        }
        // u8 and u16 frames of a multiple of 16 bytes: a thread per 16 bytes of the frame.
        let sample_bytes = self.sample_bytes();
        let vectors = sample_bytes < 4 && (det_len as u64 * sample_bytes).is_multiple_of(16);
        let threads = if vectors {
            det_len as u64 * sample_bytes / 16
        } else {
            det_len as u64
        };
        let (cfg, per_share) = reduce_grid(threads, roi_len);
        let (frame_len, scan_cols) = (det_len as u64, self.shape.scan[1] as u32);
        let (r0, c0, roi_cols) = (roi.r0 as u32, roi.c0 as u32, (roi.c1 - roi.c0) as u32);
        on_int_stored!(&self.stored, s, t => {
            let name = if vectors { "pattern_reduce_vec" } else { "pattern_reduce" };
            let f = engine.function(&format!("{name}_{t}"))?;
            let mut l = engine.stream.launch_builder(&f);
            l.arg(s).arg(&frame_len).arg(&scan_cols).arg(&r0).arg(&c0).arg(&roi_cols)
                .arg(&roi_len).arg(&per_share).arg(sum).arg(max);
            // SAFETY: the arguments match pattern_reduce's signature (wgsl/pattern_reduce.cu).
            unsafe { l.launch(cfg) }.map_err(driver_error("pattern_reduce"))?;
        });
        Ok(())
    }

    /// Bytes of one stored sample.
    pub fn sample_bytes(&self) -> u64 {
        match &self.stored {
            Stored::U8(_) => 1,
            Stored::U16(_) => 2,
            Stored::U32(_) | Stored::F32(_) => 4,
            Stored::Packed(p) => p.bits as u64 / 8,
        }
    }

    /// Whether the samples are held compressed (decision 0064).
    pub fn is_compressed(&self) -> bool {
        matches!(self.stored, Stored::Packed(_))
    }

    /// How the samples are held, in words: compressed with its size against the raw
    /// samples', or raw (float32 is kept raw where compression was asked).
    pub fn held_words(&self) -> String {
        let gb = |b: u64| b as f64 / 1e9;
        if self.is_compressed() {
            format!(
                "CUDA compressed resident: {:.3} GB for {:.3} GB of samples ({:.2}x smaller)",
                gb(self.stored_bytes()),
                gb(self.raw_bytes),
                self.raw_bytes as f64 / self.stored_bytes().max(1) as f64
            )
        } else {
            let why = if self.float.is_some() {
                " (float32 is kept raw)"
            } else {
                ""
            };
            format!("CUDA raw resident: {:.3} GB{why}", gb(self.stored_bytes()))
        }
    }

    /// Device bytes of stored samples (a compressed resident's index included).
    pub fn stored_bytes(&self) -> u64 {
        match &self.stored {
            Stored::Packed(p) => p.bytes(),
            Stored::U8(s) => s.num_bytes() as u64,
            Stored::U16(s) => s.num_bytes() as u64,
            Stored::U32(s) | Stored::F32(s) => s.num_bytes() as u64,
        }
    }

    /// Frames `[f0, f1)` as stored, widened to u32.
    // One body for every sample type: for u32 the widening is the identity.
    #[allow(clippy::useless_conversion)]
    pub fn frames(&self, engine: &CudaEngine, f0: usize, f1: usize) -> Result<Vec<u32>> {
        if let Stored::Packed(p) = &self.stored {
            return p.frames(engine, f0, f1);
        }
        let n = self.shape.det_len();
        let range = f0 * n..f1 * n;
        let out: Vec<u32> = on_stored!(&self.stored, s, _t => {
            let v = engine
                .stream
                .clone_dtoh(&s.slice(range))
                .map_err(driver_error("read frames"))?;
            v.into_iter().map(u32::from).collect()
        });
        engine.synchronize()?;
        Ok(out)
    }
}
