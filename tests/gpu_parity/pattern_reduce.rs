//! The pattern reduction (`src/kernels/pattern_reduce.rs`, `wgsl/pattern_reduce.wgsl`) against
//! the CPU over many position chunks.

use crate::common::*;
use stem4d::cpu;
use stem4d::frames::Correction;
use stem4d::products::gpu as products;

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
