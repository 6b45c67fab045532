//! The display stage, GPU-free: colour maps, the display scales (`scale`), the limits rule
//! the `display_stats` kernel runs (`limits`, mirrored so it can be checked), the colour
//! wheel of direction images (`wheel`), colouring for exports, and PNG encoding. Display
//! values are for pixels only; products keep their exact values (C-DISPLAY).

pub mod colormaps;
pub mod gpu;
pub mod limits;
pub mod line_profile;
pub mod png;
pub mod present;
pub mod scale;
pub mod wheel;

pub use limits::{stats, Limits, ShownRange, Stats, HIST_BINS, STATS_HEADER};
pub use scale::{shown, unshown, Scale};

use crate::error::{Error, Result};

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

/// Grey, where a value is NaN or ±∞ (the renderer's colour for them).
const NOT_FINITE: [u8; 3] = [128, 128, 128];

/// The colour level (0..=255) of data value `v` between the limits of `stats`, on their
/// scale, as the renderer picks it; `None` for NaN and ±∞.
pub fn level(v: f32, stats: &Stats) -> Option<usize> {
    if !v.is_finite() {
        return None;
    }
    let ShownRange { lo, hi, .. } = stats.shown;
    let t = ((shown(v, stats.scale) - lo) / (hi - lo)).clamp(0.0, 1.0);
    Some((t * 255.0 + 0.5) as usize)
}

/// Colour a plane as the renderer does (no overlays): RGBA8, row-major. For PNG export.
pub fn colorize(plane: &[f32], stats: &Stats, cmap: u32) -> Vec<u8> {
    let table = &colormaps::TABLES[(cmap as usize).min(colormaps::TABLES.len() - 1)];
    let mut out = Vec::with_capacity(plane.len() * 4);
    for &v in plane {
        let [r, g, b] = level(v, stats).map_or(NOT_FINITE, |l| table[l]);
        out.extend_from_slice(&[r, g, b, 255]);
    }
    out
}

/// Colour a direction image as the renderer does: hue from `angle` (radians), brightness
/// from `magnitude` between the limits of `stats` (256 levels, as the colour maps).
pub fn colorize_wheel(magnitude: &[f32], angle: &[f32], stats: &Stats) -> Vec<u8> {
    let mut out = Vec::with_capacity(magnitude.len() * 4);
    for (&m, &a) in magnitude.iter().zip(angle) {
        let [r, g, b] = match level(m, stats) {
            Some(l) if a.is_finite() => wheel::wheel_u8(a, l as f32 / 255.0),
            _ => NOT_FINITE,
        };
        out.extend_from_slice(&[r, g, b, 255]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::limits::note;
    use super::*;

    #[test]
    fn percentile_limits_bracket_the_requested_fraction() {
        let plane: Vec<f32> = (0..10_000).map(|i| i as f32).collect();
        let s = stats(
            &plane,
            Limits::Percentile { lo: 1.0, hi: 99.0 },
            Scale::Linear,
        );
        let width = 9999.0 / HIST_BINS as f32;
        assert!((s.lo - 100.0).abs() <= width, "lo {}", s.lo);
        assert!((s.hi - 9900.0).abs() <= width, "hi {}", s.hi);
        assert_eq!(s.finite, 10_000);
        assert_eq!(s.hist.iter().sum::<u32>(), 10_000);
        assert_eq!(s.note(), None);
    }

    #[test]
    fn non_finite_values_are_left_out_and_a_flat_plane_gets_a_unit_range() {
        let s = stats(
            &[f32::NAN, 5.0, f32::INFINITY, 5.0],
            Limits::Percentile { lo: 0.0, hi: 100.0 },
            Scale::Linear,
        );
        assert_eq!((s.finite, s.min, s.max), (2, 5.0, 5.0));
        assert_eq!((s.lo, s.hi), (5.0, 6.0));
        assert_eq!(s.notes, note::COLLAPSED);
        assert!(s.note().unwrap().contains("every finite value is 5"));
        let empty = stats(
            &[f32::NAN],
            Limits::Percentile { lo: 0.0, hi: 100.0 },
            Scale::Linear,
        );
        assert_eq!((empty.lo, empty.hi, empty.finite), (0.0, 1.0, 0));
        assert_eq!(empty.notes, note::NO_FINITE);
        assert!(empty.note().unwrap().contains("no finite value"));
    }

    #[test]
    fn symmetric_limits_centre_zero() {
        let plane = [-1.0f32, -0.5, 0.0, 0.2, 3.0];
        for scale in [Scale::Linear, Scale::Log, Scale::Sqrt] {
            let s = stats(&plane, Limits::Symmetric { lo: 0.0, hi: 100.0 }, scale);
            assert_eq!(s.lo, -s.hi, "{scale:?}");
            assert_eq!(s.shown.lo, -s.shown.hi, "{scale:?}");
            assert!(s.hi >= 3.0 * (1.0 - 4.0 / HIST_BINS as f32), "{scale:?}");
        }
    }

    /// Absolute limits are data units on every scale: reported as given, mapped through the
    /// scale, and the pixels between them spread over the map (the old rule read them as
    /// shown units, and 1000 … 50000 on a log scale painted everything at the low end).
    #[test]
    fn absolute_limits_are_data_units_on_every_scale() {
        let plane: Vec<f32> = (0..500).map(|i| 900.0 + 100.0 * i as f32).collect();
        let limits = Limits::Absolute {
            lo: 1000.0,
            hi: 50000.0,
        };
        for scale in [Scale::Linear, Scale::Log, Scale::Sqrt] {
            let s = stats(&plane, limits, scale);
            assert_eq!((s.lo, s.hi), (1000.0, 50000.0), "{scale:?}");
            assert_eq!((s.min, s.max), (900.0, 50800.0), "{scale:?}");
            assert_eq!(
                (s.shown.lo, s.shown.hi),
                (shown(1000.0, scale), shown(50000.0, scale))
            );
            assert_eq!(s.note(), None, "{scale:?}");
            let levels: std::collections::BTreeSet<usize> =
                plane.iter().filter_map(|&v| level(v, &s)).collect();
            // 490 values between the limits: on every scale they reach well over a hundred
            // of the 256 levels (the log scale bunches the upper ones together).
            assert!(levels.len() > 100, "{scale:?}: {} levels", levels.len());
            assert_eq!(level(950.0, &s), Some(0));
            assert_eq!(level(60000.0, &s), Some(255));
        }
    }

    #[test]
    fn limits_beside_the_data_or_too_close_are_said() {
        let plane = [10.0f32, 20.0, 30.0];
        let above = stats(
            &plane,
            Limits::Absolute {
                lo: 1000.0,
                hi: 50000.0,
            },
            Scale::Log,
        );
        assert_eq!(above.notes, note::ABOVE_DATA);
        let text = above.note().unwrap();
        assert!(
            text.contains("1000 … 50000") && text.contains("low end"),
            "{text}"
        );
        let below = stats(&plane, Limits::Absolute { lo: -5.0, hi: 10.0 }, Scale::Sqrt);
        assert_eq!(below.notes, note::BELOW_DATA);
        assert!(below.note().unwrap().contains("high end"));
        // Two limits float32 tells apart in data units but not once through the log.
        let (a, b) = (1.0e30f32, 1.000_001e30);
        assert_eq!(shown(a, Scale::Log), shown(b, Scale::Log));
        let close = stats(&plane, Limits::Absolute { lo: a, hi: b }, Scale::Log);
        assert_eq!(close.notes, note::COLLAPSED | note::ABOVE_DATA);
        assert_eq!(close.lo, a);
        assert!(close.hi > b && close.shown.hi == close.shown.lo + 1.0);
        assert!(close.note().unwrap().contains("one value on the log scale"));
    }

    #[test]
    fn colours_follow_the_table_ends_and_mark_nan() {
        let s = stats(
            &[0.0, 1.0],
            Limits::Absolute { lo: 0.0, hi: 1.0 },
            Scale::Linear,
        );
        let rgba = colorize(&[0.0, 1.0, f32::NAN], &s, 0);
        let t = &colormaps::TABLES[0];
        assert_eq!(&rgba[0..3], &t[0]);
        assert_eq!(&rgba[4..7], &t[255]);
        assert_eq!(&rgba[8..11], &[128, 128, 128]);
        assert_eq!(lut_words().len(), 256 * colormaps::NAMES.len());
        let wheel = colorize_wheel(&[1.0, 0.0, 1.0], &[0.0, 1.0, f32::NAN], &s);
        assert_eq!(&wheel[0..4], &[255, 0, 0, 255]);
        assert_eq!(&wheel[4..7], &[0, 0, 0]);
        assert_eq!(&wheel[8..11], &[128, 128, 128]);
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
