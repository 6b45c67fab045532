//! The GPU path's host arithmetic: the exact integer sums the kernels return, rounded once
//! into float64 (C-COM, C-REDUCE, C-FLOAT-GPU, C-WEIGHTS). Written apart from the CPU
//! reference's double-double (`cpu::exact`) and by other means — integer long division and
//! exact float expansions, each correctly rounded — so that parity compares two
//! implementations and can catch a bug in either (decision 0020).

/// `m · 2^exp2` (with `sticky`: plus a positive amount below its last bit), negated when
/// `negative`, rounded to nearest float64, ties to even.
pub fn round_scaled(m: u128, sticky: bool, exp2: i32, negative: bool) -> f64 {
    let sign = if negative { -1.0 } else { 1.0 };
    if m == 0 {
        return 0.0 * sign;
    }
    let bits = 128 - m.leading_zeros() as i32;
    // The exponent of m's leading bit, and the bits float64 keeps from there (fewer once
    // the value is subnormal; none or less below the smallest subnormal's half).
    let lead = exp2 + bits - 1;
    let keep = if lead >= -1022 {
        53
    } else {
        53 - (-1022 - lead)
    };
    let drop = bits - keep;
    if drop <= 0 {
        // Exact: m fits in the bits kept (sticky is only ever set with bits to drop).
        return sign * scale2(m as f64, exp2);
    }
    if drop > 127 {
        // Below half the smallest subnormal: rounds to zero.
        return 0.0 * sign;
    }
    let q = m >> drop;
    let rest = m & ((1u128 << drop) - 1);
    let half = 1u128 << (drop - 1);
    let up = rest > half || (rest == half && (sticky || q & 1 == 1));
    sign * scale2((q + up as u128) as f64, exp2 + drop)
}

/// `x · 2^n`, exact whenever the result is representable (x an integer below 2^54 here).
fn scale2(mut x: f64, mut n: i32) -> f64 {
    let step = |k: i32| f64::from_bits(((k + 1023) as u64) << 52);
    while n > 1000 {
        x *= step(1000);
        n -= 1000;
    }
    while n < -1000 {
        x *= step(-1000);
        n += 1000;
    }
    if n >= -1022 {
        x * step(n)
    } else {
        // Two steps so that each factor is a normal power of two.
        x * step(-1000) * step(n + 1000)
    }
}

/// `v · 2^exp2` rounded once.
pub fn from_i128_scaled(v: i128, exp2: i32) -> f64 {
    round_scaled(v.unsigned_abs(), false, exp2, v < 0)
}

/// `(a / b) · 2^exp2`, negated when `negative`, rounded once (`b` > 0): long division to
/// 66 significant bits of the quotient, the remainder kept as a sticky bit.
pub fn quotient(a: u128, b: u128, exp2: i32, negative: bool) -> f64 {
    debug_assert!(b > 0);
    if a == 0 || b == 0 {
        return 0.0;
    }
    // Exact operands of float64: its division rounds once, as wanted.
    if a < 1 << 53 && b < 1 << 53 && exp2 == 0 {
        let q = a as f64 / b as f64;
        return if negative { -q } else { q };
    }
    let mut q = a / b;
    let mut r = a % b;
    let mut frac_bits = 0;
    // Quotient bits past the integer part, one at a time, until there are enough to round;
    // r < b, so 2r fits while b < 2^127, and the loop stops before q can overflow.
    while q < 1 << 66 && b < 1 << 127 {
        r <<= 1;
        q <<= 1;
        if r >= b {
            r -= b;
            q |= 1;
        }
        frac_bits += 1;
    }
    round_scaled(q, r != 0, exp2 - frac_bits, negative)
}

/// An exact sum of float64 terms and products, as a non-overlapping expansion (Shewchuk),
/// rounded once by [`ExactSum::value`].
#[derive(Clone, Debug, Default)]
pub struct ExactSum {
    partials: Vec<f64>,
}

impl ExactSum {
    pub fn add(&mut self, mut x: f64) {
        let mut kept = 0;
        for k in 0..self.partials.len() {
            let mut y = self.partials[k];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                self.partials[kept] = lo;
                kept += 1;
            }
            x = hi;
        }
        self.partials.truncate(kept);
        self.partials.push(x);
    }

    /// Add `w · s` exactly for an exact integer sum `s` (a weight group's masked sum, which
    /// may pass 2^53): split in two 32-bit halves so both products are exact (C-WEIGHTS).
    pub fn add_weighted(&mut self, w: f64, s: u64) {
        self.add_product(w * 4_294_967_296.0, (s >> 32) as f64);
        self.add_product(w, (s & 0xffff_ffff) as f64);
    }

    /// Add `a · b` exactly (its rounded product and the FMA's remainder).
    /// Add `w · s · 2^lsb` exactly (`s` an exact 128-bit sum of float32 data in units of
    /// `2^lsb`): `s` in three exact pieces of at most 43 bits each.
    pub fn add_weighted_wide(&mut self, w: f64, s: i128, lsb: i32) {
        let low = |k: u32| ((s >> (42 * k)) & ((1 << 42) - 1)) as f64;
        let pieces = [low(0), low(1), (s >> 84) as f64];
        for (k, piece) in pieces.into_iter().enumerate() {
            self.add_product(w, piece * from_i128_scaled(1, lsb + 42 * k as i32));
        }
    }

    pub fn add_product(&mut self, a: f64, b: f64) {
        let p = a * b;
        self.add(p);
        self.add(a.mul_add(b, -p));
    }

    /// The sum rounded once to nearest, ties to even.
    pub fn value(&self) -> f64 {
        let p = &self.partials;
        let Some(&top) = p.last() else {
            return 0.0;
        };
        let (mut hi, mut lo) = (top, 0.0);
        let mut j = p.len() - 1;
        while j > 0 {
            j -= 1;
            let x = hi;
            let y = p[j];
            hi = x + y;
            lo = y - (hi - x);
            if lo != 0.0 {
                break;
            }
        }
        // A remainder exactly half an ulp, with more of the same sign below it, rounds away.
        if j > 0 && ((lo < 0.0 && p[j - 1] < 0.0) || (lo > 0.0 && p[j - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            if y == x - hi {
                hi = x;
            }
        }
        hi
    }
}

/// The mean over the scan of each CoM plane (`com`: rows plane, then columns plane): exact
/// sums rounded once, then divided (C-DPC-MEAN).
pub fn scan_means(com: &[f64]) -> [f64; 2] {
    let n = com.len() / 2;
    let mean = |plane: &[f64]| {
        let mut s = ExactSum::default();
        plane.iter().for_each(|&v| s.add(v));
        s.value() / n.max(1) as f64
    };
    [mean(&com[..n]), mean(&com[n..])]
}

/// DPC from CoM planes: the scan mean taken off each component, then the contract's flip
/// and rotation (C-DPC).
pub fn dpc_from_com(com: &[f64], rotation_deg: f64, flip: bool) -> Vec<f64> {
    let n = com.len() / 2;
    let [mr, mc] = scan_means(com);
    let mut out = vec![0f64; 2 * n];
    for k in 0..n {
        let g = crate::contract::rotate_flip([com[k] - mr, com[n + k] - mc], rotation_deg, flip);
        out[k] = g[0];
        out[n + k] = g[1];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift) for the property checks below.
    fn numbers(seed: u64) -> impl Iterator<Item = u64> {
        let mut s = seed;
        std::iter::repeat_with(move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        })
    }

    #[test]
    fn integers_round_once_to_nearest_even() {
        // Exact below 2^53; past it, ties go to the even neighbour.
        assert_eq!(
            from_i128_scaled(9_007_199_254_740_993, 0),
            9_007_199_254_740_992.0
        );
        assert_eq!(
            from_i128_scaled(9_007_199_254_740_995, 0),
            9_007_199_254_740_996.0
        );
        assert_eq!(from_i128_scaled(-3, -1), -1.5);
        for (v, e) in numbers(7)
            .take(2000)
            .map(|x| (x as i128 * 977 - (1 << 60), (x % 40) as i32 - 20))
        {
            // `as` rounds an integer to nearest even; scaling by 2^e is exact here.
            assert_eq!(from_i128_scaled(v, e), (v as f64) * 2f64.powi(e), "{v} {e}");
        }
        // Subnormal results: the bits below the smallest subnormal are rounded, once.
        assert_eq!(from_i128_scaled(3, -1075), f64::from_bits(2));
        assert_eq!(from_i128_scaled(1, -1075), 0.0);
        assert_eq!(from_i128_scaled(1, -1074), f64::from_bits(1));
    }

    #[test]
    fn quotients_are_correctly_rounded() {
        assert_eq!(quotient(1, 3, 0, false), 1.0 / 3.0);
        assert_eq!(quotient(1, 3, -2, true), -1.0 / 12.0);
        assert_eq!(quotient(0, 5, 0, false), 0.0);
        // Against float64 division where its operands are exact (one rounding there too).
        let mut it = numbers(11);
        for _ in 0..5000 {
            let (a, b) = (it.next().unwrap() >> 12, (it.next().unwrap() >> 12).max(1));
            assert_eq!(
                quotient(a as u128, b as u128, 3, false),
                (a as f64 / b as f64) * 8.0
            );
        }
        // Past 2^53: the result's neighbours bracket the exact quotient within half an ulp.
        for _ in 0..2000 {
            let a = (it.next().unwrap() as u128) << 40 | it.next().unwrap() as u128;
            let b = (it.next().unwrap() >> (it.next().unwrap() % 60)).max(1) as u128;
            let q = quotient(a, b, 0, false);
            let exact_scaled = |x: f64| {
                // x·b compared with a, in integers: x = m·2^e with m < 2^53.
                let (m, e) = (
                    x.to_bits() & ((1 << 52) - 1) | 1 << 52,
                    ((x.to_bits() >> 52) as i32) - 1075,
                );
                (m as u128, e)
            };
            let (m, e) = exact_scaled(q);
            // |m·2^e − a/b| ≤ 2^(e−1)  ⇔  |2m·b − 2a·2^−e| ≤ b  (e ≥ 0 here or scaled).
            if e >= 0 {
                let lhs = (m * b) << e;
                let diff = lhs.abs_diff(a) << 1;
                assert!(diff <= b << e, "{a}/{b}");
            } else {
                let lhs = m * b;
                let rhs = a << (-e);
                assert!((lhs.abs_diff(rhs) << 1) <= b, "{a}/{b}");
            }
        }
    }

    #[test]
    fn expansions_sum_exactly_then_round_once() {
        let mut s = ExactSum::default();
        for x in [1e100, 1.0, -1e100, 1e-100] {
            s.add(x);
        }
        assert_eq!(s.value(), 1.0 + 1e-100);
        let mut s = ExactSum::default();
        s.add_product(0.1, 3.0);
        s.add(-0.30000000000000004);
        // 0.1·3 exactly, minus its rounding: the product's remainder alone.
        assert_eq!(s.value(), 0.1f64.mul_add(3.0, -(0.1 * 3.0)));
        // Order never matters.
        let xs: Vec<f64> = numbers(3)
            .take(500)
            .map(|v| f64::from_bits(v >> 2) * if v & 1 == 1 { -1.0 } else { 1.0 })
            .filter(|x| x.is_finite() && x.abs() < 1e300)
            .collect();
        let (mut a, mut b) = (ExactSum::default(), ExactSum::default());
        xs.iter().for_each(|&x| a.add(x));
        xs.iter().rev().for_each(|&x| b.add(x));
        assert_eq!(a.value(), b.value());
    }
}
