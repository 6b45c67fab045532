//! Products stage: what a user can ask for, with the same names and meanings on every
//! backend and in the CLI (`stem4d product --kind KIND ...`) and the page (`stem4d.product`).

pub mod gpu;
pub mod gpu_float;
pub mod host_exact;
pub mod judge;
pub mod npy;

use serde::Serialize;

use crate::contract::{DetectorMask, Dtype, Region, Shape4};
use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProductKind {
    SumDp,
    MeanDp,
    MaxDp,
    Total,
    Bf,
    Adf,
    Df,
    Rect,
    Mask,
    Com,
    Dpc,
    Idpc,
    Binned,
    Pattern,
    FitBf,
}

impl ProductKind {
    pub const ALL: [ProductKind; 15] = [
        ProductKind::SumDp,
        ProductKind::MeanDp,
        ProductKind::MaxDp,
        ProductKind::Total,
        ProductKind::Bf,
        ProductKind::Adf,
        ProductKind::Df,
        ProductKind::Rect,
        ProductKind::Mask,
        ProductKind::Com,
        ProductKind::Dpc,
        ProductKind::Idpc,
        ProductKind::Binned,
        ProductKind::Pattern,
        ProductKind::FitBf,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProductKind::SumDp => "sum-dp",
            ProductKind::MeanDp => "mean-dp",
            ProductKind::MaxDp => "max-dp",
            ProductKind::Total => "total",
            ProductKind::Bf => "bf",
            ProductKind::Adf => "adf",
            ProductKind::Df => "df",
            ProductKind::Rect => "rect",
            ProductKind::Mask => "mask",
            ProductKind::Com => "com",
            ProductKind::Dpc => "dpc",
            ProductKind::Idpc => "idpc",
            ProductKind::Binned => "binned",
            ProductKind::Pattern => "pattern",
            ProductKind::FitBf => "fit-bf",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
                Error::param(format!(
                    "unknown product kind '{s}' (one of: {})",
                    names.join(" ")
                ))
            })
    }
}

/// Parameters of one product; unused ones are ignored.
#[derive(Clone, Debug, PartialEq)]
pub struct ProductParams {
    pub kind: ProductKind,
    pub center: Option<[f64; 2]>,
    pub radius: Option<f64>,
    pub inner: Option<f64>,
    pub outer: Option<f64>,
    pub rect: Option<Region>,
    pub mask: Option<DetectorMask>,
    pub scan_roi: Option<Region>,
    pub at: Option<[usize; 2]>,
    pub bin: usize,
    pub mask_bad_pixels: bool,
    pub rotation: f64,
    pub flip: bool,
}

impl ProductParams {
    pub fn new(kind: ProductKind) -> Self {
        ProductParams {
            kind,
            center: None,
            radius: None,
            inner: None,
            outer: None,
            rect: None,
            mask: None,
            scan_roi: None,
            at: None,
            bin: 1,
            mask_bad_pixels: false,
            rotation: 0.0,
            flip: false,
        }
    }

    /// Parameters as the browser API takes them (`stem4d.product(params)`): the CLI's flags
    /// in camelCase JSON. Unknown keys are refused so a typo never silently means "default".
    pub fn from_json(v: &serde_json::Value) -> Result<Self> {
        use serde_json::Value;
        let obj = v
            .as_object()
            .ok_or_else(|| Error::param("product parameters must be an object"))?;
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::param("product parameters need a 'kind' string"))?;
        let mut p = ProductParams::new(ProductKind::parse(kind)?);
        let num = |k: &str, x: &Value| {
            x.as_f64()
                .filter(|f| f.is_finite())
                .ok_or_else(|| Error::param(format!("'{k}' must be a finite number")))
        };
        let index = |k: &str, x: &Value| {
            x.as_u64()
                .map(|u| u as usize)
                .ok_or_else(|| Error::param(format!("'{k}' must hold non-negative integers")))
        };
        let list = |k: &str, x: &Value, n: usize| -> Result<Vec<Value>> {
            match x.as_array() {
                Some(a) if a.len() == n => Ok(a.clone()),
                _ => Err(Error::param(format!(
                    "'{k}' must be an array of {n} numbers"
                ))),
            }
        };
        let region = |k: &str, x: &Value| -> Result<Region> {
            let a = list(k, x, 4)?;
            Ok(Region {
                r0: index(k, &a[0])?,
                r1: index(k, &a[1])?,
                c0: index(k, &a[2])?,
                c1: index(k, &a[3])?,
            })
        };
        for (k, x) in obj {
            if x.is_null() {
                continue;
            }
            match k.as_str() {
                "kind" => {}
                "center" => {
                    let a = list(k, x, 2)?;
                    p.center = Some([num(k, &a[0])?, num(k, &a[1])?]);
                }
                "radius" => p.radius = Some(num(k, x)?),
                "inner" => p.inner = Some(num(k, x)?),
                "outer" => p.outer = Some(num(k, x)?),
                "rect" => p.rect = Some(region(k, x)?),
                "scanRoi" => p.scan_roi = Some(region(k, x)?),
                "at" => {
                    let a = list(k, x, 2)?;
                    p.at = Some([index(k, &a[0])?, index(k, &a[1])?]);
                }
                "bin" => p.bin = index(k, x)?,
                "maskBadPixels" => {
                    p.mask_bad_pixels = x
                        .as_bool()
                        .ok_or_else(|| Error::param("'maskBadPixels' must be true or false"))?
                }
                "rotation" => p.rotation = num(k, x)?,
                "flip" => {
                    p.flip = x
                        .as_bool()
                        .ok_or_else(|| Error::param("'flip' must be true or false"))?
                }
                "mask" => p.mask = Some(mask_from_json(x)?),
                other => {
                    return Err(Error::param(format!(
                        "unknown product parameter '{other}' (kind, center, radius, inner, outer, rect, scanRoi, at, bin, maskBadPixels, rotation, flip, mask)"
                    )))
                }
            }
        }
        Ok(p)
    }

    /// `v`, or an error naming the field `product '<kind>' needs '<field>'`.
    pub fn need<T: Copy>(v: Option<T>, field: &'static str, kind: ProductKind) -> Result<T> {
        v.ok_or_else(|| {
            Error::product_param(field, format!("product '{}' needs '{field}'", kind.name()))
        })
    }

    /// The detector mask of a virtual-image product, validated against the (binned) detector
    /// (C-BIN-COMPOSE: its geometry is in binned pixels).
    pub fn detector_mask(&self, det: [usize; 2]) -> Result<DetectorMask> {
        let k = self.kind;
        let m = match k {
            ProductKind::Bf | ProductKind::Df => DetectorMask::Disk {
                center: Self::need(self.center, "center", k)?,
                radius: Self::need(self.radius, "radius", k)?,
            },
            ProductKind::Adf => DetectorMask::Annulus {
                center: Self::need(self.center, "center", k)?,
                inner: Self::need(self.inner, "inner", k)?,
                outer: Self::need(self.outer, "outer", k)?,
            },
            ProductKind::Rect => DetectorMask::Rect(Self::need(self.rect, "rect", k)?),
            ProductKind::Mask => self
                .mask
                .clone()
                .ok_or_else(|| Error::product_param("mask", "product 'mask' needs 'mask'"))?,
            _ => {
                return Err(Error::param(format!(
                    "product '{}' has no detector mask",
                    k.name()
                )))
            }
        };
        m.validate(det)?;
        Ok(m)
    }

    pub fn validate(&self, shape: Shape4) -> Result<()> {
        if self.bin == 0 {
            return Err(Error::product_param("bin", "'bin' must be >= 1"));
        }
        if self.bin > shape.det[0].max(shape.det[1]) {
            return Err(Error::product_param(
                "bin",
                format!(
                    "'bin' {} is larger than the {}x{} detector",
                    self.bin, shape.det[0], shape.det[1]
                ),
            ));
        }
        if !self.rotation.is_finite() {
            return Err(Error::product_param(
                "rotation",
                "'rotation' must be finite",
            ));
        }
        let det = shape.binned(self.bin).det;
        if let Some(roi) = self.scan_roi {
            roi.checked(shape.scan, "scan ROI")?;
        }
        match self.kind {
            ProductKind::Bf
            | ProductKind::Df
            | ProductKind::Adf
            | ProductKind::Rect
            | ProductKind::Mask => {
                self.detector_mask(det)?;
            }
            ProductKind::Pattern => {
                let [r, c] = Self::need(self.at, "at", self.kind)?;
                if r >= shape.scan[0] || c >= shape.scan[1] {
                    return Err(Error::product_param(
                        "at",
                        format!(
                            "'at' {r},{c} is outside the {}x{} scan",
                            shape.scan[0], shape.scan[1]
                        ),
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// A product's values, in the dtype the contract gives it (C-DTYPE).
#[derive(Clone, Debug, PartialEq)]
pub enum ArrayData {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl ArrayData {
    pub fn len(&self) -> usize {
        match self {
            ArrayData::U8(v) => v.len(),
            ArrayData::U16(v) => v.len(),
            ArrayData::U32(v) => v.len(),
            ArrayData::U64(v) => v.len(),
            ArrayData::F32(v) => v.len(),
            ArrayData::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dtype_name(&self) -> &'static str {
        match self {
            ArrayData::U8(_) => "uint8",
            ArrayData::U16(_) => "uint16",
            ArrayData::U32(_) => "uint32",
            ArrayData::U64(_) => "uint64",
            ArrayData::F32(_) => "float32",
            ArrayData::F64(_) => "float64",
        }
    }

    /// Values as f64 (comparisons and display only: u64 above 2^53 round).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            ArrayData::U8(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::U16(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::U32(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::U64(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            ArrayData::F64(v) => v.clone(),
        }
    }

    /// Narrow u32 samples back to the source dtype (max-dp and pattern keep it; C-DTYPE).
    pub fn from_samples_u32(v: Vec<u32>, dtype: Dtype, binned: bool) -> ArrayData {
        match (dtype, binned) {
            (Dtype::U8, false) => ArrayData::U8(v.into_iter().map(|x| x as u8).collect()),
            (Dtype::U16, false) => ArrayData::U16(v.into_iter().map(|x| x as u16).collect()),
            _ => ArrayData::U32(v),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ProductArray {
    pub shape: Vec<usize>,
    pub data: ArrayData,
}

/// A detector mask from JSON, flat or nested row-major: booleans select pixels (exact
/// integer sums, like a uint8 `.npy`), numbers weight them (float64 sums).
fn mask_from_json(v: &serde_json::Value) -> Result<DetectorMask> {
    fn flatten<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
        match v.as_array() {
            Some(a) => a.iter().for_each(|x| flatten(x, out)),
            None => out.push(v),
        }
    }
    let mut flat = Vec::new();
    flatten(v, &mut flat);
    if flat.iter().all(|x| x.is_boolean()) {
        return Ok(DetectorMask::Bool(
            flat.iter().map(|x| x.as_bool() == Some(true)).collect(),
        ));
    }
    flat.iter()
        .map(|x| {
            x.as_f64().filter(|f| f.is_finite()).ok_or_else(|| {
                Error::param("'mask' must hold only booleans or only finite numbers")
            })
        })
        .collect::<Result<Vec<f64>>>()
        .map(DetectorMask::Weighted)
}

#[cfg(test)]
mod json_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn browser_parameters_mean_what_the_cli_flags_mean() {
        let p = ProductParams::from_json(&json!({
            "kind": "adf", "center": [10.5, 11], "inner": 3, "outer": 9.5,
            "scanRoi": [0, 4, 1, 5], "bin": 2, "maskBadPixels": true,
            "rotation": -12.5, "flip": true, "at": null
        }))
        .unwrap();
        assert_eq!(p.kind, ProductKind::Adf);
        assert_eq!(p.center, Some([10.5, 11.0]));
        assert_eq!((p.inner, p.outer), (Some(3.0), Some(9.5)));
        assert_eq!(
            p.scan_roi,
            Some(Region {
                r0: 0,
                r1: 4,
                c0: 1,
                c1: 5
            })
        );
        assert_eq!(
            (p.bin, p.mask_bad_pixels, p.rotation, p.flip),
            (2, true, -12.5, true)
        );
        let m = ProductParams::from_json(
            &json!({"kind": "mask", "mask": [[true, false], [false, true]]}),
        )
        .unwrap();
        assert_eq!(
            m.mask,
            Some(DetectorMask::Bool(vec![true, false, false, true]))
        );
        let w = ProductParams::from_json(&json!({"kind": "mask", "mask": [0.5, 1, 0, 2]})).unwrap();
        assert_eq!(
            w.mask,
            Some(DetectorMask::Weighted(vec![0.5, 1.0, 0.0, 2.0]))
        );
    }

    #[test]
    fn malformed_browser_parameters_are_named() {
        for (v, want) in [
            (json!({"kind": "bf", "radius": "3"}), "'radius'"),
            (
                json!({"kind": "bf", "centre": [1, 2]}),
                "unknown product parameter 'centre'",
            ),
            (json!({"kind": "bf", "center": [1]}), "'center'"),
            (json!({"kind": "pattern", "at": [-1, 2]}), "'at'"),
            (json!({"kind": "nope"}), "nope"),
            (json!({"radius": 3}), "'kind'"),
            (json!([1, 2]), "object"),
            (json!({"kind": "mask", "mask": [true, 1]}), "'mask'"),
        ] {
            let e = ProductParams::from_json(&v).unwrap_err().to_string();
            assert!(e.contains(want), "{v}: {e}");
        }
    }
}
