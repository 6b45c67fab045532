//! A session opened within a GPU memory budget (`OpenRequest::memory_budget`): the plan is
//! in the profile, and what the session finds, fits, draws and computes is what the
//! session without a budget does, byte for byte, from a compressed resident or streamed
//! with nothing staying on the GPU.

use super::*;
use stem4d::products::npy::to_bytes;
use stem4d::products::ProductKind;
use stem4d::upload::memory::PlanKind;

#[test]
fn a_session_within_a_budget_shows_what_the_resident_shows() {
    let Some(engine) = engine() else { return };
    // (A float32 file read by the CPU decoders needs a smaller budget to stream.) Each
    // within the budget as the engine chooses, then along the streaming plan picked by name.
    for (name, masked, budget, pick) in [
        ("arina_u16", true, 262144, None),
        ("arina_u16", true, 262144, Some(PlanKind::Streaming)),
        ("hot_stack_u16", true, 262144, None),
        ("hot_stack_u16", true, 262144, Some(PlanKind::Streaming)),
        ("emd_f32", false, 24000, None),
    ] {
        let req = |budget, memory_plan| OpenRequest {
            bin: 1,
            mask_bad_pixels: masked,
            memory_budget: budget,
            memory_plan,
            ..Default::default()
        };
        let mut plain = open(&engine, name, req(None, None));
        let mut within = open(&engine, name, req(Some(budget), pick));
        let plan = &within.profile.memory_plan;
        // The engine compresses the Arina counts (hot_stack's blocks leave too little of
        // the budget for a scratch block, float32 is kept raw: both stream).
        let kind = pick.unwrap_or(match name {
            "arina_u16" => PlanKind::Compressed,
            _ => PlanKind::Streaming,
        });
        assert_eq!(plan.kind, kind, "{name}: {plan:?}");
        match kind {
            PlanKind::Streaming => {
                assert!(plan.peak_bytes <= budget, "{name}: {plan:?}");
                assert_eq!(within.profile.products_on, "gpu, streamed", "{name}");
            }
            _ => {
                assert_eq!(within.profile.products_on, "gpu, compressed", "{name}");
                let c = within.profile.compressed.as_ref().expect("its sizes");
                assert!(c.packed_bytes + c.scratch_bytes <= budget, "{name}: {c:?}");
                assert!(c.ratio > 1.0, "{name}: {c:?}");
            }
        }
        assert_eq!(plain.profile.memory_plan.kind, PlanKind::Resident, "{name}");
        assert_eq!(plain.bf_fit, within.bf_fit, "{name}: the same BF fit");
        let report = |s: &Session| serde_json::to_string(&s.profile.bad_pixels).unwrap();
        assert_eq!(
            report(&plain),
            report(&within),
            "{name}: the same bad pixels"
        );
        let [cr, cc, r] = plain.bf_fit;
        let st = bf_state([cr, cc], r, [1, 2]);
        pollster::block_on(within.update(&engine, &st)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let corr = Correction {
            mask_bad_pixels: masked,
            bin: 1,
        };
        for kind in [
            ProductKind::Bf,
            ProductKind::Com,
            ProductKind::Idpc,
            ProductKind::MeanDp,
            ProductKind::Pattern,
            ProductKind::FitBf,
        ] {
            let mut p = ProductParams::new(kind);
            p.center = Some([cr, cc]);
            p.radius = Some(r);
            p.at = Some([2, 1]);
            let a = pollster::block_on(plain.product(&engine, &p, corr)).unwrap();
            let b = pollster::block_on(within.product(&engine, &p, corr)).unwrap();
            assert!(
                to_bytes(&a) == to_bytes(&b),
                "{name} {}: {kind:?} differs",
                kind.name()
            );
        }
    }
}

/// Without a budget, an acquisition the GPU refuses for want of memory (a GPU simulated with
/// one byte less than its resident) is streamed within half the resident's payload, and the
/// profile says why; its products are the resident's. Opened as bslz4 chunks, so its blocks
/// go through the GPU decoder where the plan lets them.
#[test]
fn a_resident_the_gpu_has_no_memory_for_is_streamed_instead() {
    let Some(engine) = engine() else { return };
    let dims = [64, 40, 16, 16];
    let acq = || stem4d::formats::synthetic::open_compressed(dims).unwrap();
    let req = OpenRequest {
        bin: 1,
        ..Default::default()
    };
    let open_it = || {
        pollster::block_on(Session::open(&engine, acq(), &req, 0.0, &mut |_, _, _| {}))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let mut plain = open_it();
    let payload = plain.profile.resident_payload_bytes.expect("a resident");
    engine.simulate_memory(Some(payload - 1));
    let refused = pollster::block_on(Session::open(&engine, acq(), &req, 0.0, &mut |_, _, _| {}));
    engine.simulate_memory(None);
    let mut refused = refused.unwrap_or_else(|e| panic!("{e}"));
    let plan = &refused.profile.memory_plan;
    assert_eq!(plan.kind, PlanKind::Streaming, "{plan:?}");
    assert!(plan.peak_bytes <= payload / 2, "{plan:?}");
    assert!(
        refused
            .profile
            .warnings
            .iter()
            .any(|w| w.contains("did not fit the GPU") && w.contains("streamed")),
        "{:?}",
        refused.profile.warnings
    );
    assert_eq!(plain.bf_fit, refused.bf_fit);
    for kind in [ProductKind::Total, ProductKind::Com, ProductKind::MaxDp] {
        let p = ProductParams::new(kind);
        let a = pollster::block_on(plain.product(&engine, &p, Correction::default())).unwrap();
        let b = pollster::block_on(refused.product(&engine, &p, Correction::default())).unwrap();
        assert!(
            to_bytes(&a) == to_bytes(&b),
            "{}: streamed differs",
            kind.name()
        );
    }
}

/// Natively (Vulkan reports its allocator's memory) the profile has the peak of GPU memory
/// measured during the open: at least the resident's payload, and for a compressed
/// resident within a budget, at least its packed bytes and scratch.
#[test]
fn the_profile_has_the_measured_peak() {
    let Some(engine) = engine() else { return };
    let plain = open(
        &engine,
        "arina_u16",
        OpenRequest {
            bin: 1,
            ..Default::default()
        },
    );
    let peak = plain
        .profile
        .measured_peak_bytes
        .expect("Vulkan reports its memory");
    assert!(
        peak >= plain.profile.resident_payload_bytes.unwrap(),
        "{peak}"
    );
    let within = open(
        &engine,
        "arina_u16",
        OpenRequest {
            bin: 1,
            memory_budget: Some(262144),
            ..Default::default()
        },
    );
    let c = within.profile.compressed.as_ref().expect("compressed");
    let peak = within.profile.measured_peak_bytes.expect("measured");
    assert!(peak >= c.packed_bytes + c.scratch_bytes, "{peak} {c:?}");
}
