//! The display scale: how a value becomes the number the colour map and the histogram are
//! laid out on ("shown units"). Every scale is odd and non-decreasing, so limits, minima and
//! maxima keep their order through it and symmetric limits stay symmetric. The same rule
//! runs in `common.wgsl`'s `shown` (GPU) and here (CPU mirror, exports, and the inverse that
//! turns limits found in shown units back into data units). The rule is C-DISPLAY.

use serde::{Deserialize, Serialize};

/// A panel's display scale.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// The value itself.
    #[default]
    Linear,
    /// Signed `log10(1 + |v|)`: defined for every value, 0 at 0.
    Log,
    /// Signed `sqrt(|v|)`.
    Sqrt,
}

impl Scale {
    /// The code the kernels take (`SCALE_*` in `common.wgsl`).
    pub fn code(self) -> u32 {
        match self {
            Scale::Linear => 0,
            Scale::Log => 1,
            Scale::Sqrt => 2,
        }
    }

    pub fn from_code(code: u32) -> Option<Scale> {
        match code {
            0 => Some(Scale::Linear),
            1 => Some(Scale::Log),
            2 => Some(Scale::Sqrt),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scale::Linear => "linear",
            Scale::Log => "log",
            Scale::Sqrt => "sqrt",
        }
    }
}

/// WGSL's `sign`: 0 for both zeros (Rust's `signum` gives ±1 there), so that `shown(−0)` is
/// +0 here as on the GPU.
fn sign(v: f32) -> f32 {
    if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// The display transform of `common.wgsl`'s `shown`, operation for operation.
pub fn shown(v: f32, scale: Scale) -> f32 {
    match scale {
        Scale::Linear => v,
        Scale::Log => sign(v) * (1.0 + v.abs()).log2() * std::f32::consts::LOG10_2,
        Scale::Sqrt => sign(v) * v.abs().sqrt(),
    }
}

/// The data value whose shown value is `s` (host only: limits found in shown units reported
/// in data units), computed in float64 and rounded once, saturating at ±f32::MAX (a shown
/// value past log10(f32::MAX) has no float32 data value).
pub fn unshown(s: f32, scale: Scale) -> f32 {
    let a = s.abs() as f64;
    let v = match scale {
        Scale::Linear => return s,
        Scale::Log => (a * std::f64::consts::LN_10).exp_m1(),
        Scale::Sqrt => a * a,
    };
    (sign(s) as f64 * v).clamp(-f32::MAX as f64, f32::MAX as f64) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_odd_and_invert() {
        for scale in [Scale::Linear, Scale::Log, Scale::Sqrt] {
            assert_eq!(Scale::from_code(scale.code()), Some(scale));
            for v in [0.0f32, 1.0, 9.0, 99.0, 1234.5, 3.0e38] {
                assert_eq!(shown(-v, scale), -shown(v, scale), "{scale:?} {v}");
                let back = unshown(shown(v, scale), scale);
                // Shown values keep ~7 digits; ln(10)·ulp(38.5) is ~1e-5 relative for log.
                assert!(
                    (back - v).abs() <= 5e-5 * v.max(1.0),
                    "{scale:?}: {v} -> {back}"
                );
            }
        }
        assert!((shown(99.0, Scale::Log) - 2.0).abs() < 1e-6);
        assert_eq!(shown(-16.0, Scale::Sqrt), -4.0);
        assert_eq!(shown(-0.0, Scale::Log).to_bits(), 0);
        assert_eq!(unshown(40.0, Scale::Log), f32::MAX);
        assert_eq!(Scale::from_code(3), None);
    }
}
