//! The masked sum (`wgsl/masked_sum.wgsl`; its subgroup variant
//! `wgsl/masked_sum_subgroup.wgsl`, an atomic one, and `wgsl/masked_sum_packed.wgsl` with its
//! subgroup variant `wgsl/masked_sum_packed_subgroup.wgsl`, which decode a compressed resident
//! where they read it): per scan position, the exact sum of a
//! detector mask's samples (C-MASK; float32 data: C-FLOAT-GPU).
//! Its parameters, how a mask is cut into parts, and the encoders every virtual image and
//! total goes through.
//!
//! Its parity tests: `tests/gpu_parity/masked_sum.rs`.

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::gpu::{Batch, Engine, Resident};
use crate::kernels::{self, grid, uniform};
use crate::products::host_exact::ExactSum;

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct MaskedSumParams {
        pub frames: u32,
        pub tile_words: u32,
        pub bits: u32,
        pub n_idx: u32,
        pub first_frame: u32,
        pub groups_x: u32,
        /// Float32 residents: the power of two all samples are integer multiples of.
        pub lsb: i32,
        /// Workgroups per tile ([`masked_sum_parts`]).
        pub parts: u32,
        /// Positions between neighbouring parts' images (0: one image).
        pub part_stride: u32,
        /// Compressed residents: groups of 8 pixels per tile (`kernels::packed`).
        pub packed_groups: u32,
        pub _pad1: u32,
        pub _pad2: u32,
    }
}

/// Workgroups per tile for a mask of `pixels` pixels of `bits`-bit samples: one tile per
/// workgroup leaves a large GPU partly idle (a resident buffer holds a few thousand tiles),
/// so the pixel list is cut into parts of about 48 pixels per invocation (32 a workgroup; on
/// the H200 that is 2 parts for a BF disk of 2,828 pixels, 12 for an annulus of 17,296: BF
/// ran 0.53 ms with one part, 0.51 with two, 0.84–0.89 with three or four).
pub fn masked_sum_parts(pixels: u32, bits: u32) -> u32 {
    pixels
        .div_ceil(32 * 48)
        .clamp(1, 16)
        .max(masked_sum_min_parts(pixels, bits, false))
}

/// The most pixels one part may hold with no u32 lane wrapping: an invocation sums a 32nd
/// of the part, or with `subgroups` a subgroup sums all of it; 32-bit samples carry into
/// a high lane instead.
pub fn masked_sum_part_limit(bits: u32, subgroups: bool) -> u32 {
    let per_lane = if subgroups { 1 } else { 32 };
    match bits {
        32 => u32::MAX,
        b => per_lane * sum_flush(b),
    }
}

/// The fewest even parts within [`masked_sum_part_limit`].
pub fn masked_sum_min_parts(pixels: u32, bits: u32, subgroups: bool) -> u32 {
    pixels
        .div_ceil(masked_sum_part_limit(bits, subgroups))
        .max(1)
}

/// Largest sample count whose u32 sum cannot wrap for `bits`-bit samples.
pub fn sum_flush(bits: u32) -> u32 {
    let vmax = if bits >= 32 {
        u32::MAX
    } else {
        (1u32 << bits) - 1
    };
    (u32::MAX / vmax).max(1)
}

pub(crate) fn words_to_u64(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .collect()
}

/// A detector mask as the masked-sum kernel reads it: its pixels, ascending (neighbouring
/// invocations then read neighbouring sectors of a tile).
pub struct DetectorList {
    pub buffer: wgpu::Buffer,
    pub entries: u32,
    /// The same pixels on the host (ascending, distinct): split over cached ring sums.
    pub pixels: Vec<u32>,
}

impl DetectorList {
    pub fn new(engine: &Engine, indices: &[u32]) -> Result<DetectorList> {
        let mut sorted = indices.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        Ok(Self::in_order(engine, sorted))
    }

    /// `pixels` as given (ascending within each part they will be cut into).
    pub fn in_order(engine: &Engine, pixels: Vec<u32>) -> DetectorList {
        DetectorList {
            buffer: engine.input(&pixels),
            entries: pixels.len() as u32,
            pixels,
        }
    }
}

/// How a pixel list is cut into the parts each tile's workgroups take.
pub enum Parts<'a> {
    /// At least this many even parts, all adding into one image.
    Even(u32),
    /// Part k is [starts[k], starts[k + 1]) of the list, and its image starts `stride`
    /// positions after part k − 1's (ring sums: one image per ring), the resident's first
    /// position at `first` of each image (a streamed block's rows within the whole scan).
    Table {
        starts: &'a [u32],
        stride: u32,
        first: u32,
    },
}

/// Record the masked sum of `list` over every segment into `out` (8 bytes per position;
/// 16, a 128-bit sum in units of `2^lsb`, for float32 residents; it needs `COPY_DST`).
/// Where the resident has ring sums ([`crate::kernels::ring_sum`]) and the mask holds enough whole
/// rings, their sums are added up and only the other pixels are read.
pub fn encode_masked_sums(
    engine: &Engine,
    encoder: &mut wgpu::CommandEncoder,
    res: &Resident,
    list: &DetectorList,
    out: &wgpu::Buffer,
) -> Result<()> {
    if let Some(radial) = &res.radial {
        if let Some(split) = radial.split(&list.pixels, res.plan.bits) {
            radial.encode(engine, encoder, &split.rings, out)?;
            if !split.rest.is_empty() {
                let rest = DetectorList::new(engine, &split.rest)?;
                let parts = kernels::masked_sum_parts(rest.entries, res.plan.bits);
                encode_parts(engine, encoder, res, &rest, out, Parts::Even(parts), false)?;
            }
            return Ok(());
        }
    }
    let parts = kernels::masked_sum_parts(list.entries, res.plan.bits);
    encode_masked_sums_in_parts(engine, encoder, res, list, out, parts)
}

/// [`encode_masked_sums`] with the pixel list cut into `parts` per tile (at least the
/// parts that keep every lane, and every subgroup's sum on the subgroup path, from
/// wrapping; tests force others).
pub fn encode_masked_sums_in_parts(
    engine: &Engine,
    encoder: &mut wgpu::CommandEncoder,
    res: &Resident,
    list: &DetectorList,
    out: &wgpu::Buffer,
    parts: u32,
) -> Result<()> {
    encode_parts(engine, encoder, res, list, out, Parts::Even(parts), true)
}

/// The masked sums of `list` added into `out` (cleared first when `clear`: the first image
/// only), its parts as `parts` says. A table whose parts could wrap a lane is refused.
pub fn encode_parts(
    engine: &Engine,
    encoder: &mut wgpu::CommandEncoder,
    res: &Resident,
    list: &DetectorList,
    out: &wgpu::Buffer,
    parts: Parts,
    clear: bool,
) -> Result<()> {
    // Float32 residents: 128-bit sums (16 bytes a position) at binding 4. 8- and 16-bit
    // samples meet their slots through subgroups where the engine has them; compressed
    // residents (always integer) are decoded in the kernel that sums them, whose slots
    // otherwise meet in workgroup memory (decision 0059); raw ones otherwise meet in
    // workgroup memory or atomically in the output, as the engine chose for the adapter.
    let bits = res.plan.bits;
    let packed = res.packed.is_some();
    let subgroups = res.float.is_none() && engine.subgroups() && bits < 32;
    let (kernel, binding, lsb) = match res.float {
        Some(r) => (&kernels::MASKED_SUM_F32, 4, r.lsb),
        None if packed && subgroups => (&kernels::MASKED_SUM_PACKED_SUBGROUP, 3, 0),
        None if packed => (&kernels::MASKED_SUM_PACKED, 3, 0),
        None if subgroups => (&kernels::MASKED_SUM_SUBGROUP, 3, 0),
        None if engine.atomic_sums() => (&kernels::MASKED_SUM_ATOMIC, 3, 0),
        None => (&kernels::MASKED_SUM, 3, 0),
    };
    // Parts of the mask add into the sums: cleared first unless they add to others.
    if clear {
        let bytes = if res.float.is_some() { 16 } else { 8 };
        encoder.clear_buffer(out, 0, Some(res.plan.shape.frames() as u64 * bytes));
    }
    let n = list.entries;
    let (starts, part_stride, first) = match parts {
        Parts::Even(p) => {
            let p = p.max(kernels::masked_sum_min_parts(n, bits, subgroups));
            let per = n.div_ceil(p);
            ((0..=p).map(|k| (k * per).min(n)).collect(), 0, 0)
        }
        Parts::Table {
            starts,
            stride,
            first,
        } => {
            let most = kernels::masked_sum_part_limit(bits, subgroups);
            if starts.windows(2).any(|w| w[1] < w[0] || w[1] - w[0] > most) {
                return Err(Error::param(
                    "a masked-sum part is too large for exact u32 lanes",
                ));
            }
            (starts.to_vec(), stride, first)
        }
    };
    let parts = starts.len().saturating_sub(1) as u32;
    if parts == 0 {
        return Ok(());
    }
    let part_starts = engine.input(&starts);
    let mut batch = Batch::default();
    let packed_groups = kernels::packed::groups_per_tile(res.plan.shape.det_len());
    for (i, seg) in res.plan.segments.iter().enumerate() {
        let groups = grid((seg.frames as u32).div_ceil(res.plan.tile) * parts);
        let params = engine.uniform(&MaskedSumParams {
            frames: seg.frames as u32,
            tile_words: res.plan.tile_words,
            bits: res.plan.bits,
            n_idx: list.entries,
            first_frame: first + seg.first_frame as u32,
            groups_x: groups.0,
            lsb,
            parts,
            part_stride,
            packed_groups,
            ..Default::default()
        });
        let mut bindings = vec![
            (0, &params),
            (2, &list.buffer),
            (binding, out),
            (5, &part_starts),
        ];
        bindings.extend(res.segment_bindings(i, 1, (6, 7))?);
        batch.add(engine, kernel, &bindings, groups)?;
    }
    batch.flush(encoder);
    Ok(())
}

/// Per-position exact sums over the detector pixels in `indices`.
pub async fn masked_sums(engine: &Engine, res: &Resident, indices: &[u32]) -> Result<Vec<u64>> {
    let frames = res.plan.shape.frames();
    let out = engine.storage("masked sums", frames as u64 * 8);
    let list = DetectorList::new(engine, indices)?;
    let mut encoder = engine.device.create_command_encoder(&Default::default());
    encode_masked_sums(engine, &mut encoder, res, &list, &out)?;
    engine.queue.submit([encoder.finish()]);
    Ok(words_to_u64(
        &engine.read_back(&out, frames as u64 * 8).await?,
    ))
}

/// Most distinct weights a weighted mask may have on the GPU (one exact pass each; C-WEIGHTS).
pub const MAX_WEIGHT_GROUPS: usize = 64;

/// The detector pixels of each distinct non-zero weight (keyed by the weight's bits).
pub fn weight_groups(
    indices: &[u32],
    weights: &[f64],
) -> std::collections::BTreeMap<u64, Vec<u32>> {
    let mut groups: std::collections::BTreeMap<u64, Vec<u32>> = Default::default();
    for (&k, &w) in indices.iter().zip(weights) {
        if w != 0.0 {
            groups.entry(w.to_bits()).or_default().push(k);
        }
    }
    groups
}

/// [`weight_groups`], refused when there are more than the GPU path takes.
pub fn gpu_weight_groups(
    indices: &[u32],
    weights: &[f64],
) -> Result<std::collections::BTreeMap<u64, Vec<u32>>> {
    let groups = weight_groups(indices, weights);
    if groups.len() > MAX_WEIGHT_GROUPS {
        return Err(Error::GpuUnsupported(format!(
            "this weighted mask has {} distinct weights (the GPU path takes at most {MAX_WEIGHT_GROUPS}); use --backend cpu",
            groups.len()
        )));
    }
    Ok(groups)
}

/// Weighted masks: an exact integer sum per distinct weight on the GPU, combined on the host
/// exactly (FMA products into an exact expansion, `products::host_exact`), rounded once, so the result meets the CPU reference's bound
/// (C-WEIGHTS).
pub async fn weighted_sums(
    engine: &Engine,
    res: &Resident,
    indices: &[u32],
    weights: &[f64],
) -> Result<Vec<f64>> {
    let groups = gpu_weight_groups(indices, weights)?;
    let mut acc = vec![ExactSum::default(); res.plan.shape.frames()];
    for (bits, idx) in groups {
        let w = f64::from_bits(bits);
        for (a, s) in acc.iter_mut().zip(masked_sums(engine, res, &idx).await?) {
            a.add_weighted(w, s);
        }
    }
    Ok(acc.iter().map(ExactSum::value).collect())
}
