//! Residents over time: a replaced resident lends its buffers to the next upload, cleared.

use crate::common::*;
use stem4d::cpu;
use stem4d::frames::Correction;
use stem4d::products::gpu as products;

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
