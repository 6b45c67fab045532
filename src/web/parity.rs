//! The page's side of the parity matrix and the one judge (`parity`,
//! `products::judge`): `stem4d.parity()` runs the matrix on the open acquisition in this
//! Worker, `stem4d.judge(...)` judges any product against a reference the page holds. The
//! page's suite judges with these, never with bounds of its own.

use serde_json::json;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::future_to_promise;

use super::{js_err, Viewer};
use crate::products::judge::{judge as judge_cpu, judge_independent};
use crate::products::{ArrayData, ProductArray, ProductKind};

/// `{shape, dtype, data}` (as `stem4d.product` resolves, or a parsed `.npy`) as an array.
fn array_from_js(v: &JsValue, what: &str) -> Result<ProductArray, JsValue> {
    let field = |k: &str| js_sys::Reflect::get(v, &k.into());
    let bad = |m: &str| js_err(format!("{what}: {m}"));
    let shape = field("shape")?
        .dyn_into::<js_sys::Array>()
        .map_err(|_| bad("'shape' must be an array"))?
        .iter()
        .map(|d| {
            d.as_f64()
                .filter(|d| *d >= 0.0 && d.fract() == 0.0)
                .map(|d| d as usize)
                .ok_or_else(|| bad("'shape' must hold non-negative integers"))
        })
        .collect::<Result<Vec<usize>, JsValue>>()?;
    let dtype = field("dtype")?
        .as_string()
        .ok_or_else(|| bad("'dtype' must be a string"))?;
    let data = field("data")?;
    let typed = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(bad(&format!("'data' is not the typed array of {dtype}")))
        }
    };
    let data = match dtype.as_str() {
        "uint8" | "bool" => {
            typed(data.is_instance_of::<js_sys::Uint8Array>())?;
            ArrayData::U8(js_sys::Uint8Array::new(&data).to_vec())
        }
        "uint16" => {
            typed(data.is_instance_of::<js_sys::Uint16Array>())?;
            ArrayData::U16(js_sys::Uint16Array::new(&data).to_vec())
        }
        "uint32" => {
            typed(data.is_instance_of::<js_sys::Uint32Array>())?;
            ArrayData::U32(js_sys::Uint32Array::new(&data).to_vec())
        }
        "uint64" => {
            typed(data.is_instance_of::<js_sys::BigUint64Array>())?;
            ArrayData::U64(js_sys::BigUint64Array::new(&data).to_vec())
        }
        "float32" => {
            typed(data.is_instance_of::<js_sys::Float32Array>())?;
            ArrayData::F32(js_sys::Float32Array::new(&data).to_vec())
        }
        "float64" => {
            typed(data.is_instance_of::<js_sys::Float64Array>())?;
            ArrayData::F64(js_sys::Float64Array::new(&data).to_vec())
        }
        other => return Err(bad(&format!("unknown dtype '{other}'"))),
    };
    if shape.iter().product::<usize>() != data.len() {
        return Err(bad(&format!(
            "shape {shape:?} holds {} values, 'data' {}",
            shape.iter().product::<usize>(),
            data.len()
        )));
    }
    Ok(ProductArray { shape, data })
}

/// `stem4d.judge(kind, got, reference, against)`: `got` against `reference` under the
/// contract's bound for `kind`; `against` is `"cpu"` (our CPU reference: the bounds of
/// C-BOUND-INT … C-BOUND-IDPC) or `"independent"` (another float64 implementation, such as
/// numpy: C-BOUND-INDEPENDENT). Returns JSON `{pass, maxError, failure}`.
#[wasm_bindgen]
pub fn judge(
    kind: String,
    got: JsValue,
    reference: JsValue,
    against: String,
) -> Result<String, JsValue> {
    let kind = ProductKind::parse(&kind).map_err(js_err)?;
    let got = array_from_js(&got, "got")?;
    let reference = array_from_js(&reference, "reference")?;
    let verdict = match against.as_str() {
        "cpu" => judge_cpu(kind, &got, &reference),
        "independent" => judge_independent(kind, &got, &reference),
        other => {
            return Err(js_err(format!(
                "unknown reference '{other}' (cpu or independent)"
            )))
        }
    };
    Ok(json!({
        "pass": verdict.pass(),
        "maxError": verdict.max_error,
        "failure": verdict.failure,
    })
    .to_string())
}

#[wasm_bindgen]
impl Viewer {
    /// `stem4d.parity({maskBadPixels})`: the parity matrix of the open acquisition (each
    /// product on the CPU reference and on this WebGPU adapter, judged), as JSON rows. Its
    /// residents are its own, beside the one the page draws from.
    pub fn parity(&self, mask_bad_pixels: bool) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let rows = inner
                .with_session(async |s| {
                    let requests = crate::parity::matrix(&s.acq, mask_bad_pixels)?;
                    Ok::<_, crate::error::Error>(
                        crate::parity::run(Some(&inner.engine), "wgpu", &s.acq, &requests).await,
                    )
                })
                .await?
                .map_err(js_err)?;
            Ok(serde_json::to_string(&rows).map_err(js_err)?.into())
        })
    }
}
