//! C-MEM: the resident payload is `R·C·ceil(Kr/b)·ceil(Kc/b)·w` bytes, and a plan that does
//! not fit the adapter's limits is refused with a clear message that offers the exact
//! alternatives (a detector bin, a scan crop), never applied silently. The plan's
//! `payload_bytes` holds whole tiles of positions (32-byte sectors: 32/w positions), so it is
//! the formula's bytes padded up to the last whole tile.

use stem4d::contract::{resident_payload_bytes, Dtype, Shape4};
use stem4d::upload::plan::{DeviceLimits, ResidentPlan};

const ROOMY: DeviceLimits = DeviceLimits {
    max_buffer_size: 1 << 30,
    max_storage_binding: 1 << 30,
};

#[test]
fn the_payload_is_the_contracts_formula() {
    // Odd, non-square shapes; a tile of 16 u16 positions divides neither scan axis.
    for (scan, det, dtype, w) in [
        ([7, 5], [13, 11], Dtype::U16, 2),
        ([9, 4], [12, 17], Dtype::U8, 1),
        ([3, 11], [10, 9], Dtype::U32, 4),
    ] {
        let shape = Shape4 { scan, det };
        let plan = ResidentPlan::new(shape, dtype, false, ROOMY).expect("a roomy plan");
        let tile = 32 / w;
        let frames = scan[0] * scan[1];
        let padded = Shape4 {
            scan: [frames.div_ceil(tile) * tile, 1],
            det,
        };
        assert_eq!(plan.tile as usize, tile, "{dtype:?}");
        assert_eq!(
            plan.payload_bytes,
            resident_payload_bytes(padded, 1, w),
            "{scan:?} {det:?} {dtype:?}"
        );
        assert!(
            plan.payload_bytes - resident_payload_bytes(shape, 1, w)
                < (tile * det[0] * det[1] * w) as u64
        );
        assert!(plan.peak_bytes >= plan.payload_bytes);
    }
}

#[test]
fn a_plan_that_cannot_fit_is_refused_with_its_alternatives() {
    let shape = Shape4 {
        scan: [10, 6],
        det: [13, 11],
    };
    // One tile of 16 u16 positions is 143 sectors of 32 bytes: a binding below it cannot
    // hold one, and the refusal says to bin the detector, by name and size.
    let tight = DeviceLimits {
        max_buffer_size: 1 << 30,
        max_storage_binding: 143 * 32 - 4,
    };
    let e = ResidentPlan::new(shape, Dtype::U16, false, tight).unwrap_err();
    assert!(e.is_gpu_unsupported(), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("bin the detector") && text.contains("4576 bytes"),
        "{text}"
    );
    // The alternatives of a plan are exact: bin 2 and bin 4 (sums widened to 4 bytes) and
    // the first half of the scan rows.
    let plan = ResidentPlan::new(shape, Dtype::U16, false, ROOMY).expect("a roomy plan");
    let gb = |b: u64| format!("{:.2} GB", b as f64 / 1e9);
    let alt = plan.alternatives();
    assert!(
        alt.contains(&format!(
            "bin 2: {}",
            gb(resident_payload_bytes(shape, 2, 4))
        )),
        "{alt}"
    );
    assert!(
        alt.contains(&format!(
            "bin 4: {}",
            gb(resident_payload_bytes(shape, 4, 4))
        )),
        "{alt}"
    );
    assert!(alt.contains("rows 0..5 of 10"), "{alt}");
}
