//! Products on the GPU: each is one kernel over the resident acquisition; only the small
//! result leaves the GPU, and only when asked. Integer products equal the CPU reference
//! byte for byte; CoM/DPC/iDPC are returned as float32 per the contract.

use crate::contract::{Region, ScanRoi, SparseMask};
use crate::cpu::{dpc_from_com, Dd};
use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::frames::Correction;
use crate::pattern;
use crate::products::{ArrayData, ProductArray, ProductKind, ProductParams};

use crate::gpu::{Batch, Engine, Resident};
use crate::kernels::{self, grid, ComParams, MaskedSumParams, PatternParams};

fn words_to_u64(bytes: &[u8]) -> Vec<u64> {
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
    /// positions after part k − 1's (ring sums: one image per ring).
    Table { starts: &'a [u32], stride: u32 },
}

/// Record the masked sum of `list` over every segment into `out` (8 bytes per position;
/// 16, a 128-bit sum in units of `2^lsb`, for float32 residents; it needs `COPY_DST`).
/// Where the resident has ring sums ([`crate::products::radial`]) and the mask holds enough whole
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
    // Float32 residents: 128-bit sums (16 bytes a position) at binding 4; 8- and 16-bit
    // samples meet their slots through subgroups where the engine has them, otherwise in
    // workgroup memory or atomically in the output, as the engine chose for the adapter.
    let bits = res.plan.bits;
    let subgroups = res.float.is_none() && engine.subgroups() && bits < 32;
    let (kernel, binding, lsb) = match res.float {
        Some(r) => (&kernels::MASKED_SUM_F32, 4, r.lsb),
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
    let (starts, part_stride) = match parts {
        Parts::Even(p) => {
            let p = p.max(kernels::masked_sum_min_parts(n, bits, subgroups));
            let per = n.div_ceil(p);
            ((0..=p).map(|k| (k * per).min(n)).collect(), 0)
        }
        Parts::Table { starts, stride } => {
            let most = kernels::masked_sum_part_limit(bits, subgroups);
            if starts.windows(2).any(|w| w[1] < w[0] || w[1] - w[0] > most) {
                return Err(Error::param(
                    "a masked-sum part is too large for exact u32 lanes",
                ));
            }
            (starts.to_vec(), stride)
        }
    };
    let parts = starts.len().saturating_sub(1) as u32;
    if parts == 0 {
        return Ok(());
    }
    let part_starts = engine.input(&starts);
    let mut batch = Batch::default();
    for (seg, buf) in res.plan.segments.iter().zip(&res.buffers) {
        let groups = grid((seg.frames as u32).div_ceil(res.plan.tile) * parts);
        let params = engine.uniform(&MaskedSumParams {
            frames: seg.frames as u32,
            tile_words: res.plan.tile_words,
            bits: res.plan.bits,
            n_idx: list.entries,
            first_frame: seg.first_frame as u32,
            groups_x: groups.0,
            lsb,
            parts,
            part_stride,
            ..Default::default()
        });
        batch.add(
            engine,
            kernel,
            &[
                (0, &params),
                (1, buf),
                (2, &list.buffer),
                (binding, out),
                (5, &part_starts),
            ],
            groups,
        )?;
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

/// Most distinct weights a weighted mask may have on the GPU (one exact pass each).
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
        return Err(Error::Gpu(format!(
            "this weighted mask has {} distinct weights (the GPU path takes at most {MAX_WEIGHT_GROUPS}); use --backend cpu",
            groups.len()
        )));
    }
    Ok(groups)
}

/// Weighted masks: an exact integer sum per distinct weight on the GPU, combined on the host
/// in double-double with exact (FMA) products, so the result meets the CPU reference's bound.
pub async fn weighted_sums(
    engine: &Engine,
    res: &Resident,
    indices: &[u32],
    weights: &[f64],
) -> Result<Vec<f64>> {
    let groups = gpu_weight_groups(indices, weights)?;
    let mut acc = vec![Dd::ZERO; res.plan.shape.frames()];
    for (bits, idx) in groups {
        let w = f64::from_bits(bits);
        for (a, s) in acc.iter_mut().zip(masked_sums(engine, res, &idx).await?) {
            // s may pass 2^53: split so both products are exact.
            a.add_product(w * 4_294_967_296.0, (s >> 32) as f64);
            a.add_product(w, (s & 0xffff_ffff) as f64);
        }
    }
    Ok(acc.iter().map(Dd::value).collect())
}

/// The largest value a CoM moment (total, Σ i·I or Σ j·I) of `res` can take:
/// max_value · pixels · max(K − 1, 1).
pub fn moment_bound(res: &Resident) -> u128 {
    let shape = res.plan.shape;
    let max_value = if res.plan.bits == 32 {
        u32::MAX as u128
    } else {
        (1u128 << res.plan.bits) - 1
    };
    max_value * shape.det_len() as u128 * (shape.det[0].max(shape.det[1]) as u128).max(2)
}

/// Refuse detectors whose 64-bit moments could overflow: exact while the
/// [`moment_bound`] stays below 2^64.
pub fn moments_fit_64(res: &Resident) -> Result<()> {
    if moment_bound(res) >= 1u128 << 64 {
        return Err(Error::Gpu(
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
    // Float32 residents: three 128-bit sums (48 bytes a position) at binding 3.
    let (kernel, binding, lsb, parts) = match (res.float, fits) {
        (Some(r), _) => (&kernels::COM_MOMENTS_F32, 3, r.lsb, parts),
        (None, Some(least)) if flush > 0 => (&kernels::COM_MOMENTS, 2, 0, parts.max(least)),
        (None, _) => (&kernels::COM_MOMENTS_WIDE, 2, 0, parts),
    };
    // Parts of the detector add into the moments: cleared first.
    let bytes = if res.float.is_some() { 48 } else { 24 };
    encoder.clear_buffer(out, 0, Some(shape.frames() as u64 * bytes));
    let parts = parts.max(1);
    let mut batch = Batch::default();
    for (seg, buf) in res.plan.segments.iter().zip(&res.buffers) {
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
            ..Default::default()
        });
        batch.add(
            engine,
            kernel,
            &[(0, &params), (1, buf), (binding, out)],
            groups,
        )?;
    }
    batch.flush(encoder);
    Ok(())
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
    // Float32 residents: 128-bit sums, max key, seen, pad (32 bytes a pixel) at binding 4.
    let (kernel, binding, lsb, bytes) = match res.float {
        Some(r) => (&kernels::PATTERN_REDUCE_F32, 4, r.lsb, 32),
        None => (&kernels::PATTERN_REDUCE, 2, 0, 16),
    };
    encoder.clear_buffer(out, 0, Some(det_len as u64 * bytes));
    let pixel_groups = (det_len as u32).div_ceil(32);
    let mut batch = Batch::default();
    for (seg, buf) in res.plan.segments.iter().zip(&res.buffers) {
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
            ..Default::default()
        });
        batch.add(
            engine,
            kernel,
            &[(0, &params), (1, buf), (binding, out), (3, &roi_tiles)],
            groups,
        )?;
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

/// Resident samples of frames `[f0, f1)`, unpacked to u32.
pub async fn frames(engine: &Engine, res: &Resident, f0: usize, f1: usize) -> Result<Vec<u32>> {
    let plan = &res.plan;
    let det = plan.shape.det_len();
    let (tile, tile_words) = (plan.tile as usize, plan.tile_words as usize);
    let mut out = Vec::with_capacity(f1.saturating_sub(f0) * det);
    for (seg, buf) in plan.segments.iter().zip(&res.buffers) {
        let (s0, s1) = (
            f0.max(seg.first_frame) - seg.first_frame,
            f1.min(seg.first_frame + seg.frames)
                .saturating_sub(seg.first_frame),
        );
        if s0 >= s1 {
            continue;
        }
        // Only the tiles holding the frames asked for leave the GPU.
        let (t0, t1) = (s0 / tile, s1.div_ceil(tile));
        let bytes = engine
            .read_back_range(
                buf,
                (t0 * tile_words * 4) as u64,
                ((t1 - t0) * tile_words * 4) as u64,
            )
            .await?;
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
        for f in s0..s1 {
            let t = f / tile - t0;
            let tile_of = &words[t * tile_words..(t + 1) * tile_words];
            out.extend((0..det).map(|k| plan.tile_sample(tile_of, k, (f % tile) as u32)));
        }
    }
    Ok(out)
}

/// Exact CoM planes [row, col] from the moments (0 where a pattern is empty).
pub fn com_from_moments(m: &[[u64; 3]]) -> Vec<f64> {
    let n = m.len();
    let mut com = vec![0f64; 2 * n];
    for (k, [t, r, c]) in m.iter().enumerate() {
        if *t != 0 {
            com[k] = crate::cpu::div_u128(*r as u128, *t as u128);
            com[n + k] = crate::cpu::div_u128(*c as u128, *t as u128);
        }
    }
    com
}

/// Compute one product with the GPU engine (uploading the acquisition first, and with
/// bad-pixel masking zeroing the hot and dead pixels of its mean pattern).
pub async fn compute(
    engine: &Engine,
    acq: &Acquisition,
    p: &ProductParams,
) -> Result<ProductArray> {
    p.validate(acq.shape)?;
    let mut res = engine
        .upload(
            acq,
            Correction {
                mask_bad_pixels: p.mask_bad_pixels,
                bin: p.bin,
            },
        )
        .await?;
    settle_bad_pixels(engine, acq, &mut res).await?;
    compute_resident(engine, acq, &res, p).await
}

/// The mean pattern of `res` (float64, exact sums rounded once) and the hot and dead pixels
/// in it (`pattern::detect`, leaving out the file's bad pixels). With bad-pixel masking on
/// they are zeroed in `res` (`Engine::zero_pixels`) and in the mean returned, so that every
/// product leaves them out as the CPU reference does.
pub async fn settle_bad_pixels(
    engine: &Engine,
    acq: &Acquisition,
    res: &mut Resident,
) -> Result<(Vec<f64>, pattern::BadPixels)> {
    let corr = res.correction;
    let det = res.plan.shape.det;
    let mut p = ProductParams::new(ProductKind::MeanDp);
    (p.bin, p.mask_bad_pixels) = (corr.bin, corr.mask_bad_pixels);
    let mut mean = compute_resident(engine, acq, res, &p).await?.data.to_f64();
    let known = pattern::file_known(acq.pixel_mask.as_deref(), acq.shape.det, corr);
    let found = pattern::detect(&mean, det, &known);
    if corr.mask_bad_pixels && !found.is_empty() {
        let mask = found.mask(det);
        let pixels: Vec<u32> = (0..mask.len())
            .filter(|&k| mask[k])
            .map(|k| k as u32)
            .collect();
        engine.zero_pixels(res, &pixels)?;
        for &k in &pixels {
            mean[k as usize] = 0.0;
        }
        res.found_bad = Some(mask);
    }
    Ok((mean, found))
}

/// The `fit-bf` product of `mean`, the mean pattern of `res`: the pixels products leave out
/// (the file's, and those found and zeroed) are left out of the fit.
pub(crate) fn fit_on(acq: &Acquisition, res: &Resident, mean: &[f64], det: [usize; 2]) -> [f64; 3] {
    let known = pattern::file_known(acq.pixel_mask.as_deref(), acq.shape.det, res.correction);
    let known = pattern::union(known, res.found_bad.as_deref());
    pattern::fit(mean, det, &known).product()
}

/// Compute one product on an already resident acquisition (same correction).
pub async fn compute_resident(
    engine: &Engine,
    acq: &Acquisition,
    res: &Resident,
    p: &ProductParams,
) -> Result<ProductArray> {
    p.validate(acq.shape)?;
    if res.correction.bin != p.bin || res.correction.mask_bad_pixels != p.mask_bad_pixels {
        return Err(Error::param(
            "resident acquisition has another bin / bad-pixel setting",
        ));
    }
    if res.float.is_some() {
        return crate::products::gpu_float::compute(engine, acq, res, p).await;
    }
    let shape = res.plan.shape;
    let det = shape.det;
    let scan = shape.scan.to_vec();
    let binned = p.bin > 1;
    let f32s = |v: Vec<f64>| ArrayData::F32(v.into_iter().map(|x| x as f32).collect());
    Ok(match p.kind {
        ProductKind::Total => ProductArray {
            shape: scan,
            data: ArrayData::U64(masked_sums(engine, res, &SparseMask::all(det).indices).await?),
        },
        ProductKind::Bf
        | ProductKind::Adf
        | ProductKind::Rect
        | ProductKind::Mask
        | ProductKind::Df => {
            let SparseMask { indices, weights } = p.detector_mask(det)?.sparse(det);
            if let Some(w) = weights {
                return Ok(ProductArray {
                    shape: scan,
                    data: ArrayData::F64(weighted_sums(engine, res, &indices, &w).await?),
                });
            }
            let sums = masked_sums(engine, res, &indices).await?;
            let data = if p.kind == ProductKind::Df {
                let total = masked_sums(engine, res, &SparseMask::all(det).indices).await?;
                total.iter().zip(&sums).map(|(t, s)| t - s).collect()
            } else {
                sums
            };
            ProductArray {
                shape: scan,
                data: ArrayData::U64(data),
            }
        }
        ProductKind::Idpc => {
            // The moments stay on the GPU for the FFTs; the exact CoM comes back only for
            // the scan mean (a float64 sum, as the CPU reference takes it).
            moments_fit_64(res)?;
            let n = shape.frames() as u64;
            let moments = engine.storage("com moments", n * 24);
            let mut enc = engine.device.create_command_encoder(&Default::default());
            encode_com_moments(engine, &mut enc, res, &moments)?;
            engine.queue.submit([enc.finish()]);
            let com = com_from_moments(&parse_moments(&engine.read_back(&moments, n * 24).await?));
            let idpc = crate::kernels::fft::Idpc::new(engine, shape.scan);
            let mut enc = engine.device.create_command_encoder(&Default::default());
            let dpc = crate::kernels::fft::DpcSettings {
                mean: crate::cpu::scan_means(&com),
                rotation: p.rotation,
                flip: p.flip,
            };
            idpc.encode(
                engine,
                &mut enc,
                crate::kernels::fft::CentreSource::Moments {
                    buf: &moments,
                    bound: moment_bound(res),
                },
                dpc,
            )?;
            engine.queue.submit([enc.finish()]);
            ProductArray {
                shape: scan,
                data: f32s(idpc.read(engine).await?),
            }
        }
        ProductKind::Com | ProductKind::Dpc => {
            let com = com_from_moments(&com_moments(engine, res).await?);
            let planes = vec![2, shape.scan[0], shape.scan[1]];
            match p.kind {
                ProductKind::Com => ProductArray {
                    shape: planes,
                    data: f32s(com),
                },
                _ => ProductArray {
                    shape: planes,
                    data: f32s(dpc_from_com(&com, p.rotation, p.flip)),
                },
            }
        }
        ProductKind::SumDp | ProductKind::MeanDp | ProductKind::MaxDp | ProductKind::FitBf => {
            let roi = match p.kind {
                ProductKind::FitBf => Region::full(shape.scan),
                _ => p.scan_roi.unwrap_or(Region::full(shape.scan)),
            };
            let (sum, max) = pattern_reduce(engine, res, roi).await?;
            let count = roi.len() as u64;
            let mean = || {
                sum.iter()
                    .map(|&s| Dd::from_u64(s).div_u64(count))
                    .collect::<Vec<f64>>()
            };
            let (shape_out, data) = match p.kind {
                ProductKind::SumDp => (det.to_vec(), ArrayData::U64(sum)),
                ProductKind::MeanDp => (det.to_vec(), ArrayData::F64(mean())),
                ProductKind::MaxDp => (
                    det.to_vec(),
                    ArrayData::from_samples_u32(max, acq.dtype, binned),
                ),
                _ => (
                    vec![3],
                    ArrayData::F64(fit_on(acq, res, &mean(), det).to_vec()),
                ),
            };
            ProductArray {
                shape: shape_out,
                data,
            }
        }
        ProductKind::Pattern | ProductKind::Binned => stored_frames(engine, acq, res, p).await?,
    })
}

/// The pattern at `p.at`, or every frame (`binned`), as stored on the GPU: the source dtype
/// (u32 when binned) for a pattern, u32 for `binned`; float32 for float32 residents.
pub(crate) async fn stored_frames(
    engine: &Engine,
    acq: &Acquisition,
    res: &Resident,
    p: &ProductParams,
) -> Result<ProductArray> {
    let shape = res.plan.shape;
    let det = shape.det;
    let (f0, f1, out_shape) = match p.kind {
        ProductKind::Pattern => {
            let [r, c] =
                p.at.ok_or_else(|| Error::param("product 'pattern' needs --at R,C"))?;
            let f = r * shape.scan[1] + c;
            (f, f + 1, det.to_vec())
        }
        _ => (
            0,
            shape.frames(),
            vec![shape.scan[0], shape.scan[1], det[0], det[1]],
        ),
    };
    let words = frames(engine, res, f0, f1).await?;
    let data = match (res.float, p.kind) {
        (Some(_), _) => ArrayData::F32(words.into_iter().map(f32::from_bits).collect()),
        (None, ProductKind::Pattern) => {
            ArrayData::from_samples_u32(words, acq.dtype, res.correction.bin > 1)
        }
        (None, _) => ArrayData::U32(words),
    };
    Ok(ProductArray {
        shape: out_shape,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::tile_masks;
    use crate::contract::{Region, ScanRoi};

    /// One bit per scan position of each tile, set exactly for the positions the ROI's row
    /// intervals hold; the last tile's padding positions stay clear.
    #[test]
    fn tile_masks_hold_the_roi_positions() {
        let scan = [5, 7];
        for roi in [
            ScanRoi::Rect(Region {
                r0: 1,
                r1: 4,
                c0: 2,
                c1: 6,
            }),
            ScanRoi::Circle {
                center: [2.2, 3.1],
                radius: 2.4,
            },
        ] {
            let rows = roi.row_intervals(scan);
            for tile in [8u32, 16, 32] {
                let masks = tile_masks(&roi, scan, tile);
                assert_eq!(masks.len(), 35usize.div_ceil(tile as usize));
                for f in 0..masks.len() * tile as usize {
                    let set = masks[f / tile as usize] >> (f % tile as usize) & 1 == 1;
                    let inside = f < 35 && {
                        let [c0, c1] = rows[f / 7];
                        (c0..c1).contains(&((f % 7) as u32))
                    };
                    assert_eq!(set, inside, "{roi:?} tile {tile} position {f}");
                }
            }
        }
    }
}
