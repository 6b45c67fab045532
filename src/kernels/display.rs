//! The display kernels' uniforms: preparing a plane (`wgsl/display_prep.wgsl`), its
//! statistics, histogram and limits (`wgsl/display_stats.wgsl`), and the view the render
//! module draws with (`wgsl/display.wgsl`). Their encoders are the display stage's (`display::gpu`).
//!
//! Its parity tests: `tests/display_gpu/`.

use bytemuck::{Pod, Zeroable};

use crate::kernels::uniform;

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct PrepParams {
        pub n: u32,
        pub source: u32,
        pub stride: u32,
        pub offset: u32,
        pub bits: u32,
        pub groups_x: u32,
        pub flip: u32,
        pub scale: f32,
        pub mean_r: f32,
        pub mean_c: f32,
        pub cos_t: f32,
        pub sin_t: f32,
    }
}

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct StatsParams {
        pub n: u32,
        pub mode: u32,
        pub scale: u32,
        pub _pad0: u32,
        pub p_lo: f32,
        pub p_hi: f32,
        pub abs_lo: f32,
        pub abs_hi: f32,
        pub shown_lo: f32,
        pub shown_hi: f32,
        pub _pad1: u32,
        pub _pad2: u32,
    }
}

uniform! {
    #[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
    pub struct View {
        pub src_w: u32,
        pub src_h: u32,
        pub canvas_w: u32,
        pub canvas_h: u32,
        pub cmap: u32,
        /// [`crate::display::Scale::code`].
        pub scale: u32,
        pub overlay: u32,
        pub cursor_on: u32,
        pub zoom: f32,
        pub pan_r: f32,
        pub pan_c: f32,
        pub line_px: f32,
        pub o_r: f32,
        pub o_c: f32,
        pub o_inner: f32,
        pub o_outer: f32,
        pub rect_r0: f32,
        pub rect_r1: f32,
        pub rect_c0: f32,
        pub rect_c1: f32,
        pub cursor_r: f32,
        pub cursor_c: f32,
        /// Non-zero: a direction image drawn with the colour wheel.
        pub wheel: u32,
        pub _pad1: f32,
    }
}
