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
//!
//! Here: the closed form and the branch rule every backend shares, and the GPU's search.
//! The float64 reference (its sums and its search) is `cpu::dpc_rotation`.

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

/// The rotation on the GPU, from the centre of mass `centre` there (exact moments, or a CoM
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
