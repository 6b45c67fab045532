//! A session opened within a GPU memory budget (`OpenRequest::memory_budget`): the plan is
//! in the profile, and what the session finds, fits, draws and computes is what the
//! session without a budget does, byte for byte, though nothing stays on the GPU.

use super::*;
use stem4d::products::npy::to_bytes;
use stem4d::products::ProductKind;
use stem4d::upload::memory::PlanKind;

#[test]
fn a_session_within_a_budget_streams_what_the_resident_shows() {
    let Some(engine) = engine() else { return };
    // (A float32 file read by the CPU decoders needs a smaller budget to stream.)
    for (name, masked, budget) in [
        ("arina_u16", true, 262144),
        ("hot_stack_u16", true, 262144),
        ("emd_f32", false, 24000),
    ] {
        let req = |budget| OpenRequest {
            bin: 1,
            mask_bad_pixels: masked,
            memory_budget: budget,
            ..Default::default()
        };
        let mut plain = open(&engine, name, req(None));
        let mut within = open(&engine, name, req(Some(budget)));
        let plan = &within.profile.memory_plan;
        assert_eq!(plan.kind, PlanKind::Streaming, "{name}: {plan:?}");
        assert!(plan.peak_bytes <= budget, "{name}: {plan:?}");
        assert_eq!(within.profile.products_on, "gpu, streamed", "{name}");
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
                "{name} {}: streamed differs",
                kind.name()
            );
        }
    }
}
