//! The CPU reference of `dpc-rotation` (C-DPC-ROTATION, decision 0033): the curl and
//! divergence sums in float64 on the host, the closed form and branch rule of
//! `products::dpc_rotation`, and the iDPC phase from `cpu::idpc`.

use crate::error::{Error, Result};
#[cfg(test)]
use crate::products::dpc_rotation::least_curl;
use crate::products::dpc_rotation::{branch, check_scan, least_of_both_flips, Rotation};

/// `ΣC², ΣC·D, ΣD²` of the field `(dr, dc)` (row-major over `scan`), its components
/// swapped first when `flip`.
pub fn curl_div_sums(dr: &[f64], dc: &[f64], scan: [usize; 2], flip: bool) -> [f64; 3] {
    let (dr, dc) = if flip { (dc, dr) } else { (dr, dc) };
    let [rows, cols] = scan;
    let at = |f: &[f64], r: usize, c: usize| f[r * cols + c];
    let (mut a, mut b, mut s) = (0.0, 0.0, 0.0);
    for r in 0..rows.saturating_sub(1) {
        for c in 0..cols.saturating_sub(1) {
            // ∂/∂row and ∂/∂col of a component on the cell (r..r+1, c..c+1).
            let d_row = |f: &[f64]| {
                (at(f, r + 1, c) + at(f, r + 1, c + 1) - at(f, r, c) - at(f, r, c + 1)) / 2.0
            };
            let d_col = |f: &[f64]| {
                (at(f, r, c + 1) + at(f, r + 1, c + 1) - at(f, r, c) - at(f, r + 1, c)) / 2.0
            };
            let div = d_row(dr) + d_col(dc);
            let curl = d_row(dc) - d_col(dr);
            a += curl * curl;
            b += curl * div;
            s += div * div;
        }
    }
    [a, b, s]
}

/// The rotation of the DPC field `dpc` (rows then columns, each over `scan`: the CoM minus
/// its scan mean, before any flip or rotation) against the dark-field image `dark` of the
/// same scan, in float64 on the host: the flip and θ of least curl, on the branch whose
/// iDPC phase correlates positively with `dark` (`idpc` integrates a field as `cpu::idpc`
/// does). The CPU reference.
pub fn find(
    dpc: &[f64],
    dark: &[f64],
    scan: [usize; 2],
    idpc: impl Fn(&[f64], [usize; 2]) -> Vec<f64>,
) -> Result<Rotation> {
    check_scan(scan)?;
    let n = scan[0] * scan[1];
    if dpc.len() != 2 * n || dark.len() != n {
        return Err(Error::param(
            "the DPC field and the dark-field image must cover the scan",
        ));
    }
    let (dr, dc) = dpc.split_at(n);
    let sums = [false, true].map(|flip| curl_div_sums(dr, dc, scan, flip));
    let (flip, theta, curl_energy) = least_of_both_flips(sums)?;
    let field = super::dpc_from_com(dpc, theta, flip);
    let phase = idpc(&field, scan);
    Ok(Rotation {
        theta_deg: branch(theta, &phase, dark),
        flip,
        curl_energy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A projected potential of Gaussian "columns" on an odd, rectangular scan, its
    /// gradient (what DPC measures after the right rotation), and the detector-frame field
    /// that gives it through `flip` and `theta` (C-DPC inverted).
    fn simulated(scan: [usize; 2], theta: f64, flip: bool) -> (Vec<f64>, Vec<f64>) {
        let [rows, cols] = scan;
        let atoms = [
            (3.3, 4.1, 1.0),
            (9.7, 12.4, 0.8),
            (5.2, 17.9, 1.2),
            (13.1, 6.6, 0.9),
            (2.4, 20.2, 0.7),
        ];
        let v = |r: f64, c: f64| -> f64 {
            atoms
                .iter()
                .map(|&(ar, ac, h)| h * (-((r - ar).powi(2) + (c - ac).powi(2)) / 3.0).exp())
                .sum()
        };
        let n = rows * cols;
        let (mut dark, mut d) = (vec![0.0; n], vec![0.0; 2 * n]);
        for r in 0..rows {
            for c in 0..cols {
                let (rf, cf) = (r as f64, c as f64);
                let k = r * cols + c;
                dark[k] = v(rf, cf);
                let g = [
                    (v(rf + 0.5, cf) - v(rf - 0.5, cf)),
                    (v(rf, cf + 0.5) - v(rf, cf - 0.5)),
                ];
                // g = R(θ)·F(d), so F(d) = R(−θ)·g and d = F(F(d)).
                let back = crate::contract::rotate_flip(g, -theta, false);
                let dd = if flip { [back[1], back[0]] } else { back };
                d[k] = dd[0];
                d[n + k] = dd[1];
            }
        }
        (d, dark)
    }

    fn angle_gap(a: f64, b: f64) -> f64 {
        let x = (a - b).rem_euclid(360.0);
        x.min(360.0 - x)
    }

    #[test]
    fn every_quadrant_and_both_flips_are_recovered_within_half_a_degree() {
        for scan in [[17, 23], [16, 25], [15, 15]] {
            for theta in [0.0, 13.0, 89.0, 101.5, 180.0, 233.0, 271.0, 344.9] {
                for flip in [false, true] {
                    let (d, dark) = simulated(scan, theta, flip);
                    let got = find(&d, &dark, scan, super::super::idpc).unwrap();
                    assert_eq!(got.flip, flip, "{scan:?} θ {theta} flip {flip}: {got:?}");
                    assert!(
                        angle_gap(got.theta_deg, theta) <= 0.5,
                        "{scan:?} θ {theta} flip {flip}: {got:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_closed_form_is_the_least_of_a_fine_sweep() {
        let (d, _) = simulated([14, 19], 57.0, false);
        let n = 14 * 19;
        let sums = curl_div_sums(&d[..n], &d[n..], [14, 19], false);
        let energy = |t: f64| {
            let (s, c) = t.to_radians().sin_cos();
            sums[0] * c * c + 2.0 * sums[1] * s * c + sums[2] * s * s
        };
        let (theta, least) = least_curl(sums);
        assert!((energy(theta) - least).abs() <= 1e-9 * (sums[0] + sums[2]));
        for k in 0..3600 {
            assert!(energy(k as f64 / 10.0) >= least - 1e-9 * (sums[0] + sums[2]));
        }
    }

    #[test]
    fn scans_without_a_cell_or_of_other_sizes_are_refused() {
        let idpc = super::super::idpc;
        assert!(find(&[0.0; 4], &[0.0; 2], [1, 2], idpc).is_err());
        assert!(find(&[0.0; 6], &[0.0; 4], [2, 2], idpc).is_err());
    }
}
