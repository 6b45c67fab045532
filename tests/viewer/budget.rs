//! A session opened within a GPU memory budget (`OpenRequest::memory_budget`): the plan is
//! in the profile, and what the session finds, fits, draws and computes is what the
//! session without a budget does, byte for byte, from a compressed resident or streamed
//! with nothing staying on the GPU.

use super::*;
use stem4d::products::npy::to_bytes;
use stem4d::products::ProductKind;
use stem4d::upload::memory::PlanKind;

/// An open at native sampling, within `budget` along `plan` where given.
fn request(masked: bool, budget: Option<u64>, plan: Option<PlanKind>) -> OpenRequest {
    OpenRequest {
        bin: 1,
        mask_bad_pixels: masked,
        memory_budget: budget,
        memory_plan: plan,
        ..Default::default()
    }
}

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
        let mut plain = open(&engine, name, request(masked, None, None));
        let mut within = open(&engine, name, request(masked, Some(budget), pick));
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

/// A streamed session makes the ring sums about the fitted BF centre (to 0.01 px) in one
/// pass after the open (decision 0036): disks, annuli and dark fields about it whose radii
/// fall between rings come from them with no further pass over the files, equal to the
/// resident's byte for byte; a detector off the centre, or a radius inside a ring, takes a
/// pass and is as exact. u8, u16 and u32 counts, odd detectors, bad pixels masked or not.
#[test]
fn a_streamed_session_sums_detectors_about_the_bf_centre_from_ring_sums() {
    let Some(engine) = engine() else { return };
    for (name, masked) in [
        ("hot_stack_u16", true),
        ("arina_u8", false),
        ("arina_u32", true),
        ("mib_raw_r6", false),
    ] {
        let mut plain = open(&engine, name, request(masked, None, None));
        let streaming = Some(PlanKind::Streaming);
        let mut streamed = open(&engine, name, request(masked, Some(262144), streaming));
        let plan = &streamed.profile.memory_plan;
        assert_eq!(plan.kind, PlanKind::Streaming, "{name}: {plan:?}");
        let kept = plan.ring_sums_bytes.expect("room kept for the ring sums");
        assert!(plan.peak_bytes <= 262144, "{name}: {plan:?}");
        let rings = streamed
            .profile
            .streamed_ring_sums
            .clone()
            .unwrap_or_else(|| panic!("{name}: no ring sums: {:?}", streamed.profile.warnings));
        assert!(rings.bytes <= kept, "{name}: {rings:?} beyond {kept}");
        let centre = rings.center;
        assert_eq!(
            centre,
            [plain.bf_fit[0], plain.bf_fit[1]].map(|x| (x * 100.0).round() / 100.0),
            "{name}: rings about the fitted centre"
        );
        let corr = Correction {
            mask_bad_pixels: masked,
            bin: 1,
        };
        let det = streamed.acq.shape.det;
        let most = (det[0].min(det[1]) / 2).max(2);
        let (ring_of, sizes) = stem4d::kernels::ring_sum::rings_about(det, centre);
        // Whether `p`'s detector is whole rings about the centre (a radius R about a centre
        // on the pixel grid may meet pixels at distance R exactly: those take a pass).
        let whole = |p: &ProductParams| {
            // The moments need no pass; the rotation's dark field is an annulus.
            let p = match p.kind {
                ProductKind::Com | ProductKind::Dpc | ProductKind::Idpc => return true,
                ProductKind::DpcRotation => p.dark_field(),
                _ => p.clone(),
            };
            let p = &p;
            let mut pixels = match p.kind {
                ProductKind::Total => (0..(det[0] * det[1]) as u32).collect(),
                _ => p.detector_mask(det).unwrap().sparse(det).indices,
            };
            if p.kind == ProductKind::Df {
                pixels = (0..(det[0] * det[1]) as u32)
                    .filter(|k| !pixels.contains(k))
                    .collect();
            }
            stem4d::kernels::ring_sum::whole_rings(&ring_of, &sizes, &pixels).is_some()
        };
        let passes = streamed.streamed_passes();
        let expected = std::cell::Cell::new(passes);
        let asked = std::cell::Cell::new(0u64);
        let same = |plain: &mut Session, streamed: &mut Session, p: &ProductParams| {
            let a = pollster::block_on(plain.product(&engine, p, corr)).unwrap();
            let b = pollster::block_on(streamed.product(&engine, p, corr))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(to_bytes(&a) == to_bytes(&b), "{name}: {p:?} differs");
            expected.set(expected.get() + u64::from(!whole(p)));
            asked.set(asked.get() + 1);
            assert_eq!(streamed.streamed_passes(), expected.get(), "{name}: {p:?}");
        };
        for r in 1..=most {
            let mut disk = ProductParams::new(ProductKind::Bf);
            disk.center = Some(centre);
            disk.radius = Some(r as f64);
            same(&mut plain, &mut streamed, &disk);
            disk.kind = ProductKind::Df;
            same(&mut plain, &mut streamed, &disk);
            let mut ring = ProductParams::new(ProductKind::Adf);
            ring.center = Some(centre);
            ring.inner = Some((r - 1) as f64);
            ring.outer = Some((r + 1) as f64);
            same(&mut plain, &mut streamed, &ring);
        }
        same(
            &mut plain,
            &mut streamed,
            &ProductParams::new(ProductKind::Total),
        );
        // CoM, DPC, iDPC and the DPC rotation come from the moments kept with the rings (the
        // rotation's dark field an annulus of whole rings).
        assert!(rings.com_moments, "{name}: no moments kept");
        for kind in [ProductKind::Com, ProductKind::Dpc, ProductKind::Idpc] {
            let mut p = ProductParams::new(kind);
            p.rotation = 37.0;
            p.flip = true;
            same(&mut plain, &mut streamed, &p);
        }
        let mut rotation = ProductParams::new(ProductKind::DpcRotation);
        rotation.center = Some(centre);
        rotation.inner = Some(1.0);
        rotation.outer = Some(most as f64);
        same(&mut plain, &mut streamed, &rotation);
        // Whole radii are whole rings about any centre; only an annulus from 0 about a
        // centre on the pixel grid leaves out the centre's own pixel.
        let on_grid = centre.iter().all(|c| c.fract() == 0.0);
        let took = expected.get() - passes;
        assert!(
            took <= u64::from(on_grid),
            "{name}: {took} of {} detectors about {centre:?} took a pass",
            asked.get()
        );
        // Off the centre, and a radius inside a ring: a pass each where the disk is not
        // whole rings, as exact.
        for (c, r) in [([centre[0] + 0.37, centre[1] - 0.21], 2.0), (centre, 1.73)] {
            let mut off = ProductParams::new(ProductKind::Bf);
            off.center = Some(c);
            off.radius = Some(r);
            same(&mut plain, &mut streamed, &off);
        }
        assert!(
            streamed.streamed_passes() > passes,
            "{name}: no detector took a pass"
        );
        // The view draws them the same way: the pattern at the cursor reads its block, a
        // disk resized about the centre then reads nothing.
        pollster::block_on(streamed.update(&engine, &bf_state(centre, 2.0, [0, 1])))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let drawn = streamed.streamed_passes();
        let mut three = ProductParams::new(ProductKind::Bf);
        three.center = Some(centre);
        three.radius = Some(3.0);
        pollster::block_on(streamed.update(&engine, &bf_state(centre, 3.0, [0, 1])))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            streamed.streamed_passes(),
            drawn + u64::from(!whole(&three)),
            "{name}: the view took a pass"
        );
    }
}

/// A binned stream's blocks hold 32-bit sums: its first look is made for them, and gives the
/// binned resident's products with no pass.
#[test]
fn a_binned_streamed_session_makes_its_first_look_for_32_bit_sums() {
    let Some(engine) = engine() else { return };
    let name = "hot_stack_u16";
    let req = |budget, memory_plan| OpenRequest {
        bin: 2,
        ..request(false, budget, memory_plan)
    };
    let mut plain = open(&engine, name, req(None, None));
    let mut streamed = open(&engine, name, req(Some(262144), Some(PlanKind::Streaming)));
    let rings = streamed
        .profile
        .streamed_ring_sums
        .clone()
        .unwrap_or_else(|| panic!("no first look: {:?}", streamed.profile.warnings));
    assert!(rings.com_moments, "{rings:?}");
    let corr = Correction {
        mask_bad_pixels: false,
        bin: 2,
    };
    let passes = streamed.streamed_passes();
    let mut disk = ProductParams::new(ProductKind::Bf);
    disk.center = Some(rings.center);
    disk.radius = Some(2.0);
    for p in [disk, ProductParams::new(ProductKind::Com)] {
        let a = pollster::block_on(plain.product(&engine, &p, corr)).unwrap();
        let b = pollster::block_on(streamed.product(&engine, &p, corr)).unwrap();
        assert!(to_bytes(&a) == to_bytes(&b), "{:?} differs", p.kind);
    }
    assert_eq!(streamed.streamed_passes(), passes);
}

/// Several products asked together of a streamed session (`Session::products`) take one
/// pass over the files, not one each (those of its first look none), and are the bytes the
/// session without a budget gives, in order; the same call on a resident session gives them
/// too.
#[test]
fn products_asked_together_take_one_pass() {
    let Some(engine) = engine() else { return };
    let name = "arina_u16";
    let mut plain = open(&engine, name, request(true, None, None));
    let streamed = request(true, Some(262144), Some(PlanKind::Streaming));
    let mut within = open(&engine, name, streamed);
    let corr = Correction {
        mask_bad_pixels: true,
        bin: 1,
    };
    let [cr, cc, r] = plain.bf_fit;
    let with = |kind, f: &dyn Fn(&mut ProductParams)| {
        let mut p = ProductParams::new(kind);
        f(&mut p);
        p
    };
    // A disk off the fitted centre, an annulus, patterns over a scan ROI, and the total and
    // CoM of the first look.
    let ps = vec![
        with(ProductKind::Bf, &|p| {
            p.center = Some([cr + 1.5, cc - 0.5]);
            p.radius = Some(r);
        }),
        with(ProductKind::Total, &|_| {}),
        with(ProductKind::Adf, &|p| {
            p.center = Some([cr - 0.5, cc + 1.0]);
            p.inner = Some(r);
            p.outer = Some(2.0 * r);
        }),
        with(ProductKind::Com, &|_| {}),
        with(ProductKind::SumDp, &|p| {
            p.scan_roi = Some(stem4d::contract::Region {
                r0: 1,
                r1: 4,
                c0: 0,
                c1: 3,
            })
        }),
        with(ProductKind::MaxDp, &|_| {}),
    ];
    let before = within.streamed_passes();
    let got = pollster::block_on(within.products(&engine, &ps, corr)).unwrap();
    assert_eq!(
        within.streamed_passes() - before,
        1,
        "one pass for them all"
    );
    let resident = pollster::block_on(plain.products(&engine, &ps, corr)).unwrap();
    assert_eq!(got.len(), ps.len());
    for ((p, a), b) in ps.iter().zip(&got).zip(&resident) {
        let want = pollster::block_on(plain.product(&engine, p, corr)).unwrap();
        assert!(
            to_bytes(a) == to_bytes(&want),
            "{}: streamed together",
            p.kind.name()
        );
        assert!(
            to_bytes(b) == to_bytes(&want),
            "{}: resident together",
            p.kind.name()
        );
    }
    // The first look's alone: no pass.
    let first_look = [ps[1].clone(), ps[3].clone()];
    let before = within.streamed_passes();
    pollster::block_on(within.products(&engine, &first_look, corr)).unwrap();
    assert_eq!(
        within.streamed_passes(),
        before,
        "the first look's products need no pass"
    );
}
