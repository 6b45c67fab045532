//! Kernel timings for `stem4d bench gpu`: each product's kernels are recorded `reps` times
//! into one submission and waited for once; the time of one repetition is the slope between
//! a 1-rep and an n-rep batch, so submission and readback overheads cancel.

#![cfg(not(target_arch = "wasm32"))]

use std::time::Instant;

use crate::contract::{DetectorMask, Region};
use crate::error::{Error, Result};

use crate::gpu::{Engine, Resident};
use crate::kernels::com_moments::encode_com_moments;
use crate::kernels::masked_sum::{encode_masked_sums, DetectorList};
use crate::kernels::pattern_reduce::encode_pattern_reduce;

/// One benchmark line: a product, its median seconds, and the bytes its kernels must touch.
pub struct Timing {
    pub name: String,
    pub seconds: f64,
    pub bytes: f64,
}

/// Block until every submitted GPU command has finished (native benchmarks).
pub(crate) fn wait(engine: &Engine) -> Result<()> {
    engine
        .device
        .poll(wgpu::PollType::wait_indefinitely())
        .map(|_| ())
        .map_err(|e| Error::Gpu(format!("waiting for the GPU failed: {e}")))
}

fn batch(
    engine: &Engine,
    reps: usize,
    record: &dyn Fn(&mut wgpu::CommandEncoder) -> Result<()>,
) -> Result<f64> {
    let mut encoder = engine.device.create_command_encoder(&Default::default());
    for _ in 0..reps {
        record(&mut encoder)?;
    }
    let t = Instant::now();
    engine.queue.submit([encoder.finish()]);
    wait(engine)?;
    Ok(t.elapsed().as_secs_f64())
}

/// Median per-repetition time of `record` (slope of 1-rep and `reps`-rep batches).
pub fn time(
    engine: &Engine,
    reps: usize,
    record: &dyn Fn(&mut wgpu::CommandEncoder) -> Result<()>,
) -> Result<f64> {
    batch(engine, 2, record)?; // warm-up: pipelines, caches, clocks
    let mut samples = Vec::new();
    for _ in 0..5 {
        let one = batch(engine, 1, record)?;
        let many = batch(engine, reps, record)?;
        samples.push(((many - one) / (reps - 1).max(1) as f64).max(0.0));
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

/// The BF disk of `bf_radius` and the ADF annulus from twice that to the detector's edge,
/// both about the detector's middle (where the bench's ring sums are made).
pub(crate) fn bench_masks(det: [usize; 2], bf_radius: f64) -> ([f64; 2], f64, Vec<u32>, Vec<u32>) {
    let center = [(det[0] as f64 - 1.0) / 2.0, (det[1] as f64 - 1.0) / 2.0];
    let bf = DetectorMask::Disk {
        center,
        radius: bf_radius,
    }
    .sparse(det)
    .indices;
    let outer = (det[0].min(det[1]) as f64 - 1.0) / 2.0;
    let adf = DetectorMask::Annulus {
        center,
        inner: 2.0 * bf_radius,
        outer,
    }
    .sparse(det)
    .indices;
    (center, outer, bf, adf)
}

/// BF, ADF and DF (total − the BF disk, from the cached total) as `res` computes them now:
/// from its ring sums where it has them (each line then says how many rings and pixels it
/// reads, and its bytes are those), else from every selected pixel.
fn masked_products(
    engine: &Engine,
    res: &Resident,
    bf_radius: f64,
    reps: usize,
    out: &wgpu::Buffer,
) -> Result<Vec<Timing>> {
    let shape = res.plan.shape;
    let frames = shape.frames() as f64;
    let bps = res.plan.bits as f64 / 8.0;
    let (_, outer, bf, adf) = bench_masks(shape.det, bf_radius);
    let mut lines = Vec::new();
    for (name, pixels) in [
        format!("BF r={bf_radius} ({} px)", bf.len()),
        format!("ADF {:.0}..{outer:.0} ({} px)", 2.0 * bf_radius, adf.len()),
        "DF = total - BF (cached total)".into(),
    ]
    .into_iter()
    .zip([&bf, &adf, &bf])
    {
        let list = DetectorList::new(engine, pixels)?;
        let split = res
            .radial
            .as_ref()
            .and_then(|r| r.split(pixels, res.plan.bits));
        let (name, bytes) = match &split {
            Some(s) => (
                format!(
                    "{name} from ring sums: {} rings + {} px",
                    s.rings.len(),
                    s.rest.len()
                ),
                frames * (s.rings.len() as f64 * 8.0 + s.rest.len() as f64 * bps),
            ),
            None => (name, frames * pixels.len() as f64 * bps),
        };
        let seconds = time(engine, reps, &|e| {
            encode_masked_sums(engine, e, res, &list, out)
        })?;
        lines.push(Timing {
            name,
            seconds,
            bytes,
        });
    }
    Ok(lines)
}

/// Make ring sums about the bench's centre on `res` (its time is the first line), then BF,
/// ADF and DF again, from them.
pub fn ring_products(
    engine: &Engine,
    res: &mut Resident,
    bf_radius: f64,
    reps: usize,
) -> Result<Vec<Timing>> {
    let (center, ..) = bench_masks(res.plan.shape.det, bf_radius);
    let t = Instant::now();
    res.radial = pollster::block_on(crate::kernels::ring_sum::RadialCache::build(
        engine, res, center,
    ))?;
    let made = t.elapsed().as_secs_f64();
    if res.radial.is_none() {
        return Ok(Vec::new());
    }
    let out = engine.storage("bench out", res.plan.shape.frames() as u64 * 8);
    let mut lines = vec![Timing {
        name: "ring sums about the centre (once per resident)".into(),
        seconds: made,
        bytes: res.plan.payload_bytes as f64,
    }];
    lines.extend(masked_products(engine, res, bf_radius, reps, &out)?);
    Ok(lines)
}

/// The product set on a resident acquisition: BF r, ADF, DF (total − complement
/// from the cached total), CoM/DPC moments, mean DP.
pub fn products(
    engine: &Engine,
    res: &Resident,
    bf_radius: f64,
    reps: usize,
) -> Result<Vec<Timing>> {
    let shape = res.plan.shape;
    let frames = shape.frames() as f64;
    let out = engine.storage("bench out", shape.frames() as u64 * 24);
    let pattern_out = engine.storage("bench pattern", shape.det_len() as u64 * 16);
    let mut lines = masked_products(engine, res, bf_radius, reps, &out)?;
    // The image's plane, and the pattern's (its values here are the first sums, not a frame).
    lines.extend(display_passes(
        engine,
        [shape.scan[1], shape.scan[0]],
        &out,
        reps,
    )?);
    lines.extend(display_passes(
        engine,
        [shape.det[1], shape.det[0]],
        &out,
        reps,
    )?);
    let s = time(engine, reps, &|e| encode_com_moments(engine, e, res, &out))?;
    lines.push(Timing {
        name: "CoM/DPC moments (fused)".into(),
        seconds: s,
        bytes: res.plan.payload_bytes as f64,
    });
    // `out` holds the moments now: iDPC (both 2-D FFTs and the filter) from them.
    let idpc = crate::kernels::fft::Idpc::new(engine, shape.scan);
    let dpc = crate::kernels::fft::DpcSettings {
        mean: [shape.det[0] as f64 / 2.0, shape.det[1] as f64 / 2.0],
        rotation: 12.0,
        flip: false,
    };
    let s = time(engine, reps, &|e| {
        let centre = crate::kernels::fft::CentreSource::Moments {
            buf: &out,
            bound: crate::kernels::com_moments::moment_bound(res),
        };
        idpc.encode(engine, e, centre, dpc)
    })?;
    lines.push(Timing {
        name: format!(
            "iDPC {}x{} (2-D FFTs + filter)",
            shape.scan[0], shape.scan[1]
        ),
        seconds: s,
        // Moments read once, phase written once: a floor, the FFT passes touch more.
        bytes: frames * 32.0,
    });
    let roi = Region::full(shape.scan);
    let s = time(engine, reps, &|e| {
        encode_pattern_reduce(
            engine,
            e,
            res,
            &crate::contract::ScanRoi::Rect(roi),
            &pattern_out,
        )
    })?;
    lines.push(Timing {
        name: "mean DP (sum + max)".into(),
        seconds: s,
        bytes: res.plan.payload_bytes as f64,
    });
    Ok(lines)
}

/// What every new image costs on top of its product: the conversion of its u64 sums (the
/// last masked sums in `sums`) into the display plane, and the limits and histogram over it.
fn display_passes(
    engine: &Engine,
    [width, height]: [usize; 2],
    sums: &wgpu::Buffer,
    reps: usize,
) -> Result<Vec<Timing>> {
    use crate::display::gpu::{Plane, PlaneSource};
    let plane = Plane::new(engine, width as u32, height as u32);
    let n = plane.len() as f64;
    let prep = || PlaneSource::U64 {
        buf: sums,
        stride: 2,
        offset: 0,
        scale: 1.0,
    };
    let seconds = time(engine, reps, &|e| plane.encode_prep(engine, e, prep()))?;
    let mut lines = vec![Timing {
        name: format!("display plane {width}x{height} (u64 -> f32)"),
        seconds,
        bytes: n * 12.0,
    }];
    for (what, limits) in [
        (
            "percentile",
            crate::display::Limits::Percentile { lo: 0.5, hi: 99.5 },
        ),
        (
            "symmetric",
            crate::display::Limits::Symmetric { lo: 0.5, hi: 99.5 },
        ),
    ] {
        let seconds = time(engine, reps, &|e| {
            plane.encode_stats(engine, e, limits, crate::display::Scale::Linear)
        })?;
        lines.push(Timing {
            name: format!("display limits {width}x{height} ({what})"),
            seconds,
            // Two walks of the plane.
            bytes: n * 8.0,
        });
    }
    Ok(lines)
}

/// GPU bitshuffle+LZ4 decode of one upload window (compressed bytes already on the GPU),
/// into a scratch copy of the first resident segment: decoded bytes ÷ kernel time, for the
/// whole decode and for its stages (parse, inflate, unshuffle + pack).
pub async fn decode_window(
    engine: &Engine,
    acq: &crate::formats::Acquisition,
    res: &crate::gpu::Resident,
    reps: usize,
) -> Result<Vec<Timing>> {
    let window = crate::upload::gpu_decode::first_window(engine, acq).await?;
    let decoder = crate::kernels::decode::Decoder::new(engine, acq);
    let seg = &res.plan.segments[0];
    if window.frames > seg.frames {
        return Err(crate::error::Error::param(
            "the first decode window is larger than the first resident buffer",
        ));
    }
    let target = engine.storage("bench decode target", seg.bytes.max(4));
    let to = crate::kernels::decode::PackTarget {
        plan: &res.plan,
        corr: crate::frames::Correction::default(),
        seg_first: 0,
        resident: &target,
        elem: acq.dtype.size(),
    };
    let whole = |e: &mut wgpu::CommandEncoder| decoder.encode(engine, e, &window, &to);
    // Right after an upload the first decodes run slowly (on the H200 after 19 GB: 6.9–10 ms
    // against 2.0), as freshly allocated memory does on some drivers: ~1 s of them first.
    let warm = std::time::Instant::now();
    while warm.elapsed().as_secs_f64() < 1.0 {
        batch(engine, 4, &whole)?;
    }
    let bytes = window.decoded_bytes as f64;
    let line = |name: String, seconds: f64| Timing {
        name,
        seconds,
        bytes,
    };
    Ok(vec![
        line(
            format!("GPU bslz4 decode ({} frames)", window.frames),
            time(engine, reps, &whole)?,
        ),
        line(
            "  of which LZ4 parse".into(),
            time(engine, reps, &|e| decoder.encode_parse(engine, e, &window))?,
        ),
        line(
            "  of which LZ4 inflate (parse included)".into(),
            time(engine, reps, &|e| {
                decoder.encode_inflate(engine, e, &window)
            })?,
        ),
        line(
            "  of which unshuffle + pack".into(),
            time(engine, reps, &|e| {
                decoder.encode_pack(engine, e, &window, &to)
            })?,
        ),
    ])
}
