//! Display limits against the mirror: a large plane, percentiles at every kind of bin, the
//! edges (no finite value, values past ±3e38, a constant), absolute limits in data units on
//! every scale, and limits beside the data said rather than hidden (C-DISPLAY).

use super::{assert_limits_match, gpu_and_mirror_stats, render, LIMITS};
use crate::common::*;
use stem4d::display::gpu::Plane;
use stem4d::display::{self, colormaps, Limits, Scale};
use stem4d::gpu::Engine;
use stem4d::kernels::View;

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
