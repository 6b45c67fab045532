//! Tiling frames (`wgsl/tile_frames.wgsl`): frames read on the CPU, packed into the
//! position-tiled resident layout on the GPU.
//!
//! Its parity tests: `tests/gpu_parity/tile_frames.rs`.

use bytemuck::{Pod, Zeroable};

use crate::kernels::uniform;

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct TileParams {
        pub frames: u32,
        pub first_tile: u32,
        pub frame_words: u32,
        pub tile_words: u32,
        pub bits: u32,
        pub groups_x: u32,
        pub det_len: u32,
        pub _pad1: u32,
    }
}
