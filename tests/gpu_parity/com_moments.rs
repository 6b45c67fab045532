//! The CoM moments (`src/kernels/com_moments.rs`, `wgsl/com_moments*.wgsl`) against the CPU:
//! exact when folded at any interval and cut into any number of parts.

use crate::common::*;
use stem4d::cpu;
use stem4d::frames::Correction;

/// The CoM running sums folded into 64 bits after every row, every few, or never, and both
/// kernels cut into any number of parts per tile (whose sums meet through atomic adds),
/// must all give the same exact sums and moments: the folds and the carries are where a
/// wrap would hide (C-COM: the moments stay exact).
#[test]
fn folding_and_parts_at_any_interval_are_exact() {
    let Some(engine) = engine() else { return };
    let mut acqs: Vec<(String, stem4d::formats::Acquisition)> = ["arina_u16", "arina_u8"]
        .iter()
        .map(|name| (name.to_string(), open_fixture(&fixture_named(name))))
        .collect();
    // A 64×64 detector: enough rows per band for the four-loads-in-flight path.
    acqs.push((
        "synthetic 64x64".into(),
        stem4d::formats::synthetic::open([6, 5, 64, 64]).unwrap(),
    ));
    for (name, acq) in acqs {
        let res = pollster::block_on(engine.upload(&acq, Default::default())).unwrap();
        let n = acq.shape.frames() as u64;
        let all: Vec<u32> = (0..acq.shape.det_len() as u32).collect();
        // An odd mask: every pixel but a scattered few, so some sectors are left out.
        let picked: Vec<u32> = all.iter().copied().filter(|k| k % 5 != 2).collect();
        let list = stem4d::kernels::masked_sum::DetectorList::new(&engine, &picked).unwrap();
        // The kernels add into their outputs, which are cleared first.
        let out = |bytes: u64| engine.storage("out", bytes);
        let mut seen = Vec::new();
        for (flush, parts) in [
            (1u32, 1u32),
            (2, 2),
            (3, 3),
            (7, 7),
            (8, 1),
            (9, 40),
            (u32::MAX, 16),
        ] {
            let (sums, moments) = (out(n * 8), out(n * 24));
            let mut enc = engine.device.create_command_encoder(&Default::default());
            stem4d::kernels::masked_sum::encode_masked_sums_in_parts(
                &engine, &mut enc, &res, &list, &sums, parts,
            )
            .unwrap();
            stem4d::kernels::com_moments::encode_com_moments_with(
                &engine, &mut enc, &res, &moments, flush, parts,
            )
            .unwrap();
            engine.queue.submit([enc.finish()]);
            let s = pollster::block_on(engine.read_back(&sums, n * 8)).unwrap();
            let mo = pollster::block_on(engine.read_back(&moments, n * 24)).unwrap();
            seen.push((flush, parts, s, mo));
        }
        let exact =
            pollster::block_on(stem4d::kernels::com_moments::com_moments(&engine, &res)).unwrap();
        let exact_sums = pollster::block_on(stem4d::kernels::masked_sum::masked_sums(
            &engine, &res, &picked,
        ))
        .unwrap();
        let cpu_sums = {
            let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Mask);
            let mut mask = vec![false; all.len()];
            picked.iter().for_each(|&k| mask[k as usize] = true);
            p.mask = Some(stem4d::contract::DetectorMask::Bool(mask));
            cpu::compute(&acq, &p, Correction::default()).unwrap()
        };
        assert_eq!(
            stem4d::products::ArrayData::U64(exact_sums),
            cpu_sums.data,
            "{name}: odd mask"
        );
        assert_eq!(
            stem4d::kernels::com_moments::parse_moments(&seen[0].3),
            exact,
            "{name}: fold every row"
        );
        for (flush, parts, s, mo) in &seen[1..] {
            assert_eq!(s, &seen[0].2, "{name}: sums in {parts} parts");
            assert_eq!(
                mo, &seen[0].3,
                "{name}: moments folding every {flush}, {parts} parts"
            );
        }
        // And the 64-bit-per-sample path (flush 0) agrees.
        let moments = out(n * 24);
        let mut enc = engine.device.create_command_encoder(&Default::default());
        stem4d::kernels::com_moments::encode_com_moments_with(
            &engine, &mut enc, &res, &moments, 0, 3,
        )
        .unwrap();
        engine.queue.submit([enc.finish()]);
        assert_eq!(
            pollster::block_on(engine.read_back(&moments, n * 24)).unwrap(),
            seen[0].3
        );
    }
}
