//! The display path on the GPU against its CPU mirror (`stem4d::display`): planes equal the
//! f32 rendering of the exact products, limits land in the mirror's histogram bin, and the
//! rendered pixels carry the colour-map entry the mirror picks (±1 level for the divide).

mod common;

use common::*;
use stem4d::contract::{DetectorMask, SparseMask};
use stem4d::display::{self, colormaps, Limits, HIST_BINS};
use stem4d::gpu::display::{padded_row_bytes, unpad_rows, PixelTarget, Plane, PlaneSource};
use stem4d::gpu::kernels::View;
use stem4d::gpu::{products, Engine, Resident};

fn upload(engine: &Engine, name: &str) -> (stem4d::formats::Acquisition, Resident) {
    let acq = open_fixture(&fixture_named(name));
    let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    (acq, res)
}

/// Masked sums kept on the GPU, as the viewer keeps them.
fn sums_on_gpu(engine: &Engine, res: &Resident, indices: &[u32]) -> wgpu::Buffer {
    let out = engine_storage(engine, res.plan.shape.frames() as u64 * 8);
    let list = products::DetectorList::new(engine, indices).unwrap();
    let mut enc = engine.device.create_command_encoder(&Default::default());
    products::encode_masked_sums(engine, &mut enc, res, &list, &out).unwrap();
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

fn prep_and_stats(engine: &Engine, plane: &Plane, src: PlaneSource, limits: Limits, log: bool) {
    let mut enc = engine.device.create_command_encoder(&Default::default());
    plane.encode_prep(engine, &mut enc, src).unwrap();
    plane.encode_stats(engine, &mut enc, limits, log).unwrap();
    engine.queue.submit([enc.finish()]);
}

/// The stats of `values` (already in `buf`) as the GPU and the CPU mirror make them.
fn gpu_and_mirror_stats(
    engine: &Engine,
    plane: &Plane,
    (buf, values): (&wgpu::Buffer, &[f32]),
    limits: Limits,
    log: bool,
) -> (display::Stats, display::Stats) {
    prep_and_stats(
        engine,
        plane,
        PlaneSource::F32 { buf, stride: 1 },
        limits,
        log,
    );
    let got = pollster::block_on(plane.read_stats(engine)).unwrap();
    (got, display::stats(values, limits, log))
}

fn u64_as_display(v: u64) -> f32 {
    (v >> 32) as u32 as f32 * 4_294_967_296.0 + v as u32 as f32
}

fn assert_limits_match(gpu: &display::Stats, cpu: &display::Stats, exact_range: bool, what: &str) {
    assert_eq!(gpu.finite, cpu.finite, "{what}: finite count");
    let width = (cpu.max - cpu.min).abs().max(1e-6) / HIST_BINS as f32 * 1.01;
    let close = |a: f32, b: f32| (a - b).abs() <= width;
    if exact_range {
        assert_eq!((gpu.min, gpu.max), (cpu.min, cpu.max), "{what}: range");
    } else {
        assert!(
            close(gpu.min, cpu.min) && close(gpu.max, cpu.max),
            "{what}: range"
        );
    }
    assert!(close(gpu.lo, cpu.lo), "{what}: lo {} vs {}", gpu.lo, cpu.lo);
    assert!(close(gpu.hi, cpu.hi), "{what}: hi {} vs {}", gpu.hi, cpu.hi);
    assert_eq!(
        gpu.hist.iter().sum::<u32>(),
        cpu.finite,
        "{what}: histogram total"
    );
}

const LIMITS: [(Limits, bool); 4] = [
    (Limits::Percentile { lo: 0.5, hi: 99.5 }, false),
    (Limits::Symmetric { lo: 2.0, hi: 98.0 }, false),
    (
        Limits::Absolute {
            lo: 10.0,
            hi: 5000.0,
        },
        false,
    ),
    (Limits::Percentile { lo: 1.0, hi: 99.0 }, true),
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
    for (limits, log) in LIMITS {
        let mut enc = engine.device.create_command_encoder(&Default::default());
        plane.encode_stats(engine, &mut enc, limits, log).unwrap();
        engine.queue.submit([enc.finish()]);
        let gpu = pollster::block_on(plane.read_stats(engine)).unwrap();
        let cpu = display::stats(&values, limits, log);
        assert_limits_match(&gpu, &cpu, !log, &format!("{what} {limits:?} log={log}"));
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
    let exact_bf = pollster::block_on(products::masked_sums(&engine, &res, &bf_idx)).unwrap();
    let exact_total = pollster::block_on(products::masked_sums(&engine, &res, &all_idx)).unwrap();
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
    products::encode_com_moments(&engine, &mut enc, &res, &moments).unwrap();
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
fn arina_totals_plane(engine: &Engine, limits: Limits, log: bool) -> (Plane, [usize; 2]) {
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
    prep_and_stats(engine, &plane, source, limits, log);
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
    let (plane, [rows, cols]) =
        arina_totals_plane(&engine, Limits::Percentile { lo: 2.0, hi: 98.0 }, false);
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
    let want = display::colorize(&values, &stats, cmap, false);
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
    let (plane, [rows, cols]) =
        arina_totals_plane(&engine, Limits::Percentile { lo: 1.0, hi: 99.0 }, true);
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
    for (limits, log) in LIMITS {
        let (got, cpu) = gpu_and_mirror_stats(&engine, &plane, (&buf, &values), limits, log);
        assert_limits_match(
            &got,
            &cpu,
            !log,
            &format!("large plane {limits:?} log={log}"),
        );
        if !log {
            assert_eq!(got.hist, cpu.hist, "histogram {limits:?}");
            assert_eq!(
                [got.lo, got.hi].map(f32::to_bits),
                [cpu.lo, cpu.hi].map(f32::to_bits),
                "limits {limits:?}"
            );
        }
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
                    gpu_and_mirror_stats(&engine, &plane, (&buf, &values), limits, false);
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
        for (limits, _) in LIMITS {
            let (got, cpu) = gpu_and_mirror_stats(&engine, &plane, (&buf, &values), limits, false);
            let bits = |s: &display::Stats| [s.lo, s.hi, s.min, s.max].map(f32::to_bits).to_vec();
            assert_eq!(bits(&got), bits(&cpu), "{what} {limits:?}");
            assert_eq!(got.finite, cpu.finite, "{what} {limits:?}: finite count");
            assert_eq!(got.hist, cpu.hist, "{what} {limits:?}: histogram");
        }
    }
}
