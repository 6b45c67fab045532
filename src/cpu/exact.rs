//! Error-free float accumulation. A double-double keeps the rounding error of every
//! addition (TwoSum) and product (FMA), so float64 sums of float32 data do not depend on
//! the order of accumulation in practice — what lets the mean pattern match bit for bit
//! (C-FLOAT-CPU).

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Dd {
    hi: f64,
    lo: f64,
}

#[inline]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

impl Dd {
    pub const ZERO: Dd = Dd { hi: 0.0, lo: 0.0 };

    pub fn from_u64(v: u64) -> Dd {
        let hi = v as f64;
        // The part of v that `as f64` rounded away (exact: |lo| < 2^11 ulp).
        let lo = (v as i128 - hi as i128) as f64;
        Dd { hi, lo }
    }

    /// `v · 2^exp` (an exact integer sum in units of 2^exp, as the GPU's float kernels give
    /// it), rounded once into a double-double (C-FLOAT-GPU).
    pub fn from_i128_scaled(v: i128, exp: i32) -> Dd {
        if v == 0 {
            return Dd::ZERO;
        }
        let hi = v as f64;
        let lo = v.wrapping_sub(hi as i128) as f64;
        let scale = 2f64.powi(exp);
        Dd {
            hi: hi * scale,
            lo: lo * scale,
        }
    }

    #[inline]
    pub fn add(&mut self, x: f64) {
        let (s, e) = two_sum(self.hi, x);
        let (hi, lo) = two_sum(s, e + self.lo);
        self.hi = hi;
        self.lo = lo;
    }

    #[inline]
    pub fn add_product(&mut self, a: f64, b: f64) {
        let p = a * b;
        let e = a.mul_add(b, -p);
        self.add(p);
        self.add(e);
    }

    pub fn sub_dd(&mut self, o: &Dd) {
        self.add(-o.hi);
        self.add(-o.lo);
    }

    /// (hi, lo): the value is their exact sum.
    pub fn parts(&self) -> (f64, f64) {
        (self.hi, self.lo)
    }

    pub fn value(&self) -> f64 {
        self.hi + self.lo
    }

    /// `self / d`, rounded once to f64 (up to the double-double's own precision).
    pub fn div_u64(&self, d: u64) -> f64 {
        self.div_dd(&Dd::from_u64(d))
    }

    pub fn div_dd(&self, d: &Dd) -> f64 {
        let q = self.hi / d.hi;
        // Remainder self − q·d, computed with FMA, then one correction step.
        let r = (-q).mul_add(d.hi, self.hi) + self.lo - q * d.lo;
        q + r / d.hi
    }
}

/// `a / b` for exact integer moments, correctly rounded in practice (one correction step).
pub fn div_u128(a: u128, b: u128) -> f64 {
    if a < (1 << 53) && b < (1 << 53) {
        return a as f64 / b as f64;
    }
    let q = a / b;
    let r = a % b;
    split_u128(q).value() + r as f64 / b as f64
}

fn split_u128(v: u128) -> Dd {
    let hi = v as f64;
    let lo = (v as i128 - hi as i128) as f64;
    Dd { hi, lo }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_does_not_change_the_sum() {
        let xs: Vec<f64> = (0..10_000)
            .map(|i| {
                if i % 3 == 0 {
                    1e8 + i as f64 * 1e-3
                } else {
                    -(i as f64) * 1e-7
                }
            })
            .collect();
        let mut a = Dd::ZERO;
        xs.iter().for_each(|&x| a.add(x));
        let mut b = Dd::ZERO;
        xs.iter().rev().for_each(|&x| b.add(x));
        assert_eq!(a.value(), b.value());
    }

    #[test]
    fn big_integers_divide_once() {
        let t = (1u64 << 60) + 12345;
        assert_eq!(Dd::from_u64(t).div_u64(1), t as f64);
        assert_eq!(div_u128(7, 2), 3.5);
    }
}
