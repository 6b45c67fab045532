//! The scan–detector rotation of DPC (C-DPC-ROTATION, decision 0033): the angle θ and the component swap
//! ("flip", C-DPC) that make the DPC field curl-free, and the branch of the 180° that curl
//! cannot see.
//!
//! With the field `d` after the flip, its divergence `D` and curl `C` per scan cell, the
//! curl of the field rotated by θ (C-DPC: `g = R(θ)·d`) is `sinθ·D + cosθ·C`: linear in
//! (cosθ, sinθ). Its energy over the scan is therefore the quadratic form
//! `E(θ) = A·cos²θ + 2B·sinθ·cosθ + S·sin²θ` with `A = ΣC²`, `B = ΣC·D`, `S = ΣD²`, and its
//! minimum is closed: `E = (A+S)/2 + R·cos(2θ − φ)` with `R = |((A−S)/2, B)|`,
//! `φ = atan2(B, (A−S)/2)`, least at `2θ = φ + π`. No search over θ is needed, coarse or
//! fine: three sums per flip decide it exactly. Of the two flips the one with the smaller
//! least energy wins.
//!
//! θ and θ + 180° give the same curl; they give opposite iDPC phases. Electrons are
//! deflected towards the atom columns, so at the right branch the phase is positive where
//! the columns are, where an annular dark-field image is bright: the branch whose phase
//! correlates positively with the dark-field image is taken.
//!
//! Differences on a cell of four neighbouring positions (the 2 × 2 stencil), so divergence
//! and curl sit at the same points; a scan of fewer than 2 × 2 positions has no cell and is
//! refused.

use crate::error::{Error, Result};
use crate::gpu::Engine;
use crate::kernels::fft::{encode_dpc_pairs, CentreSource, DpcSettings, Idpc};
use crate::products::{ArrayData, ProductArray};

/// The rotation found: θ in degrees in [0, 360), the flip, and the curl energy left (the
/// sum over cells of the squared curl, detector px² per scan step²).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rotation {
    pub theta_deg: f64,
    pub flip: bool,
    pub curl_energy: f64,
}

impl Rotation {
    /// The `dpc-rotation` product: `[theta_deg, flip (0 or 1), curl_energy]`, float64.
    pub fn product(&self) -> ProductArray {
        ProductArray {
            shape: vec![3],
            data: ArrayData::F64(vec![
                self.theta_deg,
                if self.flip { 1.0 } else { 0.0 },
                self.curl_energy,
            ]),
        }
    }
}

/// A scan of fewer than 2 × 2 positions has no cell to take a curl on: refused on every
/// backend alike.
pub fn check_scan(scan: [usize; 2]) -> Result<()> {
    if scan[0] < 2 || scan[1] < 2 {
        return Err(Error::param(format!(
            "the DPC rotation needs a scan of at least 2 x 2 positions, not {} x {}",
            scan[0], scan[1]
        )));
    }
    Ok(())
}

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

/// The θ in [0°, 180°) of least curl energy for the sums `[ΣC², ΣC·D, ΣD²]`, and that
/// energy.
pub fn least_curl(sums: [f64; 3]) -> (f64, f64) {
    let [a, b, s] = sums;
    let half = (a - s) / 2.0;
    let r = half.hypot(b);
    let theta = ((b.atan2(half) + std::f64::consts::PI) / 2.0).to_degrees();
    (theta.rem_euclid(180.0), ((a + s) / 2.0 - r).max(0.0))
}

/// Of the sums `[no flip, flip]`, the flip whose least curl energy is smaller (no flip on
/// a tie), its θ in [0°, 180°) and that energy. A field with neither curl nor divergence
/// (uniform: every sum zero) has no rotation to find and is refused.
pub fn least_of_both_flips(sums: [[f64; 3]; 2]) -> Result<(bool, f64, f64)> {
    let total = sums[0][0] + sums[0][2];
    if !total.is_finite() || total <= 0.0 {
        return Err(Error::param(
            "the DPC field is uniform over the scan (no curl, no divergence): it has no rotation to find",
        ));
    }
    let (theta0, e0) = least_curl(sums[0]);
    let (theta1, e1) = least_curl(sums[1]);
    Ok(if e1 < e0 {
        (true, theta1, e1)
    } else {
        (false, theta0, e0)
    })
}

/// θ or θ + 180°: the branch whose iDPC `phase` (computed at θ) correlates positively with
/// the dark-field image `dark` (the columns, where electrons are deflected to, are bright
/// there and the phase is positive on them). θ stays on a tie.
pub fn branch(theta_deg: f64, phase: &[f64], dark: &[f64]) -> f64 {
    let mean = dark.iter().sum::<f64>() / dark.len().max(1) as f64;
    let corr: f64 = phase.iter().zip(dark).map(|(p, d)| p * (d - mean)).sum();
    let theta = if corr < 0.0 {
        theta_deg + 180.0
    } else {
        theta_deg
    };
    theta.rem_euclid(360.0)
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
    let field = crate::cpu::dpc_from_com(dpc, theta, flip);
    let phase = idpc(&field, scan);
    Ok(Rotation {
        theta_deg: branch(theta, &phase, dark),
        flip,
        curl_energy,
    })
}

/// The same on the GPU, from the centre of mass `centre` there (exact moments, or a CoM
/// plane already centred) and its scan `mean` (C-DPC-MEAN): the field is packed once
/// without rotation, the six curl sums come from `dpc_curl`, and the iDPC phase that
/// decides the branch from the FFTs at the θ found; only the sums and the phase come back.
pub async fn on_gpu(
    engine: &Engine,
    scan: [usize; 2],
    centre: CentreSource<'_>,
    mean: [f64; 2],
    dark: &[f64],
) -> Result<Rotation> {
    check_scan(scan)?;
    let n = (scan[0] * scan[1]) as u64;
    let field = engine.storage("dpc rotation field", n * 8);
    let plain = DpcSettings {
        mean,
        rotation: 0.0,
        flip: false,
    };
    let mut enc = engine.device.create_command_encoder(&Default::default());
    encode_dpc_pairs(engine, &mut enc, scan, centre, plain, &field)?;
    engine.queue.submit([enc.finish()]);
    let sums = crate::kernels::dpc_curl::curl_sums(engine, &field, scan).await?;
    let (flip, theta, curl_energy) = least_of_both_flips(sums)?;
    let idpc = Idpc::new(engine, scan);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    let turned = DpcSettings {
        rotation: theta,
        flip,
        ..plain
    };
    idpc.encode(engine, &mut enc, centre, turned)?;
    engine.queue.submit([enc.finish()]);
    let phase = idpc.read(engine).await?;
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
                    let got = find(&d, &dark, scan, crate::cpu::idpc).unwrap();
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
        let idpc = crate::cpu::idpc;
        assert!(find(&[0.0; 4], &[0.0; 2], [1, 2], idpc).is_err());
        assert!(find(&[0.0; 6], &[0.0; 4], [2, 2], idpc).is_err());
    }
}
