//! A synthetic uint16 acquisition generated on the fly: a bright-field disk whose centre
//! drifts with scan position, a faint ring, and hashed counting noise. Every sample is a
//! pure function of (frame, pixel), so benchmarks can make an acquisition of any size on
//! the machine that measures it, without files, and every backend sees the same numbers.

use std::sync::Arc;

use super::{Acquisition, Calibration, Format, Part, PartKind};
use crate::contract::{Dtype, Shape4};
use crate::error::{Error, Result};
use crate::source::{FileSet, MemSource};

pub fn sample(shape: Shape4, frame: usize, k: usize) -> u16 {
    let [kr, kc] = shape.det;
    let (r, c) = (frame / shape.scan[1], frame % shape.scan[1]);
    let (i, j) = ((k / kc) as f64, (k % kc) as f64);
    let radius = 0.16 * kr.min(kc) as f64;
    let cr = 0.5 * kr as f64 + 1.5 * (r as f64 * 0.05).sin();
    let cc = 0.5 * kc as f64 + 1.5 * (c as f64 * 0.07).cos();
    let d = ((i - cr).powi(2) + (j - cc).powi(2)).sqrt();
    let base: f64 = if d <= radius {
        900.0
    } else if (d - 2.2 * radius).abs() < 2.0 {
        40.0
    } else {
        3.0
    };
    let mut h = (frame as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (k as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    h ^= h >> 29;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 32;
    let noise = (h % 61) as f64 - 30.0;
    (base + noise * base.sqrt() / 17.0).max(0.0) as u16
}

pub fn frames_bytes(shape: Shape4, f0: usize, f1: usize, dst: &mut [u8]) {
    let n = shape.det_len();
    let fill = |(df, out): (usize, &mut [u8])| {
        for (k, b) in out.chunks_exact_mut(2).enumerate() {
            b.copy_from_slice(&sample(shape, f0 + df, k).to_le_bytes());
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        dst.par_chunks_mut(n * 2).enumerate().for_each(fill);
    }
    #[cfg(target_arch = "wasm32")]
    dst.chunks_mut(n * 2).enumerate().for_each(fill);
    let _ = f1;
}

pub fn open(dims: [usize; 4]) -> Result<Acquisition> {
    if dims.contains(&0) {
        return Err(Error::param(
            "--synthetic needs four positive sizes R,C,KR,KC",
        ));
    }
    let shape = Shape4 {
        scan: [dims[0], dims[1]],
        det: [dims[2], dims[3]],
    };
    let name = format!("synthetic_{}x{}x{}x{}", dims[0], dims[1], dims[2], dims[3]);
    let src = Arc::new(MemSource::new(name.clone(), Vec::<u8>::new()));
    Ok(Acquisition {
        format: Format::Synthetic,
        files: FileSet::new(vec![src.clone()])?,
        primary: name,
        dataset_path: String::new(),
        shape,
        dtype: Dtype::U16,
        scan_shape_source: "--synthetic".into(),
        parts: vec![Part {
            source: src,
            first_frame: 0,
            frames: shape.frames(),
            kind: PartKind::Synthetic,
        }],
        pixel_mask: None,
        calibration: Calibration::default(),
    })
}
