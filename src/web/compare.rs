//! The compare grid in the Worker: other acquisitions opened beside the viewed one (each its
//! own session on the same GPU), their canvases, and what the page reads of them. `render`
//! draws them with the viewed session's view in the same submission (`canvas::draw`).

use super::*;
use open::{acquisition_of, opened_json, reporter};

/// Let the compare grid go: its sessions and their canvases.
pub(super) fn close(inner: &Inner) {
    if let Some(others) = inner.compared.borrow_mut().as_mut() {
        others.clear();
    }
    inner
        .canvases
        .borrow_mut()
        .retain(|(slot, _)| matches!(slot, Slot::Panel(_)));
}

/// `f` on the compare grid's acquisition `k`, taken out for the call.
async fn with_compared<R>(
    inner: &Inner,
    k: u32,
    f: impl AsyncFnOnce(&mut Session) -> R,
) -> Result<R, JsValue> {
    let mut others = inner
        .compared
        .borrow_mut()
        .take()
        .ok_or_else(|| js_err("another call is still running"))?;
    let r = match others.get_mut(k as usize) {
        Some(s) => Ok(f(s).await),
        None => Err(js_err(format!(
            "the compare grid has no acquisition {k} (it holds {})",
            others.len()
        ))),
    };
    *inner.compared.borrow_mut() = Some(others);
    r
}

#[wasm_bindgen]
impl Viewer {
    /// Open `files` (File objects) as one more acquisition of the compare grid, beside the
    /// viewed one, with `options` JSON (as `open`; the viewed one's bin and masking apply). One whose
    /// detector differs from the viewed one's is refused by name before anything is
    /// uploaded. Resolves to JSON `{index, info, profile, bfFit, bfFitWarning}`.
    #[wasm_bindgen(js_name = openCompared)]
    pub fn open_compared(
        &self,
        files: js_sys::Array,
        options: String,
        progress: js_sys::Function,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let t0 = now_ms();
            let req: OpenRequest =
                serde_json::from_str(&options).map_err(|e| js_err(format!("open options: {e}")))?;
            let (viewed_name, corr) = {
                let s = inner.session.borrow();
                let s = s
                    .as_ref()
                    .ok_or_else(|| js_err("open an acquisition before comparing others with it"))?;
                (s.acq.primary.clone(), s.correction())
            };
            let (acq, _) = acquisition_of(&inner, files, &req).await?;
            let other_name = acq.primary.clone();
            {
                let s = inner.session.borrow();
                let viewed = s.as_ref().ok_or_else(|| js_err("no acquisition is open"))?;
                crate::session::check_shared_detector(
                    &viewed_name,
                    &viewed.acq,
                    &other_name,
                    &acq,
                    corr.bin,
                )
                .map_err(js_err)?;
            }
            // The viewed one's correction, whatever a prepared file was saved with: one
            // detector is shared.
            let req = OpenRequest {
                bin: corr.bin,
                mask_bad_pixels: corr.mask_bad_pixels,
                saved_settings: false,
                ..req
            };
            let mut report = reporter(&progress);
            let session = Session::open_replacing(
                &inner.engine,
                acq,
                &req,
                now_ms() - t0,
                &mut report,
                &mut || {},
            )
            .await;
            inner.engine.release_set_aside();
            let session = session.map_err(js_err)?;
            let mut out = opened_json(&session);
            let mut others = inner
                .compared
                .borrow_mut()
                .take()
                .ok_or_else(|| js_err("another call is still running"))?;
            out["index"] = json!(others.len());
            others.push(session);
            *inner.compared.borrow_mut() = Some(others);
            Ok(out.to_string().into())
        })
    }

    /// Close the compare grid: its acquisitions and canvases are let go; the viewed one
    /// stays.
    #[wasm_bindgen(js_name = closeCompared)]
    pub fn close_compared(&self) {
        close(&self.inner);
    }

    /// Give the compare grid's acquisition `k` its canvases (as `attach` a panel's).
    #[wasm_bindgen(js_name = attachCompared)]
    pub fn attach_compared(
        &self,
        k: u32,
        canvas: web_sys::OffscreenCanvas,
        plain: web_sys::OffscreenCanvas,
    ) -> Result<(), JsValue> {
        attach_canvas(&self.inner, Slot::Compared(k as usize), canvas, plain)
    }

    /// The value at scan position (r, c) of the compare grid's acquisition `k`'s image (as
    /// `valueAt` of the image panel).
    #[wasm_bindgen(js_name = comparedValueAt)]
    pub fn compared_value_at(&self, k: u32, r: u32, c: u32) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let v = with_compared(&inner, k, async |s| {
                s.value_at(&inner.engine, Panel::Image, r as usize, c as usize)
                    .await
            })
            .await?
            .map_err(js_err)?;
            Ok(JsValue::from(v))
        })
    }

    /// The image statistics of the compare grid's acquisition `k` (as `stats('image')`).
    #[wasm_bindgen(js_name = comparedStats)]
    pub fn compared_stats(&self, k: u32) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let report = with_compared(&inner, k, async |s| {
                s.stats_report(&inner.engine, Panel::Image).await
            })
            .await?
            .map_err(js_err)?;
            json_of(&report, "stats")
        })
    }

    /// `.npy` bytes of the exact product the compare grid's acquisition `k` shows.
    #[wasm_bindgen(js_name = comparedNpy)]
    pub fn compared_npy(&self, k: u32) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let npy = with_compared(&inner, k, async |s| s.image_npy(&inner.engine).await)
                .await?
                .map_err(js_err)?;
            Ok(js_sys::Uint8Array::from(&npy[..]).into())
        })
    }
}

/// How the page splits files into acquisitions (`formats::grouping`): `names` is a JSON
/// array of file names; the answer `{acquisitions: [[index…]…], left_out: [index…]}`.
#[wasm_bindgen(js_name = groupFiles)]
pub fn group_files(names: String) -> Result<String, JsValue> {
    let names: Vec<String> =
        serde_json::from_str(&names).map_err(|e| js_err(format!("file names: {e}")))?;
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    serde_json::to_string(&crate::formats::grouping::acquisitions(&refs)).map_err(js_err)
}
