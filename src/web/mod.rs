//! Browser glue (wasm32 only): the `Viewer` the page's Worker drives. Files arrive as `File`
//! handles, canvases as `OffscreenCanvas`es; everything else is the shared session code.
//! Every call returns a Promise and never blocks on the GPU (`map_async` + await).

mod canvas;
mod chunk_workers;
mod compare;
mod open;
mod parity;
mod prepared;
mod present;

pub use crate::source::blob::walked_answer;
pub use chunk_workers::{check_block, check_piece, walk_chunks};

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::json;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use crate::clock::now_ms;
use crate::display::gpu::PixelTarget;
use crate::display::present::{Calibration, Present, ROUNDS, WARMUP_ROUNDS};
use crate::formats::{Acquisition, OpenOptions};
use crate::gpu::Engine;
use crate::products::{ArrayData, ProductRequest};
use crate::session::{
    encode_compare, DrawKey, LeafReads, OpenRequest, Panel, Session, Stage, ViewState,
};
use crate::source::blob::{self as blob_source, BlobSource};
use crate::source::ByteSource;
use canvas::*;
use open::open_files;
use present::Plain;

fn js_err(e: impl std::fmt::Display) -> JsValue {
    JsValue::from_str(&e.to_string())
}

struct Inner {
    engine: Engine,
    /// The page's `readRanges(file, offsets, lengths)` (see `BlobSource`).
    read_ranges: Option<js_sys::Function>,
    /// The page's `walkPieces(buffers, walks)` (see `BlobSource`).
    walk_pieces: Option<js_sys::Function>,
    session: RefCell<Option<Session>>,
    /// The compare grid's other acquisitions, in the page's order (`None` while a call has
    /// them out, as `session`).
    compared: RefCell<Option<Vec<Session>>>,
    canvases: RefCell<Vec<(Slot, Canvas)>>,
    presenting: RefCell<Presenting>,
    /// Stops the request running now at its next block (`watch`; the page's Cancel during a
    /// streamed product).
    cancel: crate::watch::Cancel,
    /// The open acquisition being written as a prepared file (`preparedPiece`).
    preparer: RefCell<Option<crate::upload::prepare::Preparer>>,
}

impl Inner {
    /// Calls are serialised by the Worker; taking the session out (instead of holding a
    /// borrow across awaits) turns an overlapping call into an error, never a panic.
    fn take(&self) -> Result<Session, JsValue> {
        self.session
            .borrow_mut()
            .take()
            .ok_or_else(|| js_err("no acquisition is open (or another call is still running)"))
    }

    fn put(&self, s: Session) {
        *self.session.borrow_mut() = Some(s);
    }

    /// `f` on the open session, taken out for the call and put back whatever `f` returns.
    async fn with_session<R>(&self, f: impl AsyncFnOnce(&mut Session) -> R) -> Result<R, JsValue> {
        let mut s = self.take()?;
        let r = f(&mut s).await;
        self.put(s);
        Ok(r)
    }

    /// `f` on the open session and the compare grid's others, taken out for the call as
    /// [`Inner::with_session`] takes the one.
    async fn with_all<R>(
        &self,
        f: impl AsyncFnOnce(&mut Session, &mut [Session]) -> R,
    ) -> Result<R, JsValue> {
        let mut others = self
            .compared
            .borrow_mut()
            .take()
            .ok_or_else(|| js_err("another call is still running"))?;
        let r = self.with_session(async |s| f(s, &mut others).await).await;
        *self.compared.borrow_mut() = Some(others);
        r
    }
}

#[wasm_bindgen]
pub struct Viewer {
    inner: Rc<Inner>,
}

async fn sleep_ms(ms: i32) {
    let p = js_sys::Promise::new(&mut |resolve, _| {
        let set_timeout = js_sys::Reflect::get(&js_sys::global(), &"setTimeout".into())
            .ok()
            .map(js_sys::Function::from);
        if let Some(f) = set_timeout {
            let _ = f.call2(&JsValue::NULL, &resolve, &JsValue::from(ms));
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(p).await;
}

/// What the page learned from `GPUAdapterInfo` (wgpu's WebGPU backend leaves names empty).
#[derive(serde::Deserialize)]
struct AdapterHint {
    name: String,
    software: bool,
}

/// Open the GPU. Chromium can return no adapter right after launch: retry once.
/// `hint` (JSON `{name, software}`) names the adapter in the profile. `decode_chunks(jobs)`
/// decodes deflate/shuffle chunks, `read_ranges(file, offsets, lengths)` reads files and
/// `walk_pieces(buffers, walks)` walks chunk headers in buffers read already, on the page's
/// `workers` pool Workers (see `chunk_workers`, `BlobSource`).
#[wasm_bindgen(js_name = createViewer)]
pub async fn create_viewer(
    hint: String,
    decode_chunks: Option<js_sys::Function>,
    read_ranges: Option<js_sys::Function>,
    workers: u32,
    walk_pieces: Option<js_sys::Function>,
) -> Result<Viewer, JsValue> {
    let mut engine = match Engine::new().await {
        Ok(e) => e,
        Err(_) => {
            sleep_ms(500).await;
            Engine::new().await.map_err(js_err)?
        }
    };
    if let Ok(h) = serde_json::from_str::<AdapterHint>(&hint) {
        if engine.adapter.name.is_empty() {
            engine.adapter.name = h.name;
        }
        engine.adapter.software |= h.software;
    }
    if let Some(f) = decode_chunks {
        engine.set_chunk_decoder(Box::new(chunk_workers::WorkerPool::new(
            f,
            workers as usize,
        )));
    }
    Ok(Viewer {
        inner: Rc::new(Inner {
            engine,
            read_ranges,
            walk_pieces,
            session: RefCell::new(None),
            compared: RefCell::new(Some(Vec::new())),
            canvases: RefCell::new(Vec::new()),
            cancel: crate::watch::Cancel::default(),
            preparer: RefCell::new(None),
            presenting: RefCell::new(Presenting {
                mode: Present::Surface,
                asked: false,
                calibration: None,
            }),
        }),
    })
}

fn typed_array(data: &ArrayData) -> JsValue {
    match data {
        ArrayData::U8(v) => js_sys::Uint8Array::from(&v[..]).into(),
        ArrayData::U16(v) => js_sys::Uint16Array::from(&v[..]).into(),
        ArrayData::U32(v) => js_sys::Uint32Array::from(&v[..]).into(),
        ArrayData::U64(v) => js_sys::BigUint64Array::from(&v[..]).into(),
        ArrayData::F32(v) => js_sys::Float32Array::from(&v[..]).into(),
        ArrayData::F64(v) => js_sys::Float64Array::from(&v[..]).into(),
    }
}

/// `v` as a JSON string for the page (`what` names it in the error).
fn json_of(v: &impl serde::Serialize, what: &str) -> Result<JsValue, JsValue> {
    serde_json::to_string(v)
        .map(JsValue::from)
        .map_err(|e| js_err(format!("{what} do not serialise: {e}")))
}

fn set(obj: &js_sys::Object, key: &str, v: &JsValue) -> Result<(), JsValue> {
    js_sys::Reflect::set(obj, &key.into(), v).map(|_| ())
}

/// The passes the GPU ran since the last call, when the pass clock is on.
async fn pass_times(engine: &Engine) -> Result<Option<crate::gpu::pass_clock::PassTimes>, JsValue> {
    engine.pass_times().await.map_err(js_err)
}

#[wasm_bindgen]
impl Viewer {
    /// The adapter summary as JSON.
    pub fn adapter(&self) -> String {
        serde_json::to_string(&self.inner.engine.summary()).unwrap_or_default()
    }

    /// Colour-map names and 256-level RGB tables (for colour bars) as JSON.
    pub fn colormaps(&self) -> String {
        json!({
            "names": crate::display::colormaps::NAMES,
            "tables": crate::display::colormaps::TABLES.iter().map(|t| t.to_vec()).collect::<Vec<_>>(),
        })
        .to_string()
    }

    /// Open `files` (File objects) with `options` JSON; `progress(stage, done, total)`.
    /// Resolves to JSON `{info, profile, bfFit}`.
    pub fn open(
        &self,
        files: js_sys::Array,
        options: String,
        progress: js_sys::Function,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let req: OpenRequest =
                serde_json::from_str(&options).map_err(|e| js_err(format!("open options: {e}")))?;
            let out = open_files(&inner, files, req, progress).await;
            inner.engine.release_set_aside();
            out
        })
    }

    /// Watch the Worker's requests (`watch`): `progress(stage, done, total)` hears the
    /// blocks of streamed products (an open reports its own through `open`), and
    /// [`Viewer::cancel_work`] stops them.
    #[wasm_bindgen(js_name = watchWork)]
    pub fn watch_work(&self, progress: js_sys::Function) {
        let heard: crate::watch::Progress = Box::new(move |stage, done, total| {
            if stage == crate::watch::STREAM {
                let _ = progress.call3(
                    &JsValue::NULL,
                    &stage.into(),
                    &(done as f64).into(),
                    &(total as f64).into(),
                );
            }
        });
        crate::watch::install(self.inner.cancel.clone(), Some(heard));
    }

    /// Stop the request running now at its next block: it fails with "cancelled while …"
    /// and leaves the acquisition open. The Worker calls it for the requests sent before
    /// the page's cancel, as each runs.
    #[wasm_bindgen(js_name = cancelWork)]
    pub fn cancel_work(&self) {
        self.inner.cancel.cancel();
    }

    /// A request is over: the next one starts uncancelled.
    #[wasm_bindgen(js_name = workDone)]
    pub fn work_done(&self) {
        self.inner.cancel.reset();
    }

    /// Whether an acquisition is open (a failed open leaves the one before it open when it
    /// failed before its upload began).
    #[wasm_bindgen(js_name = isOpen)]
    pub fn is_open(&self) -> bool {
        self.inner.session.borrow().is_some()
    }

    /// `stem4d.product(params)`: resolves to `{shape, dtype, data}` (C order).
    pub fn product(&self, params: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let v: serde_json::Value = serde_json::from_str(&params)
                .map_err(|e| js_err(format!("product parameters: {e}")))?;
            let ProductRequest { params, correction } =
                ProductRequest::from_json(&v).map_err(js_err)?;
            // The acquisition-level part first, as its own step: on an integer resident a
            // new bin or masking policy is a new upload (the page's contract allows it here).
            let a = inner
                .with_session(async |s| {
                    s.set_correction(&inner.engine, correction).await?;
                    s.product(&inner.engine, &params, correction).await
                })
                .await?
                .map_err(js_err)?;
            product_object(&a)
        })
    }

    /// Several products (`params`: a JSON array of product requests, one correction), in
    /// order: those a streamed session computes in one pass over the files together
    /// (`Session::products`).
    pub fn products(&self, params: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let v: Vec<serde_json::Value> = serde_json::from_str(&params).map_err(|e| {
                js_err(format!("products: a JSON array of product parameters: {e}"))
            })?;
            let reqs = v
                .iter()
                .map(ProductRequest::from_json)
                .collect::<crate::error::Result<Vec<_>>>()
                .map_err(js_err)?;
            let Some(correction) = reqs.first().map(|r| r.correction) else {
                return Ok(js_sys::Array::new().into());
            };
            if reqs.iter().any(|r| r.correction != correction) {
                return Err(js_err(
                    "products: every product of one call takes the same bin and bad-pixel masking",
                ));
            }
            let ps: Vec<_> = reqs.into_iter().map(|r| r.params).collect();
            let arrays = inner
                .with_session(async |s| {
                    s.set_correction(&inner.engine, correction).await?;
                    s.products(&inner.engine, &ps, correction).await
                })
                .await?
                .map_err(js_err)?;
            let out = js_sys::Array::new();
            for a in &arrays {
                out.push(&product_object(a)?);
            }
            Ok(out.into())
        })
    }

    /// The load profile of the open acquisition as JSON.
    pub fn profile(&self) -> Result<String, JsValue> {
        let s = self.inner.session.borrow();
        let s = s.as_ref().ok_or_else(|| js_err("no acquisition is open"))?;
        serde_json::to_string(&s.profile).map_err(js_err)
    }

    /// Give a panel its canvases (transferred from the page): the WebGPU one and the 2D one
    /// read-back frames go on (`display::present`).
    pub fn attach(
        &self,
        panel: String,
        canvas: web_sys::OffscreenCanvas,
        plain: web_sys::OffscreenCanvas,
    ) -> Result<(), JsValue> {
        let panel = Panel::parse(&panel).map_err(js_err)?;
        attach_canvas(&self.inner, Slot::Panel(panel), canvas, plain)
    }

    /// Time frames presented both ways on the attached canvases at `sizes` (as `render`
    /// takes them) and keep the faster way (`display::present`). Both canvases are cleared
    /// to black. Resolves to how frames are presented ([`Presenting::json`]).
    #[wasm_bindgen(js_name = calibratePresent)]
    pub fn calibrate_present(&self, sizes: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let sizes = parse_sizes(&sizes)?;
            let mut cal = Calibration::default();
            for round in 0..WARMUP_ROUNDS + ROUNDS {
                let ways = if round % 2 == 0 {
                    [Present::Surface, Present::Readback]
                } else {
                    [Present::Readback, Present::Surface]
                };
                for mode in ways {
                    let t0 = now_ms();
                    let frames = {
                        let engine = &inner.engine;
                        let mut canvases = inner.canvases.borrow_mut();
                        let mut batch = FrameBatch::new(engine);
                        for (k, (slot, c)) in canvases.iter_mut().enumerate() {
                            let Some(size) = size_of(&sizes, *slot) else {
                                continue;
                            };
                            c.shown = None;
                            batch.draw(engine, k, c, mode, size, |enc, view, _| {
                                clear(enc, view);
                                Ok(())
                            })?;
                        }
                        batch.submit(engine)
                    };
                    show(&inner, frames).await?;
                    let ms = now_ms() - t0;
                    if round >= WARMUP_ROUNDS {
                        match mode {
                            Present::Surface => cal.surface_ms.push(ms),
                            Present::Readback => cal.readback_ms.push(ms),
                        }
                    }
                }
            }
            let mut p = inner.presenting.borrow_mut();
            *p = Presenting {
                mode: cal.choice(),
                asked: false,
                calibration: Some(cal),
            };
            Ok(p.json().into())
        })
    }

    /// Present frames `mode`'s way ("surface" or "readback") from the next render on, which
    /// draws both panels anew. Returns how frames are presented ([`Presenting::json`]).
    #[wasm_bindgen(js_name = setPresent)]
    pub fn set_present(&self, mode: String) -> Result<String, JsValue> {
        let mode = Present::parse(&mode).map_err(js_err)?;
        for (_, c) in self.inner.canvases.borrow_mut().iter_mut() {
            c.shown = None;
        }
        let mut p = self.inner.presenting.borrow_mut();
        p.mode = mode;
        p.asked = true;
        Ok(p.json())
    }

    /// Make what uploads from files need before the first (the browser's staging ring),
    /// so that a page's first load does not wait for it.
    #[wasm_bindgen(js_name = prepareUploads)]
    pub fn prepare_uploads(&self) {
        self.inner.engine.prepare_uploads();
    }

    /// Bring the view to `state` (JSON) and draw the canvases at `sizes`
    /// (`{"image": [w, h], "pattern": [w, h], "compared0": [w, h], …}` device pixels): the
    /// compare grid's acquisitions follow it (`ViewState::for_compare`). Resolves when the GPU is done,
    /// with `{ms, drawn}`: the interaction latency the page reports and the canvases that
    /// were drawn and presented (those whose content changed).
    pub fn render(&self, state: String, sizes: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let t0 = now_ms();
            let st: ViewState =
                serde_json::from_str(&state).map_err(|e| js_err(format!("view state: {e}")))?;
            let sizes = parse_sizes(&sizes)?;
            let (frames, drawn) = inner
                .with_all(async |s, others| draw(&inner, s, others, &st, &sizes).await)
                .await??;
            show(&inner, frames).await?;
            inner.engine.check_alive().map_err(js_err)?;
            let ms = now_ms() - t0;
            Ok(
                json!({"ms": ms, "drawn": drawn, "gpu": pass_times(&inner.engine).await?})
                    .to_string()
                    .into(),
            )
        })
    }

    /// Apply a view without drawing: the image, pattern and limits it implies, timed to the
    /// GPU finishing them (benchmarks tell the engine's cost from the canvas presentation).
    pub fn compute(&self, state: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let t0 = now_ms();
            let st: ViewState =
                serde_json::from_str(&state).map_err(|e| js_err(format!("view state: {e}")))?;
            inner
                .with_session(async |s| s.update(&inner.engine, &st).await)
                .await?
                .map_err(js_err)?;
            // The engine's own part (state parsed, work recorded and submitted) apart from
            // the wait for the GPU and Chromium's completion round trip.
            let submitted = now_ms() - t0;
            // An empty batch: its fence alone.
            let frames = FrameBatch::new(&inner.engine).submit(&inner.engine);
            show(&inner, frames).await?;
            inner.engine.check_alive().map_err(js_err)?;
            let ms = now_ms() - t0;
            Ok(
                json!({"ms": ms, "submit_ms": submitted, "gpu": pass_times(&inner.engine).await?})
                    .to_string()
                    .into(),
            )
        })
    }

    /// Time each pass of the renders and computes that follow on the GPU (benchmarks), where
    /// the adapter has `timestamp-query`; returns whether it has. Their results then carry
    /// `gpu`: `{passes: [[kernel, ms]...], busy_ms, span_ms, untimed}`, read after `ms` was
    /// taken (null while off).
    #[wasm_bindgen(js_name = timePasses)]
    pub fn time_passes(&self, on: bool) -> bool {
        self.inner.engine.time_passes(on)
    }

    /// What the open left for after its first image ([`Session::prepare`]).
    pub fn prepare(&self) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            inner
                .with_session(async |s| s.prepare(&inner.engine).await)
                .await?
                .map_err(js_err)?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Limits and range (data and shown units), scale, a 256-bar histogram, the note and the
    /// colour map of a panel, as JSON ([`crate::session::StatsReport`]).
    pub fn stats(&self, panel: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let panel = Panel::parse(&panel).map_err(js_err)?;
            let report = inner
                .with_session(async |s| s.stats_report(&inner.engine, panel).await)
                .await?
                .map_err(js_err)?;
            json_of(&report, "stats")
        })
    }

    /// The value under the pointer (exact for integer sums; degrees on a DPC direction
    /// image).
    #[wasm_bindgen(js_name = valueAt)]
    pub fn value_at(&self, panel: String, r: u32, c: u32) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let panel = Panel::parse(&panel).map_err(js_err)?;
            let v = inner
                .with_session(async |s| {
                    s.value_at(&inner.engine, panel, r as usize, c as usize)
                        .await
                })
                .await?
                .map_err(js_err)?;
            Ok(JsValue::from(v))
        })
    }

    /// A line profile of a panel's exact values from (r0, c0) to (r1, c1) (pixel indices),
    /// as JSON (`session::LineProfileReport`).
    #[wasm_bindgen(js_name = lineProfile)]
    pub fn line_profile(
        &self,
        panel: String,
        r0: f64,
        c0: f64,
        r1: f64,
        c1: f64,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let panel = Panel::parse(&panel).map_err(js_err)?;
            let report = inner
                .with_session(async |s| {
                    s.line_profile(&inner.engine, panel, [r0, c0], [r1, c1])
                        .await
                })
                .await?
                .map_err(js_err)?;
            Ok(serde_json::to_string(&report)
                .map_err(|e| js_err(format!("the profile does not serialise: {e}")))?
                .into())
        })
    }

    /// PNG bytes of a panel.
    pub fn png(&self, panel: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let panel = Panel::parse(&panel).map_err(js_err)?;
            let png = inner
                .with_session(async |s| s.png(&inner.engine, panel).await)
                .await?
                .map_err(js_err)?;
            Ok(js_sys::Uint8Array::from(&png[..]).into())
        })
    }

    /// TIFF bytes of the image panel's exact product, with the scan step as pixel size.
    #[wasm_bindgen(js_name = imageTiff)]
    pub fn image_tiff(&self) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let tiff = inner
                .with_session(async |s| s.image_tiff(&inner.engine).await)
                .await?
                .map_err(js_err)?;
            Ok(js_sys::Uint8Array::from(&tiff[..]).into())
        })
    }

    /// `.npy` bytes of the image panel's exact product.
    #[wasm_bindgen(js_name = imageNpy)]
    pub fn image_npy(&self) -> js_sys::Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let npy = inner
                .with_session(async |s| s.image_npy(&inner.engine).await)
                .await?
                .map_err(js_err)?;
            Ok(js_sys::Uint8Array::from(&npy[..]).into())
        })
    }
}

/// A product as the page's API hands it out: `{shape, dtype, data}` (a typed array).
fn product_object(a: &crate::products::ProductArray) -> Result<JsValue, JsValue> {
    let out = js_sys::Object::new();
    let shape: js_sys::Array = a.shape.iter().map(|&d| JsValue::from(d as f64)).collect();
    set(&out, "shape", &shape)?;
    set(&out, "dtype", &a.data.dtype_name().into())?;
    set(&out, "data", &typed_array(&a.data))?;
    Ok(out.into())
}
