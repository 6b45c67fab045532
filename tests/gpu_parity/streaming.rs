//! Product-first streaming (`products::stream`) against the resident acquisition: every
//! product of the parity matrix on every fixture, with and without bad-pixel masking, in
//! blocks of one and of two scan rows, decoded on the GPU (where it takes the file) and packed
//! on the CPU, all of a correction's products in one pass. The
//! results must be the resident's byte for byte (decision 0023). Then the plans a budget of
//! 256 KiB leaves on the fixtures.

use crate::common::*;
use stem4d::frames::Correction;
use stem4d::parity::matrix;
use stem4d::products::npy::to_bytes;
use stem4d::products::stream::{compute_streamed, Blocks};
use stem4d::products::{gpu, ProductParams};
use stem4d::upload::memory::{choose, PlanKind};

/// The parity matrix of `acq` (bad-pixel masking `masked`) by correction: each correction,
/// its products, and their raw resident's results.
pub(crate) fn by_correction(
    engine: &stem4d::gpu::Engine,
    acq: &stem4d::formats::Acquisition,
    masked: bool,
) -> Vec<(
    Correction,
    Vec<ProductParams>,
    Vec<stem4d::Result<stem4d::products::ProductArray>>,
)> {
    let requests = matrix(acq, masked).unwrap();
    let mut corrections: Vec<Correction> = Vec::new();
    for r in &requests {
        if !corrections.contains(&r.correction) {
            corrections.push(r.correction);
        }
    }
    corrections
        .into_iter()
        .map(|corr| {
            let ps: Vec<ProductParams> = requests
                .iter()
                .filter(|r| r.correction == corr)
                .map(|r| r.params.clone())
                .collect();
            let raw = ps
                .iter()
                .map(|p| pollster::block_on(gpu::compute(engine, acq, p, corr)))
                .collect();
            (corr, ps, raw)
        })
        .collect()
}

/// An error's words without the numbers in brackets some paths add.
pub(crate) fn words(e: &str) -> String {
    let mut out = String::new();
    let mut rest = e;
    while let Some(i) = rest.find(" (") {
        let close = rest[i..].find(')').map(|j| i + j);
        match close {
            Some(j) if rest[i + 2..j].chars().all(|c| c.is_ascii_digit()) => {
                out.push_str(&rest[..i]);
                rest = &rest[j + 1..];
            }
            _ => {
                out.push_str(&rest[..i + 2]);
                rest = &rest[i + 2..];
            }
        }
    }
    out + rest
}

#[test]
fn streamed_products_equal_the_residents_on_every_fixture() {
    let Some(engine) = engine() else { return };
    let mut compared = 0;
    for fx in manifest()["fixtures"].as_array().unwrap() {
        let name = fx["name"].as_str().unwrap();
        let acq = open_fixture(fx);
        for masked in [false, true] {
            // One pass per correction, its products together.
            for (corr, ps, resident) in by_correction(&engine, &acq, masked) {
                for (rows, gpu_decode) in [(1, true), (2, true), (1, false), (2, false)] {
                    let mut seen = Vec::new();
                    let streamed = pollster::block_on(compute_streamed(
                        &engine,
                        &acq,
                        &ps,
                        corr,
                        Blocks { rows, gpu_decode },
                        &mut |done, all| seen.push((done, all)),
                    ));
                    let what = format!(
                        "{name} masked {masked} bin {} rows {rows} gpu decode {gpu_decode}",
                        corr.bin
                    );
                    match streamed {
                        Ok(out) => {
                            assert_eq!(out.len(), ps.len());
                            assert_eq!(
                                seen.last().map(|s| s.0),
                                Some(acq.shape.scan[0]),
                                "{what}: progress ends at the last row"
                            );
                            for ((p, r), s) in ps.iter().zip(&resident).zip(&out) {
                                let r = r.as_ref().unwrap_or_else(|e| {
                                    panic!(
                                        "{what} {}: resident refused ({e}), streamed did not",
                                        p.kind.name()
                                    )
                                });
                                assert_eq!(r.shape, s.shape, "{what} {}", p.kind.name());
                                assert!(
                                    to_bytes(r) == to_bytes(s),
                                    "{what} {}: streamed differs from resident",
                                    p.kind.name()
                                );
                                compared += 1;
                            }
                        }
                        Err(e) => {
                            // Refused only as the resident refuses, in the same words.
                            // (The CPU packing of a block names the sum it met.)
                            let said: Vec<String> = resident
                                .iter()
                                .filter_map(|r| r.as_ref().err().map(|e| words(&e.to_string())))
                                .collect();
                            assert!(
                                said.contains(&words(&e.to_string())),
                                "{what}: {e} (resident: {said:?})"
                            );
                        }
                    }
                }
            }
        }
    }
    // 17 products × 2 maskings × 4 ways of reading blocks × 13 fixtures, less the refused.
    assert!(
        compared > 1200,
        "only {compared} streamed products compared"
    );
}

/// A budget of 256 KiB: fixtures the GPU decoder uploads are never resident (its windows
/// alone are larger); those whose one tile of positions is larger than the budget (a
/// 128×128 float32 or 192×192 detector) are left to the CPU reference; the peak of every
/// GPU plan taken is within the budget, and a compressed resident is built within it or
/// refused as out of memory.
#[test]
fn a_small_budget_streams_the_fixtures_or_leaves_them_to_the_cpu() {
    let Some(engine) = engine() else { return };
    let limits = engine.adapter.limits;
    for fx in manifest()["fixtures"].as_array().unwrap() {
        let name = fx["name"].as_str().unwrap();
        let acq = open_fixture(fx);
        let plans = stem4d::gpu::memory_plans(&acq, Correction::default(), limits, Some(262144));
        let plan = choose(&plans, 1);
        let tile_bytes = acq.shape.det_len() as u64 * 32;
        let gpu_decoded = stem4d::upload::gpu_decode::supported(&acq, Correction::default());
        match plan.kind {
            PlanKind::Streaming | PlanKind::Resident => {
                assert!(plan.peak_bytes <= 262144, "{name}: {plan:?}");
                assert!(tile_bytes < 262144, "{name}");
                assert!(
                    !(gpu_decoded && plan.kind == PlanKind::Resident),
                    "{name}: {plan:?}"
                );
            }
            PlanKind::Compressed => {
                // Built within the budget, or refused as out of memory (then streamed).
                assert!(tile_bytes < 262144, "{name}");
                let built = pollster::block_on(engine.upload_packed(
                    (&acq, None),
                    Correction::default(),
                    plan.rows_per_block.unwrap(),
                    plan.gpu_decode,
                    Some(stem4d::upload::packed::PackBudget::hard(262144)),
                    &mut |_, _| {},
                ));
                match built {
                    Ok(res) => {
                        let p = res.packed.as_ref().unwrap();
                        assert!(p.packed_bytes + p.scratch_bytes <= 262144, "{name}");
                    }
                    Err(e) => assert!(
                        matches!(e, stem4d::error::Error::GpuOutOfMemory(_)),
                        "{name}: {e}"
                    ),
                }
            }
            PlanKind::Cpu => assert!(tile_bytes > 262144 / 4, "{name}: {plans:#?}"),
        }
        let none = stem4d::gpu::memory_plans(&acq, Correction::default(), limits, None);
        assert_eq!(choose(&none, 1).kind, PlanKind::Resident, "{name}");
    }
}

/// A streamed pass its caller cancels part way (`stem4d::watch`) stops at the next block
/// with an error that says so, having read no further; the same pass run again gives the
/// products of one never stopped.
#[test]
fn a_cancelled_streamed_pass_stops_at_its_next_block_and_the_next_one_is_whole() {
    let Some(engine) = engine() else { return };
    let acq = open_fixture(&fixture_named("hot_stack_u16"));
    let corr = Correction::default();
    let ps: Vec<_> = ["sum-dp", "com", "bf"]
        .iter()
        .map(|k| params(k, &serde_json::json!({"center": [20, 17], "radius": 9})).0)
        .collect();
    let blocks = Blocks {
        rows: 1,
        gpu_decode: true,
    };
    let whole = |engine: &stem4d::gpu::Engine| {
        pollster::block_on(compute_streamed(
            engine,
            &acq,
            &ps,
            corr,
            blocks,
            &mut |_, _| {},
        ))
    };
    let cancel = stem4d::watch::Cancel::default();
    let stopper = cancel.clone();
    let mut rows_read = Vec::new();
    let stopped = stem4d::watch::watched(
        cancel,
        Some(Box::new(move |stage, done, _| {
            if stage == stem4d::watch::STREAM && done == 1 {
                stopper.cancel();
            }
        })),
        || {
            pollster::block_on(compute_streamed(
                &engine,
                &acq,
                &ps,
                corr,
                blocks,
                &mut |done, _| rows_read.push(done),
            ))
        },
    );
    let e = stopped.err().map(|e| e.to_string()).unwrap_or_default();
    // Stopped where it next looked: between blocks, or in the next block's upload.
    assert!(e.starts_with("cancelled while "), "{e}");
    assert_eq!(rows_read, vec![1], "no block is read after the cancel");
    assert!(
        !engine.decode_slots_kept(),
        "a stopped pass lets its decode slots go"
    );
    // A whole pass passes its decode slots from block to block, and lets them go after.
    let mut kept_between = Vec::new();
    let again = pollster::block_on(compute_streamed(
        &engine,
        &acq,
        &ps,
        corr,
        blocks,
        &mut |_, _| kept_between.push(engine.decode_slots_kept()),
    ))
    .unwrap();
    assert!(
        !kept_between.is_empty() && kept_between.iter().all(|&k| k),
        "decode slots kept between blocks: {kept_between:?}"
    );
    assert!(
        !engine.decode_slots_kept(),
        "a pass lets its decode slots go"
    );
    assert!(to_bytes(&whole(&engine).unwrap()[0]) == to_bytes(&again[0]));
    assert_eq!(again.len(), ps.len());
    for (p, a) in ps.iter().zip(&again) {
        let resident = pollster::block_on(gpu::compute(&engine, &acq, p, corr)).unwrap();
        assert!(to_bytes(a) == to_bytes(&resident), "{}", p.kind.name());
    }
}
