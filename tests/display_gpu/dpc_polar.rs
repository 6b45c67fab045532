//! DPC magnitude and direction planes from exact moments meet the bounds the contract's DPC
//! bound implies, and the colour wheel is drawn as the mirror draws it (C-DPC-POLAR).

use super::render;
use crate::common::*;
use stem4d::display::gpu::{Plane, PlaneSource};
use stem4d::display::{self, Limits, Scale};
use stem4d::kernels::View;
use stem4d::products::gpu as products;

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
    let pairs = engine.storage("pairs", n as u64 * 8);
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
