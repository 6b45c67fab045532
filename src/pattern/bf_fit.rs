//! The BF disk of a mean pattern: hot and dead pixels (and those known bad) are replaced by
//! their neighbours' median, the pattern is median-filtered 3 × 3 (so no isolated pixel can
//! be the peak), the region at or above half-way from the median to the peak is grown from the
//! peak (4-connected), its holes filled; the disk is its centroid and `sqrt(area / π)`.
//! Fits that do not look like a beam are said so (`BfFit::warning`). The rule is C-FIT of
//! docs/CONTRACT.md.

use serde::Serialize;

use super::bad_pixels::{detect, BadPixels};
use super::window::{median, window};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BfFit {
    /// `[row, col]` in detector pixels (centres at integer indices).
    pub center: [f64; 2],
    pub radius: f64,
    /// Why the fit is implausible, when it is.
    pub warning: Option<String>,
    /// The hot and dead pixels the fit left out (beside those known bad).
    pub bad: BadPixels,
}

impl BfFit {
    /// `[row, col, radius]`, the `fit-bf` product.
    pub fn product(&self) -> [f64; 3] {
        [self.center[0], self.center[1], self.radius]
    }
}

/// Fit the BF disk of `mean` (row-major `det`), leaving out `known` bad pixels (C-FIT).
pub fn fit(mean: &[f64], det: [usize; 2], known: &[bool]) -> BfFit {
    let n = det[0] * det[1];
    let bad = detect(mean, det, known);
    let found = bad.mask(det);
    let out: Vec<bool> = (0..n)
        .map(|k| known[k] || found[k] || !mean[k].is_finite())
        .collect();
    let mut w = Vec::with_capacity(9);
    let mut vals = Vec::with_capacity(9);
    let mut usable: Vec<f64> = (0..n).filter(|&k| !out[k]).map(|k| mean[k]).collect();
    let background = median(&mut usable).unwrap_or(0.0);
    // Left-out pixels take their usable neighbours' median (else the background).
    let filled: Vec<f64> = (0..n)
        .map(|k| {
            if !out[k] {
                return mean[k];
            }
            window(k, det, false, &mut w);
            vals.clear();
            vals.extend(w.iter().filter(|&&q| !out[q]).map(|&q| mean[q]));
            median(&mut vals).unwrap_or(background)
        })
        .collect();
    let smooth: Vec<f64> = (0..n)
        .map(|k| {
            window(k, det, true, &mut w);
            vals.clear();
            vals.extend(w.iter().map(|&q| filled[q]));
            median(&mut vals).unwrap_or(filled[k])
        })
        .collect();
    // The first maximum in row-major order.
    let mut peak = 0;
    for k in 1..n {
        if smooth[k] > smooth[peak] {
            peak = k;
        }
    }
    let height = smooth[peak] - background;
    if height.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return BfFit {
            center: [(det[0] as f64 - 1.0) / 2.0, (det[1] as f64 - 1.0) / 2.0],
            radius: 0.0,
            warning: Some(
                "implausible BF fit: the mean pattern has no bright disk (it is flat)".into(),
            ),
            bad,
        };
    }
    let threshold = background + 0.5 * height;
    let region = grow(det, peak, |k| smooth[k] >= threshold);
    let area = region.iter().filter(|&&r| r).count();
    let (mut sr, mut sc) = (0u64, 0u64);
    for k in (0..n).filter(|&k| region[k]) {
        sr += (k / det[1]) as u64;
        sc += (k % det[1]) as u64;
    }
    let nf = area as f64;
    let center = [sr as f64 / nf, sc as f64 / nf];
    let radius = (nf / std::f64::consts::PI).sqrt();
    let warning = implausible(det, &region, center, radius, height, bad.noise);
    BfFit {
        center,
        radius,
        warning,
        bad,
    }
}

/// The 4-connected component of `inside` holding `seed`, with its holes (what the border
/// cannot reach, 4-connected, without crossing it) filled.
fn grow(det: [usize; 2], seed: usize, inside: impl Fn(usize) -> bool) -> Vec<bool> {
    let n = det[0] * det[1];
    let mut region = vec![false; n];
    flood(det, [seed].into_iter(), &mut region, inside);
    let border = (0..n).filter(|&k| {
        let (i, j) = (k / det[1], k % det[1]);
        (i == 0 || j == 0 || i + 1 == det[0] || j + 1 == det[1]) && !region[k]
    });
    let mut outside = vec![false; n];
    flood(det, border, &mut outside, |k| !region[k]);
    for k in 0..n {
        region[k] = !outside[k];
    }
    region
}

/// Mark in `seen` every pixel reachable from `seeds` through 4-neighbours where `ok`.
fn flood(
    det: [usize; 2],
    seeds: impl Iterator<Item = usize>,
    seen: &mut [bool],
    ok: impl Fn(usize) -> bool,
) {
    let [rows, cols] = det;
    let mut stack: Vec<usize> = Vec::new();
    for s in seeds {
        if !seen[s] && ok(s) {
            seen[s] = true;
            stack.push(s);
        }
    }
    while let Some(k) = stack.pop() {
        let (i, j) = (k / cols, k % cols);
        let next = [
            (i > 0).then(|| k - cols),
            (i + 1 < rows).then(|| k + cols),
            (j > 0).then(|| k - 1),
            (j + 1 < cols).then(|| k + 1),
        ];
        for q in next.into_iter().flatten() {
            if !seen[q] && ok(q) {
                seen[q] = true;
                stack.push(q);
            }
        }
    }
}

/// Why a fitted disk does not look like the beam: too small, cut by the detector's edge,
/// not round, or barely above the noise.
fn implausible(
    det: [usize; 2],
    region: &[bool],
    center: [f64; 2],
    radius: f64,
    height: f64,
    noise: f64,
) -> Option<String> {
    let mut why = Vec::new();
    if radius < 2.0 {
        why.push(format!(
            "its radius is {radius:.2} px, too small for the beam (a hot pixel, or no beam on the detector?)"
        ));
    }
    let cols = det[1];
    let on_edge = (0..region.len()).any(|k| {
        let (i, j) = (k / cols, k % cols);
        region[k] && (i == 0 || j == 0 || i + 1 == det[0] || j + 1 == cols)
    });
    if on_edge {
        why.push("it touches the detector's edge, so its centre and radius are biased".into());
    }
    let (mut disk, mut shared) = (0usize, 0usize);
    for (k, &r) in region.iter().enumerate() {
        let (i, j) = ((k / cols) as f64, (k % cols) as f64);
        if (i - center[0]).powi(2) + (j - center[1]).powi(2) <= radius * radius {
            disk += 1;
            shared += r as usize;
        }
    }
    if radius >= 2.0 && (shared as f64) < 0.8 * disk as f64 {
        why.push(format!(
            "the bright region is not round ({:.0} % of the fitted disk)",
            100.0 * shared as f64 / disk.max(1) as f64
        ));
    }
    if noise > 0.0 && height < 10.0 * noise {
        why.push(format!(
            "it stands only {:.1} noise levels above the background",
            height / noise
        ));
    }
    (!why.is_empty()).then(|| format!("implausible BF fit: {}", why.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(det: [usize; 2], cr: f64, cc: f64, rad: f64) -> Vec<f64> {
        (0..det[0] * det[1])
            .map(|k| {
                let (i, j) = ((k / det[1]) as f64, (k % det[1]) as f64);
                if (i - cr).powi(2) + (j - cc).powi(2) <= rad * rad {
                    800.0
                } else {
                    2.0
                }
            })
            .collect()
    }

    #[test]
    fn a_hot_pixel_brighter_than_the_disk_does_not_move_the_fit() {
        let det = [63, 73];
        let mut m = disk(det, 30.4, 41.7, 11.0);
        let clean = fit(&m, det, &vec![false; 63 * 73]);
        m[5 * 73 + 6] = 5e4;
        m[33 * 73 + 40] = 0.0;
        let f = fit(&m, det, &vec![false; 63 * 73]);
        assert_eq!(f.bad.hot, vec![[5, 6]]);
        assert_eq!(f.bad.dead, vec![[33, 40]]);
        assert_eq!(f.product(), clean.product());
        assert!(
            (f.center[0] - 30.4).abs() < 0.5 && (f.center[1] - 41.7).abs() < 0.5,
            "{f:?}"
        );
        assert!(
            (f.radius - 11.0).abs() < 0.5 && f.warning.is_none(),
            "{f:?}"
        );
    }

    #[test]
    fn implausible_fits_say_why() {
        let det = [40, 50];
        let edge = fit(&disk(det, 2.0, 25.0, 8.0), det, &vec![false; 2000]);
        assert!(
            edge.warning.as_deref().is_some_and(|w| w.contains("edge")),
            "{edge:?}"
        );
        let flat = fit(&vec![5.0; 2000], det, &vec![false; 2000]);
        assert_eq!(flat.product(), [19.5, 24.5, 0.0]);
        assert!(flat.warning.as_deref().is_some_and(|w| w.contains("flat")));
        let mut speck = vec![0.0; 2000];
        for k in [20, 21, 22]
            .into_iter()
            .flat_map(|i| [20, 21, 22].map(|j| i * 50 + j))
        {
            speck[k] = 100.0;
        }
        let tiny = fit(&speck, det, &vec![false; 2000]);
        assert!(
            tiny.warning
                .as_deref()
                .is_some_and(|w| w.contains("too small")),
            "{tiny:?}"
        );
        let mut bar = vec![0.0; 2000];
        for k in (10 * 50 + 5)..(10 * 50 + 45) {
            for d in [0, 50, 100] {
                bar[k + d] = 50.0;
            }
        }
        let long = fit(&bar, det, &vec![false; 2000]);
        assert!(
            long.warning
                .as_deref()
                .is_some_and(|w| w.contains("not round")),
            "{long:?}"
        );
    }
}
