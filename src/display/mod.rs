//! The display stage, GPU-free: colour maps, the display transform, the limits rule the
//! `display_stats` kernel runs (mirrored here so it can be checked), colouring for exports,
//! and PNG encoding. Display values are for pixels only; products keep their exact values.

pub mod colormaps;
pub mod png;
pub mod present;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Histogram bins of the limits kernel.
pub const HIST_BINS: usize = 2048;
/// Words before the histogram in the stats buffer: lo, hi, min, max, finite count, spare.
pub const STATS_HEADER: usize = 8;

/// How display limits are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Limits {
    /// Between two percentiles of the finite values (0..=100).
    Percentile { lo: f32, hi: f32 },
    /// Fixed values (in displayed units: after the log transform when log is on).
    Absolute { lo: f32, hi: f32 },
    /// Diverging maps: ±max(|p_lo|, |p_hi|) so zero sits in the middle of the map.
    Symmetric { lo: f32, hi: f32 },
}

impl Limits {
    pub fn validate(&self) -> Result<()> {
        let (lo, hi) = match *self {
            Limits::Percentile { lo, hi } | Limits::Symmetric { lo, hi } => {
                if !(0.0..=100.0).contains(&lo) || !(0.0..=100.0).contains(&hi) {
                    return Err(Error::param(format!(
                        "percentile limits must lie in 0..100, got {lo}..{hi}"
                    )));
                }
                (lo, hi)
            }
            Limits::Absolute { lo, hi } => (lo, hi),
        };
        if hi <= lo || !lo.is_finite() || !hi.is_finite() {
            return Err(Error::param(format!(
                "display limits need lo < hi, got {lo}..{hi}"
            )));
        }
        Ok(())
    }

    /// (mode, lo, hi) as the kernel's uniform takes them.
    pub fn gpu_mode(&self) -> u32 {
        match self {
            Limits::Percentile { .. } => 0,
            Limits::Absolute { .. } => 1,
            Limits::Symmetric { .. } => 2,
        }
    }
}

/// A colour map by name, as the UI lists them.
pub fn colormap_index(name: &str) -> Result<u32> {
    colormaps::NAMES
        .iter()
        .position(|n| *n == name)
        .map(|i| i as u32)
        .ok_or_else(|| {
            Error::param(format!(
                "unknown colour map '{name}' (have {})",
                colormaps::NAMES.join(", ")
            ))
        })
}

/// Every colour map packed as RGBA8 words (alpha 255), map after map: the renderer's LUT.
pub fn lut_words() -> Vec<u32> {
    colormaps::TABLES
        .iter()
        .flat_map(|t| t.iter())
        .map(|[r, g, b]| *r as u32 | (*g as u32) << 8 | (*b as u32) << 16 | 0xff << 24)
        .collect()
}

/// The display transform of `common.wgsl`'s `shown`: linear, or signed log10(1 + |v|).
pub fn shown(v: f32, log: bool) -> f32 {
    if log {
        v.signum() * (1.0 + v.abs()).log2() * std::f32::consts::LOG10_2
    } else {
        v
    }
}

/// What the limits kernel writes: limits, range of the finite values, and the histogram.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stats {
    pub lo: f32,
    pub hi: f32,
    pub min: f32,
    pub max: f32,
    pub finite: u32,
    pub hist: Vec<u32>,
}

impl Stats {
    /// Parse the kernel's stats buffer.
    pub fn from_words(w: &[u32]) -> Result<Stats> {
        if w.len() < STATS_HEADER + HIST_BINS {
            return Err(Error::Gpu(format!(
                "display stats buffer holds {} words, expected {}",
                w.len(),
                STATS_HEADER + HIST_BINS
            )));
        }
        Ok(Stats {
            lo: f32::from_bits(w[0]),
            hi: f32::from_bits(w[1]),
            min: f32::from_bits(w[2]),
            max: f32::from_bits(w[3]),
            finite: w[4],
            hist: w[STATS_HEADER..STATS_HEADER + HIST_BINS].to_vec(),
        })
    }

    /// The histogram merged down to `bins` bars (for the UI).
    pub fn coarse(&self, bins: usize) -> Vec<u32> {
        let per = HIST_BINS.div_ceil(bins.max(1));
        self.hist.chunks(per).map(|c| c.iter().sum()).collect()
    }
}

/// CPU mirror of `display_stats.wgsl`, same rule step for step.
pub fn stats(plane: &[f32], limits: Limits, log: bool) -> Stats {
    let vals = plane
        .iter()
        .map(|&v| shown(v, log))
        .filter(|v| v.is_finite());
    let (mut mn, mut mx, mut n) = (3.0e38f32, -3.0e38f32, 0u32);
    for v in vals.clone() {
        mn = mn.min(v);
        mx = mx.max(v);
        n += 1;
    }
    let scale = HIST_BINS as f32 / (mx - mn).max(1.0e-30);
    let mut hist = vec![0u32; HIST_BINS];
    for v in vals {
        hist[(((v - mn).max(0.0) * scale) as usize).min(HIST_BINS - 1)] += 1;
    }
    let (lo, mut hi) = match limits {
        _ if n == 0 => (0.0, 1.0),
        Limits::Absolute { lo, hi } => (lo, hi),
        Limits::Percentile { lo: p_lo, hi: p_hi } | Limits::Symmetric { lo: p_lo, hi: p_hi } => {
            let width = (mx - mn) / HIST_BINS as f32;
            let (want_lo, want_hi) = (p_lo * 0.01 * n as f32, p_hi * 0.01 * n as f32);
            let (mut cum, mut b_lo, mut b_hi) = (0u32, None, None);
            for (b, &h) in hist.iter().enumerate() {
                cum += h;
                if b_lo.is_none() && cum as f32 > want_lo {
                    b_lo = Some(b);
                }
                if b_hi.is_none() && cum as f32 >= want_hi {
                    b_hi = Some(b);
                }
            }
            let lo = mn + b_lo.unwrap_or(0) as f32 * width;
            let hi = (mn + (b_hi.unwrap_or(HIST_BINS - 1) + 1) as f32 * width).min(mx);
            if matches!(limits, Limits::Symmetric { .. }) {
                let m = lo.abs().max(hi.abs());
                (-m, m)
            } else {
                (lo, hi)
            }
        }
    };
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        hi = lo + 1.0;
    }
    Stats {
        lo,
        hi,
        min: if n == 0 { 3.0e38 } else { mn },
        max: if n == 0 { -3.0e38 } else { mx },
        finite: n,
        hist,
    }
}

/// Colour a plane as the renderer does (no overlays): RGBA8, row-major. For PNG export.
pub fn colorize(plane: &[f32], stats: &Stats, cmap: u32, log: bool) -> Vec<u8> {
    let table = &colormaps::TABLES[(cmap as usize).min(colormaps::TABLES.len() - 1)];
    let mut out = Vec::with_capacity(plane.len() * 4);
    for &v in plane {
        let v = shown(v, log);
        let [r, g, b] = if v.is_finite() {
            let t = ((v - stats.lo) / (stats.hi - stats.lo)).clamp(0.0, 1.0);
            table[(t * 255.0 + 0.5) as usize]
        } else {
            [128, 128, 128]
        };
        out.extend_from_slice(&[r, g, b, 255]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_limits_bracket_the_requested_fraction() {
        let plane: Vec<f32> = (0..10_000).map(|i| i as f32).collect();
        let s = stats(&plane, Limits::Percentile { lo: 1.0, hi: 99.0 }, false);
        let width = 9999.0 / HIST_BINS as f32;
        assert!((s.lo - 100.0).abs() <= width, "lo {}", s.lo);
        assert!((s.hi - 9900.0).abs() <= width, "hi {}", s.hi);
        assert_eq!(s.finite, 10_000);
        assert_eq!(s.hist.iter().sum::<u32>(), 10_000);
    }

    #[test]
    fn non_finite_values_are_left_out_and_a_flat_plane_gets_a_unit_range() {
        let s = stats(
            &[f32::NAN, 5.0, f32::INFINITY, 5.0],
            Limits::Percentile { lo: 0.0, hi: 100.0 },
            false,
        );
        assert_eq!((s.finite, s.min, s.max), (2, 5.0, 5.0));
        assert_eq!((s.lo, s.hi), (5.0, 6.0));
        let empty = stats(
            &[f32::NAN],
            Limits::Percentile { lo: 0.0, hi: 100.0 },
            false,
        );
        assert_eq!((empty.lo, empty.hi, empty.finite), (0.0, 1.0, 0));
    }

    #[test]
    fn symmetric_limits_centre_zero() {
        let plane = [-1.0f32, -0.5, 0.0, 0.2, 3.0];
        let s = stats(&plane, Limits::Symmetric { lo: 0.0, hi: 100.0 }, false);
        assert_eq!(s.lo, -s.hi);
        assert!(s.hi >= 3.0 - 4.0 / HIST_BINS as f32);
    }

    #[test]
    fn colours_follow_the_table_ends_and_mark_nan() {
        let s = stats(&[0.0, 1.0], Limits::Absolute { lo: 0.0, hi: 1.0 }, false);
        let rgba = colorize(&[0.0, 1.0, f32::NAN], &s, 0, false);
        let t = &colormaps::TABLES[0];
        assert_eq!(&rgba[0..3], &t[0]);
        assert_eq!(&rgba[4..7], &t[255]);
        assert_eq!(&rgba[8..11], &[128, 128, 128]);
        assert_eq!(lut_words().len(), 256 * colormaps::NAMES.len());
    }

    #[test]
    fn bad_limits_and_names_are_refused() {
        assert!(Limits::Percentile { lo: 5.0, hi: 101.0 }
            .validate()
            .is_err());
        assert!(Limits::Absolute { lo: 2.0, hi: 1.0 }.validate().is_err());
        assert!(colormap_index("jet").is_err());
        assert_eq!(colormap_index("RdBu_r").unwrap(), 4);
    }
}
