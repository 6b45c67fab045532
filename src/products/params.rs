//! One vocabulary for describing a product: the CLI's flags (`--center R,C`, clap) and the
//! page's JSON (`{"center": [r, c]}`, serde, camelCase) are derived from the same type, so
//! a field means the same everywhere. Errors name the field (`Error::ProductParam`), and
//! each shell says it its way: the CLI by its flag, the page by its key.
//!
//! The acquisition-level settings (detector bin, bad-pixel masking) are not part of a
//! product: they are a [`Correction`] of the whole acquisition, which a GPU resident is
//! uploaded with. A request from a shell carries both ([`ProductRequest`]) and the shell
//! hands them on separately.

use serde::Deserialize;

use crate::contract::{DetectorMask, Region, Shape4};
use crate::error::{Error, Result};
use crate::frames::Correction;
use crate::products::ProductKind;

/// Parameters of one product; those the kind does not use are ignored, except a mask
/// (refused by the CLI with a kind that takes none).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[cfg_attr(not(target_arch = "wasm32"), derive(clap::Args))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProductParams {
    /// What to compute (`sum-dp`, `bf`, `idpc`, …; docs/CONTRACT.md).
    #[serde(deserialize_with = "wire::kind")]
    #[cfg_attr(
        not(target_arch = "wasm32"),
        arg(long, value_parser = super::flags::kind)
    )]
    pub kind: ProductKind,
    /// Detector centre (row, col) of a disk or annulus, in detector pixels.
    #[serde(default, deserialize_with = "wire::finite_pair")]
    #[cfg_attr(
        not(target_arch = "wasm32"),
        arg(long, value_name = "R,C", allow_hyphen_values = true, value_parser = super::flags::list::<f64, 2>)
    )]
    pub center: Option<[f64; 2]>,
    /// Disk radius in detector pixels (bf, df).
    #[serde(default, deserialize_with = "wire::finite")]
    #[cfg_attr(not(target_arch = "wasm32"), arg(long))]
    pub radius: Option<f64>,
    /// Annulus inner radius in detector pixels (adf; excluded).
    #[serde(default, deserialize_with = "wire::finite")]
    #[cfg_attr(not(target_arch = "wasm32"), arg(long))]
    pub inner: Option<f64>,
    /// Annulus outer radius in detector pixels (adf; included).
    #[serde(default, deserialize_with = "wire::finite")]
    #[cfg_attr(not(target_arch = "wasm32"), arg(long))]
    pub outer: Option<f64>,
    /// Detector rectangle, half-open (rect).
    #[serde(default, deserialize_with = "wire::region")]
    #[cfg_attr(
        not(target_arch = "wasm32"),
        arg(long, value_name = "R0,R1,C0,C1", value_parser = super::flags::region)
    )]
    pub rect: Option<Region>,
    /// Detector mask of `mask` products: booleans select pixels, numbers weight them. The
    /// CLI reads it from a file (`--mask MASK.npy`); the page passes it as an array.
    #[serde(default, deserialize_with = "wire::mask")]
    #[cfg_attr(not(target_arch = "wasm32"), arg(skip))]
    pub mask: Option<DetectorMask>,
    /// Scan positions to keep, half-open (sum-dp, mean-dp, max-dp).
    #[serde(default, deserialize_with = "wire::region")]
    #[cfg_attr(
        not(target_arch = "wasm32"),
        arg(long, value_name = "R0,R1,C0,C1", value_parser = super::flags::region)
    )]
    pub scan_roi: Option<Region>,
    /// Scan position (row, col) of a `pattern` product.
    #[serde(default, deserialize_with = "wire::index_pair")]
    #[cfg_attr(
        not(target_arch = "wasm32"),
        arg(long, value_name = "R,C", value_parser = super::flags::list::<usize, 2>)
    )]
    pub at: Option<[usize; 2]>,
    /// Rotation of the detector axes against the scan axes, in degrees (dpc, idpc).
    #[serde(default, deserialize_with = "wire::rotation")]
    #[cfg_attr(
        not(target_arch = "wasm32"),
        arg(long, default_value_t = 0.0, allow_hyphen_values = true)
    )]
    pub rotation: f64,
    /// Flip the detector's column axis before the rotation (dpc, idpc).
    #[serde(default, deserialize_with = "wire::boolean")]
    #[cfg_attr(not(target_arch = "wasm32"), arg(long))]
    pub flip: bool,
}

/// A product as a shell asks for it: the product and the acquisition-level correction it is
/// computed on (`bin`, `maskBadPixels` beside the product's keys in the page's JSON).
#[derive(Clone, Debug, PartialEq)]
pub struct ProductRequest {
    pub params: ProductParams,
    pub correction: Correction,
}

/// Every key of the page's product JSON, in the order the message about an unknown one
/// lists them.
const KEYS: [&str; 13] = [
    "kind",
    "center",
    "radius",
    "inner",
    "outer",
    "rect",
    "scanRoi",
    "at",
    "bin",
    "maskBadPixels",
    "rotation",
    "flip",
    "mask",
];

impl ProductRequest {
    /// Parameters as the browser API takes them (`stem4d.product(params)`): the CLI's flags
    /// in camelCase JSON. Unknown keys are refused so a typo never silently means "default".
    pub fn from_json(v: &serde_json::Value) -> Result<Self> {
        let Some(obj) = v.as_object() else {
            return Err(Error::param("product parameters must be an object"));
        };
        let (corr, params): (serde_json::Map<_, _>, serde_json::Map<_, _>) = obj
            .clone()
            .into_iter()
            .partition(|(k, _)| Correction::KEYS.contains(&k.as_str()));
        Ok(ProductRequest {
            params: from_map(params)?,
            correction: from_map(corr)?,
        })
    }
}

/// A serde type from one JSON object, its errors naming the field.
fn from_map<T: serde::de::DeserializeOwned>(
    m: serde_json::Map<String, serde_json::Value>,
) -> Result<T> {
    let v = serde_json::Value::Object(m);
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if let Some(rest) = inner.strip_prefix("unknown field `") {
            let name = rest.split('`').next().unwrap_or(rest);
            return Error::param(format!(
                "unknown product parameter '{name}' ({})",
                KEYS.join(", ")
            ));
        }
        if inner.starts_with("missing field `kind`") {
            return Error::product_param("kind", "product parameters need a 'kind' string");
        }
        if inner.starts_with("unknown product kind") {
            return Error::product_param("kind", inner);
        }
        match field_name(&path) {
            Some(field) => Error::product_param(field, format!("'{field}' {}", plain(&inner))),
            None => Error::param(format!("product parameters: {inner}")),
        }
    })
}

/// serde's "invalid type: integer `1`, expected a boolean" as "must be true or false (not
/// integer `1`)"; the wire's own messages ("must be …") pass unchanged.
fn plain(message: &str) -> String {
    let said = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        .and_then(|rest| rest.split_once(", expected "));
    match said {
        Some((got, want)) => {
            let want = match want {
                "usize" => "a non-negative integer",
                "a boolean" => "true or false",
                w => w,
            };
            format!("must be {want} (not {got})")
        }
        None => message.to_string(),
    }
}

/// The static name of a product field (errors carry `&'static str`).
fn field_name(path: &str) -> Option<&'static str> {
    KEYS.into_iter().find(|f| *f == path)
}

impl ProductParams {
    /// The scan positions a pattern reduction (sum, mean, max pattern, BF fit) sums over on
    /// a scan of `scan`: the scan ROI asked for, the whole scan for the BF fit.
    pub fn reduction_roi(&self, scan: [usize; 2]) -> Region {
        match self.kind {
            ProductKind::FitBf => Region::full(scan),
            _ => self.scan_roi.unwrap_or(Region::full(scan)),
        }
    }

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
            rotation: 0.0,
            flip: false,
        }
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
            // dpc-rotation: the annulus of the dark-field image that decides the 180° branch.
            ProductKind::Adf | ProductKind::DpcRotation => DetectorMask::Annulus {
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

    /// The annular dark-field image a `dpc-rotation` takes its 180° branch from: its own
    /// centre and radii as an `adf` product.
    pub fn dark_field(&self) -> ProductParams {
        ProductParams {
            center: self.center,
            inner: self.inner,
            outer: self.outer,
            ..ProductParams::new(ProductKind::Adf)
        }
    }

    /// Whether this product can be computed on `shape` with `corr`: the correction's own
    /// checks, then the product's geometry on the binned detector.
    pub fn validate(&self, shape: Shape4, corr: Correction) -> Result<()> {
        corr.validate(shape)?;
        if !self.rotation.is_finite() {
            return Err(Error::product_param(
                "rotation",
                "'rotation' must be finite",
            ));
        }
        let det = shape.binned(corr.bin).det;
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
            ProductKind::DpcRotation => {
                self.detector_mask(det)?;
                crate::products::dpc_rotation::check_scan(shape.scan)?;
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

/// The page's JSON values, each refused with what it must be (the field is named by
/// [`from_map`]). `null` means "not given", as an absent key does. The session's view state
/// reads its detector fields with these too.
pub(crate) mod wire {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer};
    use serde_json::Value;

    use crate::contract::{DetectorMask, Region};
    use crate::products::ProductKind;

    fn given<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        Option::<Value>::deserialize(d)
    }

    fn number(x: &Value) -> Result<f64, &'static str> {
        x.as_f64()
            .filter(|f| f.is_finite())
            .ok_or("must be a finite number")
    }

    fn index(x: &Value) -> Result<usize, &'static str> {
        x.as_u64()
            .and_then(|u| usize::try_from(u).ok())
            .ok_or("must hold non-negative integers")
    }

    fn list<const N: usize, T>(
        x: &Value,
        each: fn(&Value) -> Result<T, &'static str>,
    ) -> Result<[T; N], String> {
        let bad = || format!("must be an array of {N} numbers");
        let a = x.as_array().filter(|a| a.len() == N).ok_or_else(bad)?;
        let v = a
            .iter()
            .map(each)
            .collect::<Result<Vec<T>, _>>()
            .map_err(String::from)?;
        v.try_into().map_err(|_| bad())
    }

    fn map<'de, D: Deserializer<'de>, T, E: std::fmt::Display>(
        d: D,
        f: impl Fn(&Value) -> Result<T, E>,
    ) -> Result<Option<T>, D::Error> {
        given(d)?
            .map(|v| f(&v).map_err(D::Error::custom))
            .transpose()
    }

    pub fn kind<'de, D: Deserializer<'de>>(d: D) -> Result<ProductKind, D::Error> {
        let v = Value::deserialize(d)?;
        let s = v
            .as_str()
            .ok_or_else(|| D::Error::custom("must be a product kind's name (a string)"))?;
        ProductKind::parse(s).map_err(D::Error::custom)
    }

    pub fn finite<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        map(d, number)
    }

    pub fn rotation<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(finite(d)?.unwrap_or(0.0))
    }

    pub fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        Ok(map(d, |v| v.as_bool().ok_or("must be true or false"))?.unwrap_or(false))
    }

    pub fn finite_pair<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[f64; 2]>, D::Error> {
        map(d, |v| list::<2, _>(v, number))
    }

    pub fn index_pair<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[usize; 2]>, D::Error> {
        map(d, |v| list::<2, _>(v, index))
    }

    pub fn region<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Region>, D::Error> {
        map(d, |v| {
            list::<4, _>(v, index).map(|[r0, r1, c0, c1]| Region { r0, r1, c0, c1 })
        })
    }

    /// A detector mask, flat or nested row-major: booleans select pixels (exact integer
    /// sums, like a uint8 `.npy`), numbers weight them (float64 sums).
    pub fn mask<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DetectorMask>, D::Error> {
        fn flatten<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
            match v.as_array() {
                Some(a) => a.iter().for_each(|x| flatten(x, out)),
                None => out.push(v),
            }
        }
        map(d, |v| {
            let mut flat = Vec::new();
            flatten(v, &mut flat);
            if flat.iter().all(|x| x.is_boolean()) {
                return Ok(DetectorMask::Bool(
                    flat.iter().map(|x| x.as_bool() == Some(true)).collect(),
                ));
            }
            flat.iter()
                .map(|x| x.as_f64().filter(|f| f.is_finite()))
                .collect::<Option<Vec<f64>>>()
                .map(DetectorMask::Weighted)
                .ok_or("must hold only booleans or only finite numbers")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn browser_parameters_mean_what_the_cli_flags_mean() {
        let r = ProductRequest::from_json(&json!({
            "kind": "adf", "center": [10.5, 11], "inner": 3, "outer": 9.5,
            "scanRoi": [0, 4, 1, 5], "bin": 2, "maskBadPixels": true,
            "rotation": -12.5, "flip": true, "at": null
        }))
        .unwrap();
        let p = &r.params;
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
        assert_eq!((p.rotation, p.flip, p.at), (-12.5, true, None));
        assert_eq!(
            r.correction,
            Correction {
                bin: 2,
                mask_bad_pixels: true
            }
        );
        let plain = ProductRequest::from_json(&json!({"kind": "total"})).unwrap();
        assert_eq!(plain.params, ProductParams::new(ProductKind::Total));
        assert_eq!(plain.correction, Correction::default());
        let m = ProductRequest::from_json(
            &json!({"kind": "mask", "mask": [[true, false], [false, true]]}),
        )
        .unwrap();
        assert_eq!(
            m.params.mask,
            Some(DetectorMask::Bool(vec![true, false, false, true]))
        );
        let w =
            ProductRequest::from_json(&json!({"kind": "mask", "mask": [0.5, 1, 0, 2]})).unwrap();
        assert_eq!(
            w.params.mask,
            Some(DetectorMask::Weighted(vec![0.5, 1.0, 0.0, 2.0]))
        );
    }

    #[test]
    fn malformed_browser_parameters_are_named() {
        for (v, field, want) in [
            (
                json!({"kind": "bf", "radius": "3"}),
                Some("radius"),
                "'radius' must be a finite number",
            ),
            (
                json!({"kind": "bf", "centre": [1, 2]}),
                None,
                "unknown product parameter 'centre'",
            ),
            (
                json!({"kind": "bf", "bim": 2}),
                None,
                "unknown product parameter 'bim'",
            ),
            (
                json!({"kind": "bf", "center": [1]}),
                Some("center"),
                "'center' must be an array of 2",
            ),
            (
                json!({"kind": "pattern", "at": [-1, 2]}),
                Some("at"),
                "'at' must hold non-negative",
            ),
            (
                json!({"kind": "nope"}),
                Some("kind"),
                "unknown product kind 'nope' (one of",
            ),
            (json!({"kind": 3}), Some("kind"), "'kind'"),
            (json!({"radius": 3}), Some("kind"), "'kind'"),
            (json!([1, 2]), None, "object"),
            (
                json!({"kind": "mask", "mask": [true, 1]}),
                Some("mask"),
                "'mask' must hold only",
            ),
            (
                json!({"kind": "bf", "bin": 1.5}),
                Some("bin"),
                "'bin' must be a non-negative integer",
            ),
            (
                json!({"kind": "bf", "maskBadPixels": 1}),
                Some("maskBadPixels"),
                "'maskBadPixels' must be true or false (not integer `1`)",
            ),
            (
                json!({"kind": "bf", "flip": "yes"}),
                Some("flip"),
                "'flip' must be true or false",
            ),
        ] {
            let e = ProductRequest::from_json(&v).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(want), "{v}: {text}");
            let named = match &e {
                Error::ProductParam { field, .. } => Some(*field),
                _ => None,
            };
            assert_eq!(named, field, "{v}: {text}");
        }
    }
}
