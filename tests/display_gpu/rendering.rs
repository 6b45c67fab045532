//! Rendered pixels: the mirror's colour-map entries and the overlay, on BGRA and RGBA
//! canvases alike, and frames read back for the page's 2D canvases row for row.

use super::{prep_and_stats, render, render_frame, sums_on_gpu, upload};
use crate::common::*;
use stem4d::contract::SparseMask;
use stem4d::display::gpu::{padded_row_bytes, unpad_rows, PixelTarget, Plane, PlaneSource};
use stem4d::display::{self, colormaps, Limits, Scale};
use stem4d::gpu::Engine;
use stem4d::kernels::View;

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
    let out = engine.storage("pixels", (row * h) as u64);
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
