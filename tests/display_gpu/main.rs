//! The display path on the GPU (the kernels of `src/kernels/display.rs`) against its CPU
//! mirror (`stem4d::display`): planes equal the
//! f32 rendering of the exact products, limits equal the mirror's bit for bit on the linear
//! scale (and land in its histogram bin on log and sqrt, whose transcendental steps the
//! adapter rounds its own way), absolute limits are data units on every scale, and the
//! rendered pixels carry the colour-map entry the mirror picks (±1 level for the divide):
//! C-DISPLAY.
//!
//! One module per thing proved: `planes` (planes and their limits), `rendering` (pixels
//! and canvases), `limits` (limits at their edges and beside the data) and `dpc_polar`
//! (DPC magnitude and direction planes).

#[path = "../common/mod.rs"]
mod common;

mod dpc_polar;
mod limits;
mod planes;
mod rendering;

use common::*;
use stem4d::display::gpu::{PixelTarget, Plane, PlaneSource};
use stem4d::display::{self, Limits, Scale, HIST_BINS};
use stem4d::gpu::{Engine, Resident};
use stem4d::kernels::View;

fn upload(engine: &Engine, name: &str) -> (stem4d::formats::Acquisition, Resident) {
    let acq = open_fixture(&fixture_named(name));
    let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    (acq, res)
}

/// Masked sums kept on the GPU, as the viewer keeps them.
fn sums_on_gpu(engine: &Engine, res: &Resident, indices: &[u32]) -> wgpu::Buffer {
    let out = engine.storage("out", res.plan.shape.frames() as u64 * 8);
    let list = stem4d::kernels::masked_sum::DetectorList::new(engine, indices).unwrap();
    let mut enc = engine.device.create_command_encoder(&Default::default());
    stem4d::kernels::masked_sum::encode_masked_sums(engine, &mut enc, res, &list, &out).unwrap();
    engine.queue.submit([enc.finish()]);
    out
}

fn prep_and_stats(engine: &Engine, plane: &Plane, src: PlaneSource, limits: Limits, scale: Scale) {
    let mut enc = engine.device.create_command_encoder(&Default::default());
    plane.encode_prep(engine, &mut enc, src).unwrap();
    plane.encode_stats(engine, &mut enc, limits, scale).unwrap();
    engine.queue.submit([enc.finish()]);
}

/// The stats of `values` (already in `buf`) as the GPU and the CPU mirror make them.
fn gpu_and_mirror_stats(
    engine: &Engine,
    plane: &Plane,
    (buf, values): (&wgpu::Buffer, &[f32]),
    limits: Limits,
    scale: Scale,
) -> (display::Stats, display::Stats) {
    prep_and_stats(
        engine,
        plane,
        PlaneSource::F32 { buf, stride: 1 },
        limits,
        scale,
    );
    let got = pollster::block_on(plane.read_stats(engine)).unwrap();
    (got, display::stats(values, limits, scale))
}

/// The GPU's stats against the mirror's. On every scale: the same count, data range
/// (min/max are of the data values, order-free), scale and notes, and absolute limits as
/// given with the same shown values (the host makes those for both), all bit for bit. On the
/// linear scale everything else too; on log and sqrt the adapter's log2/sqrt may round
/// otherwise than Rust's, so the shown range agrees to float32 precision and the found
/// limits within a histogram bin.
fn assert_limits_match(gpu: &display::Stats, cpu: &display::Stats, what: &str) {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(gpu.finite, cpu.finite, "{what}: finite count");
    assert_eq!(
        bits(&[gpu.min, gpu.max]),
        bits(&[cpu.min, cpu.max]),
        "{what}: data range {} … {} vs {} … {}",
        gpu.min,
        gpu.max,
        cpu.min,
        cpu.max
    );
    assert_eq!(
        (gpu.scale, gpu.notes),
        (cpu.scale, cpu.notes),
        "{what}: notes"
    );
    assert_eq!(gpu.asked, cpu.asked, "{what}: limits asked for");
    assert_eq!(
        gpu.hist.iter().sum::<u32>(),
        cpu.finite,
        "{what}: histogram total"
    );
    if cpu.asked.is_some() && cpu.finite > 0 {
        assert_eq!(
            bits(&[gpu.lo, gpu.hi, gpu.shown.lo, gpu.shown.hi]),
            bits(&[cpu.lo, cpu.hi, cpu.shown.lo, cpu.shown.hi]),
            "{what}: absolute limits"
        );
    }
    if cpu.scale == Scale::Linear {
        assert_eq!(gpu, cpu, "{what}: linear stats bit for bit");
        return;
    }
    let (s_gpu, s_cpu) = (gpu.shown, cpu.shown);
    let near_ulps = |b: f32| 4.0 * f32::EPSILON * b.abs().max(1.0);
    let near = |a: f32, b: f32| (a - b).abs() <= near_ulps(b);
    assert!(
        near(s_gpu.min, s_cpu.min) && near(s_gpu.max, s_cpu.max),
        "{what}: shown range {s_gpu:?} vs {s_cpu:?}"
    );
    // A bin, or a few ulps where the range is one value (its limits are then that value
    // and one unit above it, each as the adapter rounds it).
    let width = (s_cpu.max - s_cpu.min).abs() / HIST_BINS as f32 * 1.01;
    let close = |a: f32, b: f32| (a - b).abs() <= width.max(near_ulps(b));
    assert!(
        close(s_gpu.lo, s_cpu.lo) && close(s_gpu.hi, s_cpu.hi),
        "{what}: shown limits {s_gpu:?} vs {s_cpu:?}"
    );
}

/// Limits and scales every plane is checked under: each mode, absolute limits in data units
/// on all three scales, percentiles on log and sqrt.
const LIMITS: [(Limits, Scale); 7] = [
    (Limits::Percentile { lo: 0.5, hi: 99.5 }, Scale::Linear),
    (Limits::Symmetric { lo: 2.0, hi: 98.0 }, Scale::Linear),
    (
        Limits::Absolute {
            lo: 10.0,
            hi: 5000.0,
        },
        Scale::Linear,
    ),
    (
        Limits::Absolute {
            lo: 10.0,
            hi: 5000.0,
        },
        Scale::Log,
    ),
    (
        Limits::Absolute {
            lo: -3.0,
            hi: 700.0,
        },
        Scale::Sqrt,
    ),
    (Limits::Percentile { lo: 1.0, hi: 99.0 }, Scale::Log),
    (Limits::Symmetric { lo: 0.5, hi: 99.5 }, Scale::Sqrt),
];

/// Draw a plane at one canvas pixel per source pixel and read it back as the page's 2D
/// canvases get it (a [`PixelTarget`], RGBA).
fn render(engine: &Engine, plane: &Plane, view: View) -> Vec<u8> {
    render_frame(engine, plane, view, [plane.width, plane.height])
}

/// [`render`] on a canvas of `size` pixels.
fn render_frame(engine: &Engine, plane: &Plane, view: View, size: [u32; 2]) -> Vec<u8> {
    let target = PixelTarget::new(engine, size);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    engine
        .renderer(PixelTarget::FORMAT)
        .encode_draw(engine, &mut enc, &target.view, plane, &view);
    target.encode_copy(&mut enc);
    engine.queue.submit([enc.finish()]);
    pollster::block_on(target.read(engine)).unwrap()
}
