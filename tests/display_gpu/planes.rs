//! Display planes equal the f32 rendering of the exact products (BF, DF, CoM, DPC, a
//! resident frame), and their limits the mirror's under every limits mode and scale
//! (C-DISPLAY).

use super::{assert_limits_match, sums_on_gpu, upload, LIMITS};
use crate::common::*;
use stem4d::contract::{DetectorMask, SparseMask};
use stem4d::display;
use stem4d::display::gpu::{Plane, PlaneSource};
use stem4d::frames::Correction;
use stem4d::gpu::Engine;
use stem4d::products::gpu as products;

fn u64_as_display(v: u64) -> f32 {
    (v >> 32) as u32 as f32 * 4_294_967_296.0 + v as u32 as f32
}

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
    let com = stem4d::cpu::compute(&acq, &p, Correction::default())
        .unwrap()
        .data
        .to_f64();
    p.kind = stem4d::products::ProductKind::Dpc;
    (p.rotation, p.flip) = (23.0, true);
    let dpc = stem4d::cpu::compute(&acq, &p, Correction::default())
        .unwrap()
        .data
        .to_f64();
    let n = rows * cols;
    let mean = [
        com[..n].iter().sum::<f64>() / n as f64,
        com[n..].iter().sum::<f64>() / n as f64,
    ];
    let moments = engine.storage("moments", n as u64 * 24);
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
