//! Products on the GPU: each is one kernel over the resident acquisition; only the small
//! result leaves the GPU, and only when asked. Integer products equal the CPU reference
//! byte for byte; CoM/DPC/iDPC are returned as float32 per the contract (C-DTYPE).

use crate::contract::{mask_pixels, SparseMask};
use crate::error::Result;
use crate::formats::Acquisition;
use crate::frames::Correction;
use crate::pattern;
use crate::products::host_exact;
use crate::products::{ArrayData, ProductArray, ProductKind, ProductParams};

use crate::gpu::{Engine, Resident};
use crate::kernels::com_moments::{
    com_moments, encode_com_moments, moment_bound, moments_fit_64, parse_moments,
};
use crate::kernels::masked_sum::{masked_sums, weighted_sums};
use crate::kernels::pattern_reduce::pattern_reduce;

/// Resident samples of frames `[f0, f1)`, unpacked to u32.
pub async fn frames(engine: &Engine, res: &Resident, f0: usize, f1: usize) -> Result<Vec<u32>> {
    let plan = &res.plan;
    let det = plan.shape.det_len();
    let (tile, tile_words) = (plan.tile as usize, plan.tile_words as usize);
    let mut out = Vec::with_capacity(f1.saturating_sub(f0) * det);
    for (i, (seg, buf)) in plan.segments.iter().zip(&res.buffers).enumerate() {
        let (s0, s1) = (
            f0.max(seg.first_frame) - seg.first_frame,
            f1.min(seg.first_frame + seg.frames)
                .saturating_sub(seg.first_frame),
        );
        if s0 >= s1 {
            continue;
        }
        // Only the tiles holding the frames asked for leave the GPU; a compressed
        // resident's are unpacked into its scratch (tile `a` first) as many as it holds at
        // a time.
        let (t0, t1) = (s0 / tile, s1.div_ceil(tile));
        let step = match res.packed {
            Some(_) => (buf.size() as usize / (tile_words * 4)).max(1),
            None => t1 - t0,
        };
        for a in (t0..t1).step_by(step.max(1)) {
            let b = (a + step).min(t1);
            let first_word = match res.packed {
                Some(_) => {
                    let mut batch = crate::gpu::Batch::default();
                    res.unpack(engine, &mut batch, i, None, (a as u32, b as u32))?;
                    let mut encoder = engine.device.create_command_encoder(&Default::default());
                    batch.flush(&mut encoder);
                    engine.queue.submit([encoder.finish()]);
                    0
                }
                None => a * tile_words,
            };
            let bytes = engine
                .read_back_range(
                    buf,
                    (first_word * 4) as u64,
                    ((b - a) * tile_words * 4) as u64,
                )
                .await?;
            let words: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
            for f in (s0.max(a * tile))..s1.min(b * tile) {
                let t = f / tile - a;
                let tile_of = &words[t * tile_words..(t + 1) * tile_words];
                out.extend((0..det).map(|k| plan.tile_sample(tile_of, k, (f % tile) as u32)));
            }
        }
    }
    Ok(out)
}

/// Exact CoM planes [row, col] from the moments (0 where a pattern is empty): one division
/// of exact integers (C-COM).
pub fn com_from_moments(m: &[[u64; 3]]) -> Vec<f64> {
    let n = m.len();
    let mut com = vec![0f64; 2 * n];
    for (k, [t, r, c]) in m.iter().enumerate() {
        if *t != 0 {
            com[k] = host_exact::quotient(*r as u128, *t as u128, 0, false);
            com[n + k] = host_exact::quotient(*c as u128, *t as u128, 0, false);
        }
    }
    com
}

/// Compute one product with the GPU engine: the acquisition uploaded with `corr` first (with
/// bad-pixel masking, the hot and dead pixels of its mean pattern zeroed).
pub async fn compute(
    engine: &Engine,
    acq: &Acquisition,
    p: &ProductParams,
    corr: Correction,
) -> Result<ProductArray> {
    p.validate(acq.shape, corr)?;
    let mut res = engine.upload(acq, corr).await?;
    settle_bad_pixels(engine, acq, &mut res).await?;
    compute_resident(engine, acq, &res, p).await
}

/// The mean pattern of `res` (float64, exact sums rounded once) and the hot and dead pixels
/// in it (`pattern::detect`, leaving out the file's bad pixels). With bad-pixel masking on
/// they are zeroed in `res` (`Engine::zero_pixels`) and in the mean returned, so that every
/// product leaves them out as the CPU reference does (C-BAD-FOUND).
pub async fn settle_bad_pixels(
    engine: &Engine,
    acq: &Acquisition,
    res: &mut Resident,
) -> Result<(Vec<f64>, pattern::BadPixels)> {
    let corr = res.correction;
    let det = res.plan.shape.det;
    let p = ProductParams::new(ProductKind::MeanDp);
    let mut mean = compute_resident(engine, acq, res, &p).await?.data.to_f64();
    let (found, zero) = found_in_mean(acq, corr, &mean, det);
    if let Some(mask) = zero {
        let pixels = mask_pixels(&mask);
        engine.zero_pixels(res, &pixels)?;
        for &k in &pixels {
            mean[k as usize] = 0.0;
        }
        res.found_bad = Some(mask);
    }
    Ok((mean, found))
}

/// What the host's pattern products need of a resident on any GPU backend: its (binned)
/// detector, its correction and the hot and dead pixels found and zeroed in it.
#[derive(Clone, Copy)]
pub struct PatternFacts<'a> {
    pub det: [usize; 2],
    pub correction: Correction,
    pub found_bad: Option<&'a [bool]>,
}

impl Resident {
    pub(crate) fn facts(&self) -> PatternFacts<'_> {
        PatternFacts {
            det: self.plan.shape.det,
            correction: self.correction,
            found_bad: self.found_bad.as_deref(),
        }
    }
}

/// The `fit-bf` product of `mean`, the mean pattern of a resident: the pixels products
/// leave out (the file's, and those found and zeroed) are left out of the fit.
pub(crate) fn fit_on(acq: &Acquisition, res: PatternFacts, mean: &[f64]) -> [f64; 3] {
    let known = pattern::file_known(acq.pixel_mask.as_deref(), acq.shape.det, res.correction);
    let known = pattern::union(known, res.found_bad);
    pattern::fit(mean, res.det, &known).product()
}

/// The hot and dead pixels of `mean` (the mean pattern under `corr`), leaving out the
/// file's, and the mask to zero where bad-pixel masking is on and any were found.
pub(crate) fn found_in_mean(
    acq: &Acquisition,
    corr: Correction,
    mean: &[f64],
    det: [usize; 2],
) -> (pattern::BadPixels, Option<Vec<bool>>) {
    let known = pattern::file_known(acq.pixel_mask.as_deref(), acq.shape.det, corr);
    let found = pattern::detect(mean, det, &known);
    let zero = (corr.mask_bad_pixels && !found.is_empty()).then(|| found.mask(det));
    (found, zero)
}

/// The product `kind` of a pattern reduction (sum, mean, max pattern or the BF fit) from
/// the exact per-pixel sums and maxima over `count` positions of an integer acquisition.
pub(crate) fn pattern_product(
    acq: &Acquisition,
    res: PatternFacts,
    kind: ProductKind,
    sum: Vec<u64>,
    max: Vec<u32>,
    count: u64,
) -> ProductArray {
    let det = res.det;
    let mean = || {
        sum.iter()
            .map(|&s| host_exact::quotient(s as u128, count as u128, 0, false))
            .collect::<Vec<f64>>()
    };
    let (shape_out, data) = match kind {
        ProductKind::MeanDp => (det.to_vec(), ArrayData::F64(mean())),
        ProductKind::MaxDp => (
            det.to_vec(),
            ArrayData::from_samples_u32(max, acq.dtype, res.correction.bin > 1),
        ),
        ProductKind::FitBf => (vec![3], ArrayData::F64(fit_on(acq, res, &mean()).to_vec())),
        _ => (det.to_vec(), ArrayData::U64(sum)),
    };
    ProductArray {
        shape: shape_out,
        data,
    }
}

/// CoM or DPC planes `[2, R, C]` from the exact CoM (float64, row plane then column plane),
/// rounded once to float32 (C-COM, C-DPC).
pub(crate) fn com_product(p: &ProductParams, scan: [usize; 2], com: &[f64]) -> ProductArray {
    let data = match p.kind {
        ProductKind::Dpc => host_exact::dpc_from_com(com, p.rotation, p.flip),
        _ => com.to_vec(),
    };
    ProductArray {
        shape: vec![2, scan[0], scan[1]],
        data: ArrayData::F32(data.into_iter().map(|x| x as f32).collect()),
    }
}

/// iDPC of an integer acquisition from its exact moments, `moments` on the GPU and `parsed`
/// read back (their CoM gives the scan mean, a float64 sum as the CPU reference takes it):
/// C-IDPC-GPU and C-DPC-MEAN.
pub(crate) async fn idpc_of_moments(
    engine: &Engine,
    scan: [usize; 2],
    moments: &wgpu::Buffer,
    parsed: &[[u64; 3]],
    bound: u128,
    p: &ProductParams,
) -> Result<ProductArray> {
    let com = com_from_moments(parsed);
    let idpc = crate::kernels::fft::Idpc::new(engine, scan);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    let dpc = crate::kernels::fft::DpcSettings {
        mean: host_exact::scan_means(&com),
        rotation: p.rotation,
        flip: p.flip,
    };
    idpc.encode(
        engine,
        &mut enc,
        crate::kernels::fft::CentreSource::Moments {
            buf: moments,
            bound,
        },
        dpc,
    )?;
    engine.queue.submit([enc.finish()]);
    idpc_product(engine, &idpc, scan).await
}

/// The exact CoM moments of `res`, kept on the GPU for the iDPC pack (which reads them
/// there) and read back for the scan mean.
async fn moments_kept(engine: &Engine, res: &Resident) -> Result<(wgpu::Buffer, Vec<[u64; 3]>)> {
    moments_fit_64(res)?;
    let n = res.plan.shape.frames() as u64;
    let moments = engine.storage("com moments", n * 24);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    encode_com_moments(engine, &mut enc, res, &moments)?;
    engine.queue.submit([enc.finish()]);
    let parsed = parse_moments(&engine.read_back(&moments, n * 24).await?);
    Ok((moments, parsed))
}

/// Exact moments read back, uploaded again as the iDPC pack reads them (two u32 words per
/// u64): a streamed pass joins its blocks' moments on the host.
pub(crate) fn moments_input(engine: &Engine, moments: &[[u64; 3]]) -> wgpu::Buffer {
    let words: Vec<u32> = moments
        .iter()
        .flatten()
        .flat_map(|&v| [v as u32, (v >> 32) as u32])
        .collect();
    engine.input(&words)
}

/// The `dpc-rotation` product of an integer acquisition from its exact moments, `moments`
/// on the GPU and `parsed` read back (none above `bound`), and its dark-field image `dark`.
pub(crate) async fn rotation_of_moments(
    engine: &Engine,
    scan: [usize; 2],
    moments: &wgpu::Buffer,
    parsed: &[[u64; 3]],
    bound: u128,
    dark: &ProductArray,
) -> Result<ProductArray> {
    let centre = crate::kernels::fft::CentreSource::Moments {
        buf: moments,
        bound,
    };
    let mean = host_exact::scan_means(&com_from_moments(parsed));
    let dark = dark.data.to_f64();
    let found = crate::products::dpc_rotation::on_gpu(engine, scan, centre, mean, &dark).await?;
    Ok(found.product())
}

/// The phase an iDPC plan computed, as the float32 product (C-IDPC-GPU).
pub(crate) async fn idpc_product(
    engine: &Engine,
    idpc: &crate::kernels::fft::Idpc,
    scan: [usize; 2],
) -> Result<ProductArray> {
    let phase = idpc.read(engine).await?;
    Ok(ProductArray {
        shape: scan.to_vec(),
        data: ArrayData::F32(phase.into_iter().map(|x| x as f32).collect()),
    })
}

/// Compute one product on an already resident acquisition, with the correction it was
/// uploaded with.
pub async fn compute_resident(
    engine: &Engine,
    acq: &Acquisition,
    res: &Resident,
    p: &ProductParams,
) -> Result<ProductArray> {
    p.validate(acq.shape, res.correction)?;
    if res.float.is_some() {
        return crate::products::gpu_float::compute(engine, acq, res, p).await;
    }
    let shape = res.plan.shape;
    let det = shape.det;
    let scan = shape.scan.to_vec();
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
            // C-MASK: DF = total − BF, from the per-position total.
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
            let (moments, parsed) = moments_kept(engine, res).await?;
            idpc_of_moments(engine, shape.scan, &moments, &parsed, moment_bound(res), p).await?
        }
        ProductKind::DpcRotation => {
            let (moments, parsed) = moments_kept(engine, res).await?;
            let dark = Box::pin(compute_resident(engine, acq, res, &p.dark_field())).await?;
            let bound = moment_bound(res);
            rotation_of_moments(engine, shape.scan, &moments, &parsed, bound, &dark).await?
        }
        ProductKind::Com | ProductKind::Dpc => com_product(
            p,
            shape.scan,
            &com_from_moments(&com_moments(engine, res).await?),
        ),
        ProductKind::SumDp | ProductKind::MeanDp | ProductKind::MaxDp | ProductKind::FitBf => {
            let roi = p.reduction_roi(shape.scan);
            let (sum, max) = pattern_reduce(engine, res, roi).await?;
            pattern_product(acq, res.facts(), p.kind, sum, max, roi.len() as u64)
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
            let [r, c] = ProductParams::need(p.at, "at", p.kind)?;
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
    use crate::contract::{Region, ScanRoi};
    use crate::kernels::pattern_reduce::tile_masks;

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
