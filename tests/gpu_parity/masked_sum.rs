//! The masked sum (`src/kernels/masked_sum.rs`: `wgsl/masked_sum.wgsl` and, where the adapter
//! has subgroups, `wgsl/masked_sum_subgroup.wgsl`) against the CPU:
//! exact whichever way its slots meet and in any number of parts, weighted masks per distinct
//! weight, part tables that could wrap refused.

use super::check;
use crate::common::*;
use stem4d::cpu;
use stem4d::frames::Correction;
use stem4d::products::gpu as products;

/// The masked sums meeting their slots through subgroups (where the adapter has them:
/// lavapipe and the H200 do), through workgroup memory and atomically in the output give
/// the CPU's sums, on 8-, 16- and 32-bit data with padded tiles, at saturation on a detector
/// whose totals pass 2^32 (the subgroup path then needs two parts per tile) and with 32-bit
/// samples that carry, for whole, disk and scattered masks in any number of parts (C-MASK).
#[test]
fn masked_sums_agree_whichever_way_the_slots_meet() {
    use stem4d::contract::Dtype;
    let Some(mut engine) = engine() else { return };
    if std::env::var("STEM4D_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        assert!(engine.subgroups(), "the test adapter has no subgroups");
    }
    for (dtype, dims, saturated) in [
        (Dtype::U16, [3, 7, 13, 11], false),
        (Dtype::U8, [5, 9, 12, 10], false),
        (Dtype::U16, [1, 3, 300, 256], true),
        (Dtype::U32, [2, 5, 9, 7], true),
    ] {
        let n = dims.iter().product::<usize>() * dtype.size();
        let mut bytes = noise_bytes(n, 99);
        if saturated {
            bytes.iter_mut().enumerate().for_each(|(i, b)| {
                if i % 16 != 0 {
                    *b = 0xff
                }
            });
        }
        let acq = raw_acquisition(dtype, dims, bytes);
        let det = (dims[2] * dims[3]) as u32;
        let disk: Vec<u32> = (0..det)
            .filter(|k| {
                let (i, j) = ((k / dims[3] as u32) as f64, (k % dims[3] as u32) as f64);
                (i - dims[2] as f64 * 0.4).powi(2) + (j - dims[3] as f64 * 0.6).powi(2)
                    <= (dims[2].min(dims[3]) as f64 * 0.3).powi(2)
            })
            .collect();
        let masks = [
            (0..det).collect::<Vec<u32>>(),
            disk,
            (0..det).filter(|k| k % 7 == 3 || k % 11 == 0).collect(),
        ];
        for (m, picked) in masks.iter().enumerate() {
            let mut mask = vec![false; det as usize];
            picked.iter().for_each(|&k| mask[k as usize] = true);
            let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Mask);
            p.mask = Some(stem4d::contract::DetectorMask::Bool(mask));
            let want = cpu::compute(&acq, &p, Correction::default()).unwrap().data;
            for (subgroups, atomics) in [(true, false), (false, false), (false, true)] {
                engine.use_subgroups(subgroups);
                engine.use_atomic_sums(atomics);
                let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
                let list = stem4d::kernels::masked_sum::DetectorList::new(&engine, picked).unwrap();
                for parts in [1u32, 3, 16] {
                    let frames = acq.shape.frames() as u64;
                    let out = engine.storage("sums", frames * 8);
                    let mut enc = engine.device.create_command_encoder(&Default::default());
                    stem4d::kernels::masked_sum::encode_masked_sums_in_parts(
                        &engine, &mut enc, &res, &list, &out, parts,
                    )
                    .unwrap();
                    engine.queue.submit([enc.finish()]);
                    let got: Vec<u64> = pollster::block_on(engine.read_back(&out, frames * 8))
                        .unwrap()
                        .chunks_exact(8)
                        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                        .collect();
                    assert_eq!(
                        stem4d::products::ArrayData::U64(got),
                        want,
                        "{dtype:?} {dims:?} mask {m}, subgroups {subgroups}, atomics {atomics}, \
                         {parts} parts"
                    );
                }
            }
        }
    }
}

/// A table of masked-sum parts that goes backwards, or holds more pixels in one part than
/// u32 lanes can sum exactly (here 76,800 saturated u16 pixels), is refused, never summed.
#[test]
fn masked_sum_part_tables_that_could_wrap_are_refused() {
    use stem4d::contract::Dtype;
    use stem4d::kernels::masked_sum::{encode_parts, Parts};
    let Some(mut engine) = engine() else { return };
    let dims = [1, 2, 300, 256];
    let acq = raw_acquisition(Dtype::U16, dims, vec![0xff; 2 * 300 * 256 * 2]);
    let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
    let all: Vec<u32> = (0..300 * 256).collect();
    let list = stem4d::kernels::masked_sum::DetectorList::in_order(&engine, all);
    let out = engine.storage("sums", 2 * 8 * 2);
    for subgroups in [true, false] {
        engine.use_subgroups(subgroups);
        let limit = stem4d::kernels::masked_sum_part_limit(16, engine.subgroups());
        for starts in [vec![0, 76_800], vec![0, 40_000, 30_000, 76_800]] {
            if starts
                .windows(2)
                .all(|w| w[1] >= w[0] && w[1] - w[0] <= limit)
            {
                continue; // within the limit on this path (no subgroups: 32 lanes a part)
            }
            let mut enc = engine.device.create_command_encoder(&Default::default());
            let parts = Parts::Table {
                starts: &starts,
                stride: 2,
                first: 0,
            };
            let err = encode_parts(&engine, &mut enc, &res, &list, &out, parts, true);
            assert!(err.is_err(), "{starts:?} accepted (subgroups {subgroups})");
        }
    }
}

/// Weighted masks on the GPU meet the CPU's float64 bound (C-WEIGHTS).
#[test]
fn weighted_masks_sum_exactly_per_distinct_weight() {
    let Some(engine) = engine() else { return };
    for name in ["arina_u16", "arina_u32"] {
        let fx = fixture_named(name);
        let acq = open_fixture(&fx);
        let det = acq.shape.det;
        // Asymmetric weights with few distinct values (incl. negative and tiny ones).
        let levels = [0.5, 1.0, -2.25, 1e-3, 3.0e5];
        let w: Vec<f64> = (0..det[0] * det[1])
            .map(|k| {
                if k % 7 == 3 {
                    0.0
                } else {
                    levels[(k * k + k / 3) % levels.len()]
                }
            })
            .collect();
        let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Mask);
        p.mask = Some(stem4d::contract::DetectorMask::Weighted(w));
        let gpu = pollster::block_on(products::compute(&engine, &acq, &p, Correction::default()))
            .unwrap();
        let cpu = cpu::compute(&acq, &p, Correction::default()).unwrap();
        check("mask", name, &gpu, &cpu).unwrap();
    }
}

/// A weighted mask with more distinct weights than the GPU path combines (64) is refused by
/// the GPU backend as unsupported, by name, never approximated (C-WEIGHTS); the session then
/// computes it on the CPU reference, the same values (tests/viewer/readouts.rs).
#[test]
fn weighted_masks_past_the_gpus_weights_are_refused_by_name() {
    let Some(engine) = engine() else { return };
    let fx = fixture_named("arina_u16");
    let acq = open_fixture(&fx);
    let n = acq.shape.det[0] * acq.shape.det[1];
    // 65 distinct weights, the rest of the pixels left out.
    let w: Vec<f64> = (0..n)
        .map(|k| if k < 65 { 1.0 + k as f64 / 8.0 } else { 0.0 })
        .collect();
    let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Mask);
    p.mask = Some(stem4d::contract::DetectorMask::Weighted(w));
    let e = pollster::block_on(products::compute(&engine, &acq, &p, Correction::default()))
        .unwrap_err();
    assert!(e.is_gpu_unsupported(), "{e:?}");
    assert!(e.to_string().contains("65 distinct weights"), "{e}");
}
