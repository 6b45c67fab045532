//! The synthetic acquisition made on the GPU (`src/kernels/synthetic.rs`, `wgsl/synthetic.wgsl`)
//! equals the CPU's samples.

use super::check;
use crate::common::*;
use stem4d::cpu;
use stem4d::frames::Correction;
use stem4d::products::gpu as products;

/// The GPU's synthetic acquisition holds `formats::synthetic::sample`'s integers (C-SYNTH).
#[test]
fn synthetic_residents_made_on_the_gpu_equal_the_cpu_samples() {
    use stem4d::formats::synthetic;
    let Some(engine) = engine() else { return };
    // Odd detector (a half-filled last word), rectangular scan, and a forced split.
    let acq = synthetic::open([4, 37, 13, 11]).unwrap();
    let corr = stem4d::frames::Correction::default();
    let mut limits = engine.adapter.limits;
    // Two tiles (of 16 positions, 143 sectors of 32 bytes) per buffer.
    limits.max_storage_binding = 143 * 32 * 2;
    let res = pollster::block_on(engine.upload_with_limits(&acq, corr, limits)).unwrap();
    assert!(res.buffers.len() > 3);
    let n = acq.shape.frames();
    let got = pollster::block_on(products::frames(&engine, &res, 0, n)).unwrap();
    let det = acq.shape.det_len();
    for f in 0..n {
        for k in 0..det {
            assert_eq!(
                got[f * det + k],
                synthetic::sample(acq.shape, f, k) as u32,
                "frame {f} pixel {k}"
            );
        }
    }
    let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Com);
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &res, &p)).unwrap();
    check(
        "com",
        "synthetic com",
        &gpu,
        &cpu::compute(&acq, &p, Correction::default()).unwrap(),
    )
    .unwrap();
    p.kind = stem4d::products::ProductKind::Bf;
    (p.center, p.radius) = (Some([6.2, 5.1]), Some(2.5));
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &res, &p)).unwrap();
    assert_eq!(gpu, cpu::compute(&acq, &p, Correction::default()).unwrap());
}
