//! Browser glue (wasm32 only): the `Viewer` the page's Worker drives. Files arrive as `File`
//! handles, canvases as `OffscreenCanvas`es; everything else is the shared session code.
//! Every call returns a Promise and never blocks on the GPU (`map_async` + await).

mod chunk_workers;
mod present;

pub use crate::source::blob::walked_answer;
pub use chunk_workers::walk_chunks;

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
use crate::products::{ArrayData, ProductParams};
use crate::session::{DrawKey, LeafReads, OpenRequest, Panel, Session, Stage, ViewState};
use crate::source::blob::{self as blob_source, BlobSource};
use crate::source::ByteSource;
use present::Plain;

fn js_err(e: impl std::fmt::Display) -> JsValue {
    JsValue::from_str(&e.to_string())
}

/// A panel's two canvases: the WebGPU one the browser presents, and the 2D one the page
/// puts frames it read back on (`display::present`); the page shows the one in use.
struct Canvas {
    canvas: web_sys::OffscreenCanvas,
    surface: wgpu::Surface<'static>,
    format: wgpu::TextureFormat,
    /// The size the surface is configured at.
    size: [u32; 2],
    plain: Plain,
    /// What the canvas in use shows now: the way it was drawn and its [`Session::draw_key`].
    shown: Option<(Present, DrawKey)>,
}

impl Canvas {
    /// The size of the frame `mode`'s canvas shows.
    fn size(&self, mode: Present) -> [u32; 2] {
        match mode {
            Present::Surface => self.size,
            Present::Readback => self.plain.size(),
        }
    }

    /// Size the WebGPU canvas and configure its surface, if `size` is new.
    fn configure(&mut self, engine: &Engine, size: [u32; 2]) -> Result<(), JsValue> {
        if size == self.size {
            return Ok(());
        }
        self.canvas.set_width(size[0]);
        self.canvas.set_height(size[1]);
        let config = self
            .surface
            .get_default_config(&engine.raw_adapter, size[0], size[1])
            .ok_or_else(|| js_err("the canvas cannot be configured for this adapter"))?;
        self.surface.configure(
            &engine.device,
            &wgpu::SurfaceConfiguration {
                format: self.format,
                ..config
            },
        );
        self.size = size;
        Ok(())
    }
}

/// Frames recorded into one submission: the surface textures to present after it, and the
/// canvases whose frames are read back.
struct FrameBatch {
    enc: wgpu::CommandEncoder,
    textures: Vec<wgpu::SurfaceTexture>,
    readbacks: Vec<usize>,
}

/// A batch submitted: its fence, and the canvases whose read-back frames go on their 2D
/// canvas once it is done ([`show`]).
struct Frames {
    fence: wgpu::Buffer,
    readbacks: Vec<usize>,
}

impl FrameBatch {
    fn new(engine: &Engine) -> FrameBatch {
        FrameBatch {
            enc: engine.device.create_command_encoder(&Default::default()),
            textures: Vec::new(),
            readbacks: Vec::new(),
        }
    }

    /// Draw canvas `k` (`c`) at `size` `mode`'s way with `encode(encoder, target, format)`.
    /// False when the frame was skipped: the WebGPU canvas's texture was lost or outdated,
    /// and the canvas is configured again next time.
    fn draw(
        &mut self,
        engine: &Engine,
        k: usize,
        c: &mut Canvas,
        mode: Present,
        size: [u32; 2],
        encode: impl FnOnce(
            &mut wgpu::CommandEncoder,
            &wgpu::TextureView,
            wgpu::TextureFormat,
        ) -> Result<(), JsValue>,
    ) -> Result<bool, JsValue> {
        match mode {
            Present::Surface => {
                c.configure(engine, size)?;
                let texture = match c.surface.get_current_texture() {
                    wgpu::CurrentSurfaceTexture::Success(t)
                    | wgpu::CurrentSurfaceTexture::Suboptimal(t) => t,
                    _ => {
                        c.size = [0, 0];
                        return Ok(false);
                    }
                };
                let view = texture.texture.create_view(&Default::default());
                encode(&mut self.enc, &view, c.format)?;
                self.textures.push(texture);
            }
            Present::Readback => {
                let target = c.plain.target(engine, size);
                encode(&mut self.enc, &target.view, PixelTarget::FORMAT)?;
                target.encode_copy(&mut self.enc);
                self.readbacks.push(k);
            }
        }
        Ok(true)
    }

    fn submit(mut self, engine: &Engine) -> Frames {
        let fence = engine.fence(&mut self.enc);
        engine.queue.submit([self.enc.finish()]);
        for t in self.textures {
            engine.queue.present(t);
        }
        Frames {
            fence,
            readbacks: self.readbacks,
        }
    }
}

/// Wait for `frames`' submission (the fence and the read-back pixels map in the same round
/// trip), then put each read-back frame on its 2D canvas. Chromium reports a mapped fence
/// sooner than `onSubmittedWorkDone` (BENCHMARKS, session 12: pattern at cursor computed
/// 0.9–1.1 against 2.9–3.2 ms, BF drawn 4.3–4.9 against 5.9–6.7 ms on the H200), and racing
/// the two was no faster than the fence alone.
async fn show(inner: &Inner, frames: Frames) -> Result<(), JsValue> {
    let mut buffers = vec![frames.fence.clone()];
    {
        let canvases = inner.canvases.borrow();
        for &k in &frames.readbacks {
            buffers.extend(canvases[k].1.plain.pixels().cloned());
        }
    }
    let refs: Vec<&wgpu::Buffer> = buffers.iter().collect();
    let waited = inner
        .engine
        .all_mapped_for_read(&refs, "waiting for the GPU")
        .await;
    frames.fence.unmap();
    if let Err(e) = waited {
        for b in &buffers[1..] {
            b.unmap();
        }
        return Err(js_err(e));
    }
    let canvases = inner.canvases.borrow();
    for &k in &frames.readbacks {
        canvases[k].1.plain.put()?;
    }
    Ok(())
}

fn panel_key(panel: Panel) -> &'static str {
    match panel {
        Panel::Image => "image",
        Panel::Pattern => "pattern",
    }
}

/// The canvas sizes the page sends (`{"image": [w, h], "pattern": [w, h]}` device pixels).
fn parse_sizes(sizes: &str) -> Result<std::collections::HashMap<String, [u32; 2]>, JsValue> {
    serde_json::from_str(sizes).map_err(|e| js_err(format!("canvas sizes: {e}")))
}

/// `panel`'s canvas size in `sizes`, kept within what a canvas can be.
fn size_of(sizes: &std::collections::HashMap<String, [u32; 2]>, panel: Panel) -> Option<[u32; 2]> {
    sizes
        .get(panel_key(panel))
        .map(|&[w, h]| [w.clamp(1, 8192), h.clamp(1, 8192)])
}

/// How frames are presented, and how that was decided.
struct Presenting {
    mode: Present,
    /// The page asked for `mode` (`setPresent`) instead of taking the calibration's.
    asked: bool,
    calibration: Option<Calibration>,
}

impl Presenting {
    /// `{mode, chosen, surface_ms, readback_ms, rounds}` (`chosen`: "measured" by the
    /// calibration, "asked" by the page, or "default" before either; the median calibration
    /// frame of each way): what `stem4d.present()` gives.
    fn json(&self) -> String {
        let (surface_ms, readback_ms) = self.calibration.as_ref().map_or((None, None), |c| {
            let (s, r) = c.medians();
            (Some(s), Some(r))
        });
        let chosen = match (self.asked, &self.calibration) {
            (true, _) => "asked",
            (false, Some(_)) => "measured",
            (false, None) => "default",
        };
        json!({
            "mode": self.mode, "chosen": chosen, "surface_ms": surface_ms,
            "readback_ms": readback_ms, "rounds": ROUNDS,
        })
        .to_string()
    }
}

struct Inner {
    engine: Engine,
    /// The page's `readRanges(file, offsets, lengths)` (see `BlobSource`).
    read_ranges: Option<js_sys::Function>,
    /// The page's `walkPieces(buffers, walks)` (see `BlobSource`).
    walk_pieces: Option<js_sys::Function>,
    session: RefCell<Option<Session>>,
    canvases: RefCell<Vec<(Panel, Canvas)>>,
    presenting: RefCell<Presenting>,
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
            canvases: RefCell::new(Vec::new()),
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
            let p = ProductParams::from_json(&v).map_err(js_err)?;
            let a = inner
                .with_session(async |s| s.product(&inner.engine, &p).await)
                .await?
                .map_err(js_err)?;
            let out = js_sys::Object::new();
            let shape: js_sys::Array = a.shape.iter().map(|&d| JsValue::from(d as f64)).collect();
            set(&out, "shape", &shape)?;
            set(&out, "dtype", &a.data.dtype_name().into())?;
            set(&out, "data", &typed_array(&a.data))?;
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
        let engine = &self.inner.engine;
        let surface = engine
            .instance
            .create_surface(wgpu::SurfaceTarget::OffscreenCanvas(canvas.clone()))
            .map_err(|e| js_err(format!("cannot draw on the {panel:?} canvas: {e}")))?;
        let caps = surface.get_capabilities(&engine.raw_adapter);
        let format = caps
            .formats
            .iter()
            .copied()
            .find(|f| !f.is_srgb())
            .or_else(|| caps.formats.first().copied())
            .ok_or_else(|| js_err("the canvas offers no texture format"))?;
        let plain = Plain::new(plain)?;
        // Both ways' pipelines compile now, not on the first image of a load.
        engine.renderer(format);
        engine.renderer(PixelTarget::FORMAT);
        let mut canvases = self.inner.canvases.borrow_mut();
        canvases.retain(|(p, _)| *p != panel);
        canvases.push((
            panel,
            Canvas {
                canvas,
                surface,
                format,
                size: [0, 0],
                plain,
                shown: None,
            },
        ));
        Ok(())
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
                        for (k, (panel, c)) in canvases.iter_mut().enumerate() {
                            let Some(size) = size_of(&sizes, *panel) else {
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

    /// Bring the view to `state` (JSON) and draw both canvases at `sizes`
    /// (`{"image": [w, h], "pattern": [w, h]}` device pixels). Resolves when the GPU is done,
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
                .with_session(async |s| draw(&inner, s, &st, &sizes).await)
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
            Ok(serde_json::to_string(&report)
                .map_err(|e| js_err(format!("stats do not serialise: {e}")))?
                .into())
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

/// The open of [`Viewer::open`], its old session set aside.
async fn open_files(
    inner: &Inner,
    files: js_sys::Array,
    req: OpenRequest,
    progress: js_sys::Function,
) -> Result<JsValue, JsValue> {
    let t0 = now_ms();
    let read0 = blob_source::read_ms();
    let pool = match req.reads.as_deref() {
        None | Some("workers") => inner.read_ranges.clone(),
        Some("blob") => None,
        Some(other) => {
            return Err(js_err(format!(
                "open option reads: '{other}' is not \"workers\" or \"blob\""
            )))
        }
    };
    // Reads without the pool are walked without it too.
    let walker = pool.as_ref().and(inner.walk_pieces.clone());
    let mut sources: Vec<Arc<dyn ByteSource>> = Vec::new();
    for f in files.iter() {
        let file: web_sys::File = f
            .dyn_into()
            .map_err(|_| js_err("open() takes File objects"))?;
        sources.push(Arc::new(
            BlobSource::new(file, pool.clone(), walker.clone()).map_err(js_err)?,
        ));
    }
    let mut index_rounds = 0;
    let acq = match req.synthetic {
        Some(dims) => crate::formats::synthetic::open(dims).map_err(js_err)?,
        None => {
            let opts = OpenOptions {
                scan_shape: req.scan_shape,
                dataset: req.dataset.clone(),
            };
            // The B-tree leaves are read by the upload, alongside the chunks before
            // them, unless the open is asked to read them.
            let defer = req.leaf_reads().map_err(js_err)? != LeafReads::Open;
            let (acq, rounds) = Acquisition::open_gathered(sources, &opts, defer).await;
            index_rounds = rounds;
            acq.map_err(js_err)?
        }
    };
    let mut report = |stage: &str, done: u64, total: u64| {
        let _ = progress.call3(
            &JsValue::NULL,
            &stage.into(),
            &JsValue::from(done as f64),
            &JsValue::from(total as f64),
        );
    };
    // The previous acquisition stays open until this one is checked and about to load; its
    // GPU memory is then released, but for its resident buffers: this one reuses those its
    // plan can.
    let mut release_previous = || {
        if let Some(old) = inner.session.borrow_mut().take() {
            old.set_aside(&inner.engine);
        }
    };
    let mut session = Session::open_replacing(
        &inner.engine,
        acq,
        &req,
        now_ms() - t0,
        &mut report,
        &mut release_previous,
    )
    .await
    .map_err(js_err)?;
    session.profile.index_read_rounds = index_rounds;
    session.profile.stages.push(Stage {
        name: "of which file reads".into(),
        ms: blob_source::read_ms() - read0,
    });
    let out = json!({
        "info": session.info,
        "profile": session.profile,
        "bfFit": session.bf_fit,
        "bfFitWarning": session.bf_fit_warning,
    });
    inner.put(session);
    Ok(out.to_string().into())
}

/// Record and submit the view `st` on the canvases whose content it changes (those drawn:
/// their keys), the way frames are presented now.
async fn draw(
    inner: &Inner,
    s: &mut Session,
    st: &ViewState,
    sizes: &std::collections::HashMap<String, [u32; 2]>,
) -> Result<(Frames, Vec<&'static str>), JsValue> {
    let engine = &inner.engine;
    s.update(engine, st).await.map_err(js_err)?;
    let mode = inner.presenting.borrow().mode;
    let mut canvases = inner.canvases.borrow_mut();
    let mut batch = FrameBatch::new(engine);
    let mut shown = Vec::new();
    for (k, (panel, c)) in canvases.iter_mut().enumerate() {
        let Some(size) = size_of(sizes, *panel) else {
            continue;
        };
        let shows = (mode, s.draw_key(*panel, size).map_err(js_err)?);
        if size == c.size(mode) && c.shown == Some(shows) {
            continue;
        }
        c.shown = None;
        let panel = *panel;
        let drew = batch.draw(engine, k, c, mode, size, |enc, view, format| {
            s.encode_draw(engine, enc, panel, view, format, size)
                .map_err(js_err)
        })?;
        if drew {
            shown.push((k, shows, panel_key(panel)));
        }
    }
    let frames = batch.submit(engine);
    let mut drawn = Vec::new();
    for (k, shows, key) in shown {
        canvases[k].1.shown = Some(shows);
        drawn.push(key);
    }
    Ok((frames, drawn))
}

/// Record clearing `target` to black (the calibration's frames).
fn clear(enc: &mut wgpu::CommandEncoder, target: &wgpu::TextureView) {
    enc.begin_render_pass(&wgpu::RenderPassDescriptor {
        label: Some("calibration frame"),
        color_attachments: &[Some(crate::display::gpu::cleared_to_black(target))],
        ..Default::default()
    });
}
