//! A line profile across a panel's values (issue #33, exports): samples one pixel apart
//! from one end of a drawn line to the other, each the bilinear interpolation of the four
//! values around it. Coordinates are in pixel indices (pixel (r, c)'s centre is at (r, c)),
//! so a line through pixel centres along a row or column samples the values themselves.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::products::tiff::PixelSize;
use crate::products::ProductArray;

/// A profile: the distance of each sample from the line's start, in pixels, and its value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LineProfile {
    pub distance_px: Vec<f64>,
    pub values: Vec<f64>,
}

/// Most samples a profile takes: a line across a 4096-pixel diagonal.
pub const MAX_SAMPLES: usize = 8192;

/// The profile of `values` (row-major, `dims` = [rows, cols]) from `from` to `to`
/// ([row, col] each, clamped onto the plane's pixel centres).
pub fn sample(
    values: &[f64],
    dims: [usize; 2],
    from: [f64; 2],
    to: [f64; 2],
) -> Result<LineProfile> {
    let [rows, cols] = dims;
    if rows == 0 || cols == 0 || values.len() != rows * cols {
        return Err(Error::param("a line profile needs a plane of values"));
    }
    if from.iter().chain(&to).any(|v| !v.is_finite()) {
        return Err(Error::param("a line profile's ends must be finite numbers"));
    }
    let clamp = |p: [f64; 2]| {
        [
            p[0].clamp(0.0, (rows - 1) as f64),
            p[1].clamp(0.0, (cols - 1) as f64),
        ]
    };
    let (a, b) = (clamp(from), clamp(to));
    let length = (b[0] - a[0]).hypot(b[1] - a[1]);
    let steps = (length.ceil() as usize).clamp(1, MAX_SAMPLES - 1);
    let at = |r: usize, c: usize| values[r * cols + c];
    let mut out = LineProfile {
        distance_px: Vec::with_capacity(steps + 1),
        values: Vec::with_capacity(steps + 1),
    };
    for k in 0..=steps {
        let t = k as f64 / steps as f64;
        let (r, c) = (a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]));
        let (r0, c0) = (r.floor() as usize, c.floor() as usize);
        let (r1, c1) = ((r0 + 1).min(rows - 1), (c0 + 1).min(cols - 1));
        let (fr, fc) = (r - r0 as f64, c - c0 as f64);
        // Weights that are exactly zero leave their neighbour out (no 0 · NaN).
        let mix = |x: f64, y: f64, f: f64| match f {
            0.0 => x,
            _ => x * (1.0 - f) + y * f,
        };
        let top = mix(at(r0, c0), at(r0, c1), fc);
        let bottom = mix(at(r1, c0), at(r1, c1), fc);
        out.distance_px.push(t * length);
        out.values.push(mix(top, bottom, fr));
    }
    Ok(out)
}

/// The profile of the image `array` (the product `what`, named in errors) from `from` to
/// `to` as CSV: `distance_UNIT,value`, one sample a line, distances in `pixel`'s unit (else
/// `px`); an image of two planes (CoM, DPC) gives `value_row,value_col`.
pub fn csv(
    array: &ProductArray,
    from: [f64; 2],
    to: [f64; 2],
    pixel: Option<&PixelSize>,
    what: &str,
) -> Result<String> {
    let (planes, dims) = match array.shape[..] {
        [rows, cols] => (1, [rows, cols]),
        [2, rows, cols] => (2, [rows, cols]),
        _ => {
            return Err(Error::param(format!(
                "{what} has shape {:?}: a line profile runs across an image (rows x cols)",
                array.shape
            )))
        }
    };
    let values = array.data.to_f64();
    let n = dims[0] * dims[1];
    let profiles = (0..planes)
        .map(|k| sample(&values[k * n..(k + 1) * n], dims, from, to))
        .collect::<Result<Vec<_>>>()?;
    let (scale, units) = pixel.map_or((1.0, "px"), |p| (p.step, p.units.as_str()));
    let mut out = format!("distance_{units},");
    out.push_str(if planes == 2 {
        "value_row,value_col\n"
    } else {
        "value\n"
    });
    for (i, d) in profiles[0].distance_px.iter().enumerate() {
        out.push_str(&format!("{}", d * scale));
        for p in &profiles {
            out.push_str(&format!(",{}", p.values[i]));
        }
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 5 × 7 plane whose value is `10·r + c`: bilinear interpolation is exact on it.
    fn plane() -> Vec<f64> {
        (0..35).map(|k| (10 * (k / 7) + k % 7) as f64).collect()
    }

    #[test]
    fn a_row_through_pixel_centres_samples_the_values() {
        let p = sample(&plane(), [5, 7], [2.0, 0.0], [2.0, 6.0]).unwrap();
        assert_eq!(p.values, vec![20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0]);
        assert_eq!(p.distance_px, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }

    #[test]
    fn a_diagonal_interpolates_and_ends_are_clamped() {
        let p = sample(&plane(), [5, 7], [-3.0, -1.0], [4.0, 3.0]).unwrap();
        // Clamped to (0, 0) … (4, 3): length 5, six samples on the plane's linear values.
        assert_eq!(p.values.len(), 6);
        for (k, v) in p.values.iter().enumerate() {
            let t = k as f64 / 5.0;
            assert!((v - (10.0 * 4.0 * t + 3.0 * t)).abs() < 1e-12, "{k}: {v}");
        }
        assert!((p.distance_px[5] - 5.0).abs() < 1e-12);
    }

    #[test]
    fn a_point_and_bad_input() {
        let p = sample(&plane(), [5, 7], [1.0, 1.0], [1.0, 1.0]).unwrap();
        assert_eq!(p.values, vec![11.0, 11.0]);
        assert!(sample(&plane(), [5, 7], [f64::NAN, 0.0], [1.0, 1.0]).is_err());
        assert!(sample(&plane(), [5, 6], [0.0, 0.0], [1.0, 1.0]).is_err());
    }
}
