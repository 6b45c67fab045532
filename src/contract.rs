//! The scientific contract, GPU-free: dtypes, shapes, detector masks, binning and the DPC
//! conventions. Every backend (CPU reference, WGSL, CUDA) takes its definitions from here;
//! `docs/CONTRACT.md` states the rules and where this project refines them.

use serde::Serialize;

use crate::error::{Error, Result};

/// Source sample type of an acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    #[serde(rename = "uint8")]
    U8,
    #[serde(rename = "uint16")]
    U16,
    #[serde(rename = "uint32")]
    U32,
    #[serde(rename = "float32")]
    F32,
}

impl Dtype {
    pub fn size(self) -> usize {
        match self {
            Dtype::U8 => 1,
            Dtype::U16 => 2,
            Dtype::U32 | Dtype::F32 => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dtype::U8 => "uint8",
            Dtype::U16 => "uint16",
            Dtype::U32 => "uint32",
            Dtype::F32 => "float32",
        }
    }

    pub fn is_float(self) -> bool {
        self == Dtype::F32
    }

    /// Dectris saturation / dead-pixel sentinel `2^bits − 1`; floats have none (C-BAD).
    pub fn sentinel(self) -> Option<u32> {
        match self {
            Dtype::U8 => Some(u8::MAX as u32),
            Dtype::U16 => Some(u16::MAX as u32),
            Dtype::U32 => Some(u32::MAX),
            Dtype::F32 => None,
        }
    }
}

/// The pixels set in a boolean detector mask (row-major indices): a file's bad pixels, the
/// hot and dead pixels found, as the zeroing kernel and a prepared file's description take
/// them.
pub fn mask_pixels(mask: &[bool]) -> Vec<u32> {
    (0..mask.len())
        .filter(|&k| mask[k])
        .map(|k| k as u32)
        .collect()
}

/// Logical shape `I[Rr, Rc, Kr, Kc]`, (row, col) on both grids (C-AXES).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shape4 {
    pub scan: [usize; 2],
    pub det: [usize; 2],
}

impl Shape4 {
    pub fn frames(&self) -> usize {
        self.scan[0] * self.scan[1]
    }
    pub fn det_len(&self) -> usize {
        self.det[0] * self.det[1]
    }
    pub fn as_array(&self) -> [usize; 4] {
        [self.scan[0], self.scan[1], self.det[0], self.det[1]]
    }
    /// Detector shape after a count-preserving bin by `b` (partial edge blocks kept: C-BIN).
    pub fn binned(&self, b: usize) -> Shape4 {
        Shape4 {
            scan: self.scan,
            det: [self.det[0].div_ceil(b), self.det[1].div_ceil(b)],
        }
    }
}

/// Half-open region `[r0, r1) × [c0, c1)` (C-AXES).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Region {
    pub r0: usize,
    pub r1: usize,
    pub c0: usize,
    pub c1: usize,
}

impl Region {
    pub fn full(shape: [usize; 2]) -> Self {
        Region {
            r0: 0,
            r1: shape[0],
            c0: 0,
            c1: shape[1],
        }
    }

    /// Check that the region is non-empty and inside `shape`; `what` names it in the error.
    pub fn checked(self, shape: [usize; 2], what: &str) -> Result<Self> {
        if self.r0 >= self.r1 || self.c0 >= self.c1 || self.r1 > shape[0] || self.c1 > shape[1] {
            return Err(Error::param(format!(
                "{what} [{}, {}) x [{}, {}) is empty or outside the {} x {} grid",
                self.r0, self.r1, self.c0, self.c1, shape[0], shape[1]
            )));
        }
        Ok(self)
    }

    pub fn contains(&self, r: usize, c: usize) -> bool {
        r >= self.r0 && r < self.r1 && c >= self.c0 && c < self.c1
    }

    pub fn len(&self) -> usize {
        (self.r1 - self.r0) * (self.c1 - self.c0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The scan positions a reduced pattern covers: a half-open rectangle (the CLI's `--scan-roi`)
/// or a disk drawn in the viewer, `(r − cr)² + (c − cc)² ≤ radius²` on position indices.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScanRoi {
    Rect(Region),
    Circle { center: [f64; 2], radius: f64 },
}

impl ScanRoi {
    /// Columns `[c0, c1)` of each scan row inside the ROI (empty rows give `[0, 0)`): the
    /// kernel's exact membership test, decided here in float64.
    pub fn row_intervals(&self, scan: [usize; 2]) -> Vec<[u32; 2]> {
        (0..scan[0])
            .map(|r| match *self {
                ScanRoi::Rect(g) if (g.r0..g.r1).contains(&r) => {
                    [g.c0.min(scan[1]) as u32, g.c1.min(scan[1]) as u32]
                }
                ScanRoi::Rect(_) => [0, 0],
                ScanRoi::Circle { center, radius } => {
                    let dr = r as f64 - center[0];
                    let inside = |c: usize| {
                        let dc = c as f64 - center[1];
                        dr * dr + dc * dc <= radius * radius
                    };
                    let cols: Vec<usize> = (0..scan[1]).filter(|&c| inside(c)).collect();
                    match (cols.first(), cols.last()) {
                        (Some(&a), Some(&b)) => [a as u32, b as u32 + 1],
                        _ => [0, 0],
                    }
                }
            })
            .collect()
    }

    /// Positions inside.
    pub fn count(&self, scan: [usize; 2]) -> usize {
        self.row_intervals(scan)
            .iter()
            .map(|[a, b]| (b - a) as usize)
            .sum()
    }

    pub fn validate(&self, scan: [usize; 2]) -> Result<()> {
        match *self {
            ScanRoi::Rect(g) => g.checked(scan, "scan ROI").map(|_| ()),
            ScanRoi::Circle { center, radius } => {
                if !(center[0].is_finite()
                    && center[1].is_finite()
                    && radius.is_finite()
                    && radius >= 0.0)
                {
                    return Err(Error::param(
                        "a circular scan ROI needs a finite centre and radius",
                    ));
                }
                if self.count(scan) == 0 {
                    return Err(Error::param(format!(
                        "the circular scan ROI at ({}, {}) r={radius} holds no position of the {}x{} scan",
                        center[0], center[1], scan[0], scan[1]
                    )));
                }
                Ok(())
            }
        }
    }
}

/// The largest |centre| or radius of a geometric mask, in detector pixels: 2^24, the most
/// pixels a detector side can have here, and far from where a squared distance loses
/// integer exactness or overflows.
pub const GEOMETRY_LIMIT_PX: f64 = 16_777_216.0;

/// A detector mask. Geometric masks follow the contract's edge rules exactly (C-MASK):
/// disk `d² ≤ r²`, annulus `ri² < d² ≤ ro²`, rectangle half-open.
#[derive(Clone, Debug, PartialEq)]
pub enum DetectorMask {
    Disk {
        center: [f64; 2],
        radius: f64,
    },
    Annulus {
        center: [f64; 2],
        inner: f64,
        outer: f64,
    },
    Rect(Region),
    Point {
        r: usize,
        c: usize,
    },
    /// Boolean mask over the detector, row-major.
    Bool(Vec<bool>),
    /// Weighted mask over the detector, row-major; sums become float64.
    Weighted(Vec<f64>),
}

/// A mask reduced to the detector pixels it selects: the sparse list every kernel walks.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseMask {
    pub indices: Vec<u32>,
    /// `None` for 0/1 masks (exact integer sums); weights for weighted masks.
    pub weights: Option<Vec<f64>>,
}

impl SparseMask {
    /// Every detector pixel: the per-position total that DF and the cached total use (C-MASK).
    pub fn all(det: [usize; 2]) -> SparseMask {
        SparseMask {
            indices: (0..(det[0] * det[1]) as u32).collect(),
            weights: None,
        }
    }
}

impl DetectorMask {
    fn dist2(center: [f64; 2], i: usize, j: usize) -> f64 {
        let dr = i as f64 - center[0];
        let dc = j as f64 - center[1];
        dr * dr + dc * dc
    }

    pub fn validate(&self, det: [usize; 2]) -> Result<()> {
        // Centres and radii far past any detector would square past f64's range (d² = ∞
        // ≤ r² = ∞ takes every pixel): refused, so no geometry is decided by an overflow.
        let finite = |v: f64, what: &str| {
            if !v.is_finite() {
                Err(Error::param(format!("{what} must be a finite number")))
            } else if v.abs() > GEOMETRY_LIMIT_PX {
                Err(Error::param(format!(
                    "{what} {v} is past what a detector holds (at most ±{GEOMETRY_LIMIT_PX} pixels)"
                )))
            } else {
                Ok(())
            }
        };
        match self {
            DetectorMask::Disk { center, radius } => {
                finite(center[0], "center row")?;
                finite(center[1], "center col")?;
                finite(*radius, "radius")?;
                if *radius < 0.0 {
                    return Err(Error::param("radius must be >= 0"));
                }
            }
            DetectorMask::Annulus {
                center,
                inner,
                outer,
            } => {
                finite(center[0], "center row")?;
                finite(center[1], "center col")?;
                finite(*inner, "inner radius")?;
                finite(*outer, "outer radius")?;
                if *inner < 0.0 || outer < inner {
                    return Err(Error::param(format!(
                        "annulus needs 0 <= inner <= outer (got inner {inner}, outer {outer})"
                    )));
                }
            }
            DetectorMask::Rect(r) => {
                r.checked(det, "detector rectangle")?;
            }
            DetectorMask::Point { r, c } => {
                if *r >= det[0] || *c >= det[1] {
                    return Err(Error::param(format!(
                        "detector point ({r}, {c}) is outside the {} x {} detector",
                        det[0], det[1]
                    )));
                }
            }
            DetectorMask::Bool(m) => check_mask_len(m.len(), det)?,
            DetectorMask::Weighted(w) => {
                check_mask_len(w.len(), det)?;
                if w.iter().any(|v| !v.is_finite()) {
                    return Err(Error::param("mask weights must be finite"));
                }
            }
        }
        Ok(())
    }

    /// Weight of detector pixel (i, j): 0 or 1 for geometric and boolean masks.
    pub fn weight(&self, det: [usize; 2], i: usize, j: usize) -> f64 {
        // C-MASK: the membership test every backend's pixel list comes from.
        let inside = match self {
            DetectorMask::Disk { center, radius } => Self::dist2(*center, i, j) <= radius * radius,
            DetectorMask::Annulus {
                center,
                inner,
                outer,
            } => {
                let d2 = Self::dist2(*center, i, j);
                inner * inner < d2 && d2 <= outer * outer
            }
            DetectorMask::Rect(r) => r.contains(i, j),
            DetectorMask::Point { r, c } => *r == i && *c == j,
            DetectorMask::Bool(m) => m[i * det[1] + j],
            DetectorMask::Weighted(w) => return w[i * det[1] + j],
        };
        if inside {
            1.0
        } else {
            0.0
        }
    }

    pub fn is_weighted(&self) -> bool {
        matches!(self, DetectorMask::Weighted(_))
    }

    pub fn sparse(&self, det: [usize; 2]) -> SparseMask {
        let mut indices = Vec::new();
        let mut weights = Vec::new();
        for i in 0..det[0] {
            for j in 0..det[1] {
                let w = self.weight(det, i, j);
                if w != 0.0 {
                    indices.push((i * det[1] + j) as u32);
                    weights.push(w);
                }
            }
        }
        SparseMask {
            indices,
            weights: self.is_weighted().then_some(weights),
        }
    }
}

fn check_mask_len(len: usize, det: [usize; 2]) -> Result<()> {
    if len != det[0] * det[1] {
        return Err(Error::param(format!(
            "mask has {len} pixels but the detector has {} x {} = {}",
            det[0],
            det[1],
            det[0] * det[1]
        )));
    }
    Ok(())
}

/// DPC convention (C-DPC): the component swap ("flip") comes first, then the rotation by θ:
/// `g_r = cosθ·d_r − sinθ·d_c`, `g_c = sinθ·d_r + cosθ·d_c`.
pub fn rotate_flip(d: [f64; 2], rotation_deg: f64, flip: bool) -> [f64; 2] {
    let [dr, dc] = if flip { [d[1], d[0]] } else { d };
    let (s, c) = rotation_deg.to_radians().sin_cos();
    [c * dr - s * dc, s * dr + c * dc]
}

/// DPC magnitude and direction of one position's DPC vector `[g_r, g_c]` (after flip and
/// rotation): `|g| = sqrt(g_r² + g_c²)` in detector pixels, and the angle `atan2(g_c, g_r)`
/// in radians, in (−π, π]: 0 along +row, +π/2 along +col. A zero vector has angle 0
/// (C-DPC-POLAR).
pub fn dpc_polar(g: [f64; 2]) -> [f64; 2] {
    let magnitude = g[0].hypot(g[1]);
    if magnitude == 0.0 {
        return [0.0, 0.0];
    }
    [magnitude, g[1].atan2(g[0])]
}

/// numpy's `fftfreq(n)` (unit sample spacing): iDPC's `ν` per scan axis (C-IDPC).
pub fn fftfreq(n: usize) -> Vec<f64> {
    let half = n.div_ceil(2);
    (0..n)
        .map(|k| {
            let k = if k < half {
                k as f64
            } else {
                k as f64 - n as f64
            };
            k / n as f64
        })
        .collect()
}

/// Resident payload in bytes: `B = Rr·Rc·ceil(Kr/b)·ceil(Kc/b)·w` (C-MEM).
pub fn resident_payload_bytes(shape: Shape4, bin: usize, bytes_per_value: usize) -> u64 {
    let b = shape.binned(bin.max(1));
    (b.frames() as u64) * (b.det_len() as u64) * bytes_per_value as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_edge_is_inclusive_and_annulus_inner_exclusive() {
        let det = [9, 9];
        let disk = DetectorMask::Disk {
            center: [4.0, 4.0],
            radius: 2.0,
        };
        assert_eq!(disk.weight(det, 2, 4), 1.0);
        assert_eq!(disk.weight(det, 2, 3), 0.0);
        let ann = DetectorMask::Annulus {
            center: [4.0, 4.0],
            inner: 1.0,
            outer: 2.0,
        };
        assert_eq!(ann.weight(det, 3, 4), 0.0, "d = inner is excluded");
        assert_eq!(ann.weight(det, 2, 4), 1.0, "d = outer is included");
        assert_eq!(ann.weight(det, 4, 4), 0.0);
    }

    /// A disk far off the detector with a radius that would reach it only through an
    /// overflow (d² = ∞ ≤ r² = ∞) is refused, never taken as every pixel; sizes up to the
    /// limit still work.
    #[test]
    fn geometry_past_any_detector_is_refused() {
        let det = [13, 11];
        for m in [
            DetectorMask::Disk {
                center: [1e308, 1e308],
                radius: 1e308,
            },
            DetectorMask::Disk {
                center: [6.0, 5.0],
                radius: 2e7,
            },
            DetectorMask::Annulus {
                center: [-3e7, 5.0],
                inner: 0.0,
                outer: 1.0,
            },
        ] {
            let e = m.validate(det).unwrap_err().to_string();
            assert!(e.contains("past what a detector holds"), "{m:?}: {e}");
        }
        let big = DetectorMask::Disk {
            center: [6.0, 5.0],
            radius: GEOMETRY_LIMIT_PX,
        };
        big.validate(det).unwrap();
        assert_eq!(big.sparse(det).indices.len(), 13 * 11);
    }

    #[test]
    fn rect_is_half_open_and_validated() {
        let det = [5, 7];
        let m = DetectorMask::Rect(Region {
            r0: 1,
            r1: 3,
            c0: 0,
            c1: 7,
        });
        m.validate(det).unwrap();
        assert_eq!(m.sparse(det).indices.len(), 14);
        let bad = DetectorMask::Rect(Region {
            r0: 1,
            r1: 6,
            c0: 0,
            c1: 7,
        });
        assert!(bad.validate(det).is_err());
    }

    #[test]
    fn fftfreq_matches_numpy() {
        assert_eq!(fftfreq(4), vec![0.0, 0.25, -0.5, -0.25]);
        assert_eq!(fftfreq(5), vec![0.0, 0.2, 0.4, -0.4, -0.2]);
    }

    #[test]
    fn flip_comes_before_rotation() {
        let g = rotate_flip([1.0, 0.0], 90.0, true);
        // flip -> (0, 1); rotate 90° -> (-1, 0)
        assert!((g[0] + 1.0).abs() < 1e-15 && g[1].abs() < 1e-15);
    }

    #[test]
    fn dpc_direction_is_measured_from_plus_row_towards_plus_col() {
        let deg = |g: [f64; 2]| dpc_polar(g)[1].to_degrees();
        assert_eq!(dpc_polar([3.0, 4.0])[0], 5.0);
        assert_eq!(deg([1.0, 0.0]), 0.0);
        assert!((deg([0.0, 2.0]) - 90.0).abs() < 1e-12);
        assert!((deg([-1.0, 0.0]) - 180.0).abs() < 1e-12);
        assert!((deg([0.0, -1.0]) + 90.0).abs() < 1e-12);
        // A zero vector (either zero's sign) has no direction: angle 0, never ±π.
        assert_eq!(dpc_polar([-0.0, 0.0]), [0.0, 0.0]);
        assert_eq!(dpc_polar([0.0, -0.0]), [0.0, 0.0]);
    }

    #[test]
    fn payload_counts_partial_bins() {
        let s = Shape4 {
            scan: [2, 3],
            det: [5, 7],
        };
        assert_eq!(resident_payload_bytes(s, 2, 4), 6 * 3 * 4 * 4);
    }
}
