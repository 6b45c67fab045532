//! Products on the CUDA backend: the kernels' exact sums (`resident.rs`) finished by the host
//! arithmetic the wgpu engine uses (`products::gpu`'s CoM and DPC planes, exact quotients
//! and weighted sums), so both GPU backends answer with one vocabulary.

use super::{CudaEngine, CudaResident};
use crate::contract::{Region, SparseMask};
use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::frames::Correction;
use crate::products::gpu::{com_from_moments, com_product};
use crate::products::host_exact::{quotient, ExactSum};
use crate::products::{ArrayData, ProductArray, ProductKind, ProductParams};

/// One product of `acq` with the correction `corr`: the acquisition uploaded first.
pub fn compute(
    engine: &CudaEngine,
    acq: &Acquisition,
    p: &ProductParams,
    corr: Correction,
) -> Result<ProductArray> {
    p.validate(acq.shape, corr)?;
    let res = CudaResident::upload(engine, acq, corr)?;
    compute_resident(engine, acq, &res, p)
}

/// One product of the resident `res` (uploaded from `acq`).
pub fn compute_resident(
    engine: &CudaEngine,
    acq: &Acquisition,
    res: &CudaResident,
    p: &ProductParams,
) -> Result<ProductArray> {
    p.validate(acq.shape, res.correction)?;
    let (scan, det) = (res.shape.scan, res.shape.det);
    let image = |data| ProductArray {
        shape: scan.to_vec(),
        data,
    };
    Ok(match p.kind {
        ProductKind::Total => image(ArrayData::U64(
            res.masked_sums(engine, &SparseMask::all(det).indices)?,
        )),
        ProductKind::Bf
        | ProductKind::Adf
        | ProductKind::Rect
        | ProductKind::Mask
        | ProductKind::Df => {
            let SparseMask { indices, weights } = p.detector_mask(det)?.sparse(det);
            if let Some(w) = weights {
                return Ok(image(ArrayData::F64(weighted_sums(engine, res, &indices, &w)?)));
            }
            let sums = res.masked_sums(engine, &indices)?;
            // C-MASK: DF = total − disk, from the per-position total.
            image(ArrayData::U64(if p.kind == ProductKind::Df {
                let total = res.masked_sums(engine, &SparseMask::all(det).indices)?;
                total.iter().zip(&sums).map(|(t, s)| t - s).collect()
            } else {
                sums
            }))
        }
        ProductKind::Com | ProductKind::Dpc => {
            com_product(p, scan, &com_from_moments(&res.com_moments(engine)?))
        }
        ProductKind::Idpc | ProductKind::DpcRotation => {
            return Err(Error::GpuUnsupported(format!(
                "{} is not on the CUDA backend yet (its FFT and curl search are WGSL only): use --backend wgpu or cpu",
                p.kind.name()
            )))
        }
        ProductKind::SumDp | ProductKind::MeanDp | ProductKind::MaxDp | ProductKind::FitBf => {
            let roi = match p.kind {
                ProductKind::FitBf => Region::full(scan),
                _ => p.scan_roi.unwrap_or(Region::full(scan)),
            };
            let (sum, max) = res.pattern_reduce(engine, roi)?;
            pattern_product(acq, res, p.kind, sum, max, roi.len() as u128)
        }
        ProductKind::Pattern => {
            let [r, c] = ProductParams::need(p.at, "at", p.kind)?;
            let f = r * scan[1] + c;
            ProductArray {
                shape: det.to_vec(),
                data: ArrayData::from_samples_u32(
                    res.frames(engine, f, f + 1)?,
                    acq.dtype,
                    res.correction.bin > 1,
                ),
            }
        }
        ProductKind::Binned => ProductArray {
            shape: vec![scan[0], scan[1], det[0], det[1]],
            data: ArrayData::U32(res.frames(engine, 0, res.shape.frames())?),
        },
    })
}

/// Σ w·I per position for a mask of a few distinct weights: one exact masked sum per weight,
/// combined exactly and rounded once (C-WEIGHTS).
fn weighted_sums(
    engine: &CudaEngine,
    res: &CudaResident,
    indices: &[u32],
    weights: &[f64],
) -> Result<Vec<f64>> {
    let groups = crate::kernels::masked_sum::gpu_weight_groups(indices, weights)?;
    let mut acc = vec![ExactSum::default(); res.shape.frames()];
    for (bits, pixels) in groups {
        let w = f64::from_bits(bits);
        for (a, s) in acc.iter_mut().zip(res.masked_sums(engine, &pixels)?) {
            a.add_weighted(w, s);
        }
    }
    Ok(acc.iter().map(ExactSum::value).collect())
}

/// The sum, mean or max pattern, or the BF fit, from exact per-pixel sums and maxima over
/// `count` positions.
fn pattern_product(
    acq: &Acquisition,
    res: &CudaResident,
    kind: ProductKind,
    sum: Vec<u64>,
    max: Vec<u32>,
    count: u128,
) -> ProductArray {
    let det = res.shape.det;
    let mean = || -> Vec<f64> {
        sum.iter()
            .map(|&s| quotient(s as u128, count, 0, false))
            .collect()
    };
    let (shape, data) = match kind {
        ProductKind::MeanDp => (det.to_vec(), ArrayData::F64(mean())),
        ProductKind::MaxDp => (
            det.to_vec(),
            ArrayData::from_samples_u32(max, acq.dtype, res.correction.bin > 1),
        ),
        ProductKind::FitBf => {
            // The pixels products leave out (the file's, those found) stay out of the fit.
            let known = crate::pattern::file_known(
                acq.pixel_mask.as_deref(),
                acq.shape.det,
                res.correction,
            );
            let known = crate::pattern::union(known, res.found_bad.as_deref());
            let fit = crate::pattern::fit(&mean(), det, &known).product();
            (vec![3], ArrayData::F64(fit.to_vec()))
        }
        _ => (det.to_vec(), ArrayData::U64(sum)),
    };
    ProductArray { shape, data }
}
