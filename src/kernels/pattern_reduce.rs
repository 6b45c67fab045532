//! The pattern reduction (`wgsl/pattern_reduce.wgsl`): sum and max patterns over all
//! positions or a scan ROI, in chunks of tiles that bound one dispatch's work (C-REDUCE;
//! float32 data: C-FLOAT-GPU); over a compressed resident `wgsl/pattern_reduce_packed.wgsl`
//! decodes the sectors it reads (decision 0031).
//!
//! Its parity tests: `tests/gpu_parity/pattern_reduce.rs`.

use bytemuck::{Pod, Zeroable};

use crate::contract::{Region, ScanRoi};
use crate::error::Result;
use crate::gpu::{Batch, Engine, Resident};
use crate::kernels::{self, grid, uniform};

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct PatternParams {
        pub frames: u32,
        pub tile_words: u32,
        pub bits: u32,
        pub det_len: u32,
        pub first_frame: u32,
        /// Tiles per invocation ([`pattern_chunk_tiles`]).
        pub chunk_tiles: u32,
        pub groups_x: u32,
        /// Workgroups (32 pixels each) covering the detector.
        pub pixel_groups: u32,
        /// Float32 residents: the power of two all samples are integer multiples of.
        pub lsb: i32,
        /// Compressed residents: groups of 8 pixels a tile in the packed index.
        pub packed_groups: u32,
        pub _pad2: u32,
        pub _pad3: u32,
    }
}

/// Invocations the pattern reduction aims for (enough to fill a large GPU), when the
/// detector alone gives fewer.
pub const PATTERN_INVOCATIONS: u64 = 1 << 21;

/// Tiles one pattern-reduce invocation walks for `tiles` tiles of `bits`-bit samples and a
/// detector of `det_len` pixels (two invocations each): enough chunks to fill the GPU, and
/// never so many tiles that an invocation's u32 sum (`4 · per_word` samples a tile) could
/// wrap; 32-bit samples carry into a high word.
pub fn pattern_chunk_tiles(tiles: u32, bits: u32, det_len: usize) -> u32 {
    let chunks = PATTERN_INVOCATIONS.div_ceil(det_len.max(1) as u64 * 2);
    let mut len = (tiles as u64).div_ceil(chunks).max(1);
    if bits < 32 {
        let per_vec4 = (128 / bits) as u64;
        len = len.min(u32::MAX as u64 / (per_vec4 * ((1u64 << bits) - 1)));
    }
    len as u32
}

/// Record the pattern reduction over the positions in `roi` into `out` (16 bytes per pixel:
/// sum lo, sum hi, max, seen; 32 for float32 residents: four sum limbs, max key, seen, pad).
/// `out` is cleared first; segments add into it.
pub fn encode_pattern_reduce(
    engine: &Engine,
    encoder: &mut wgpu::CommandEncoder,
    res: &Resident,
    roi: &ScanRoi,
    out: &wgpu::Buffer,
) -> Result<()> {
    let shape = res.plan.shape;
    let det_len = shape.det_len();
    let roi_tiles = engine.input(&tile_masks(roi, shape.scan, res.plan.tile));
    // Float32 residents: 128-bit sums, max key, seen, pad (32 bytes a pixel) at binding 4;
    // compressed ones (always integer) are decoded in the kernel (decision 0031).
    let packed = res.packed.as_ref();
    let (kernel, binding, lsb, bytes) = match (res.float, packed) {
        (Some(r), _) => (&kernels::PATTERN_REDUCE_F32, 4, r.lsb, 32),
        (None, Some(_)) => (&kernels::PATTERN_REDUCE_PACKED, 2, 0, 16),
        (None, None) => (&kernels::PATTERN_REDUCE, 2, 0, 16),
    };
    encoder.clear_buffer(out, 0, Some(det_len as u64 * bytes));
    let pixel_groups = (det_len as u32).div_ceil(32);
    let packed_groups = kernels::packed::groups_per_tile(det_len);
    let mut batch = Batch::default();
    for (i, seg) in res.plan.segments.iter().enumerate() {
        let tiles = (seg.frames as u32).div_ceil(res.plan.tile);
        let chunk_tiles = kernels::pattern_chunk_tiles(tiles, res.plan.bits, det_len);
        let groups = grid(pixel_groups * tiles.div_ceil(chunk_tiles));
        let params = engine.uniform(&PatternParams {
            frames: seg.frames as u32,
            tile_words: res.plan.tile_words,
            bits: res.plan.bits,
            det_len: det_len as u32,
            first_frame: seg.first_frame as u32,
            chunk_tiles,
            groups_x: groups.0,
            pixel_groups,
            lsb,
            packed_groups,
            ..Default::default()
        });
        let mut bindings = vec![(0, &params), (binding, out), (3, &roi_tiles)];
        bindings.extend(res.segment_bindings(i, 1, (5, 6))?);
        batch.add(engine, kernel, &bindings, groups)?;
    }
    batch.flush(encoder);
    Ok(())
}

/// Per tile of `tile` positions, bit `p` set when the tile's position `p` is inside `roi`.
pub fn tile_masks(roi: &ScanRoi, scan: [usize; 2], tile: u32) -> Vec<u32> {
    let tile = tile as usize;
    let mut masks = vec![0u32; (scan[0] * scan[1]).div_ceil(tile)];
    for (r, [c0, c1]) in roi.row_intervals(scan).into_iter().enumerate() {
        for f in r * scan[1] + c0 as usize..r * scan[1] + c1 as usize {
            masks[f / tile] |= 1 << (f % tile);
        }
    }
    masks
}

/// Sum (exact) and maximum pattern over the positions in `roi`.
pub async fn pattern_reduce(
    engine: &Engine,
    res: &Resident,
    roi: Region,
) -> Result<(Vec<u64>, Vec<u32>)> {
    let shape = res.plan.shape;
    let det_len = shape.det_len();
    let out = engine.storage("pattern", det_len as u64 * 16);
    let mut encoder = engine.device.create_command_encoder(&Default::default());
    encode_pattern_reduce(engine, &mut encoder, res, &ScanRoi::Rect(roi), &out)?;
    engine.queue.submit([encoder.finish()]);
    let bytes = engine.read_back(&out, det_len as u64 * 16).await?;
    let words: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
    let sum = words
        .chunks_exact(4)
        .map(|w| w[0] as u64 | (w[1] as u64) << 32)
        .collect();
    let max = words.chunks_exact(4).map(|w| w[2]).collect();
    Ok((sum, max))
}
