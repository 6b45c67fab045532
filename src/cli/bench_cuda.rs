//! `stem4d bench gpu --backend cuda`: the CUDA backend's upload and kernel times on the
//! acquisition given, printed as the wgpu bench prints its own (same masks, same "effective"
//! bandwidth) so that the two backends compare line by line.

use std::time::Instant;

use super::bench_report::BenchReport;
use super::OpenArgs;
use crate::cuda::{bench::kernel_times, CudaEngine, CudaResident};
use crate::error::Result;
use crate::frames::Correction;
use crate::upload::memory::CudaHeld;

pub(super) fn bench_cuda(
    open: &OpenArgs,
    reps: usize,
    bf_radius: f64,
    held: CudaHeld,
    json: Option<&std::path::Path>,
) -> Result<()> {
    let acq = super::open_acquisition(open)?;
    let t = Instant::now();
    let engine = CudaEngine::new()?;
    let device_ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "bench gpu: {:?} {:?} {} ({:.2} GB) on {}",
        acq.format,
        acq.shape.as_array(),
        acq.dtype.name(),
        acq.logical_bytes() as f64 / 1e9,
        engine.line()
    );
    let mut report = BenchReport::new(engine.line(), false);
    let stage = |report: &mut BenchReport, name: &str, ms: f64, more: String| {
        println!("  stage  {name:<28} {ms:>10.3} ms{more}");
        report.push(format!("stage {name}"), format!("{ms:.3} ms"));
    };
    stage(
        &mut report,
        "device + kernels (NVRTC)",
        device_ms,
        String::new(),
    );
    let t = Instant::now();
    let res = CudaResident::upload_held(&engine, &acq, Correction::default(), held)?;
    let upload_ms = t.elapsed().as_secs_f64() * 1e3;
    let gb = res.raw_bytes as f64 / 1e9;
    let rate = format!(
        "  ({gb:.2} GB of samples, {:.2} GB/s; frames decoded on the {})",
        gb / (upload_ms / 1e3),
        if res.decoded_on_gpu { "GPU" } else { "CPU" }
    );
    stage(&mut report, "read+decode+upload", upload_ms, rate);
    println!("  {}", res.held_words());
    report.push("resident", res.held_words());
    // The wgpu bench's masks and names, so that the lines compare.
    let (_, outer, bf, adf) = super::bench_gpu::bench_masks(res.shape.det, bf_radius);
    let bf_name = format!("BF r={bf_radius} ({} px)", bf.len());
    let adf_name = format!("ADF {:.0}..{outer:.0} ({} px)", 2.0 * bf_radius, adf.len());
    for k in kernel_times(&engine, &res, reps, (&bf_name, &bf), (&adf_name, &adf))? {
        let gbs = k.bytes as f64 / (k.ms / 1e3) / 1e9;
        println!(
            "  kernel {:<36} {:>9.3} ms {:>9.1} GB/s effective",
            k.name, k.ms, gbs
        );
        report.push(
            format!("kernel {}", k.name),
            format!("{:.3} ms ({gbs:.1} GB/s effective)", k.ms),
        );
    }
    if let Some(path) = json {
        report.write(path)?;
    }
    Ok(())
}
