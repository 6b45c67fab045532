//! Residents across buffers and over time: residents split across buffers give the same
//! sums and reductions, synthetic residents made on the GPU hold the generator's samples,
//! and a replaced resident lends its buffers, cleared.

use super::check;
use crate::common::*;
use stem4d::cpu;
use stem4d::frames::Correction;
use stem4d::products::gpu as products;

#[test]
fn residents_split_across_buffers_give_the_same_sums() {
    let Some(engine) = engine() else { return };
    let fx = fixture_named("arina_u16");
    let acq = open_fixture(&fx);
    let corr = stem4d::frames::Correction::default();
    let whole = pollster::block_on(engine.upload(&acq, corr)).unwrap();
    // Force a tiny binding limit: one tile of positions per buffer.
    let mut limits = engine.adapter.limits;
    limits.max_storage_binding = whole.plan.tile_words as u64 * 4;
    let plan =
        stem4d::upload::plan::ResidentPlan::new(acq.shape, acq.dtype, false, limits).unwrap();
    // 35 positions: tiles of 16, 16 and a padded 3.
    assert_eq!(plan.segments.len(), 3);
    let split = pollster::block_on(engine.upload_with_limits(&acq, corr, limits)).unwrap();
    assert_eq!(split.buffers.len(), plan.segments.len());
    let all: Vec<u32> = (0..acq.shape.det_len() as u32).collect();
    let a = pollster::block_on(stem4d::kernels::masked_sum::masked_sums(
        &engine, &whole, &all,
    ))
    .unwrap();
    let b = pollster::block_on(stem4d::kernels::masked_sum::masked_sums(
        &engine, &split, &all,
    ))
    .unwrap();
    assert_eq!(a, b);
    let ma =
        pollster::block_on(stem4d::kernels::com_moments::com_moments(&engine, &whole)).unwrap();
    let mb =
        pollster::block_on(stem4d::kernels::com_moments::com_moments(&engine, &split)).unwrap();
    assert_eq!(ma, mb);
    let roi = stem4d::contract::Region::full(acq.shape.scan);
    let pa = pollster::block_on(stem4d::kernels::pattern_reduce::pattern_reduce(
        &engine, &whole, roi,
    ))
    .unwrap();
    let pb = pollster::block_on(stem4d::kernels::pattern_reduce::pattern_reduce(
        &engine, &split, roi,
    ))
    .unwrap();
    assert_eq!(pa, pb);
}

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

/// Reduced patterns over many chunks of positions and several segments (atomics + carries)
/// equal the CPU reference, over the whole scan and over an off-centre ROI (C-REDUCE).
#[test]
fn pattern_reductions_over_many_position_chunks_are_exact() {
    use stem4d::products::{ProductKind, ProductParams};
    let Some(engine) = engine() else { return };
    let acq = stem4d::formats::synthetic::open([41, 29, 9, 7]).unwrap();
    let mut limits = engine.adapter.limits;
    limits.max_storage_binding = 32 * 4 * 300; // ~300 frames per buffer
    let res =
        pollster::block_on(engine.upload_with_limits(&acq, Default::default(), limits)).unwrap();
    assert!(res.buffers.len() >= 4);
    for roi in [
        None,
        Some(stem4d::contract::Region {
            r0: 3,
            r1: 40,
            c0: 1,
            c1: 28,
        }),
    ] {
        for kind in [ProductKind::SumDp, ProductKind::MaxDp, ProductKind::MeanDp] {
            let mut p = ProductParams::new(kind);
            p.scan_roi = roi;
            let gpu =
                pollster::block_on(products::compute_resident(&engine, &acq, &res, &p)).unwrap();
            assert_eq!(
                gpu,
                cpu::compute(&acq, &p, Correction::default()).unwrap(),
                "{kind:?} roi {roi:?}"
            );
        }
    }
}

/// A resident replaced by one of the same plan lends it its buffers, cleared: byte for byte
/// (partial tiles included) the new resident is what a fresh upload makes, and its products
/// equal the CPU reference. Buffers no plan reuses are freed.
#[test]
fn a_replaced_resident_lends_its_buffers_cleared() {
    use stem4d::formats::synthetic;
    let Some(engine) = engine() else { return };
    let bytes = |res: &stem4d::gpu::Resident| -> Vec<Vec<u8>> {
        res.buffers
            .iter()
            .map(|b| pollster::block_on(engine.read_back(b, b.size())).unwrap())
            .collect()
    };
    // 15×20 = 300 positions and 13×23 = 299 take the same 19 tiles of 16: the first fills
    // the position the second leaves as padding (and its bytes differ everywhere else).
    let first = synthetic::open([15, 20, 21, 18]).unwrap();
    let old = pollster::block_on(engine.upload(&first, Default::default())).unwrap();
    let old_bytes = bytes(&old);
    let acq = synthetic::open_compressed([13, 23, 21, 18]).unwrap();
    let fresh = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    let fresh_bytes = bytes(&fresh);
    drop(fresh);
    assert_eq!(old.plan.segments.len(), 1);
    let stale = old_bytes[0]
        .iter()
        .zip(&fresh_bytes[0])
        .filter(|(o, f)| o != f)
        .count();
    assert!(
        stale > 0,
        "the old resident's bytes differ from the new one's"
    );
    engine.set_aside(old);
    assert_eq!(engine.set_aside_buffers(), 1);
    let reused = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    assert_eq!(
        engine.set_aside_buffers(),
        0,
        "the upload took the buffer set aside"
    );
    engine.release_set_aside();
    assert_eq!(
        bytes(&reused),
        fresh_bytes,
        "a reused buffer reads as a new one"
    );
    let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::SumDp);
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &reused, &p)).unwrap();
    assert_eq!(gpu, cpu::compute(&acq, &p, Correction::default()).unwrap());
    p.kind = stem4d::products::ProductKind::MaxDp;
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &reused, &p)).unwrap();
    assert_eq!(gpu, cpu::compute(&acq, &p, Correction::default()).unwrap());
    // Another plan (bin 2) reuses nothing: what was set aside is freed before it uploads.
    engine.set_aside(reused);
    let binned = stem4d::frames::Correction {
        bin: 2,
        ..Default::default()
    };
    let res = pollster::block_on(engine.upload(&acq, binned)).unwrap();
    assert_eq!(
        engine.set_aside_buffers(),
        0,
        "buffers of another size are freed"
    );
    let p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Total);
    let gpu = pollster::block_on(products::compute_resident(&engine, &acq, &res, &p)).unwrap();
    assert_eq!(gpu, cpu::compute(&acq, &p, binned).unwrap());
}
