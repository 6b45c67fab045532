//! The compressed resident's kernels (`wgsl/packed.wgsl`): encoding a raw resident segment
//! into sectors cut to the bit width of their largest sample, and unpacking the sectors a
//! product reads into a raw-layout scratch segment (decision 0025). The layout is described
//! in the WGSL; `upload::packed` builds residents with it.
//!
//! Its parity tests: `tests/gpu_parity/packed.rs`.

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::gpu::{Batch, Engine};
use crate::kernels::{self, grid, uniform};
use crate::upload::plan::ResidentPlan;

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct PackedParams {
        pub tiles: u32,
        pub first_tile: u32,
        pub groups_per_tile: u32,
        pub det_len: u32,
        pub bits: u32,
        pub tile_words: u32,
        pub groups_x: u32,
        /// `packed` (the unpack): entries of the pixel list, 0 for every pixel.
        pub n_list: u32,
        /// `packed`: the tile of the scratch its first tile is written to.
        pub out_tile: u32,
        /// `packed_rebase`: words added to each group's data start.
        pub rebase: u32,
        pub _pad1: u32,
        pub _pad2: u32,
    }
}

/// Groups (of 8 pixels of a tile) one `packed_codes` workgroup sizes.
pub const GROUPS_PER_BLOCK: u32 = 1024;

/// Groups of 8 pixels per tile of a detector of `det_len` pixels.
pub fn groups_per_tile(det_len: usize) -> u32 {
    det_len.div_ceil(8) as u32
}

/// Index words of a packed segment of `tiles` tiles (two per group).
pub fn index_words(tiles: u32, det_len: usize) -> u64 {
    tiles as u64 * groups_per_tile(det_len) as u64 * 2
}

/// Words of the one-bit-per-pixel mask of pixels unpacked as 0.
pub fn zeroed_words(det_len: usize) -> usize {
    det_len.div_ceil(32).max(1)
}

fn params(plan: &ResidentPlan, tiles: u32, groups: (u32, u32)) -> PackedParams {
    let det_len = plan.shape.det_len();
    PackedParams {
        tiles,
        groups_per_tile: groups_per_tile(det_len),
        det_len: det_len as u32,
        bits: plan.bits,
        tile_words: plan.tile_words,
        groups_x: groups.0,
        ..Default::default()
    }
}

/// One raw segment being encoded: `tiles` tiles of `plan`'s layout in `raw`, and `local`,
/// two words a group, between the two passes.
pub struct Encoding<'a> {
    pub plan: &'a ResidentPlan,
    pub tiles: u32,
    pub raw: &'a wgpu::Buffer,
    pub local: &'a wgpu::Buffer,
}

impl Encoding<'_> {
    /// Groups (of 8 pixels of a tile) of the segment.
    fn groups(&self) -> u64 {
        self.tiles as u64 * groups_per_tile(self.plan.shape.det_len()) as u64
    }

    /// Record `k` over `workgroups` workgroups with the segment's parameters and raw
    /// samples bound, and `more` beside them.
    fn record(
        &self,
        engine: &Engine,
        encoder: &mut wgpu::CommandEncoder,
        k: &kernels::Kernel,
        workgroups: u64,
        more: &[(u32, &wgpu::Buffer)],
    ) -> Result<u32> {
        let n = u32::try_from(workgroups)
            .map_err(|_| Error::Gpu("a packed segment has too many groups".into()))?;
        let groups = grid(n);
        let p = engine.uniform(&params(self.plan, self.tiles, groups));
        let mut bindings = vec![(0, &p), (1, self.raw)];
        bindings.extend_from_slice(more);
        let mut batch = Batch::default();
        batch.add(engine, k, &bindings, groups)?;
        batch.flush(encoder);
        Ok(n)
    }
}

/// The first pass of encoding: per group its width codes and data words from its block's
/// start into `local`, and per block of [`GROUPS_PER_BLOCK`] groups their words into
/// `block_words`. Returns the blocks.
pub fn encode_codes(
    engine: &Engine,
    encoder: &mut wgpu::CommandEncoder,
    e: &Encoding,
    block_words: &wgpu::Buffer,
) -> Result<u32> {
    let blocks = e.groups().div_ceil(GROUPS_PER_BLOCK as u64);
    let more = [(2, e.local), (3, block_words)];
    e.record(engine, encoder, &kernels::PACKED_CODES, blocks, &more)
}

/// The second pass: the index and the data of the packed segment into `packed`, each
/// block's data from word `block_base[b]` on.
pub fn encode_write(
    engine: &Engine,
    encoder: &mut wgpu::CommandEncoder,
    e: &Encoding,
    block_base: &wgpu::Buffer,
    packed: &wgpu::Buffer,
) -> Result<()> {
    let more = [(4, e.local), (5, block_base), (6, packed)];
    e.record(
        engine,
        encoder,
        &kernels::PACKED_WRITE,
        e.groups().div_ceil(256),
        &more,
    )?;
    Ok(())
}

/// What a product reads of a packed segment: the pixels of a list (`None`: every pixel) of
/// tiles `[t0, t1)`, written from tile `out_tile` of the scratch on.
#[derive(Clone, Copy)]
pub struct Unpack<'a> {
    pub list: Option<(&'a wgpu::Buffer, u32)>,
    pub tiles: (u32, u32),
    pub out_tile: u32,
}

/// Queue the unpacking of `what` of the packed segment `packed` into `scratch` (the raw
/// layout of tiles `[t0, t1)`, tile `t` at word `(out_tile + t − t0) · tile_words`), the
/// pixels set in `zeroed` as 0. The scratch holds at least `out_tile + t1 − t0` tiles.
pub(crate) fn add_unpack(
    engine: &Engine,
    batch: &mut Batch,
    plan: &ResidentPlan,
    packed: &wgpu::Buffer,
    zeroed: &wgpu::Buffer,
    scratch: &wgpu::Buffer,
    what: Unpack,
) -> Result<()> {
    let (t0, t1) = what.tiles;
    let det_len = plan.shape.det_len();
    let (list, n) = match what.list {
        Some((buffer, n)) => (buffer, n),
        None => (zeroed, 0),
    };
    let per_tile = if n > 0 { n as u64 } else { det_len as u64 };
    let invocations = t1.saturating_sub(t0) as u64 * per_tile;
    if invocations == 0 {
        return Ok(());
    }
    let invocations = u32::try_from(invocations).map_err(|_| {
        Error::Gpu("a packed segment is too large to unpack in one dispatch".into())
    })?;
    let groups = grid(invocations.div_ceil(256));
    let mut p = params(plan, t1 - t0, groups);
    p.first_tile = t0;
    p.n_list = n;
    p.out_tile = what.out_tile;
    let p = engine.uniform(&p);
    batch.add(
        engine,
        &kernels::PACKED,
        &[(0, &p), (7, packed), (8, list), (9, zeroed), (10, scratch)],
        groups,
    )
}

/// One invocation a group of `tiles` tiles from `first_tile` of a packed segment, `p`'s
/// other fields set by `with`, recorded into `batch`.
fn add_over_groups(
    engine: &Engine,
    batch: &mut Batch,
    (plan, segment): (&ResidentPlan, &wgpu::Buffer),
    k: &kernels::Kernel,
    (first_tile, tiles): (u32, u32),
    with: impl FnOnce(&mut PackedParams),
) -> Result<()> {
    let groups = tiles as u64 * groups_per_tile(plan.shape.det_len()) as u64;
    if groups == 0 {
        return Ok(());
    }
    let n = u32::try_from(groups.div_ceil(256))
        .map_err(|_| Error::Gpu("a packed segment has too many groups".into()))?;
    let grid = grid(n);
    let mut p = params(plan, tiles, grid);
    p.first_tile = first_tile;
    with(&mut p);
    let p = engine.uniform(&p);
    batch.add(engine, k, &[(0, &p), (6, segment)], grid)
}

/// Queue the move of a prepared block's index, copied to tiles `[first_tile, first_tile +
/// tiles)` of the packed segment `segment`, to data `rebase` words further on (decision
/// 0055).
pub(crate) fn add_rebase(
    engine: &Engine,
    batch: &mut Batch,
    (plan, segment): (&ResidentPlan, &wgpu::Buffer),
    (first_tile, tiles): (u32, u32),
    rebase: u32,
) -> Result<()> {
    let k = &kernels::PACKED_REBASE;
    add_over_groups(
        engine,
        batch,
        (plan, segment),
        k,
        (first_tile, tiles),
        |p| p.rebase = rebase,
    )
}

/// Queue the zeroing of the saturation sentinels of the first `tiles` tiles of the packed
/// segment `segment`, in place (C-BAD, as the decode masks them).
pub(crate) fn add_zero_sentinels(
    engine: &Engine,
    batch: &mut Batch,
    (plan, segment): (&ResidentPlan, &wgpu::Buffer),
    tiles: u32,
) -> Result<()> {
    let k = &kernels::PACKED_ZERO_SENTINELS;
    add_over_groups(engine, batch, (plan, segment), k, (0, tiles), |_| {})
}
