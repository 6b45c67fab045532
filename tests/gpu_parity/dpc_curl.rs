//! `kernels::dpc_curl` (the DPC rotation's sums) against the float64 reference
//! `cpu::dpc_rotation::curl_div_sums`, on an odd, rectangular scan of several
//! workgroups of cells, both flips; then the `dpc-rotation` product of a simulated
//! acquisition of known rotation on the CPU, the GPU and a streamed pass.

use crate::check;
use crate::common::*;
use stem4d::cpu::dpc_rotation::curl_div_sums;
use stem4d::frames::Correction;
use stem4d::products::{ProductArray, ProductKind, ProductParams};

#[test]
fn curl_sums_on_the_gpu_equal_the_reference_within_float32() {
    let Some(engine) = engine() else { return };
    for scan in [[37usize, 29usize], [2, 3], [5, 130]] {
        let n = scan[0] * scan[1];
        // A smooth field with a curl and a divergence of its own, rounded to float32.
        let (mut dr, mut dc) = (vec![0f64; n], vec![0f64; n]);
        for k in 0..n {
            let (r, c) = ((k / scan[1]) as f64, (k % scan[1]) as f64);
            dr[k] = ((0.31 * r).sin() + 0.2 * (0.17 * c).cos()) as f32 as f64;
            dc[k] = ((0.23 * c + 0.4).cos() - 0.3 * (0.29 * r).sin()) as f32 as f64;
        }
        let words: Vec<u32> = (0..n)
            .flat_map(|k| [(dr[k] as f32).to_bits(), (dc[k] as f32).to_bits()])
            .collect();
        let field = engine.input(&words);
        let got = pollster::block_on(stem4d::kernels::dpc_curl::curl_sums(&engine, &field, scan))
            .unwrap();
        for (f, flip) in [false, true].into_iter().enumerate() {
            let want = curl_div_sums(&dr, &dc, scan, flip);
            let scale = want[0] + want[2];
            for q in 0..3 {
                assert!(
                    (got[f][q] - want[q]).abs() <= 1e-5 * scale.max(1e-30),
                    "{scan:?} flip {flip} sum {q}: {} against {}",
                    got[f][q],
                    want[q]
                );
            }
        }
    }
}

/// A u16 acquisition (odd, rectangular scan of odd, non-square frames) whose centre of mass
/// is the gradient of a projected potential of Gaussian columns, turned into the detector
/// frame by `flip` and `theta` (C-DPC inverted), and whose ADF ring is bright on the columns.
/// Returns it with the `dpc-rotation` request (the ring's annulus).
fn simulated_acquisition(theta: f64, flip: bool) -> (stem4d::formats::Acquisition, ProductParams) {
    let (scan, det) = ([13usize, 18usize], [11usize, 14usize]);
    let atoms = [
        (3.3, 4.1, 1.0),
        (9.7, 12.4, 0.8),
        (5.2, 15.9, 1.2),
        (10.1, 5.6, 0.9),
    ];
    let v = |r: f64, c: f64| -> f64 {
        atoms
            .iter()
            .map(|&(ar, ac, h)| h * (-((r - ar).powi(2) + (c - ac).powi(2)) / 3.0).exp())
            .sum()
    };
    let (c0r, c0c) = (5usize, 6usize);
    let ring = [
        (4i64, 0i64),
        (-4, 0),
        (0, 4),
        (0, -4),
        (3, 3),
        (3, -3),
        (-3, 3),
        (-3, -3),
    ];
    let mut samples = Vec::with_capacity(scan[0] * scan[1] * det[0] * det[1] * 2);
    for r in 0..scan[0] {
        for c in 0..scan[1] {
            let (rf, cf) = (r as f64, c as f64);
            let g = [
                v(rf + 0.5, cf) - v(rf - 0.5, cf),
                v(rf, cf + 0.5) - v(rf, cf - 0.5),
            ];
            let back = stem4d::contract::rotate_flip(g, -theta, false);
            let d = if flip { [back[1], back[0]] } else { back };
            let mut frame = vec![0u16; det[0] * det[1]];
            let at =
                |dr: i64, dc: i64| (c0r as i64 + dr) as usize * det[1] + (c0c as i64 + dc) as usize;
            let (shift_r, shift_c) = (
                (8000.0 * d[0]).round() as i64,
                (8000.0 * d[1]).round() as i64,
            );
            frame[at(0, 0)] = 20_000;
            frame[at(1, 0)] = (10_000 + shift_r) as u16;
            frame[at(-1, 0)] = (10_000 - shift_r) as u16;
            frame[at(0, 1)] = (10_000 + shift_c) as u16;
            frame[at(0, -1)] = (10_000 - shift_c) as u16;
            // Symmetric about the centre: the ring moves no centre of mass.
            for (dr, dc) in ring {
                frame[at(dr, dc)] = (3000.0 * v(rf, cf)).round() as u16;
            }
            samples.extend(frame.iter().flat_map(|x| x.to_le_bytes()));
        }
    }
    let acq = raw_acquisition(
        stem4d::contract::Dtype::U16,
        [scan[0], scan[1], det[0], det[1]],
        samples,
    );
    let mut p = ProductParams::new(ProductKind::DpcRotation);
    p.center = Some([c0r as f64, c0c as f64]);
    p.inner = Some(3.5);
    p.outer = Some(4.9);
    (acq, p)
}

fn angle_gap(a: f64, b: f64) -> f64 {
    let x = (a - b).rem_euclid(360.0);
    x.min(360.0 - x)
}

/// C-DPC-ROTATION end to end: the known rotation (every quadrant, both flips) and its
/// 180° branch are found from the frames on the CPU, on the GPU resident and in a streamed
/// pass of two-row blocks; the GPU's within C-BOUND-DPC-ROTATION of the CPU's.
#[test]
fn the_rotation_of_a_simulated_acquisition_is_found_on_every_path() {
    let Some(engine) = engine() else { return };
    for (theta, flip) in [
        (0.0, false),
        (37.0, true),
        (128.5, false),
        (200.0, true),
        (301.0, false),
    ] {
        let (acq, p) = simulated_acquisition(theta, flip);
        let corr = Correction::default();
        let what = format!("θ {theta} flip {flip}");
        let cpu = stem4d::cpu::compute(&acq, &p, corr).unwrap_or_else(|e| panic!("{what}: {e}"));
        let gpu = pollster::block_on(stem4d::products::gpu::compute(&engine, &acq, &p, corr))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let streamed = pollster::block_on(stem4d::products::stream::compute_streamed(
            &engine,
            &acq,
            std::slice::from_ref(&p),
            corr,
            stem4d::products::stream::Blocks {
                rows: 2,
                gpu_decode: false,
            },
            &mut |_, _| {},
        ))
        .unwrap_or_else(|e| panic!("{what}: streamed: {e}"));
        for (path, got) in [("cpu", &cpu), ("gpu", &gpu), ("streamed", &streamed[0])] {
            let v = got.data.to_f64();
            assert_eq!(got.shape, vec![3], "{what} {path}");
            assert_eq!(v[1] == 1.0, flip, "{what} {path}: {v:?}");
            assert!(angle_gap(v[0], theta) <= 0.5, "{what} {path}: {v:?}");
        }
        check("dpc-rotation", &what, &gpu, &cpu).unwrap();
        check("dpc-rotation", &what, &streamed[0], &cpu).unwrap();
    }
}

/// The judge of C-BOUND-DPC-ROTATION refuses another flip, θ past 0.01° (round the circle:
/// 359.995° is 0.01° from 0.005°) and another curl energy.
#[test]
fn the_rotation_bound_refuses_what_it_should() {
    let r = |v: [f64; 3]| ProductArray {
        shape: vec![3],
        data: stem4d::products::ArrayData::F64(v.to_vec()),
    };
    let reference = r([0.004, 1.0, 2.0]);
    assert!(check("dpc-rotation", "", &r([359.995, 1.0, 2.0005]), &reference).is_ok());
    assert!(check("dpc-rotation", "", &r([0.004, 0.0, 2.0]), &reference).is_err());
    assert!(check("dpc-rotation", "", &r([0.02, 1.0, 2.0]), &reference).is_err());
    assert!(check("dpc-rotation", "", &r([180.004, 1.0, 2.0]), &reference).is_err());
    assert!(check("dpc-rotation", "", &r([0.004, 1.0, 2.01]), &reference).is_err());
}
