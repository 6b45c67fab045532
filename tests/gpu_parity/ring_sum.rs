//! Ring sums (`src/kernels/ring_sum.rs`): masked sums through cached ring sums equal the CPU's.

use crate::common::*;
use stem4d::cpu;
use stem4d::frames::Correction;

/// Masked sums through cached ring sums (whole rings summed, the other pixels read) equal
/// the CPU's for disks and annuli about the rings' centre (float radii, so rings are cut),
/// off-centre and scattered masks, on 8-, 16- and 32-bit data, at saturation where the
/// per-position totals pass 2^32, and on a resident split across buffers; the centred masks
/// must take the ring path, or the test would check nothing new (C-RING).
#[test]
fn masked_sums_from_ring_sums_equal_the_cpu() {
    use stem4d::contract::{DetectorMask, Dtype};
    use stem4d::kernels::ring_sum::RadialCache;
    let Some(engine) = engine() else { return };
    for (dtype, dims, saturated, split) in [
        (Dtype::U16, [5, 7, 23, 19], false, false),
        (Dtype::U8, [6, 5, 17, 21], false, true),
        (Dtype::U32, [3, 4, 15, 16], true, false),
        (Dtype::U16, [2, 3, 300, 256], true, true),
    ] {
        let n = dims.iter().product::<usize>() * dtype.size();
        let mut bytes = noise_bytes(n, 7);
        if saturated {
            bytes.iter_mut().enumerate().for_each(|(i, b)| {
                if i % 13 != 0 {
                    *b = 0xff
                }
            });
        }
        let acq = raw_acquisition(dtype, dims, bytes);
        let det = [dims[2], dims[3]];
        let corr = stem4d::frames::Correction::default();
        let mut res = if split {
            let whole = pollster::block_on(engine.upload(&acq, corr)).unwrap();
            let mut limits = engine.adapter.limits;
            limits.max_storage_binding = whole.plan.tile_words as u64 * 4;
            pollster::block_on(engine.upload_with_limits(&acq, corr, limits)).unwrap()
        } else {
            pollster::block_on(engine.upload(&acq, corr)).unwrap()
        };
        let c = [det[0] as f64 * 0.47, det[1] as f64 * 0.52];
        res.radial = pollster::block_on(RadialCache::build(&engine, &res, c)).unwrap();
        let radial = res.radial.as_ref().expect("ring sums made");
        let r = det[0].min(det[1]) as f64;
        // Whether the ring path must (Some) or need not (None) be taken: small 8-bit disks
        // may go either way, their pixels costing little more than their rings.
        let masks = [
            (
                DetectorMask::Disk {
                    center: c,
                    radius: 0.31 * r,
                },
                None,
            ),
            (
                DetectorMask::Annulus {
                    center: c,
                    inner: 0.12 * r,
                    outer: 0.43 * r,
                },
                None,
            ),
            (
                DetectorMask::Annulus {
                    center: c,
                    inner: 0.2 * r,
                    outer: 2.0 * r,
                },
                None,
            ),
            (
                DetectorMask::Disk {
                    center: [2.0, 3.0],
                    radius: 0.2 * r,
                },
                Some(false),
            ),
        ];
        let mut all: Vec<u32> = (0..(det[0] * det[1]) as u32).collect();
        let mut cases: Vec<(Vec<u32>, Option<bool>)> = masks
            .iter()
            .map(|(m, ring)| (m.sparse(det).indices, *ring))
            .collect();
        cases.push((all.clone(), Some(true)));
        all.remove(all.len() / 2);
        cases.push((all, Some(true)));
        let scattered = (0..(det[0] * det[1]) as u32).filter(|k| k % 5 == 1);
        cases.push((scattered.collect(), Some(false)));
        let mut ring_cases = 0;
        for (m, (picked, expect)) in cases.iter().enumerate() {
            let ring = radial.split(picked, res.plan.bits).is_some();
            if let Some(e) = expect {
                assert_eq!(ring, *e, "{dtype:?} {dims:?} mask {m}: ring path taken");
            }
            ring_cases += ring as usize;
            let mut mask = vec![false; det[0] * det[1]];
            picked.iter().for_each(|&k| mask[k as usize] = true);
            let mut p = stem4d::products::ProductParams::new(stem4d::products::ProductKind::Mask);
            p.mask = Some(stem4d::contract::DetectorMask::Bool(mask));
            let want = cpu::compute(&acq, &p, Correction::default()).unwrap().data;
            let got = pollster::block_on(stem4d::kernels::masked_sum::masked_sums(
                &engine, &res, picked,
            ))
            .unwrap();
            assert_eq!(
                stem4d::products::ArrayData::U64(got),
                want,
                "{dtype:?} {dims:?} mask {m} (ring path {ring})"
            );
        }
        // The centred masks of the 16-bit cases always pay; every case has at least the
        // whole detector and all of it but one pixel.
        let least = if dtype == Dtype::U16 { 5 } else { 2 };
        assert!(
            ring_cases >= least,
            "{dtype:?} {dims:?}: only {ring_cases} masks took the rings"
        );
    }
    // Float32 sums are 128-bit: no ring sums are made for them.
    let f32s = raw_acquisition(Dtype::F32, [2, 3, 9, 8], noise_bytes(2 * 3 * 9 * 8 * 4, 3));
    let res = pollster::block_on(engine.upload(&f32s, Default::default())).unwrap();
    let made = pollster::block_on(RadialCache::build(&engine, &res, [4.0, 4.0])).unwrap();
    assert!(made.is_none(), "ring sums made for a float32 resident");
    // Nor about a centre off the detector (a BF fit gone astray).
    let u16s = raw_acquisition(Dtype::U16, [2, 3, 9, 8], noise_bytes(2 * 3 * 9 * 8 * 2, 5));
    let res = pollster::block_on(engine.upload(&u16s, Default::default())).unwrap();
    for c in [[4.0, 1e12], [-3.0, 4.0], [f64::NAN, 4.0]] {
        let made = pollster::block_on(RadialCache::build(&engine, &res, c)).unwrap();
        assert!(made.is_none(), "ring sums made about {c:?}");
    }
    assert!(
        pollster::block_on(RadialCache::build(&engine, &res, [4.0, 4.0]))
            .unwrap()
            .is_some()
    );
}
