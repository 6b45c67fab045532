//! Hot and dead pixels in the mean pattern. A hot pixel stands above every one of its 3 × 3
//! neighbours by more than the pattern's whole bright-field contrast (and ten noise levels);
//! a dead one lies below every neighbour by more than half that contrast. A disk's edge, or
//! noise, never puts a pixel above (below) all its neighbours by that much, so sharp, noisy
//! and background-subtracted patterns give no false hits (tests and the decision record).
//! The rule is C-BAD-FOUND of docs/CONTRACT.md.

use serde::Serialize;

use super::window::{median, window};

/// The rule, as provenance states it.
pub const RULE: &str = "in the mean pattern: hot = above all 3x3 neighbours by more than \
max(10 noise, contrast), dead = below all of them by more than max(10 noise, contrast/2); \
noise = 1.4826 MAD of (value - neighbours' median), contrast = peak of the 3x3-median-filtered \
pattern - its median";

/// Pixels found, in row-major order, `[row, col]` on the detector the mean was made on.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BadPixels {
    pub hot: Vec<[usize; 2]>,
    pub dead: Vec<[usize; 2]>,
    /// The robust noise of the mean pattern and its bright-field contrast (the scales).
    pub noise: f64,
    pub contrast: f64,
}

impl BadPixels {
    pub fn is_empty(&self) -> bool {
        self.hot.is_empty() && self.dead.is_empty()
    }

    /// Every pixel found, as a detector mask.
    pub fn mask(&self, det: [usize; 2]) -> Vec<bool> {
        let mut m = vec![false; det[0] * det[1]];
        for [r, c] in self.hot.iter().chain(&self.dead) {
            m[r * det[1] + c] = true;
        }
        m
    }
}

/// Hot and dead pixels of `mean` (row-major `det`), leaving out the pixels `known` to be bad
/// already (and any non-finite value) from every neighbourhood and statistic. A neighbourhood
/// of fewer than three usable pixels judges nothing (C-BAD-FOUND).
pub fn detect(mean: &[f64], det: [usize; 2], known: &[bool]) -> BadPixels {
    let n = det[0] * det[1];
    let usable: Vec<bool> = (0..n).map(|k| !known[k] && mean[k].is_finite()).collect();
    let mut w = Vec::with_capacity(9);
    let mut vals = Vec::with_capacity(9);
    // (pixel, neighbours' median, max, min) of every judged pixel.
    let mut judged = Vec::new();
    let mut filtered = Vec::new();
    for k in (0..n).filter(|&k| usable[k]) {
        window(k, det, true, &mut w);
        vals.clear();
        vals.extend(w.iter().filter(|&&q| usable[q]).map(|&q| mean[q]));
        filtered.extend(median(&mut vals));
        vals.clear();
        vals.extend(w.iter().filter(|&&q| q != k && usable[q]).map(|&q| mean[q]));
        if vals.len() < 3 {
            continue;
        }
        let max = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let min = vals.iter().copied().fold(f64::INFINITY, f64::min);
        if let Some(med) = median(&mut vals) {
            judged.push((k, med, max, min));
        }
    }
    let mut residuals: Vec<f64> = judged.iter().map(|&(k, med, ..)| mean[k] - med).collect();
    let centre = median(&mut residuals.clone()).unwrap_or(0.0);
    for r in residuals.iter_mut() {
        *r = (*r - centre).abs();
    }
    let noise = 1.4826 * median(&mut residuals).unwrap_or(0.0);
    let peak = filtered.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut values: Vec<f64> = (0..n).filter(|&k| usable[k]).map(|k| mean[k]).collect();
    let background = median(&mut values).unwrap_or(0.0);
    let contrast = peak - background;
    let mut out = BadPixels {
        noise,
        contrast: contrast.max(0.0),
        ..Default::default()
    };
    // Also true when contrast is NaN or −∞ (nothing usable).
    if contrast.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return out;
    }
    let (hot_by, dead_by) = (
        (10.0 * noise).max(contrast),
        (10.0 * noise).max(contrast / 2.0),
    );
    for &(k, _, max, min) in &judged {
        let at = [k / det[1], k % det[1]];
        if mean[k] - max > hot_by {
            out.hot.push(at);
        } else if min - mean[k] > dead_by {
            out.dead.push(at);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk of `level` (radius `rad` about (cr, cc)) on `bg`, with deterministic noise of
    /// amplitude `amp`.
    fn disk(
        det: [usize; 2],
        cr: f64,
        cc: f64,
        rad: f64,
        level: f64,
        bg: f64,
        amp: f64,
    ) -> Vec<f64> {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        (0..det[0] * det[1])
            .map(|k| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let noise = ((s >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2.0 * amp;
                let (i, j) = ((k / det[1]) as f64, (k % det[1]) as f64);
                let inside = (i - cr).powi(2) + (j - cc).powi(2) <= rad * rad;
                (if inside { level } else { bg }) + noise
            })
            .collect()
    }

    #[test]
    fn a_sharp_noisy_disk_has_no_bad_pixels() {
        for (amp, bg) in [(0.0, 3.0), (5.0, 3.0), (8.0, 0.0), (2.0, -1.0)] {
            let m = disk([41, 37], 19.3, 17.6, 9.5, 900.0, bg, amp);
            let b = detect(&m, [41, 37], &vec![false; 41 * 37]);
            assert!(b.is_empty(), "noise {amp}, background {bg}: {b:?}");
        }
    }

    #[test]
    fn hot_and_dead_pixels_are_found_wherever_they_are() {
        let det = [41, 37];
        let mut m = disk(det, 19.3, 17.6, 9.5, 900.0, 0.0, 4.0);
        m[3 * 37 + 30] = 4.0e4; // outside the disk
        m[19 * 37 + 18] = 2.5e3; // inside, above the disk by more than its contrast
        m[0] = 1.0e5; // a corner: three neighbours
        m[22 * 37 + 15] = 0.0; // dead inside the disk
        let b = detect(&m, det, &vec![false; 41 * 37]);
        assert_eq!(b.hot, vec![[0, 0], [3, 30], [19, 18]]);
        assert_eq!(b.dead, vec![[22, 15]]);
        // Known bad pixels are neither judged nor used.
        let mut known = vec![false; 41 * 37];
        known[3 * 37 + 30] = true;
        let b = detect(&m, det, &known);
        assert_eq!(b.hot, vec![[0, 0], [19, 18]]);
    }

    #[test]
    fn a_flat_or_empty_pattern_judges_nothing() {
        assert!(detect(&[0.0; 30], [5, 6], &[false; 30]).is_empty());
        assert!(detect(&[7.0; 30], [5, 6], &[true; 30]).is_empty());
    }
}
