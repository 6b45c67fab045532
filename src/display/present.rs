//! How the page's frames reach the screen, and how it picks the way (GPU-free: the
//! choice is tested natively; `web::present` does the drawing).
//!
//! A WebGPU canvas is presented by the browser. A Chrome that composites on the GPU takes
//! the frame as it is, at no cost to the page. One that composites in software (headless
//! Chromium, a Chrome whose GPU compositing is blocklisted, some remote desktops) reads each
//! WebGPU frame back itself once the Worker's task ends, before the page hears that its
//! update is done: on the H200 machine 1–1.5 ms a frame, more than a whole pattern update
//! (decision 0012). The page can instead draw a frame off screen, map its
//! pixels in the round trip that waits for the update anyway, and put them on a 2D canvas,
//! which a software compositor takes as it is. Neither way is faster everywhere, so the
//! page times both on its own canvases when they are attached and keeps the faster one.

use serde::Serialize;

use crate::error::{Error, Result};

/// The way a panel's frames reach its canvas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Present {
    /// Drawn into the WebGPU canvas's own texture; the browser presents it.
    Surface,
    /// Drawn off screen, read back by the page and put on a 2D canvas.
    Readback,
}

impl Present {
    pub fn parse(name: &str) -> Result<Present> {
        match name {
            "surface" => Ok(Present::Surface),
            "readback" => Ok(Present::Readback),
            other => Err(Error::param(format!(
                "present: '{other}' is not \"surface\" or \"readback\""
            ))),
        }
    }
}

/// Calibration frames of each way that are not counted: the first of a page compile the
/// display's pipelines and make its textures.
pub const WARMUP_ROUNDS: usize = 2;
/// Counted frames of each way, alternating which goes first.
pub const ROUNDS: usize = 9;

/// A readback is kept only when it is faster by this much and by [`READBACK_SHARE`] of a
/// surface frame: where both cost about the same, the WebGPU canvas wins (no copies, and a
/// GPU compositor takes it without the upload a 2D canvas's frame needs).
pub const READBACK_MARGIN_MS: f64 = 0.25;
pub const READBACK_SHARE: f64 = 0.15;

/// Frames timed both ways on the page's canvases: request → on both canvases and the GPU
/// done, as an update is timed.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Calibration {
    pub surface_ms: Vec<f64>,
    pub readback_ms: Vec<f64>,
}

impl Calibration {
    /// The median frame of each way: (surface, readback).
    pub fn medians(&self) -> (f64, f64) {
        (median(&self.surface_ms), median(&self.readback_ms))
    }

    /// The way to keep: the readback only when it is clearly faster.
    pub fn choice(&self) -> Present {
        let (surface, readback) = self.medians();
        let saved = surface - readback;
        if readback.is_finite()
            && surface.is_finite()
            && saved >= READBACK_MARGIN_MS
            && saved >= READBACK_SHARE * surface
        {
            Present::Readback
        } else {
            Present::Surface
        }
    }
}

/// The median of `v` (the upper one of an even count); NaN for none.
fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cal(surface: &[f64], readback: &[f64]) -> Calibration {
        Calibration {
            surface_ms: surface.to_vec(),
            readback_ms: readback.to_vec(),
        }
    }

    #[test]
    fn names_parse_and_others_are_refused_by_name() {
        assert_eq!(Present::parse("surface").unwrap(), Present::Surface);
        assert_eq!(Present::parse("readback").unwrap(), Present::Readback);
        let e = Present::parse("carrier pigeon").unwrap_err().to_string();
        assert!(e.contains("carrier pigeon") && e.contains("surface"), "{e}");
        assert_eq!(
            serde_json::to_string(&Present::Readback).unwrap(),
            "\"readback\""
        );
    }

    #[test]
    fn a_software_compositor_picks_the_readback() {
        // The H200's headless Chromium: ~2.1 ms a frame through the browser's readback,
        // ~0.8 ms through the page's own; one slow outlier each way changes nothing.
        let c = cal(&[2.1, 2.3, 1.9, 9.0, 2.0], &[0.8, 0.7, 0.9, 0.8, 6.0]);
        assert_eq!(c.medians(), (2.1, 0.8));
        assert_eq!(c.choice(), Present::Readback);
    }

    #[test]
    fn a_gpu_compositor_keeps_the_surface() {
        // Presentation free: the readback's copies make it slower, or hardly faster.
        assert_eq!(
            cal(&[0.6, 0.5, 0.7], &[0.9, 0.8, 1.0]).choice(),
            Present::Surface
        );
        assert_eq!(
            cal(&[0.6, 0.6, 0.6], &[0.5, 0.5, 0.5]).choice(),
            Present::Surface
        );
        // Faster by the margin but not by the share of a slow frame: still the surface.
        assert_eq!(cal(&[4.0], &[3.6]).choice(), Present::Surface);
        assert_eq!(cal(&[4.0], &[3.3]).choice(), Present::Readback);
    }

    #[test]
    fn no_frames_keep_the_surface() {
        assert_eq!(cal(&[], &[]).choice(), Present::Surface);
        assert_eq!(cal(&[2.0], &[f64::NAN]).choice(), Present::Surface);
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[3.0, 1.0, 2.0, 4.0]), 3.0);
    }
}
