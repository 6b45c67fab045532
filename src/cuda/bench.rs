//! Kernel times of the CUDA backend (`stem4d bench gpu --backend cuda`): each kernel queued
//! `reps` times after a warm-up launch, the stream synchronized, the mean per launch (no
//! read back), with the bytes it must read for an "effective" bandwidth as the wgpu bench
//! reports it.

use std::time::Instant;

use super::resident::alloc;
use super::{CudaEngine, CudaResident};
use crate::contract::Region;
use crate::error::Result;

/// One kernel's time: what it computed, ms per launch, bytes it must read.
pub struct Timed {
    pub name: String,
    pub ms: f64,
    pub bytes: u64,
}

fn timed(
    engine: &CudaEngine,
    reps: usize,
    name: String,
    bytes: u64,
    mut launch: impl FnMut() -> Result<()>,
) -> Result<Timed> {
    launch()?;
    engine.synchronize()?;
    let t0 = Instant::now();
    for _ in 0..reps {
        launch()?;
    }
    engine.synchronize()?;
    Ok(Timed {
        name,
        ms: t0.elapsed().as_secs_f64() * 1e3 / reps.max(1) as f64,
        bytes,
    })
}

/// BF over the pixel list `bf`, ADF over `adf`, the total, the CoM moments and the mean
/// pattern (sum + max) of `res`, each timed over `reps` launches; the bytes are those of the
/// samples read, as stored raw (an "effective" rate on a compressed resident).
pub fn kernel_times(
    engine: &CudaEngine,
    res: &CudaResident,
    reps: usize,
    (bf_name, bf): (&str, &[u32]),
    (adf_name, adf): (&str, &[u32]),
) -> Result<Vec<Timed>> {
    let frames = res.shape.frames();
    let det_len = res.shape.det_len();
    let sample = res.sample_bytes();
    let mut sums = alloc::<u64>(engine, frames, "masked sums")?;
    let mut out = Vec::new();
    let all: Vec<u32> = (0..det_len as u32).collect();
    for (name, pixels) in [
        (bf_name, bf),
        (adf_name, adf),
        ("total (every pixel)", &all[..]),
    ] {
        let set = res.masked_set(engine, pixels)?;
        let bytes = frames as u64 * pixels.len() as u64 * sample;
        out.push(timed(engine, reps, name.to_string(), bytes, || {
            res.launch_masked_sum(engine, &set, &mut sums)
        })?);
    }
    let mut moments = alloc::<u64>(engine, 3 * frames, "CoM moments")?;
    out.push(timed(
        engine,
        reps,
        "CoM/DPC moments".into(),
        res.raw_bytes,
        || res.launch_com_moments(engine, &mut moments),
    )?);
    let mut sum = alloc::<u64>(engine, det_len, "sum pattern")?;
    let mut max = alloc::<u32>(engine, det_len, "max pattern")?;
    let scan = Region::full(res.shape.scan);
    out.push(timed(
        engine,
        reps,
        "mean DP (sum + max)".into(),
        res.raw_bytes,
        || res.launch_pattern_reduce(engine, scan, &mut sum, &mut max),
    )?);
    Ok(out)
}
