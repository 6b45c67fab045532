//! The compressed resident (`src/kernels/packed.rs`: `wgsl/packed.wgsl`, built by
//! `upload::packed`) against the raw one:
//! every product of the parity matrix on every fixture, with and without bad-pixel masking,
//! built in blocks of the fewest scan rows that are whole tiles and in one block, must equal
//! the raw resident's byte for byte; float32 data is refused by name (decision 0025).

use crate::common::*;
use crate::streaming::{by_correction, words};
use stem4d::frames::Correction;
use stem4d::products::gpu;
use stem4d::products::npy::to_bytes;
use stem4d::upload::packed::block_rows;

#[test]
fn packed_products_equal_the_raw_residents_on_every_fixture() {
    let Some(engine) = engine() else { return };
    let mut compared = 0;
    let mut smaller = 0;
    for fx in manifest()["fixtures"].as_array().unwrap() {
        let name = fx["name"].as_str().unwrap();
        let acq = open_fixture(fx);
        if acq.dtype.is_float() {
            let refused = pollster::block_on(engine.upload_packed(
                &acq,
                Correction::default(),
                1,
                true,
                None,
                &mut |_, _| {},
            ));
            let e = refused.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("float32 data is kept raw"), "{name}: {e}");
            continue;
        }
        for masked in [false, true] {
            for (corr, ps, raw) in by_correction(&engine, &acq, masked) {
                let tile = 256
                    / stem4d::gpu::plan_of(&acq, corr.bin, engine.adapter.limits)
                        .unwrap()
                        .bits as usize;
                let [rows, cols] = acq.shape.binned(corr.bin).scan;
                for want in [1, rows] {
                    let step = block_rows(want, cols, tile);
                    for gpu_decode in [true, false] {
                        let what = format!(
                            "{name} masked {masked} bin {} rows {step} gpu decode {gpu_decode}",
                            corr.bin
                        );
                        let built = pollster::block_on(engine.upload_packed(
                            &acq,
                            corr,
                            step,
                            gpu_decode,
                            None,
                            &mut |_, _| {},
                        ));
                        let mut res = match built {
                            Ok(res) => res,
                            Err(e) => {
                                // Refused as the raw upload is.
                                let e = words(&e.to_string());
                                let as_raw = raw
                                    .iter()
                                    .all(|r| r.as_ref().is_err_and(|r| words(&r.to_string()) == e));
                                assert!(as_raw, "{what}: {e}");
                                continue;
                            }
                        };
                        let packed = res.packed.as_ref().unwrap();
                        assert!(packed.packed_bytes > 0, "{what}");
                        if packed.packed_bytes < packed.raw_bytes {
                            smaller += 1;
                        }
                        pollster::block_on(gpu::settle_bad_pixels(&engine, &acq, &mut res))
                            .unwrap();
                        for (p, r) in ps.iter().zip(&raw) {
                            let got =
                                pollster::block_on(gpu::compute_resident(&engine, &acq, &res, p));
                            match (r, got) {
                                (Ok(r), Ok(g)) => {
                                    assert_eq!(r.shape, g.shape, "{what} {}", p.kind.name());
                                    assert!(
                                        to_bytes(r) == to_bytes(&g),
                                        "{what} {}: packed differs from raw",
                                        p.kind.name()
                                    );
                                    compared += 1;
                                }
                                (Err(a), Err(b)) => {
                                    assert_eq!(a.to_string(), b.to_string(), "{what}")
                                }
                                (a, b) => panic!(
                                    "{what} {}: raw {:?}, packed {:?}",
                                    p.kind.name(),
                                    a.as_ref().err(),
                                    b.err()
                                ),
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(compared > 600, "only {compared} packed products compared");
    assert!(smaller > 0, "no fixture packed smaller than raw");
}
