//! The synthetic acquisition (`wgsl/synthetic.wgsl`): generated on the GPU for benchmarks,
//! the same integers as `formats::synthetic::sample` (C-SYNTH).
//!
//! Its parity tests: `tests/gpu_parity/synthetic.rs`.

use bytemuck::{Pod, Zeroable};

use crate::kernels::uniform;

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct SynthParams {
        pub frames: u32,
        pub first_frame: u32,
        pub tile_words: u32,
        pub det_rows: u32,
        pub det_cols: u32,
        pub scan_cols: u32,
        pub groups_x: u32,
        pub _pad0: u32,
    }
}
