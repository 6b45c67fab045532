//! The wide kernels' host side on the CUDA backend: exact 128-bit sums of float32 residents
//! in units of `2^lsb` (`masked_sum_f32`, `com_moments_f32`, `pattern_reduce_f32`), each
//! refused by name where the audited range could pass 127 bits (C-FLOAT-GPU), as the wgpu
//! engine refuses it.

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::detector_set::DetectorSet;
use super::engine::{driver_error, CudaEngine};
use super::resident::{alloc, per_frame, read, reduce_grid, CudaResident, Stored};
use crate::contract::Region;
use crate::error::{Error, Result};
use crate::products::host_exact::quotient;
use crate::upload::plan::FloatRange;

/// (lo, hi) word pairs as 128-bit two's-complement integers.
fn wide(words: &[u64]) -> Vec<i128> {
    words
        .chunks_exact(2)
        .map(|w| ((w[1] as u128) << 64 | w[0] as u128) as i128)
        .collect()
}

impl CudaResident {
    /// The float32 samples' bits and their audited range.
    fn float_samples(&self) -> Result<(&CudaSlice<u32>, FloatRange)> {
        match (&self.stored, self.float) {
            (Stored::F32(s), Some(r)) => Ok((s, r)),
            _ => Err(Error::Gpu(
                "CUDA: a float32 kernel was asked to sum integer samples".into(),
            )),
        }
    }

    /// The mean pattern over every position (float64, each exact sum rounded once).
    pub fn mean_pattern(&self, engine: &CudaEngine, file: &str) -> Result<Vec<f64>> {
        let scan = Region::full(self.shape.scan);
        let count = scan.len() as u128;
        Ok(match self.float {
            None => {
                let (sum, _) = self.pattern_reduce(engine, scan)?;
                sum.iter()
                    .map(|&s| quotient(s as u128, count, 0, false))
                    .collect()
            }
            Some(r) => {
                let (sum, _) = self.pattern_reduce_wide(engine, file, scan)?;
                sum.iter()
                    .map(|&s| quotient(s.unsigned_abs(), count, r.lsb, s < 0))
                    .collect()
            }
        })
    }

    /// Each frame's exact sum over the detector pixels `pixels`, in units of `2^lsb`.
    pub fn masked_sums_wide(
        &self,
        engine: &CudaEngine,
        file: &str,
        pixels: &[u32],
    ) -> Result<Vec<i128>> {
        let (samples, range) = self.float_samples()?;
        let frames = self.shape.frames();
        if pixels.is_empty() {
            return Ok(vec![0; frames]);
        }
        range.check_exact(pixels.len() as u64, 1, file)?;
        let mut out = alloc::<u64>(engine, 2 * frames, "float sums")?;
        let set = DetectorSet::upload(engine, pixels)?;
        let (frame_len, n_frames) = (self.shape.det_len() as u64, frames as u64);
        let f = engine.function("masked_sum_f32")?;
        let mut l = engine.stream.launch_builder(&f);
        l.arg(samples)
            .arg(&frame_len)
            .arg(&n_frames)
            .arg(&set.spans)
            .arg(&set.n_spans)
            .arg(&set.pixels)
            .arg(&set.n_pixels)
            .arg(&range.lsb)
            .arg(&mut out);
        // SAFETY: the arguments match masked_sum_f32's signature (wgsl/masked_sum.cu).
        unsafe { l.launch(per_frame(n_frames)) }.map_err(driver_error("masked_sum_f32"))?;
        Ok(wide(&read(engine, &out)?))
    }

    /// Each frame's exact (total, Σ row·x, Σ col·x) in units of `2^lsb`.
    pub fn com_moments_wide(&self, engine: &CudaEngine, file: &str) -> Result<Vec<[i128; 3]>> {
        let (samples, range) = self.float_samples()?;
        let det = self.shape.det;
        range.check_exact(self.shape.det_len() as u64, det[0].max(det[1]) as u64, file)?;
        let n_frames = self.shape.frames() as u64;
        let mut out = alloc::<u64>(engine, 6 * self.shape.frames(), "float moments")?;
        let [kr, kc] = det.map(|d| d as u32);
        let f = engine.function("com_moments_f32")?;
        let mut l = engine.stream.launch_builder(&f);
        l.arg(samples)
            .arg(&n_frames)
            .arg(&kr)
            .arg(&kc)
            .arg(&range.lsb)
            .arg(&mut out);
        // SAFETY: the arguments match com_moments_f32's signature (wgsl/com_moments.cu).
        unsafe { l.launch(per_frame(n_frames)) }.map_err(driver_error("com_moments_f32"))?;
        let v = wide(&read(engine, &out)?);
        Ok(v.chunks_exact(3).map(|m| [m[0], m[1], m[2]]).collect())
    }

    /// Per-pixel exact sums (units of `2^lsb`) and maxima over the positions of `roi`.
    pub fn pattern_reduce_wide(
        &self,
        engine: &CudaEngine,
        file: &str,
        roi: Region,
    ) -> Result<(Vec<i128>, Vec<f32>)> {
        let (samples, range) = self.float_samples()?;
        range.check_exact(roi.len() as u64, 1, file)?;
        let det_len = self.shape.det_len();
        let mut sum = alloc::<u64>(engine, 2 * det_len, "float sum pattern")?;
        let mut max = alloc::<u32>(engine, det_len, "float max pattern")?;
        let roi_len = roi.len() as u64;
        if roi_len > 0 {
            let (cfg, per_share) = reduce_grid(det_len as u64, roi_len);
            let (frame_len, scan_cols) = (det_len as u64, self.shape.scan[1] as u32);
            let (r0, c0, roi_cols) = (roi.r0 as u32, roi.c0 as u32, (roi.c1 - roi.c0) as u32);
            let f = engine.function("pattern_reduce_f32")?;
            let mut l = engine.stream.launch_builder(&f);
            l.arg(samples)
                .arg(&frame_len)
                .arg(&scan_cols)
                .arg(&r0)
                .arg(&c0)
                .arg(&roi_cols)
                .arg(&roi_len)
                .arg(&per_share)
                .arg(&range.lsb)
                .arg(&mut sum)
                .arg(&mut max);
            // SAFETY: the arguments match pattern_reduce_f32's signature
            // (wgsl/pattern_reduce.cu); `sum` and `max` start zeroed.
            unsafe { l.launch(cfg) }.map_err(driver_error("pattern_reduce_f32"))?;
        }
        let sums = wide(&read(engine, &sum)?);
        // Undo `float_key`: keys at or above 2^31 were non-negative floats.
        let max = read(engine, &max)?
            .into_iter()
            .map(|key| {
                f32::from_bits(if key >> 31 != 0 {
                    key & 0x7fff_ffff
                } else {
                    !key
                })
            })
            .collect();
        Ok((sums, max))
    }
}
