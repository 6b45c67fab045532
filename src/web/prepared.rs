//! The page's *Prepared .stem4d* (decision 0037): the open acquisition written as a prepared
//! file piece by piece, the Worker handing each piece to the page, which writes it.

use wasm_bindgen::prelude::*;

use super::{js_err, Viewer};
use crate::upload::prepare::{Preparer, BLOCK_BYTES};

#[wasm_bindgen]
impl Viewer {
    /// The next piece of the open acquisition as a prepared file (`stem4d prepare`'s
    /// container, decision 0037): `{at, bytes, last, done, total}`, `start` beginning anew.
    /// The page writes each piece at byte `at` of the file (zeros between); the last is the
    /// header. Blocks are read and tiled on this Worker's thread.
    #[wasm_bindgen(js_name = preparedPiece)]
    pub fn prepared_piece(&self, start: bool) -> Result<js_sys::Object, JsValue> {
        if start {
            let (acq, saved) = self
                .inner
                .session
                .borrow()
                .as_ref()
                .map(|s| (s.acq.clone(), s.saved_settings()))
                .ok_or_else(|| js_err("no acquisition is open"))?;
            if acq.index_pending() {
                return Err(js_err(format!(
                    "{}: its chunk index is still being read; save it once the load is done",
                    acq.primary
                )));
            }
            // The settings the page views it with go into the file (decision 0037).
            *self.inner.preparer.borrow_mut() =
                Some(Preparer::from_session(acq, BLOCK_BYTES, saved));
        }
        let mut slot = self.inner.preparer.borrow_mut();
        let p = slot
            .as_mut()
            .ok_or_else(|| js_err("no prepared file is being written"))?;
        let piece = p.next_piece();
        let (done, total) = p.progress();
        let (at, bytes) = match piece {
            Ok(Some(piece)) => piece,
            Ok(None) => {
                *slot = None;
                return Err(js_err("the prepared file was written whole already"));
            }
            Err(e) => {
                *slot = None;
                return Err(js_err(e));
            }
        };
        let last = at == 0;
        if last {
            *slot = None;
        }
        let out = js_sys::Object::new();
        let set = |k: &str, v: JsValue| js_sys::Reflect::set(&out, &k.into(), &v);
        set("at", JsValue::from(at as f64))?;
        set("bytes", js_sys::Uint8Array::from(&bytes[..]).into())?;
        set("last", JsValue::from(last))?;
        set("done", JsValue::from(done as f64))?;
        set("total", JsValue::from(total as f64))?;
        Ok(out)
    }
}
