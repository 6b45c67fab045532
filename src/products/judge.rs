//! The one judge of a backend's product against the CPU reference, under the contract's
//! precision bounds (docs/CONTRACT.md): integer products, float sums and everything else
//! identical (C-BOUND-INT, C-BOUND-FLOAT-MEAN); CoM the float32 rounding of the exact quotient (C-BOUND-COM); DPC
//! within 2e-6 detector px (C-BOUND-DPC); iDPC within 1e-5·max|φ| (C-BOUND-IDPC); weighted
//! masks, float64 from exact per-weight sums, within the CPU's float64 bound (C-WEIGHTS).
//! `stem4d parity` and the native and browser parity tests judge with it; it is GPU-free and
//! builds for wasm.

use super::{ArrayData, ProductArray, ProductKind};

/// DPC: the largest error allowed, in detector pixels.
pub const DPC_BOUND_PX: f64 = 2e-6;
/// iDPC: the largest error allowed, relative to the reference's max|φ|.
pub const IDPC_BOUND_OF_MAX: f64 = 1e-5;
/// DPC rotation: the largest gap in θ allowed, in degrees (C-BOUND-DPC-ROTATION).
pub const ROTATION_BOUND_DEG: f64 = 0.01;
/// DPC rotation: the largest error of the curl energy left, relative to the reference's.
pub const ROTATION_ENERGY_BOUND_REL: f64 = 1e-3;
/// Weighted masks: the CPU reference's own float64 bound, relative to each value.
pub const WEIGHTED_BOUND_REL: f64 = 1e-12;
/// An independent float64 implementation (numpy) against ours, relative (C-BOUND-INDEPENDENT).
pub const INDEPENDENT_BOUND_REL: f64 = 1e-12;

/// What the judge found: the largest absolute difference, and the first value out of
/// bounds (`None`: the product passes).
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub max_error: f64,
    /// The reference's largest |value| (the scale of relative errors; 0 for an empty one).
    pub scale: f64,
    /// The bound the product was held to, in words.
    pub bound: String,
    pub failure: Option<String>,
}

const IDENTICAL: &str = "identical";

impl Verdict {
    pub fn pass(&self) -> bool {
        self.failure.is_none()
    }
}

/// Two arrays of one shape as f64: the largest difference, the reference's largest |value|,
/// and the first value a bound refuses.
struct Diff {
    got: Vec<f64>,
    reference: Vec<f64>,
    max_error: f64,
    scale: f64,
}

impl Diff {
    fn of(got: &ProductArray, reference: &ProductArray) -> Diff {
        let (g, c) = (got.data.to_f64(), reference.data.to_f64());
        let max_error = g
            .iter()
            .zip(&c)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        let scale = c.iter().fold(0f64, |m, v| m.max(v.abs()));
        Diff {
            got: g,
            reference: c,
            max_error,
            scale,
        }
    }

    /// The first value `ok` refuses, said with its index.
    fn first_outside(&self, ok: &dyn Fn(f64, f64) -> bool) -> Option<String> {
        let (g, c) = (&self.got, &self.reference);
        g.iter()
            .zip(c)
            .position(|(a, b)| !ok(*a, *b))
            .map(|i| format!("[{i}] {:e} vs reference {:e}", g[i], c[i]))
    }
}

/// `got` (any backend) against `reference` (the CPU's) for a product of `kind`.
pub fn judge(kind: ProductKind, got: &ProductArray, reference: &ProductArray) -> Verdict {
    if got.shape != reference.shape {
        return Verdict {
            max_error: f64::INFINITY,
            scale: 0.0,
            bound: IDENTICAL.into(),
            failure: Some(format!(
                "shape {:?} != reference {:?}",
                got.shape, reference.shape
            )),
        };
    }
    let d = Diff::of(got, reference);
    let (max_error, scale) = (d.max_error, d.scale);
    let within = |ok: &dyn Fn(f64, f64) -> bool| d.first_outside(ok);
    let (bound, failure) = match (kind, &got.data, &reference.data) {
        (ProductKind::Com, ArrayData::F32(gf), ArrayData::F64(cf)) => (
            "the float32 of the reference".into(),
            gf.iter()
                .zip(cf)
                .position(|(a, b)| *a != *b as f32)
                .map(|i| format!("[{i}] {:e} is not the float32 of {:e}", gf[i], cf[i])),
        ),
        (ProductKind::Dpc, _, _) => (
            format!("|error| <= {DPC_BOUND_PX:e} px"),
            within(&|a, b| (a - b).abs() <= DPC_BOUND_PX),
        ),
        (ProductKind::Idpc, _, _) => (
            format!("|error| <= {IDPC_BOUND_OF_MAX:e} x max|reference|"),
            within(&|a, b| (a - b).abs() <= IDPC_BOUND_OF_MAX * scale),
        ),
        (ProductKind::DpcRotation, _, _) => (
            format!(
                "same flip, θ within {ROTATION_BOUND_DEG}°, curl energy within {ROTATION_ENERGY_BOUND_REL:e} x reference"
            ),
            rotation_failure(&d.got, &d.reference),
        ),
        (ProductKind::Mask, ArrayData::F64(_), ArrayData::F64(_)) => (
            format!("|error| <= {WEIGHTED_BOUND_REL:e} x |reference|"),
            within(&|a, b| (a - b).abs() <= WEIGHTED_BOUND_REL * b.abs()),
        ),
        _ if got.data == reference.data => (IDENTICAL.into(), None),
        _ if got.data.dtype_name() != reference.data.dtype_name() => (
            IDENTICAL.into(),
            Some(format!(
                "dtype {} != reference {}",
                got.data.dtype_name(),
                reference.data.dtype_name()
            )),
        ),
        _ => (
            IDENTICAL.into(),
            within(&|a, b| a.to_bits() == b.to_bits())
                .or_else(|| Some("not identical to the reference".into())),
        ),
    };
    Verdict {
        max_error,
        scale,
        bound,
        failure,
    }
}

/// C-BOUND-DPC-ROTATION: what refuses a `[theta_deg, flip, curl_energy]` against the reference's: another flip,
/// θ farther than the bound round the circle, or another curl energy.
fn rotation_failure(got: &[f64], reference: &[f64]) -> Option<String> {
    let [theta, flip, energy] = <[f64; 3]>::try_from(got).ok()?;
    let [theta_ref, flip_ref, energy_ref] = <[f64; 3]>::try_from(reference).ok()?;
    let gap = (theta - theta_ref).rem_euclid(360.0);
    let gap = gap.min(360.0 - gap);
    if flip != flip_ref {
        Some(format!("flip {flip} vs reference {flip_ref}"))
    } else if gap.is_nan() || gap > ROTATION_BOUND_DEG {
        Some(format!("θ {theta}° vs reference {theta_ref}°"))
    } else if (energy - energy_ref).abs() > ROTATION_ENERGY_BOUND_REL * energy_ref.abs()
        || energy.is_nan() != energy_ref.is_nan()
    {
        Some(format!(
            "curl energy {energy:e} vs reference {energy_ref:e}"
        ))
    } else {
        None
    }
}

/// `got` (the CPU reference or any backend) against `reference`, an independent float64
/// implementation such as the numpy fixtures (C-BOUND-INDEPENDENT): the bounds above where
/// the backend rounds to float32, 1e-12 where both are float64 sums in different orders.
pub fn judge_independent(
    kind: ProductKind,
    got: &ProductArray,
    reference: &ProductArray,
) -> Verdict {
    if got.shape != reference.shape {
        return judge(kind, got, reference);
    }
    let d = Diff::of(got, reference);
    let (max_error, scale) = (d.max_error, d.scale);
    let signed = matches!(
        kind,
        ProductKind::Com | ProductKind::Dpc | ProductKind::Idpc
    );
    // NaN where both have it (a CoM of an empty frame) is the same value.
    let within = |ok: &dyn Fn(f64, f64) -> bool| {
        d.first_outside(&|a, b| ok(a, b) || (a.is_nan() && b.is_nan()))
    };
    let (bound, failure) = match (kind, &got.data, &reference.data) {
        // The rotation's own bound (C-BOUND-DPC-ROTATION): the angle comes through atan2 of
        // sums taken in other orders, so no relative bound on its value holds near 0°.
        (ProductKind::DpcRotation, _, _) => return judge(kind, got, reference),
        // A backend's float32 rounding of a quantity the reference holds in float64.
        (
            ProductKind::Com | ProductKind::Dpc | ProductKind::Idpc,
            ArrayData::F32(_),
            ArrayData::F64(_),
        ) => return judge(kind, got, reference),
        // The float64 mean of float32 data, rounded once to float32 (C-BOUND-FLOAT-MEAN).
        (ProductKind::MeanDp, ArrayData::F64(gm), ArrayData::F32(cm)) => (
            "rounds to the reference's float32".into(),
            gm.iter()
                .zip(cm)
                .position(|(a, b)| (*a as f32).to_bits() != b.to_bits())
                .map(|i| format!("[{i}] float32 of {:e} is not {:e}", gm[i], cm[i])),
        ),
        (_, ArrayData::F64(_), ArrayData::F64(_)) => (
            format!(
                "|error| <= {INDEPENDENT_BOUND_REL:e} x {}",
                if signed {
                    "max|reference|"
                } else {
                    "|reference|"
                }
            ),
            within(&|a, b| {
                (a - b).abs() <= INDEPENDENT_BOUND_REL * if signed { scale } else { b.abs() }
            }),
        ),
        _ => return judge(kind, got, reference),
    };
    Verdict {
        max_error,
        scale,
        bound,
        failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> ProductArray {
        ProductArray {
            shape: vec![v.len()],
            data: ArrayData::F32(v.to_vec()),
        }
    }

    fn f64s(v: &[f64]) -> ProductArray {
        ProductArray {
            shape: vec![v.len()],
            data: ArrayData::F64(v.to_vec()),
        }
    }

    #[test]
    fn each_kind_is_held_to_its_bound() {
        // CoM: the float32 rounding, nothing else.
        let c = f64s(&[0.1, 2.5]);
        assert!(judge(ProductKind::Com, &f32s(&[0.1, 2.5]), &c).pass());
        let off = f32::from_bits(0.1f32.to_bits() + 1);
        assert!(!judge(ProductKind::Com, &f32s(&[off, 2.5]), &c).pass());
        // DPC: 2e-6 px absolute.
        assert!(judge(ProductKind::Dpc, &f32s(&[0.1000019]), &f64s(&[0.1])).pass());
        assert!(!judge(ProductKind::Dpc, &f32s(&[0.100003]), &f64s(&[0.1])).pass());
        // iDPC: 1e-5 of the largest |φ|.
        let phi = f64s(&[1.0, -0.5]);
        assert!(judge(ProductKind::Idpc, &f32s(&[1.000009, -0.5]), &phi).pass());
        assert!(!judge(ProductKind::Idpc, &f32s(&[1.0, -0.49998]), &phi).pass());
        // Integers: identical; a shape or dtype apart fails.
        let u = |v: Vec<u64>| ProductArray {
            shape: vec![v.len()],
            data: ArrayData::U64(v),
        };
        assert!(judge(ProductKind::Bf, &u(vec![3, 4]), &u(vec![3, 4])).pass());
        let v = judge(ProductKind::Bf, &u(vec![3, 5]), &u(vec![3, 4]));
        assert_eq!((v.pass(), v.max_error), (false, 1.0));
        assert!(!judge(ProductKind::Bf, &u(vec![3]), &u(vec![3, 4])).pass());
        assert!(!judge(ProductKind::Total, &f64s(&[3.0]), &u(vec![3])).pass());
        // Float sums: the same bits; weighted masks within the CPU's float64 bound.
        assert!(!judge(ProductKind::Total, &f64s(&[1.0 + 1e-15]), &f64s(&[1.0])).pass());
        assert!(judge(ProductKind::Mask, &f64s(&[1.0 + 1e-15]), &f64s(&[1.0])).pass());
        assert!(!judge(ProductKind::Mask, &f64s(&[1.0 + 1e-11]), &f64s(&[1.0])).pass());
    }

    #[test]
    fn an_independent_reference_allows_float64_sums_in_another_order() {
        let near = judge_independent(ProductKind::Total, &f64s(&[2.0 + 1e-12]), &f64s(&[2.0]));
        assert!(near.pass());
        assert!(
            !judge_independent(ProductKind::Total, &f64s(&[2.0 + 1e-11]), &f64s(&[2.0])).pass()
        );
        // Signed products against the largest |reference|: small values may differ more.
        let phi = f64s(&[1.0, 1e-9]);
        assert!(judge_independent(ProductKind::Dpc, &f64s(&[1.0, 1e-9 + 5e-13]), &phi).pass());
        assert!(!judge_independent(ProductKind::Bf, &f64s(&[1.0, 1e-9 + 5e-13]), &phi).pass());
        // A backend's float32 keeps its own bound; integers and float32 stay identical.
        let off = f32::from_bits(0.1f32.to_bits() + 1);
        assert!(!judge_independent(ProductKind::Com, &f32s(&[off]), &f64s(&[0.1])).pass());
        assert!(judge_independent(ProductKind::Dpc, &f32s(&[0.1000019]), &f64s(&[0.1])).pass());
        assert!(!judge_independent(ProductKind::MaxDp, &f32s(&[off]), &f32s(&[0.1])).pass());
        // The float mean of float data: its float32 rounding is the reference's.
        let mean = f64s(&[0.1f32 as f64 + 1e-12]);
        assert!(judge_independent(ProductKind::MeanDp, &mean, &f32s(&[0.1])).pass());
        assert!(
            !judge_independent(ProductKind::MeanDp, &f64s(&[off as f64]), &f32s(&[0.1])).pass()
        );
        // NaN where both have it (a CoM of an empty frame) is the same value.
        assert!(judge_independent(ProductKind::Com, &f64s(&[f64::NAN]), &f64s(&[f64::NAN])).pass());
        assert!(!judge_independent(ProductKind::Total, &f64s(&[1.0]), &f32s(&[1.0])).pass());
    }
}
