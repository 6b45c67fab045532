//! Canvases and the frames drawn on them: one batch of draws per update, shown through the
//! surface or by readback (`present`), and what the page is told about how frames are shown.

use super::*;

/// A panel's two canvases: the WebGPU one the browser presents, and the 2D one the page
/// puts frames it read back on (`display::present`); the page shows the one in use.
pub(super) struct Canvas {
    pub(super) canvas: web_sys::OffscreenCanvas,
    pub(super) surface: wgpu::Surface<'static>,
    pub(super) format: wgpu::TextureFormat,
    /// The size the surface is configured at.
    pub(super) size: [u32; 2],
    pub(super) plain: Plain,
    /// What the canvas in use shows now: the way it was drawn and its [`Session::draw_key`].
    pub(super) shown: Option<(Present, DrawKey)>,
}

impl Canvas {
    /// The size of the frame `mode`'s canvas shows.
    pub(super) fn size(&self, mode: Present) -> [u32; 2] {
        match mode {
            Present::Surface => self.size,
            Present::Readback => self.plain.size(),
        }
    }

    /// Size the WebGPU canvas and configure its surface, if `size` is new.
    pub(super) fn configure(&mut self, engine: &Engine, size: [u32; 2]) -> Result<(), JsValue> {
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
pub(super) struct FrameBatch {
    pub(super) enc: wgpu::CommandEncoder,
    pub(super) textures: Vec<wgpu::SurfaceTexture>,
    pub(super) readbacks: Vec<usize>,
}

/// A batch submitted: its fence, and the canvases whose read-back frames go on their 2D
/// canvas once it is done ([`show`]).
pub(super) struct Frames {
    pub(super) fence: wgpu::Buffer,
    pub(super) readbacks: Vec<usize>,
}

impl FrameBatch {
    pub(super) fn new(engine: &Engine) -> FrameBatch {
        FrameBatch {
            enc: engine.device.create_command_encoder(&Default::default()),
            textures: Vec::new(),
            readbacks: Vec::new(),
        }
    }

    /// Draw canvas `k` (`c`) at `size` `mode`'s way with `encode(encoder, target, format)`.
    /// False when the frame was skipped: the WebGPU canvas's texture was lost or outdated,
    /// and the canvas is configured again next time.
    pub(super) fn draw(
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

    pub(super) fn submit(mut self, engine: &Engine) -> Frames {
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
/// sooner than `onSubmittedWorkDone` (decision 0011: pattern at cursor computed
/// 0.9–1.1 against 2.9–3.2 ms, BF drawn 4.3–4.9 against 5.9–6.7 ms on the H200), and racing
/// the two was no faster than the fence alone.
pub(super) async fn show(inner: &Inner, frames: Frames) -> Result<(), JsValue> {
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

/// What a canvas shows: a panel of the acquisition the page views, or the image of the
/// compare grid's acquisition `k` ([`Inner::compared`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Slot {
    Panel(Panel),
    Compared(usize),
}

impl Slot {
    /// Its key in the sizes the page sends and the canvases a render reports drawn.
    pub(super) fn key(self) -> String {
        match self {
            Slot::Panel(Panel::Image) => "image".into(),
            Slot::Panel(Panel::Pattern) => "pattern".into(),
            Slot::Compared(k) => format!("compared{k}"),
        }
    }
}

/// The canvas sizes the page sends (`{"image": [w, h], "pattern": [w, h], "compared0": [w, h],
/// …}` device pixels).
pub(super) fn parse_sizes(
    sizes: &str,
) -> Result<std::collections::HashMap<String, [u32; 2]>, JsValue> {
    serde_json::from_str(sizes).map_err(|e| js_err(format!("canvas sizes: {e}")))
}

/// `slot`'s canvas size in `sizes`, kept within what a canvas can be.
pub(super) fn size_of(
    sizes: &std::collections::HashMap<String, [u32; 2]>,
    slot: Slot,
) -> Option<[u32; 2]> {
    sizes
        .get(&slot.key())
        .map(|&[w, h]| [w.clamp(1, 8192), h.clamp(1, 8192)])
}

/// How frames are presented, and how that was decided.
pub(super) struct Presenting {
    pub(super) mode: Present,
    /// The page asked for `mode` (`setPresent`) instead of taking the calibration's.
    pub(super) asked: bool,
    pub(super) calibration: Option<Calibration>,
}

impl Presenting {
    /// `{mode, chosen, surface_ms, readback_ms, rounds}` (`chosen`: "measured" by the
    /// calibration, "asked" by the page, or "default" before either; the median calibration
    /// frame of each way): what `stem4d.present()` gives.
    pub(super) fn json(&self) -> String {
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

/// Record and submit the view `st` on the canvases whose content it changes (those drawn:
/// their keys), the way frames are presented now: the viewed session `s` and the compare
/// grid's `others` brought up to date and every canvas drawn in one submission.
pub(super) async fn draw(
    inner: &Inner,
    s: &mut Session,
    others: &mut [Session],
    st: &ViewState,
    sizes: &std::collections::HashMap<String, [u32; 2]>,
) -> Result<(Frames, Vec<String>), JsValue> {
    let engine = &inner.engine;
    let mut batch = FrameBatch::new(engine);
    let updated = {
        let mut refs: Vec<&mut Session> = others.iter_mut().collect();
        encode_compare(engine, &mut batch.enc, s, &mut refs, st).await
    };
    if let Err(e) = updated {
        // What was recorded before the failure is submitted: the sessions it updated count
        // their planes as made.
        engine.queue.submit([batch.enc.finish()]);
        return Err(js_err(e));
    }
    let mode = inner.presenting.borrow().mode;
    let mut canvases = inner.canvases.borrow_mut();
    let mut shown = Vec::new();
    for (k, (slot, c)) in canvases.iter_mut().enumerate() {
        let Some(size) = size_of(sizes, *slot) else {
            continue;
        };
        let (session, panel) = match *slot {
            Slot::Panel(panel) => (&mut *s, panel),
            Slot::Compared(i) => match others.get_mut(i) {
                Some(o) => (o, Panel::Image),
                None => continue,
            },
        };
        let shows = (mode, session.draw_key(panel, size).map_err(js_err)?);
        if size == c.size(mode) && c.shown == Some(shows) {
            continue;
        }
        c.shown = None;
        let drew = batch.draw(engine, k, c, mode, size, |enc, view, format| {
            session
                .encode_draw(engine, enc, panel, view, format, size)
                .map_err(js_err)
        })?;
        if drew {
            shown.push((k, shows, slot.key()));
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
pub(super) fn clear(enc: &mut wgpu::CommandEncoder, target: &wgpu::TextureView) {
    enc.begin_render_pass(&wgpu::RenderPassDescriptor {
        label: Some("calibration frame"),
        color_attachments: &[Some(crate::display::gpu::cleared_to_black(target))],
        ..Default::default()
    });
}

/// Give `slot` its canvases (transferred from the page): the WebGPU one and the 2D one
/// read-back frames go on (`display::present`). A slot attached again takes the new ones.
pub(super) fn attach_canvas(
    inner: &Inner,
    slot: Slot,
    canvas: web_sys::OffscreenCanvas,
    plain: web_sys::OffscreenCanvas,
) -> Result<(), JsValue> {
    let engine = &inner.engine;
    let surface = engine
        .instance
        .create_surface(wgpu::SurfaceTarget::OffscreenCanvas(canvas.clone()))
        .map_err(|e| js_err(format!("cannot draw on the {} canvas: {e}", slot.key())))?;
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
    let mut canvases = inner.canvases.borrow_mut();
    canvases.retain(|(s, _)| *s != slot);
    canvases.push((
        slot,
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
