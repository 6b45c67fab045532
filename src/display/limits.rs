//! Display limits: what the user asks for ([`Limits`]), what the `display_stats` kernel
//! makes of it (its stats buffer, parsed into [`Stats`]), and the CPU mirror of that kernel,
//! step for step ([`stats`]), which the GPU is checked against.
//!
//! Units. Limits given as numbers (`absolute`) are data units on every scale; the host
//! passes the kernel both those and their shown values (`super::shown`, one Rust function
//! for the GPU's uniform and the mirror), so the colour map spans exactly them. Percentile
//! and symmetric limits are found on a histogram laid out in shown units between the
//! shown minimum and maximum, and reported back in data units through the exact inverse
//! (`super::unshown`). Ranges (`min`, `max`) are of the data values themselves.
//!
//! Nothing fails silently: the kernel sets a note flag when the limits cannot apply as
//! asked (no finite value; limits that collapse to one value, then widened by one shown
//! unit; absolute limits on one side of every value, which are kept — a series shown with
//! fixed limits stays comparable — but said), and [`Stats::note`] words it (C-DISPLAY).

use serde::{Deserialize, Serialize};

use super::scale::{shown, unshown, Scale};
use crate::error::{Error, Result};

/// Histogram bins of the limits kernel.
pub const HIST_BINS: usize = 2048;
/// Words before the histogram in the stats buffer (the [`word`] indices).
pub const STATS_HEADER: usize = 16;

/// Where the kernel writes each header value (`display_stats.wgsl` uses the same indices).
pub mod word {
    /// Limits in shown units (f32 bits): what the renderer maps to the ends of the map.
    pub const LO: usize = 0;
    pub const HI: usize = 1;
    /// Shown minimum and maximum: the span of the histogram.
    pub const SHOWN_MIN: usize = 2;
    pub const SHOWN_MAX: usize = 3;
    /// Count of finite values.
    pub const FINITE: usize = 4;
    /// Minimum and maximum of the finite data values (data units).
    pub const MIN: usize = 5;
    pub const MAX: usize = 6;
    /// [`super::note`] flags.
    pub const NOTES: usize = 7;
    /// The absolute limits asked for, in data units (absolute mode only).
    pub const ASKED_LO: usize = 8;
    pub const ASKED_HI: usize = 9;
    /// [`super::Scale::code`] and [`super::Limits::gpu_mode`] the stats were made with.
    pub const SCALE: usize = 10;
    pub const MODE: usize = 11;
}

/// Flags of the header's notes word: why the limits are not what was asked for.
pub mod note {
    /// No finite value at all: limits 0..1 (shown), every pixel grey.
    pub const NO_FINITE: u32 = 1;
    /// The limits came out as one value (a flat plane, or limits float32 cannot tell apart
    /// on this scale): the upper one is the lower plus one shown unit.
    pub const COLLAPSED: u32 = 2;
    /// Absolute limits at or above every value: the whole panel is the low end of the map.
    pub const ABOVE_DATA: u32 = 4;
    /// Absolute limits at or below every value: the whole panel is the high end of the map.
    pub const BELOW_DATA: u32 = 8;
}

/// How display limits are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Limits {
    /// Between two percentiles of the finite values (0..=100).
    Percentile { lo: f32, hi: f32 },
    /// Fixed values in data units, whatever the scale (the colour map spans their shown
    /// values).
    Absolute { lo: f32, hi: f32 },
    /// Diverging maps: ±max(|p_lo|, |p_hi|) so zero sits in the middle of the map.
    Symmetric { lo: f32, hi: f32 },
}

/// What the limits kernel's uniform takes of [`Limits`] on a scale: the mode code, the
/// percentiles, and the absolute limits in data and in shown units.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KernelLimits {
    pub mode: u32,
    pub p_lo: f32,
    pub p_hi: f32,
    pub abs_lo: f32,
    pub abs_hi: f32,
    pub shown_lo: f32,
    pub shown_hi: f32,
}

pub const MODE_PERCENTILE: u32 = 0;
pub const MODE_ABSOLUTE: u32 = 1;
pub const MODE_SYMMETRIC: u32 = 2;

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

    /// The mode code of the kernel's uniform.
    pub fn gpu_mode(&self) -> u32 {
        match self {
            Limits::Percentile { .. } => MODE_PERCENTILE,
            Limits::Absolute { .. } => MODE_ABSOLUTE,
            Limits::Symmetric { .. } => MODE_SYMMETRIC,
        }
    }

    /// The kernel's view of these limits on `scale` (shown values made here, on the host,
    /// so the GPU and the mirror map the same numbers).
    pub fn for_kernel(&self, scale: Scale) -> KernelLimits {
        let mut k = KernelLimits {
            mode: self.gpu_mode(),
            ..Default::default()
        };
        match *self {
            Limits::Percentile { lo, hi } | Limits::Symmetric { lo, hi } => {
                (k.p_lo, k.p_hi) = (lo, hi);
            }
            Limits::Absolute { lo, hi } => {
                (k.abs_lo, k.abs_hi) = (lo, hi);
                (k.shown_lo, k.shown_hi) = (shown(lo, scale), shown(hi, scale));
            }
        }
        k
    }
}

/// Limits and range in shown units (the histogram's axis).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ShownRange {
    pub lo: f32,
    pub hi: f32,
    pub min: f32,
    pub max: f32,
}

/// What the limits kernel writes, parsed: limits and range in data units, the same in
/// shown units, the histogram (over `shown.min..shown.max`) and the notes.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Limits in data units.
    pub lo: f32,
    pub hi: f32,
    /// Range of the finite data values (3e38 and −3e38 when there is none).
    pub min: f32,
    pub max: f32,
    pub shown: ShownRange,
    pub scale: Scale,
    pub finite: u32,
    /// [`note`] flags.
    pub notes: u32,
    /// The absolute limits asked for (data units), if the mode was absolute.
    pub asked: Option<[f32; 2]>,
    pub hist: Vec<u32>,
}

fn f(w: u32) -> f32 {
    f32::from_bits(w)
}

/// A number for a note: plain where short, else in exponent form.
fn num(v: f32) -> String {
    if v != 0.0 && !(1e-3..1e6).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
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
        let scale = Scale::from_code(w[word::SCALE]).ok_or_else(|| {
            Error::Gpu(format!("display stats name scale code {}", w[word::SCALE]))
        })?;
        Ok(Stats::parse(w, scale))
    }

    /// The header and histogram of a whole buffer (`w` holds both) made on `scale`.
    fn parse(w: &[u32], scale: Scale) -> Stats {
        let notes = w[word::NOTES];
        let shown = ShownRange {
            lo: f(w[word::LO]),
            hi: f(w[word::HI]),
            min: f(w[word::SHOWN_MIN]),
            max: f(w[word::SHOWN_MAX]),
        };
        let absolute = w[word::MODE] == MODE_ABSOLUTE;
        let asked = absolute.then(|| [f(w[word::ASKED_LO]), f(w[word::ASKED_HI])]);
        // Absolute limits that applied are reported as given, bit for bit; limits the kernel
        // found or adjusted in shown units come back through the inverse of the scale.
        let applied = |flags: u32| asked.filter(|_| notes & flags == 0);
        let lo = applied(note::NO_FINITE).map_or(unshown(shown.lo, scale), |a| a[0]);
        let hi =
            applied(note::NO_FINITE | note::COLLAPSED).map_or(unshown(shown.hi, scale), |a| a[1]);
        Stats {
            lo,
            hi,
            min: f(w[word::MIN]),
            max: f(w[word::MAX]),
            shown,
            scale,
            finite: w[word::FINITE],
            notes,
            asked,
            hist: w[STATS_HEADER..STATS_HEADER + HIST_BINS].to_vec(),
        }
    }

    /// The histogram merged down to `bins` bars (for the UI).
    pub fn coarse(&self, bins: usize) -> Vec<u32> {
        let per = HIST_BINS.div_ceil(bins.max(1));
        self.hist.chunks(per).map(|c| c.iter().sum()).collect()
    }

    /// Why the limits are not what was asked for, in words; `None` when they are.
    pub fn note(&self) -> Option<String> {
        let (lo, hi) = (num(self.lo), num(self.hi));
        if self.notes & note::NO_FINITE != 0 {
            return Some(
                "no finite value in this panel (every pixel is NaN or ±∞, drawn grey): \
                 the limits cannot apply"
                    .into(),
            );
        }
        if self.notes & note::COLLAPSED != 0 {
            let scale = self.scale.name();
            return Some(match self.asked {
                Some([a, b]) => format!(
                    "the limits {} … {} are one value on the {scale} scale in float32: \
                     widened to {lo} … {hi}",
                    num(a),
                    num(b)
                ),
                None if self.min == self.max => format!(
                    "every finite value is {}: the colour map spans {lo} … {hi}",
                    num(self.min)
                ),
                None => format!(
                    "the limits fell on one value, {lo} (too little spread for float32 at \
                     this magnitude on the {scale} scale): widened to {lo} … {hi}"
                ),
            });
        }
        if self.notes & note::ABOVE_DATA != 0 {
            return Some(format!(
                "the limits {lo} … {hi} lie at or above every value (the largest is {}): \
                 the whole panel shows the low end of the colour map",
                num(self.max)
            ));
        }
        if self.notes & note::BELOW_DATA != 0 {
            return Some(format!(
                "the limits {lo} … {hi} lie at or below every value (the smallest is {}): \
                 the whole panel shows the high end of the colour map",
                num(self.min)
            ));
        }
        None
    }
}

/// CPU mirror of `display_stats.wgsl`: the stats buffer it writes, word for word.
pub fn stats_words(plane: &[f32], limits: Limits, scale: Scale) -> Vec<u32> {
    let k = limits.for_kernel(scale);
    let vals = plane.iter().copied().filter(|v| v.is_finite());
    // The serial walk's range starts from ±3e38, as the kernel's does.
    let (mut mn, mut mx, mut n) = (3.0e38f32, -3.0e38f32, 0u32);
    for v in vals.clone() {
        mn = mn.min(v);
        mx = mx.max(v);
        n += 1;
    }
    let (smn, smx) = (shown(mn, scale), shown(mx, scale));
    let per_unit = HIST_BINS as f32 / (smx - smn).max(1.0e-30);
    let mut hist = vec![0u32; HIST_BINS];
    for v in vals {
        let b = ((shown(v, scale) - smn).max(0.0) * per_unit) as usize;
        hist[b.min(HIST_BINS - 1)] += 1;
    }
    let mut notes = 0u32;
    let (lo, mut hi) = if n == 0 {
        notes |= note::NO_FINITE;
        (0.0, 1.0)
    } else if k.mode == MODE_ABSOLUTE {
        if k.abs_lo >= mx {
            notes |= note::ABOVE_DATA;
        }
        if k.abs_hi <= mn {
            notes |= note::BELOW_DATA;
        }
        (k.shown_lo, k.shown_hi)
    } else {
        let width = (smx - smn) / HIST_BINS as f32;
        let (want_lo, want_hi) = (k.p_lo * 0.01 * n as f32, k.p_hi * 0.01 * n as f32);
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
        let lo = smn + b_lo.unwrap_or(0) as f32 * width;
        let hi = (smn + (b_hi.unwrap_or(HIST_BINS - 1) + 1) as f32 * width).min(smx);
        if k.mode == MODE_SYMMETRIC {
            let m = lo.abs().max(hi.abs());
            (-m, m)
        } else {
            (lo, hi)
        }
    };
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        hi = lo + 1.0;
        notes |= note::COLLAPSED;
    }
    let mut w = vec![0u32; STATS_HEADER];
    w[word::LO] = lo.to_bits();
    w[word::HI] = hi.to_bits();
    w[word::SHOWN_MIN] = smn.to_bits();
    w[word::SHOWN_MAX] = smx.to_bits();
    w[word::FINITE] = n;
    w[word::MIN] = mn.to_bits();
    w[word::MAX] = mx.to_bits();
    w[word::NOTES] = notes;
    w[word::ASKED_LO] = k.abs_lo.to_bits();
    w[word::ASKED_HI] = k.abs_hi.to_bits();
    w[word::SCALE] = scale.code();
    w[word::MODE] = k.mode;
    w.extend(hist);
    w
}

/// The mirror's stats, parsed as the GPU's are.
pub fn stats(plane: &[f32], limits: Limits, scale: Scale) -> Stats {
    Stats::parse(&stats_words(plane, limits, scale), scale)
}
