//! A panel's 2D canvas, drawn from frames the page reads back itself (see
//! [`crate::display::present`] for when that beats presenting the WebGPU canvas).

use wasm_bindgen::{JsCast, JsValue};

use crate::display::gpu::PixelTarget;
use crate::gpu::Engine;

use super::js_err;

/// A panel's 2D canvas and the off-screen frame it is drawn from.
pub(super) struct Plain {
    canvas: web_sys::OffscreenCanvas,
    context: web_sys::OffscreenCanvasRenderingContext2d,
    target: Option<PixelTarget>,
}

impl Plain {
    pub(super) fn new(canvas: web_sys::OffscreenCanvas) -> Result<Plain, JsValue> {
        // Opaque, and kept in memory: a canvas Chromium put on the GPU would need the very
        // readback this one exists to avoid when a software compositor takes its frame.
        let options = js_sys::Object::new();
        js_sys::Reflect::set(&options, &"alpha".into(), &false.into())?;
        js_sys::Reflect::set(&options, &"willReadFrequently".into(), &true.into())?;
        let context = canvas
            .get_context_with_context_options("2d", &options)?
            .and_then(|c| {
                c.dyn_into::<web_sys::OffscreenCanvasRenderingContext2d>()
                    .ok()
            })
            .ok_or_else(|| js_err("the panel's 2D canvas has no 2D context"))?;
        Ok(Plain {
            canvas,
            context,
            target: None,
        })
    }

    /// The size of the frame the canvas shows now ([0, 0] before the first).
    pub(super) fn size(&self) -> [u32; 2] {
        self.target.as_ref().map_or([0, 0], |t| t.size)
    }

    /// The off-screen frame of `size` to draw into, the canvas resized with it.
    pub(super) fn target(&mut self, engine: &Engine, size: [u32; 2]) -> &PixelTarget {
        if self.size() != size {
            self.canvas.set_width(size[0]);
            self.canvas.set_height(size[1]);
            self.target = None;
        }
        self.target
            .get_or_insert_with(|| PixelTarget::new(engine, size))
    }

    /// The buffer the frame's pixels are mapped from.
    pub(super) fn pixels(&self) -> Option<&wgpu::Buffer> {
        self.target.as_ref().map(|t| &t.pixels)
    }

    /// Put the mapped frame on the canvas and unmap it. The mapping goes to `putImageData`
    /// as the browser gave it, never through wasm memory; its padded rows are an image as
    /// wide as a row, whose columns past the canvas's edge are clipped.
    pub(super) fn put(&self) -> Result<(), JsValue> {
        let t = self
            .target
            .as_ref()
            .ok_or_else(|| js_err("a 2D canvas frame was put before it was drawn"))?;
        let shown = (|| {
            let view = t
                .pixels
                .get_mapped_range(..)
                .map_err(|e| js_err(format!("frame pixels not mapped: {e:?}")))?;
            let bytes = view.as_uint8array();
            let clamped = js_sys::Uint8ClampedArray::new_with_byte_offset_and_length(
                &bytes.buffer(),
                bytes.byte_offset(),
                bytes.length(),
            );
            let image = web_sys::ImageData::new_with_js_u8_clamped_array_and_sh(
                &clamped,
                t.row_bytes() / 4,
                t.size[1],
            )?;
            self.context.put_image_data(&image, 0.0, 0.0)
        })();
        t.pixels.unmap();
        shown
    }
}
