//! The CoM moments (`wgsl/com_moments.wgsl`: u32 lanes, wide, float32): per scan position,
//! the exact sums of I, I·row and I·col (C-COM; float32 data: C-FLOAT-GPU); over a
//! compressed resident the kernels decode the sectors they read with
//! `wgsl/packed_moments.wgsl` (decision 0031): `wgsl/com_moments_packed_rows.wgsl` walks
//! detector rows of whole index groups (decision 0061); on other detectors the loop of
//! `wgsl/packed_columns.wgsl` walks columns, each invocation finding its sectors
//! (`wgsl/com_moments_packed.wgsl`) or, with subgroups, a quad sharing them
//! (`wgsl/com_moments_packed_quad.wgsl`, decision 0060).
//! Parameters, the bounds that pick a variant, and the encoders.
//!
//! Its parity tests: `tests/gpu_parity/com_moments.rs`.

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::gpu::{Batch, Engine, Resident};
use crate::kernels::masked_sum::words_to_u64;
use crate::kernels::{self, grid, uniform};

/// Detector rows per u32 fold of the CoM running sums (`0`: take the 64-bit path per
/// sample): over n rows the running sum of sums reaches n(n − 1)/2 · vmax, kept below 2^32.
pub fn moment_flush(bits: u32, _det: [usize; 2]) -> u32 {
    if bits >= 32 {
        return 0;
    }
    let vmax = (1u64 << bits) - 1;
    let mut n = 1u64;
    while (n + 1) * n / 2 * vmax <= u32::MAX as u64 {
        n += 1;
    }
    n as u32
}

/// Row bands per tile that keep a large GPU busy: about 96 rows each (measured best on the
/// H200), up to 8. Both CoM kernels start from it.
pub fn com_bands(rows: usize) -> u32 {
    rows.div_ceil(96).clamp(1, 8) as u32
}

/// Row bands per tile for the CoM kernel with u32 lanes (`com_moments`, and
/// `com_moments_packed` with its quad form), or `None` when even one-row bands could wrap a
/// lane (take `com_moments_wide`): an invocation sums `ceil(cols / slots)` columns over a
/// band. [`com_bands`], or more bands when the bound needs them.
pub fn com_parts(bits: u32, det: [usize; 2]) -> Option<u32> {
    lane_bands(bits, det, |band, cols, slots| band * cols.div_ceil(slots))
}

/// Row bands per tile for `com_moments_packed_rows`, as [`com_parts`]: an invocation takes
/// every `slots`-th (row, group of 8 columns) item of its band.
pub fn com_parts_rows(bits: u32, det: [usize; 2]) -> Option<u32> {
    lane_bands(bits, det, |band, cols, slots| {
        (band * cols.div_ceil(8)).div_ceil(slots) * 8
    })
}

/// The fewest row bands per tile from [`com_bands`] up whose invocations sum at most
/// `pixels(band, cols, slots)` samples each, every one times a row or column index, below
/// 2^32; `None` when even one-row bands could wrap a lane.
fn lane_bands(bits: u32, det: [usize; 2], pixels: impl Fn(u64, u64, u64) -> u64) -> Option<u32> {
    if bits >= 32 {
        return None;
    }
    let [rows, cols] = [det[0].max(1) as u64, det[1].max(1) as u64];
    let slots = if bits == 8 { 32 } else { 64 };
    let scale = ((1u64 << bits) - 1) * (rows.max(cols) - 1).max(1);
    (com_bands(det[0]) as u64..=rows)
        .find(|&parts| pixels(rows.div_ceil(parts), cols, slots) * scale <= u32::MAX as u64)
        .map(|parts| parts as u32)
}

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct ComParams {
        pub frames: u32,
        pub tile_words: u32,
        pub bits: u32,
        pub det_rows: u32,
        pub det_cols: u32,
        pub first_frame: u32,
        pub groups_x: u32,
        /// Detector rows per u32 fold of the running sums ([`moment_flush`]).
        pub flush: u32,
        /// Float32 residents: the power of two all samples are integer multiples of.
        pub lsb: i32,
        /// Workgroups per tile ([`com_parts`]).
        pub parts: u32,
        /// Compressed residents: groups of 8 pixels a tile in the packed index.
        pub packed_groups: u32,
        pub _pad2: u32,
    }
}

/// The largest value a CoM moment (total, Σ i·I or Σ j·I) of `res` can take:
/// max_value · pixels · max(K − 1, 1).
pub fn moment_bound(res: &Resident) -> u128 {
    moment_bound_of(res.plan.bits, res.plan.shape.det)
}

/// [`moment_bound`] of a resident of `bits`-bit samples of a `det` detector, known before
/// it exists (a streamed session's first look).
pub fn moment_bound_of(bits: u32, det: [usize; 2]) -> u128 {
    let max_value = if bits == 32 {
        u32::MAX as u128
    } else {
        (1u128 << bits) - 1
    };
    max_value * (det[0] * det[1]) as u128 * (det[0].max(det[1]) as u128).max(2)
}

/// Refuse detectors whose 64-bit moments could overflow: exact while the
/// [`moment_bound`] stays below 2^64.
pub fn moments_fit_64(res: &Resident) -> Result<()> {
    if moment_bound(res) >= 1u128 << 64 {
        return Err(Error::GpuUnsupported(
            "centre-of-mass moments of this detector could exceed 64 bits; use --backend cpu"
                .into(),
        ));
    }
    Ok(())
}

/// Moments buffer bytes (three u64 per position) as (total, Σ i·I, Σ j·I).
pub fn parse_moments(bytes: &[u8]) -> Vec<[u64; 3]> {
    let v = words_to_u64(bytes);
    v.chunks_exact(3).map(|m| [m[0], m[1], m[2]]).collect()
}

/// Per-position (total, Σ i·I, Σ j·I), exact.
pub async fn com_moments(engine: &Engine, res: &Resident) -> Result<Vec<[u64; 3]>> {
    moments_fit_64(res)?;
    let frames = res.plan.shape.frames();
    let out = engine.storage("com moments", frames as u64 * 24);
    let mut encoder = engine.device.create_command_encoder(&Default::default());
    encode_com_moments(engine, &mut encoder, res, &out)?;
    engine.queue.submit([encoder.finish()]);
    Ok(parse_moments(
        &engine.read_back(&out, frames as u64 * 24).await?,
    ))
}

/// Record the fused CoM-moment kernel into `out` (24 bytes per position; 48 for float32
/// residents; cleared first, so it needs `COPY_DST`).
pub fn encode_com_moments(
    engine: &Engine,
    encoder: &mut wgpu::CommandEncoder,
    res: &Resident,
    out: &wgpu::Buffer,
) -> Result<()> {
    let plan = &res.plan;
    let (flush, parts) = match kernels::com_parts(plan.bits, plan.shape.det) {
        Some(parts) => (kernels::moment_flush(plan.bits, plan.shape.det), parts),
        None => (0, kernels::com_bands(plan.shape.det[0])),
    };
    encode_com_moments_with(engine, encoder, res, out, flush, parts)
}

/// [`encode_com_moments`] folding the running sums every `flush` rows (any value up to
/// [`kernels::moment_flush`] is exact; 0 = the 64-bit path per sample) in `parts` bands of
/// rows per tile, at least those [`kernels::com_parts`] needs for u32 lanes (tests force
/// both to exercise the folds and the atomic adds).
pub fn encode_com_moments_with(
    engine: &Engine,
    encoder: &mut wgpu::CommandEncoder,
    res: &Resident,
    out: &wgpu::Buffer,
    flush: u32,
    parts: u32,
) -> Result<()> {
    let shape = res.plan.shape;
    let fits = kernels::com_parts(res.plan.bits, shape.det);
    let flush = flush.min(kernels::moment_flush(res.plan.bits, shape.det));
    // Float32 residents: three 128-bit sums (48 bytes a position) at binding 3; compressed
    // ones (always integer) are decoded in the kernel that sums them (decision 0031).
    let packed = res.packed.as_ref();
    let (kernel, binding, lsb, parts) = match (res.float, fits, packed.is_some()) {
        (Some(r), _, _) => (&kernels::COM_MOMENTS_F32, 3, r.lsb, parts),
        (None, Some(least), false) if flush > 0 => (&kernels::COM_MOMENTS, 2, 0, parts.max(least)),
        (None, Some(least), true) if flush > 0 => {
            // Rows of whole index groups are walked along (decision 0061); otherwise a
            // quad of invocations shares each sector's index where the engine has
            // subgroups (decision 0060).
            match kernels::com_parts_rows(res.plan.bits, shape.det) {
                Some(bands) if shape.det[1].is_multiple_of(8) => {
                    (&kernels::COM_MOMENTS_PACKED_ROWS, 2, 0, parts.max(bands))
                }
                _ if engine.subgroups() => {
                    (&kernels::COM_MOMENTS_PACKED_QUAD, 2, 0, parts.max(least))
                }
                _ => (&kernels::COM_MOMENTS_PACKED, 2, 0, parts.max(least)),
            }
        }
        (None, _, false) => (&kernels::COM_MOMENTS_WIDE, 2, 0, parts),
        (None, _, true) => (&kernels::COM_MOMENTS_PACKED_WIDE, 2, 0, parts),
    };
    // Parts of the detector add into the moments: cleared first.
    let bytes = if res.float.is_some() { 48 } else { 24 };
    encoder.clear_buffer(out, 0, Some(shape.frames() as u64 * bytes));
    let parts = parts.max(1);
    let packed_groups = kernels::packed::groups_per_tile(shape.det_len());
    let mut batch = Batch::default();
    for (i, seg) in res.plan.segments.iter().enumerate() {
        let groups = grid((seg.frames as u32).div_ceil(res.plan.tile) * parts);
        let params = engine.uniform(&ComParams {
            frames: seg.frames as u32,
            tile_words: res.plan.tile_words,
            bits: res.plan.bits,
            det_rows: shape.det[0] as u32,
            det_cols: shape.det[1] as u32,
            first_frame: seg.first_frame as u32,
            groups_x: groups.0,
            flush,
            lsb,
            parts,
            packed_groups,
            ..Default::default()
        });
        let mut bindings = vec![(0, &params), (binding, out)];
        bindings.extend(res.segment_bindings(i, 1, (4, 5))?);
        batch.add(engine, kernel, &bindings, groups)?;
    }
    batch.flush(encoder);
    Ok(())
}
