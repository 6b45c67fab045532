//! A product's part of each block of a pass (decision 0023): what it keeps of the blocks
//! it has seen (`Part`), taken from each block's resident as that block is held, joined
//! by scan rows without rounding, and finished once the pass is over by the code that
//! finishes the product on a resident acquisition.

use crate::contract::Region;
use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::gpu::{Engine, Resident};
use crate::kernels::com_moments::{com_moments, moment_bound};
use crate::kernels::pattern_reduce::pattern_reduce;
use crate::products::gpu::{
    com_from_moments, com_product, compute_resident, idpc_of_moments, moments_input,
    pattern_product, rotation_of_moments, stored_frames,
};
use crate::products::gpu_float;
use crate::products::{ArrayData, ProductArray, ProductKind, ProductParams};

/// What a product keeps of the blocks it has seen.
pub(super) enum Part {
    /// Per-position values (virtual images, totals): the blocks' arrays, joined by rows.
    Rows(Option<ArrayData>),
    /// Every frame (`binned`), joined by rows.
    Frames(Option<ArrayData>),
    /// The pattern at `at`, from the block that holds it.
    Pattern(Option<ProductArray>),
    /// The exact CoM, row plane and column plane (CoM, DPC; iDPC of float32 data).
    Com(Vec<f64>, Vec<f64>),
    /// The exact moments (iDPC of integer data) and their bound.
    Moments(Vec<[u64; 3]>, u128),
    /// Per-pixel sums and maxima over the positions of a scan ROI (integer data).
    IntPattern(Vec<u64>, Vec<u32>),
    /// The same for float32 data: sums in units of `2^lsb`.
    FloatPattern(Vec<i128>, i32, Vec<f32>),
    /// The DPC rotation: its centre of mass (a `Com` or `Moments` part) and the rows of
    /// its dark-field image.
    Rotation(Box<Part>, Option<ArrayData>),
}

/// A block's share of a product's scan ROI: `roi` (rows of the whole scan) within rows
/// `b0..b1`, in the block's own rows; `None` where they do not meet.
fn roi_in_block(roi: Region, b0: usize, b1: usize) -> Option<Region> {
    let (r0, r1) = (roi.r0.max(b0), roi.r1.min(b1));
    (r0 < r1).then(|| Region {
        r0: r0 - b0,
        r1: r1 - b0,
        ..roi
    })
}

/// Whether product `p` reads anything of the block of rows `b0..b1`.
pub(super) fn needs(p: &ProductParams, scan: [usize; 2], b0: usize, b1: usize) -> bool {
    match p.kind {
        ProductKind::Pattern => p.at.is_some_and(|[r, _]| (b0..b1).contains(&r)),
        ProductKind::SumDp | ProductKind::MeanDp | ProductKind::MaxDp | ProductKind::FitBf => {
            roi_in_block(p.reduction_roi(scan), b0, b1).is_some()
        }
        _ => true,
    }
}

fn join(into: &mut Option<ArrayData>, more: ArrayData) -> Result<()> {
    let Some(have) = into else {
        *into = Some(more);
        return Ok(());
    };
    match (have, more) {
        (ArrayData::U8(a), ArrayData::U8(b)) => a.extend(b),
        (ArrayData::U16(a), ArrayData::U16(b)) => a.extend(b),
        (ArrayData::U32(a), ArrayData::U32(b)) => a.extend(b),
        (ArrayData::U64(a), ArrayData::U64(b)) => a.extend(b),
        (ArrayData::F32(a), ArrayData::F32(b)) => a.extend(b),
        (ArrayData::F64(a), ArrayData::F64(b)) => a.extend(b),
        (a, b) => {
            return Err(Error::Gpu(format!(
                "streamed blocks disagree on the product's dtype ({} then {})",
                a.dtype_name(),
                b.dtype_name()
            )))
        }
    }
    Ok(())
}

/// Float32 pattern sums of a block, in units of `2^lsb`, added to those of the blocks
/// before, all in units of the smaller `2^lsb` (exactly, or refused past 127 bits).
fn add_float_sums(
    file: &str,
    have: &mut Vec<i128>,
    have_lsb: &mut i32,
    more: Vec<i128>,
    lsb: i32,
) -> Result<()> {
    let too_wide = || {
        Error::GpuUnsupported(format!(
            "{file}: float32 pattern sums of the streamed blocks span more than the GPU's exact 128-bit sums hold; use --backend cpu"
        ))
    };
    // Scale `v` from units 2^from to units 2^to (to ≤ from), exactly.
    let rescale = |v: i128, from: i32, to: i32| -> Result<i128> {
        if v == 0 {
            return Ok(0);
        }
        let d = u32::try_from(from - to).map_err(|_| too_wide())?;
        if d >= 127 {
            return Err(too_wide());
        }
        v.checked_mul(1i128 << d).ok_or_else(too_wide)
    };
    if have.is_empty() {
        *have = more;
        *have_lsb = lsb;
        return Ok(());
    }
    let to = (*have_lsb).min(lsb);
    for (h, m) in have.iter_mut().zip(more) {
        let a = rescale(*h, *have_lsb, to)?;
        let b = rescale(m, lsb, to)?;
        *h = a.checked_add(b).ok_or_else(too_wide)?;
    }
    *have_lsb = to;
    Ok(())
}

/// Take product `p`'s part of the block resident `res` (rows `b0..b1` of the scan).
pub(super) async fn take_part(
    engine: &Engine,
    block: &Acquisition,
    res: &Resident,
    p: &ProductParams,
    part: &mut Part,
    (b0, b1, scan): (usize, usize, [usize; 2]),
) -> Result<()> {
    let file = block.primary.as_str();
    match part {
        Part::Rows(into) => join(into, compute_resident(engine, block, res, p).await?.data),
        Part::Frames(into) => join(into, stored_frames(engine, block, res, p).await?.data),
        Part::Pattern(into) => {
            let mut local = p.clone();
            local.at = p.at.map(|[r, c]| [r - b0, c]);
            *into = Some(stored_frames(engine, block, res, &local).await?);
            Ok(())
        }
        Part::Com(rows, cols) => {
            let com = match res.float {
                Some(_) => gpu_float::com_exact(engine, file, res).await?,
                None => com_from_moments(&com_moments(engine, res).await?),
            };
            let (r, c) = com.split_at(com.len() / 2);
            rows.extend_from_slice(r);
            cols.extend_from_slice(c);
            Ok(())
        }
        Part::Moments(all, bound) => {
            all.extend(com_moments(engine, res).await?);
            *bound = moment_bound(res);
            Ok(())
        }
        Part::Rotation(centre, dark) => {
            Box::pin(take_part(engine, block, res, p, centre, (b0, b1, scan))).await?;
            join(
                dark,
                compute_resident(engine, block, res, &p.dark_field())
                    .await?
                    .data,
            )
        }
        Part::IntPattern(sum, max) => {
            let Some(roi) = roi_in_block(p.reduction_roi(scan), b0, b1) else {
                return Ok(());
            };
            let (s, m) = pattern_reduce(engine, res, roi).await?;
            if sum.is_empty() {
                (*sum, *max) = (s, m);
                return Ok(());
            }
            for (a, b) in sum.iter_mut().zip(s) {
                *a = a.checked_add(b).ok_or_else(|| {
                    Error::GpuUnsupported(format!(
                        "{file}: pattern sums of the streamed blocks pass 64 bits; use --backend cpu"
                    ))
                })?;
            }
            for (a, b) in max.iter_mut().zip(m) {
                *a = (*a).max(b);
            }
            Ok(())
        }
        Part::FloatPattern(sum, lsb, max) => {
            let Some(roi) = roi_in_block(p.reduction_roi(scan), b0, b1) else {
                return Ok(());
            };
            let (s, m) = gpu_float::pattern_reduce(engine, file, res, roi).await?;
            let block_lsb = gpu_float::range(res)?.lsb;
            if max.is_empty() {
                *max = m;
            } else {
                // The kernel's order of floats (negative zero below zero): total_cmp's.
                for (a, b) in max.iter_mut().zip(m) {
                    if b.total_cmp(a).is_gt() {
                        *a = b;
                    }
                }
            }
            if s.iter().all(|&v| v == 0) && !sum.is_empty() {
                return Ok(());
            }
            add_float_sums(file, sum, lsb, s, block_lsb)
        }
    }
}

/// The part product `p` starts a pass with.
pub(super) fn empty_part(p: &ProductParams, float: bool) -> Part {
    match p.kind {
        ProductKind::Binned => Part::Frames(None),
        ProductKind::Pattern => Part::Pattern(None),
        ProductKind::Com | ProductKind::Dpc => Part::Com(Vec::new(), Vec::new()),
        ProductKind::Idpc if float => Part::Com(Vec::new(), Vec::new()),
        ProductKind::Idpc => Part::Moments(Vec::new(), 0),
        ProductKind::DpcRotation => Part::Rotation(
            Box::new(match float {
                true => Part::Com(Vec::new(), Vec::new()),
                false => Part::Moments(Vec::new(), 0),
            }),
            None,
        ),
        ProductKind::SumDp | ProductKind::MeanDp | ProductKind::MaxDp | ProductKind::FitBf => {
            match float {
                true => Part::FloatPattern(Vec::new(), i32::MAX, Vec::new()),
                false => Part::IntPattern(Vec::new(), Vec::new()),
            }
        }
        _ => Part::Rows(None),
    }
}

/// Finish product `p` from its part: the resident path's own finishing code, `res` (the
/// pass's last block) standing for the acquisition's correction and zeroed pixels.
pub(super) async fn finish(
    engine: &Engine,
    acq: &Acquisition,
    res: &Resident,
    p: &ProductParams,
    part: Part,
    shape: crate::contract::Shape4,
) -> Result<ProductArray> {
    let scan = shape.scan;
    let missing = || Error::Gpu(format!("the streamed pass left no {}", p.kind.name()));
    Ok(match part {
        Part::Rows(data) => ProductArray {
            shape: scan.to_vec(),
            data: data.ok_or_else(missing)?,
        },
        Part::Frames(data) => ProductArray {
            shape: vec![scan[0], scan[1], shape.det[0], shape.det[1]],
            data: data.ok_or_else(missing)?,
        },
        Part::Pattern(array) => array.ok_or_else(missing)?,
        Part::Com(rows, cols) => {
            let com = [rows, cols].concat();
            match p.kind {
                ProductKind::Idpc => gpu_float::idpc_of_com(engine, scan, &com, p).await?,
                _ => com_product(p, scan, &com),
            }
        }
        Part::Moments(moments, bound) => {
            let buf = moments_input(engine, &moments);
            idpc_of_moments(engine, scan, &buf, &moments, bound, p).await?
        }
        Part::Rotation(centre, dark) => {
            let dark = ProductArray {
                shape: scan.to_vec(),
                data: dark.ok_or_else(missing)?,
            };
            match *centre {
                Part::Com(rows, cols) => {
                    let com = [rows, cols].concat();
                    gpu_float::rotation_of_com(engine, scan, &com, &dark).await?
                }
                Part::Moments(moments, bound) => {
                    let buf = moments_input(engine, &moments);
                    rotation_of_moments(engine, scan, &buf, &moments, bound, &dark).await?
                }
                _ => return Err(missing()),
            }
        }
        Part::IntPattern(sum, max) => {
            let count = p.reduction_roi(scan).len() as u64;
            pattern_product(acq, res.facts(), p.kind, sum, max, count)
        }
        Part::FloatPattern(sum, lsb, max) => {
            let count = p.reduction_roi(scan).len() as u64;
            gpu_float::pattern_product(acq, res.facts(), p.kind, sum, max, count, lsb)
        }
    })
}
