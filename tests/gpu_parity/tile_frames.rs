//! Tiling frames (`src/kernels/tile_frames.rs`, `wgsl/tile_frames.wgsl`): residents split across
//! buffers give the same sums.

use crate::common::*;

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
