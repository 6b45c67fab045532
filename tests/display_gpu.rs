//! The display path on the GPU against its CPU mirror (`stem4d::display`): planes equal the
//! f32 rendering of the exact products, limits equal the mirror's bit for bit on the linear
//! scale (and land in its histogram bin on log and sqrt, whose transcendental steps the
//! adapter rounds its own way), absolute limits are data units on every scale, and the
//! rendered pixels carry the colour-map entry the mirror picks (±1 level for the divide).

mod common;

use common::*;
use stem4d::contract::{DetectorMask, SparseMask};
use stem4d::display::gpu::{padded_row_bytes, unpad_rows, PixelTarget, Plane, PlaneSource};
use stem4d::display::{self, colormaps, Limits, Scale, HIST_BINS};
use stem4d::gpu::{Engine, Resident};
use stem4d::kernels::View;
use stem4d::products::gpu as products;

fn upload(engine: &Engine, name: &str) -> (stem4d::formats::Acquisition, Resident) {
    let acq = open_fixture(&fixture_named(name));
    let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    (acq, res)
}

/// Masked sums kept on the GPU, as the viewer keeps them.
fn sums_on_gpu(engine: &Engine, res: &Resident, indices: &[u32]) -> wgpu::Buffer {
    let out = engine_storage(engine, res.plan.shape.frames() as u64 * 8);
    let list = stem4d::kernels::masked_sum::DetectorList::new(engine, indices).unwrap();
    let mut enc = engine.device.create_command_encoder(&Default::default());
    stem4d::kernels::masked_sum::encode_masked_sums(engine, &mut enc, res, &list, &out).unwrap();
    engine.queue.submit([enc.finish()]);
    out
}

fn engine_storage(engine: &Engine, bytes: u64) -> wgpu::Buffer {
    engine.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: bytes,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
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

fn u64_as_display(v: u64) -> f32 {
    (v >> 32) as u32 as f32 * 4_294_967_296.0 + v as u32 as f32
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

fn check_plane(
    engine: &Engine,
    plane: &Plane,
    src: PlaneSource,
    want: &[f32],
    tol: f32,
    what: &str,
) {
    let mut enc = engine.device.create_command_encoder(&Default::default());
    plane.encode_prep(engine, &mut enc, src).unwrap();
    engine.queue.submit([enc.finish()]);
    let values = pollster::block_on(plane.read_values(engine)).unwrap();
    assert_eq!(values.len(), want.len(), "{what}: plane size");
    for (i, (g, w)) in values.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}: [{i}] {g} vs {w}"
        );
    }
    for (limits, scale) in LIMITS {
        let mut enc = engine.device.create_command_encoder(&Default::default());
        plane.encode_stats(engine, &mut enc, limits, scale).unwrap();
        engine.queue.submit([enc.finish()]);
        let gpu = pollster::block_on(plane.read_stats(engine)).unwrap();
        let cpu = display::stats(&values, limits, scale);
        assert_limits_match(&gpu, &cpu, &format!("{what} {limits:?} {scale:?}"));
    }
}

#[test]
fn planes_and_limits_match_the_cpu_mirror() {
    let Some(engine) = engine() else { return };
    let (acq, res) = upload(&engine, "arina_u16");
    let [rows, cols] = acq.shape.scan;
    let det = acq.shape.det;
    let disk = DetectorMask::Disk {
        center: [det[0] as f64 / 2.0 - 0.3, det[1] as f64 / 2.0 + 0.7],
        radius: det[0] as f64 / 5.0,
    };
    let bf_idx = disk.sparse(det).indices;
    let all_idx = SparseMask::all(det).indices;
    let bf = sums_on_gpu(&engine, &res, &bf_idx);
    let total = sums_on_gpu(&engine, &res, &all_idx);
    let exact_bf = pollster::block_on(stem4d::kernels::masked_sum::masked_sums(
        &engine, &res, &bf_idx,
    ))
    .unwrap();
    let exact_total = pollster::block_on(stem4d::kernels::masked_sum::masked_sums(
        &engine, &res, &all_idx,
    ))
    .unwrap();
    let plane = Plane::new(&engine, cols as u32, rows as u32);
    let bf_want: Vec<f32> = exact_bf.iter().map(|&v| u64_as_display(v)).collect();
    let src = PlaneSource::U64 {
        buf: &bf,
        stride: 2,
        offset: 0,
        scale: 1.0,
    };
    check_plane(&engine, &plane, src, &bf_want, 0.0, "bf");
    let df_want: Vec<f32> = exact_total
        .iter()
        .zip(&exact_bf)
        .map(|(t, b)| u64_as_display(t - b))
        .collect();
    let src = PlaneSource::U64Diff {
        total: &total,
        part: &bf,
    };
    check_plane(&engine, &plane, src, &df_want, 0.0, "df");

    // CoM and DPC from the fused moments, against the exact CPU values (f32 display path).
    let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Com);
    let com = stem4d::cpu::compute(&acq, &p).unwrap().data.to_f64();
    p.kind = stem4d::products::ProductKind::Dpc;
    (p.rotation, p.flip) = (23.0, true);
    let dpc = stem4d::cpu::compute(&acq, &p).unwrap().data.to_f64();
    let n = rows * cols;
    let mean = [
        com[..n].iter().sum::<f64>() / n as f64,
        com[n..].iter().sum::<f64>() / n as f64,
    ];
    let moments = engine_storage(&engine, n as u64 * 24);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    stem4d::kernels::com_moments::encode_com_moments(&engine, &mut enc, &res, &moments).unwrap();
    engine.queue.submit([enc.finish()]);
    for axis in 0..2u32 {
        let plane_of = |v: &[f64]| -> Vec<f32> {
            v[axis as usize * n..(axis as usize + 1) * n]
                .iter()
                .map(|&x| x as f32)
                .collect()
        };
        let src = PlaneSource::Com {
            moments: &moments,
            axis,
        };
        check_plane(
            &engine,
            &plane,
            src,
            &plane_of(&com),
            1e-5,
            &format!("com[{axis}]"),
        );
        let src = PlaneSource::Dpc {
            moments: &moments,
            axis,
            mean,
            rotation: 23.0,
            flip: true,
        };
        let want = plane_of(&dpc);
        let mut enc = engine.device.create_command_encoder(&Default::default());
        plane.encode_prep(&engine, &mut enc, src).unwrap();
        engine.queue.submit([enc.finish()]);
        let got = pollster::block_on(plane.read_values(&engine)).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 1e-3, "dpc[{axis}][{i}] {g} vs {w}");
        }
    }

    // A resident frame (the pattern at the cursor) and the reduced patterns.
    let f = (rows - 1) * cols + cols / 2;
    let frame = pollster::block_on(products::frames(&engine, &res, f, f + 1)).unwrap();
    assert_eq!(frame.len(), acq.shape.det_len());
    let pattern = Plane::new(&engine, det[1] as u32, det[0] as u32);
    let src = PlaneSource::Frame {
        res: &res,
        frame: f,
    };
    let want: Vec<f32> = frame.iter().map(|&v| v as f32).collect();
    check_plane(
        &engine,
        &pattern,
        src,
        &want,
        0.0,
        "pattern at the last row",
    );
}

/// The Arina fixture's totals as a display plane with its limits, and the scan's shape.
fn arina_totals_plane(engine: &Engine, limits: Limits, scale: Scale) -> (Plane, [usize; 2]) {
    let (acq, res) = upload(engine, "arina_u16");
    let [rows, cols] = acq.shape.scan;
    let total = sums_on_gpu(engine, &res, &SparseMask::all(acq.shape.det).indices);
    let plane = Plane::new(engine, cols as u32, rows as u32);
    let source = PlaneSource::U64 {
        buf: &total,
        stride: 2,
        offset: 0,
        scale: 1.0,
    };
    prep_and_stats(engine, &plane, source, limits, scale);
    (plane, [rows, cols])
}

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

/// A canvas of `size` in `format` drawn and read back on a path of its own (a storage
/// buffer copied out, its rows cut here): the reference for [`PixelTarget`].
fn render_as(
    engine: &Engine,
    plane: &Plane,
    view: View,
    format: wgpu::TextureFormat,
    size: [u32; 2],
) -> Vec<u8> {
    let [w, h] = size;
    let renderer = engine.renderer(format);
    let texture = engine.device.create_texture(&wgpu::TextureDescriptor {
        label: None,
        size: wgpu::Extent3d {
            width: w,
            height: h,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let row = (w * 4).next_multiple_of(256);
    let out = engine_storage(engine, (row * h) as u64);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    let target = texture.create_view(&Default::default());
    renderer.encode_draw(engine, &mut enc, &target, plane, &view);
    enc.copy_texture_to_buffer(
        texture.as_image_copy(),
        wgpu::TexelCopyBufferInfo {
            buffer: &out,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(row),
                rows_per_image: None,
            },
        },
        wgpu::Extent3d {
            width: w,
            height: h,
            depth_or_array_layers: 1,
        },
    );
    engine.queue.submit([enc.finish()]);
    let bytes = pollster::block_on(engine.read_back(&out, (row * h) as u64)).unwrap();
    bytes
        .chunks_exact(row as usize)
        .flat_map(|r| r[..w as usize * 4].to_vec())
        .collect()
}

#[test]
fn rendered_pixels_carry_the_mirror_colours_and_the_overlay() {
    let Some(engine) = engine() else { return };
    let cmap = display::colormap_index("viridis").unwrap();
    let (plane, [rows, cols]) = arina_totals_plane(
        &engine,
        Limits::Percentile { lo: 2.0, hi: 98.0 },
        Scale::Linear,
    );
    let values = pollster::block_on(plane.read_values(&engine)).unwrap();
    let stats = pollster::block_on(plane.read_stats(&engine)).unwrap();
    let view = View {
        canvas_w: cols as u32,
        canvas_h: rows as u32,
        cmap,
        zoom: 1.0,
        pan_r: rows as f32 / 2.0,
        pan_c: cols as f32 / 2.0,
        line_px: 0.5,
        ..Default::default()
    };
    let pixels = render(&engine, &plane, view);
    // The engine keeps a renderer per format: BGRA canvases get the same pixels, their
    // channels in that order, and RGBA ones still theirs.
    let bgra = render_as(
        &engine,
        &plane,
        view,
        wgpu::TextureFormat::Bgra8Unorm,
        [cols as u32, rows as u32],
    );
    let swapped: Vec<u8> = bgra
        .chunks_exact(4)
        .flat_map(|p| [p[2], p[1], p[0], p[3]])
        .collect();
    assert_eq!(swapped, pixels);
    assert_eq!(render(&engine, &plane, view), pixels);
    let want = display::colorize(&values, &stats, cmap);
    let table = &colormaps::TABLES[cmap as usize];
    for (i, (g, w)) in pixels.chunks_exact(4).zip(want.chunks_exact(4)).enumerate() {
        let level = table.iter().position(|t| t[..] == w[..3]).unwrap();
        let near = table[level.saturating_sub(1)..(level + 2).min(256)]
            .iter()
            .any(|t| t[..] == g[..3]);
        assert!(near, "pixel {i}: GPU {:?} vs CPU {:?}", &g[..3], &w[..3]);
    }
    // A one-pixel rectangle outline straddles the half-open rectangle's edges.
    let rect = View {
        overlay: 3,
        rect_r0: 1.0,
        rect_r1: 4.0,
        rect_c0: 1.0,
        rect_c1: 4.0,
        line_px: 1.0,
        ..view
    };
    let pixels = render(&engine, &plane, rect);
    let is_overlay = |r: usize, c: usize| pixels[(r * cols + c) * 4..][..3] == [0, 255, 153];
    assert!(
        rows >= 5 && cols >= 5,
        "scan {rows}×{cols} too small for this check"
    );
    assert!(is_overlay(1, 1) && is_overlay(3, 3) && is_overlay(1, 2) && is_overlay(0, 0));
    assert!(!is_overlay(2, 2), "the interior stays an image pixel");
}

/// The page's 2D canvases show a [`PixelTarget`]'s pixels: at canvas widths either side of
/// the copy's row alignment (64 texels), odd heights and a zoomed view, they are the
/// texture's, row for row.
#[test]
fn frames_read_back_for_a_2d_canvas_are_the_drawn_pixels() {
    let Some(engine) = engine() else { return };
    let (plane, [rows, cols]) = arina_totals_plane(
        &engine,
        Limits::Percentile { lo: 1.0, hi: 99.0 },
        Scale::Log,
    );
    let mut drew_plane = false;
    for size in [[1, 1], [63, 17], [64, 9], [65, 31], [130, 7], [257, 3]] {
        let view = View {
            canvas_w: size[0],
            canvas_h: size[1],
            cmap: display::colormap_index("twilight").unwrap(),
            zoom: 1.7,
            pan_r: rows as f32 / 3.0,
            pan_c: cols as f32 / 2.0,
            line_px: 1.0,
            ..Default::default()
        };
        let got = render_frame(&engine, &plane, view, size);
        let want = render_as(&engine, &plane, view, PixelTarget::FORMAT, size);
        assert_eq!(got.len(), (size[0] * size[1] * 4) as usize, "{size:?}");
        assert_eq!(got, want, "canvas {size:?}");
        assert!(
            got.chunks_exact(4).all(|p| p[3] == 255),
            "canvas {size:?}: every pixel opaque"
        );
        drew_plane |= got.chunks_exact(4).any(|p| p[..3] != [0, 0, 0]);
    }
    assert!(
        drew_plane,
        "some canvas shows the plane, not only the background"
    );
}

#[test]
fn frame_rows_are_cut_at_their_padding() {
    assert_eq!(padded_row_bytes(1), 256);
    assert_eq!(padded_row_bytes(64), 256);
    assert_eq!(padded_row_bytes(65), 512);
    // Two rows of 3 texels, 256 bytes apart, each marked by its row and texel.
    let mut padded = vec![0xEEu8; 512];
    for r in 0..2 {
        for b in 0..12 {
            padded[r * 256 + b] = (r * 100 + b) as u8;
        }
    }
    let rows = unpad_rows(&padded, 256, [3, 2]);
    let want: Vec<u8> = (0..2)
        .flat_map(|r| (0..12).map(move |b| (r * 100 + b) as u8))
        .collect();
    assert_eq!(rows, want);
}

/// Limits of a plane far larger than the kernel's workgroup equal the mirror: exact range,
/// finite count and histogram, with NaN, infinities and negative values mixed in.
#[test]
fn limits_of_a_large_plane_match_the_mirror_exactly() {
    let Some(engine) = engine() else { return };
    let (w, h) = (517u32, 263u32);
    let values: Vec<f32> = (0..w * h)
        .map(|i| match i % 997 {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            _ => ((i as f32 * 0.618_034).fract() - 0.3) * 1.0e4 + (i % 7) as f32,
        })
        .collect();
    let buf = engine.input(bytemuck::cast_slice(&values));
    let plane = Plane::new(&engine, w, h);
    for (limits, scale) in LIMITS {
        let (got, cpu) = gpu_and_mirror_stats(&engine, &plane, (&buf, &values), limits, scale);
        assert_limits_match(&got, &cpu, &format!("large plane {limits:?} {scale:?}"));
    }
}

/// The percentile search finds the mirror's bins wherever they fall: the first bin, the
/// last, and either side of 8-bin runs (where a scan shared by 256 invocations would cut
/// the 2,048 bins).
#[test]
fn percentile_limits_match_the_mirror_at_every_kind_of_bin() {
    let Some(engine) = engine() else { return };
    let (w, h) = (301u32, 77u32);
    // Uneven: a square law puts most values low, so the counts vary from bin to bin.
    let values: Vec<f32> = (0..w * h)
        .map(|i| {
            let t = (i as f32 * 0.754_877_7).fract();
            t * t * 2048.0 - 100.0
        })
        .collect();
    let buf = engine.input(bytemuck::cast_slice(&values));
    let plane = Plane::new(&engine, w, h);
    let ps = [
        0.0f32, 0.001, 0.37, 3.1, 12.5, 50.0, 87.5, 99.63, 99.999, 100.0,
    ];
    for (k, &lo) in ps.iter().enumerate() {
        for &hi in &ps[k + 1..] {
            for limits in [Limits::Percentile { lo, hi }, Limits::Symmetric { lo, hi }] {
                let (got, cpu) =
                    gpu_and_mirror_stats(&engine, &plane, (&buf, &values), limits, Scale::Linear);
                assert_eq!(
                    [got.lo, got.hi].map(f32::to_bits),
                    [cpu.lo, cpu.hi].map(f32::to_bits),
                    "{limits:?}: {} {} vs {} {}",
                    got.lo,
                    got.hi,
                    cpu.lo,
                    cpu.hi
                );
            }
        }
    }
}

/// The edges of the many-workgroup limits: no finite value at all (the mirror's ±3e38 range
/// and 0..1 limits), one finite value among NaNs in the last block, values beyond the
/// mirror's ±3e38 starting points, and a plane of one constant over many workgroups.
#[test]
fn limits_at_their_edges_match_the_mirror_exactly() {
    let Some(engine) = engine() else { return };
    let (w, h) = (1031u32, 9u32);
    let n = (w * h) as usize;
    let mut one = vec![f32::NAN; n];
    one[n - 1] = -2.5;
    let (mut above, mut below) = (vec![1.0f32; n], vec![1.0f32; n]);
    above[17] = 3.3e38;
    below[4000] = -3.3e38;
    let cases = [
        ("no finite value", vec![f32::NAN; n]),
        ("one finite value", one),
        ("above 3e38", above),
        ("below -3e38", below),
        ("constant", vec![-0.0f32; n]),
    ];
    let plane = Plane::new(&engine, w, h);
    for (what, values) in cases {
        let buf = engine.input(bytemuck::cast_slice(&values));
        for (limits, scale) in LIMITS {
            let (got, cpu) = gpu_and_mirror_stats(&engine, &plane, (&buf, &values), limits, scale);
            assert_limits_match(&got, &cpu, &format!("{what} {limits:?} {scale:?}"));
        }
    }
}

/// A ramp 0 … 60000 over an odd, non-square plane with NaN every 97th value, on the GPU.
fn ramp_plane(engine: &Engine) -> (Plane, Vec<f32>, wgpu::Buffer) {
    let (w, h) = (173u32, 61u32);
    let n = (w * h) as usize;
    let values: Vec<f32> = (0..n)
        .map(|i| match i % 97 {
            42 => f32::NAN,
            _ => i as f32 * (60000.0 / (n - 1) as f32),
        })
        .collect();
    let buf = engine.input(bytemuck::cast_slice(&values));
    (Plane::new(engine, w, h), values, buf)
}

/// The plane drawn at one canvas pixel per value with `cmap` on `scale`.
fn render_plane(engine: &Engine, plane: &Plane, cmap: u32, scale: Scale) -> Vec<u8> {
    let view = View {
        canvas_w: plane.width,
        canvas_h: plane.height,
        cmap,
        scale: scale.code(),
        zoom: 1.0,
        pan_r: plane.height as f32 / 2.0,
        pan_c: plane.width as f32 / 2.0,
        ..Default::default()
    };
    render(engine, plane, view)
}

/// Each rendered pixel is the mirror's colour-map entry or a neighbour of it (the shader's
/// divide may round to the next level).
fn assert_pixels_follow_the_mirror(pixels: &[u8], want: &[u8], cmap: u32, what: &str) {
    let table = &colormaps::TABLES[cmap as usize];
    for (i, (g, w)) in pixels.chunks_exact(4).zip(want.chunks_exact(4)).enumerate() {
        if w[..3] == [128, 128, 128] {
            assert_eq!(g[..3], w[..3], "{what}: pixel {i} is grey (NaN)");
            continue;
        }
        let level = table.iter().position(|t| t[..] == w[..3]).unwrap();
        let near = table[level.saturating_sub(1)..(level + 2).min(256)]
            .iter()
            .any(|t| t[..] == g[..3]);
        assert!(
            near,
            "{what}: pixel {i}: GPU {:?} vs CPU {:?}",
            &g[..3],
            &w[..3]
        );
    }
}

/// Absolute limits are data units on every scale (the old rule read them in shown units, so
/// 1000 … 50000 with log on painted every pixel at the low end): the limits come back as
/// given, bit for bit with the mirror, no note, and the image spreads over the map wherever
/// the limits overlap the data.
#[test]
fn absolute_limits_in_data_units_draw_the_data_on_every_scale() {
    let Some(engine) = engine() else { return };
    let (plane, values, buf) = ramp_plane(&engine);
    let cmap = display::colormap_index("inferno").unwrap();
    for (lo, hi) in [
        (1000.0, 50000.0),
        (0.5, 2000.0),
        (40000.0, 1.0e6),
        (-10.0, 10.0),
    ] {
        for scale in [Scale::Linear, Scale::Log, Scale::Sqrt] {
            let what = format!("{lo} … {hi} {scale:?}");
            let limits = Limits::Absolute { lo, hi };
            let (got, cpu) = gpu_and_mirror_stats(&engine, &plane, (&buf, &values), limits, scale);
            assert_limits_match(&got, &cpu, &what);
            assert_eq!((got.lo, got.hi), (lo, hi), "{what}: data units, as given");
            assert_eq!(got.note(), None, "{what}");
            let pixels = render_plane(&engine, &plane, cmap, scale);
            assert_pixels_follow_the_mirror(
                &pixels,
                &display::colorize(&values, &got, cmap),
                cmap,
                &what,
            );
            let colours: std::collections::BTreeSet<&[u8]> =
                pixels.chunks_exact(4).map(|p| &p[..3]).collect();
            assert!(colours.len() >= 4, "{what}: {} colours", colours.len());
        }
    }
}

/// Absolute limits beside every value are kept (a series drawn with fixed limits stays
/// comparable) and said: the GPU sets the mirror's note, the words name the end of the map
/// the panel shows, and the panel shows exactly that end; limits float32 cannot tell apart
/// on the log scale are widened and said.
#[test]
fn limits_beside_the_data_are_said_not_hidden() {
    let Some(engine) = engine() else { return };
    let (plane, values, buf) = ramp_plane(&engine);
    let cmap = display::colormap_index("viridis").unwrap();
    let table = &colormaps::TABLES[cmap as usize];
    use display::limits::note;
    let cases = [
        (
            (70000.0, 80000.0),
            note::ABOVE_DATA,
            "low end",
            Some(table[0]),
        ),
        ((-5.0, 0.0), note::BELOW_DATA, "high end", Some(table[255])),
        (
            (1.0e30, 1.000_001e30),
            note::ABOVE_DATA | note::COLLAPSED,
            "one value",
            Some(table[0]),
        ),
    ];
    for ((lo, hi), flags, words, end) in cases {
        for scale in [Scale::Linear, Scale::Log, Scale::Sqrt] {
            // Only the log scale folds these two limits into one value.
            let flags = if scale != Scale::Log {
                flags & !note::COLLAPSED
            } else {
                flags
            };
            let what = format!("{lo} … {hi} {scale:?}");
            let limits = Limits::Absolute { lo, hi };
            let (got, cpu) = gpu_and_mirror_stats(&engine, &plane, (&buf, &values), limits, scale);
            assert_limits_match(&got, &cpu, &what);
            assert_eq!(got.notes, flags, "{what}");
            let text = got.note().unwrap_or_default();
            let words = if flags & note::COLLAPSED == 0 && words == "one value" {
                "low end"
            } else {
                words
            };
            assert!(text.contains(words), "{what}: {text}");
            let pixels = render_plane(&engine, &plane, cmap, scale);
            for (p, v) in pixels.chunks_exact(4).zip(&values) {
                let want = if v.is_finite() {
                    end.unwrap()
                } else {
                    [128, 128, 128]
                };
                assert_eq!(p[..3], want, "{what}: every pixel at the said end");
            }
        }
    }
}

/// Exact moments `[t, Σi·I, Σj·I]` of a 7 × 9 scan whose CoM sits exactly on the dyadic
/// point (6.25, 5.5) at three positions and at ±x about it (antipodal pairs, x from 1e-6 to
/// 1 px, in every direction) elsewhere, so that its scan mean is that point exactly and the
/// three have a DPC of exactly zero.
fn crafted_moments() -> ([usize; 2], Vec<[u64; 3]>) {
    let scan = [7usize, 9];
    let (c_r, c_c) = (6.25f64, 5.5f64);
    let mut m = Vec::new();
    for k in 0..3u64 {
        let t = 4 * (250_001 + 1979 * k);
        m.push([t, (c_r * t as f64) as u64, (c_c * t as f64) as u64]);
    }
    for j in 0..30u64 {
        let t = 4 * (250_001 + 1979 * (j + 3));
        let r = 10f64.powf(-6.0 + 6.0 * j as f64 / 29.0);
        let theta = 2.0 * std::f64::consts::PI * (j as f64 + 0.37) / 30.0;
        let (dr, dc) = (
            (r * theta.cos() * t as f64).round() as i64,
            (r * theta.sin() * t as f64).round() as i64,
        );
        let (br, bc) = ((c_r * t as f64) as i64, (c_c * t as f64) as i64);
        m.push([t, (br + dr) as u64, (bc + dc) as u64]);
        m.push([t, (br - dr) as u64, (bc - dc) as u64]);
    }
    assert_eq!(m.len(), scan[0] * scan[1]);
    (scan, m)
}

/// Wrapped difference of two angles (radians), in [0, π].
fn angle_diff(a: f64, b: f64) -> f64 {
    let d = (a - b).rem_euclid(2.0 * std::f64::consts::PI);
    d.min(2.0 * std::f64::consts::PI - d)
}

/// The DPC magnitude and direction planes from exact moments, against the CPU reference
/// (`cpu::dpc_from_com` and `contract::dpc_polar` in float64) with rotation and flip. The
/// components meet the contract's DPC bound ε = 2e-6 px; from it: the magnitude within
/// √2·ε + 8 ulp, and the angle within asin(√2·ε/|g|) + 2e-6 rad (the vector's error turns it
/// by at most that; the shader's atan adds at most 2e-6), no bound where |g| ≤ √2·ε
/// (a direction that small is not determined), exactly 0 for a zero vector. Whatever
/// the length, the angle is the direction of the vector the GPU holds within 2e-6 rad.
#[test]
fn dpc_magnitude_and_direction_meet_their_bounds() {
    let Some(engine) = engine() else { return };
    use stem4d::kernels::fft::{encode_dpc_pairs, CentreSource, DpcSettings};
    let (scan, m) = crafted_moments();
    let n = scan[0] * scan[1];
    let words: Vec<u32> = m
        .iter()
        .flat_map(|v| v.iter().flat_map(|&x| [x as u32, (x >> 32) as u32]))
        .collect();
    let moments = engine.input(&words);
    let bound = m.iter().flat_map(|v| v.iter()).copied().max().unwrap() as u128;
    let com = products::com_from_moments(&m);
    let mean = stem4d::cpu::scan_means(&com);
    assert_eq!(mean, [6.25, 5.5], "the antipodal pairs cancel exactly");
    let (rotation, flip) = (-137.0, true);
    let reference = stem4d::cpu::dpc_from_com(&com, rotation, flip);
    let pairs = engine_storage(&engine, n as u64 * 8);
    let plane = Plane::with_angle(&engine, scan[1] as u32, scan[0] as u32);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    let centre = CentreSource::Moments {
        buf: &moments,
        bound,
    };
    let dpc = DpcSettings {
        mean,
        rotation,
        flip,
    };
    encode_dpc_pairs(&engine, &mut enc, scan, centre, dpc, &pairs).unwrap();
    plane
        .encode_prep(
            &engine,
            &mut enc,
            PlaneSource::DpcMagnitude { pairs: &pairs },
        )
        .unwrap();
    plane
        .encode_angle(&engine, &mut enc, PlaneSource::DpcAngle { pairs: &pairs })
        .unwrap();
    let limits = Limits::Percentile { lo: 0.0, hi: 100.0 };
    plane
        .encode_stats(&engine, &mut enc, limits, Scale::Sqrt)
        .unwrap();
    engine.queue.submit([enc.finish()]);
    let g: Vec<f32> = bytemuck::pod_collect_to_vec(
        &pollster::block_on(engine.read_back(&pairs, n as u64 * 8)).unwrap(),
    );
    let magnitude = pollster::block_on(plane.read_values(&engine)).unwrap();
    let angle = pollster::block_on(plane.read_angles(&engine)).unwrap();
    let eps = 2e-6f64;
    let (mut zeros, mut bounded) = (0, 0);
    for k in 0..n {
        let want = [reference[k], reference[n + k]];
        let got = [g[2 * k] as f64, g[2 * k + 1] as f64];
        for axis in 0..2 {
            assert!(
                (got[axis] - want[axis]).abs() <= eps,
                "[{k}] component {axis}: {} vs {}",
                got[axis],
                want[axis]
            );
        }
        let [m_ref, a_ref] = stem4d::contract::dpc_polar(want);
        let (m_gpu, a_gpu) = (magnitude[k] as f64, angle[k] as f64);
        let m_bound = 2f64.sqrt() * eps + 8.0 * f32::EPSILON as f64 * m_ref;
        assert!(
            (m_gpu - m_ref).abs() <= m_bound,
            "[{k}] |g| {m_gpu} vs {m_ref}"
        );
        assert!(a_gpu.is_finite() && a_gpu.abs() <= std::f64::consts::PI + 1e-6);
        if m_ref == 0.0 {
            zeros += 1;
            assert_eq!((m_gpu, a_gpu), (0.0, 0.0), "[{k}] a zero vector");
            continue;
        }
        let own = stem4d::contract::dpc_polar(got)[1];
        assert!(
            angle_diff(a_gpu, own) <= 2e-6,
            "[{k}] atan of its own vector: {a_gpu} vs {own}"
        );
        let ratio = 2f64.sqrt() * eps / m_ref;
        if ratio < 1.0 {
            bounded += 1;
            let a_bound = ratio.asin() + 2e-6;
            assert!(
                angle_diff(a_gpu, a_ref) <= a_bound,
                "[{k}] angle {a_gpu} vs {a_ref} (|g| {m_ref}, bound {a_bound})"
            );
        }
    }
    assert_eq!(zeros, 3);
    assert!(bounded >= 40, "only {bounded} directions bounded");

    // The colour wheel as drawn: hue from the angle plane, brightness from the magnitude's
    // level between its limits (on the sqrt scale here), against the mirror (±2 per channel:
    // a level either side of the divide, rounded either way).
    let stats = pollster::block_on(plane.read_stats(&engine)).unwrap();
    let view = View {
        canvas_w: plane.width,
        canvas_h: plane.height,
        scale: Scale::Sqrt.code(),
        wheel: 1,
        zoom: 1.0,
        pan_r: plane.height as f32 / 2.0,
        pan_c: plane.width as f32 / 2.0,
        ..Default::default()
    };
    let pixels = render(&engine, &plane, view);
    let want = display::colorize_wheel(&magnitude, &angle, &stats);
    for (i, (p, w)) in pixels.chunks_exact(4).zip(want.chunks_exact(4)).enumerate() {
        for ch in 0..3 {
            assert!(
                (p[ch] as i32 - w[ch] as i32).abs() <= 2,
                "wheel pixel {i}: GPU {:?} vs CPU {:?}",
                &p[..3],
                &w[..3]
            );
        }
    }
    let hues: std::collections::BTreeSet<&[u8]> = pixels.chunks_exact(4).map(|p| &p[..3]).collect();
    assert!(hues.len() > 30, "{} colours on the wheel", hues.len());
}
