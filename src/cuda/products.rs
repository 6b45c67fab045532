//! Products on the CUDA backend: the kernels' exact sums (`resident.rs`, and
//! `resident_float.rs` for float32) finished by the host arithmetic the wgpu engine uses
//! (`products::gpu` and `gpu_float`: CoM and DPC planes, exact quotients, weighted sums,
//! pattern products), iDPC and the DPC rotation on CUDA's own FFT (`idpc.rs`); so both GPU
//! backends answer with one vocabulary and every product has a CUDA form.

use super::idpc::{rotation, Centre, CudaIdpc};
use super::{CudaEngine, CudaResident};
use crate::contract::SparseMask;
use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::frames::Correction;
use crate::kernels::fft::DpcSettings;
use crate::products::gpu::{com_from_moments, com_product, pattern_product};
use crate::products::gpu_float::{self, centred_com_pairs, com_from_wide_moments};
use crate::products::host_exact::{from_i128_scaled, scan_means, ExactSum};
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
    if let Some(range) = res.float {
        return compute_float(engine, acq, res, p, range.lsb);
    }
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
                let sums = |pixels: &[u32]| res.masked_sums(engine, pixels);
                let v = weighted_image(res, &indices, &w, sums, ExactSum::add_weighted)?;
                return Ok(image(ArrayData::F64(v)));
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
            // C-IDPC-GPU: the pack reads the exact moments where they were summed; their
            // CoM read back gives the scan mean (C-DPC-MEAN).
            let (moments, parsed) = res.com_moments_kept(engine)?;
            let centre = Centre::Moments {
                buf: &moments,
                bound: res.moment_bound(),
            };
            let mean = scan_means(&com_from_moments(&parsed));
            phase_or_rotation(engine, acq, res, p, centre, mean)?
        }
        ProductKind::SumDp | ProductKind::MeanDp | ProductKind::MaxDp | ProductKind::FitBf => {
            let roi = p.reduction_roi(scan);
            let (sum, max) = res.pattern_reduce(engine, roi)?;
            pattern_product(acq, res.facts(), p.kind, sum, max, roi.len() as u64)
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

/// iDPC (the phase at `p`'s rotation and flip) or the DPC rotation (its dark-field image
/// computed here too) from the DPC of `centre` with scan mean `mean`.
fn phase_or_rotation(
    engine: &CudaEngine,
    acq: &Acquisition,
    res: &CudaResident,
    p: &ProductParams,
    centre: Centre,
    mean: [f64; 2],
) -> Result<ProductArray> {
    let scan = res.shape.scan;
    if p.kind == ProductKind::DpcRotation {
        let dark = compute_resident(engine, acq, res, &p.dark_field())?;
        return Ok(rotation(engine, scan, centre, mean, &dark.data.to_f64())?.product());
    }
    let dpc = DpcSettings {
        mean,
        rotation: p.rotation,
        flip: p.flip,
    };
    let phase = CudaIdpc::new(engine, scan)?.run(engine, centre, dpc)?;
    Ok(ProductArray {
        shape: scan.to_vec(),
        data: ArrayData::F32(phase.into_iter().map(|x| x as f32).collect()),
    })
}

/// One product of a float32 resident: exact 128-bit sums in units of `2^lsb` rounded once
/// on the host, as `products::gpu_float` rounds the wgpu engine's (C-FLOAT-GPU).
fn compute_float(
    engine: &CudaEngine,
    acq: &Acquisition,
    res: &CudaResident,
    p: &ProductParams,
    lsb: i32,
) -> Result<ProductArray> {
    let file = acq.primary.as_str();
    let (scan, det) = (res.shape.scan, res.shape.det);
    let image = |v: Vec<f64>| ProductArray {
        shape: scan.to_vec(),
        data: ArrayData::F64(v),
    };
    let values =
        |v: Vec<i128>| -> Vec<f64> { v.into_iter().map(|s| from_i128_scaled(s, lsb)).collect() };
    let floats = |bits: Vec<u32>| ArrayData::F32(bits.into_iter().map(f32::from_bits).collect());
    Ok(match p.kind {
        ProductKind::Total => image(values(res.masked_sums_wide(
            engine,
            file,
            &SparseMask::all(det).indices,
        )?)),
        ProductKind::Bf
        | ProductKind::Adf
        | ProductKind::Rect
        | ProductKind::Mask
        | ProductKind::Df => {
            let SparseMask { indices, weights } = p.detector_mask(det)?.sparse(det);
            if let Some(w) = weights {
                let sums = |pixels: &[u32]| res.masked_sums_wide(engine, file, pixels);
                let add = |a: &mut ExactSum, w, s| a.add_weighted_wide(w, s, lsb);
                return Ok(image(weighted_image(res, &indices, &w, sums, add)?));
            }
            let mut sums = res.masked_sums_wide(engine, file, &indices)?;
            if p.kind == ProductKind::Df {
                let total = res.masked_sums_wide(engine, file, &SparseMask::all(det).indices)?;
                for (s, t) in sums.iter_mut().zip(total) {
                    *s = t - *s;
                }
            }
            image(values(sums))
        }
        ProductKind::Com | ProductKind::Dpc => com_product(
            p,
            scan,
            &com_from_wide_moments(&res.com_moments_wide(engine, file)?),
        ),
        ProductKind::Idpc | ProductKind::DpcRotation => {
            // The scan mean taken off in float64 before the one rounding to float32.
            let com = com_from_wide_moments(&res.com_moments_wide(engine, file)?);
            let pairs: Vec<f32> = centred_com_pairs(&com)
                .into_iter()
                .map(f32::from_bits)
                .collect();
            let plane = engine
                .stream
                .clone_htod(&pairs)
                .map_err(|e| Error::Gpu(format!("CUDA: CoM plane: {e}")))?;
            phase_or_rotation(engine, acq, res, p, Centre::Com(&plane), [0.0, 0.0])?
        }
        ProductKind::SumDp | ProductKind::MeanDp | ProductKind::MaxDp | ProductKind::FitBf => {
            let roi = p.reduction_roi(scan);
            let (sum, max) = res.pattern_reduce_wide(engine, file, roi)?;
            gpu_float::pattern_product(acq, res.facts(), p.kind, sum, max, roi.len() as u64, lsb)
        }
        ProductKind::Pattern => {
            let [r, c] = ProductParams::need(p.at, "at", p.kind)?;
            let f = r * scan[1] + c;
            ProductArray {
                shape: det.to_vec(),
                data: floats(res.frames(engine, f, f + 1)?),
            }
        }
        ProductKind::Binned => ProductArray {
            shape: vec![scan[0], scan[1], det[0], det[1]],
            data: floats(res.frames(engine, 0, res.shape.frames())?),
        },
    })
}

/// Σ w·I per position for a mask of a few distinct weights: one exact masked sum per
/// weight (`sums` of its pixels, integer or wide), each added exactly by `add` and the whole
/// rounded once (C-WEIGHTS).
fn weighted_image<S>(
    res: &CudaResident,
    indices: &[u32],
    weights: &[f64],
    mut sums: impl FnMut(&[u32]) -> Result<Vec<S>>,
    add: impl Fn(&mut ExactSum, f64, S),
) -> Result<Vec<f64>> {
    let groups = crate::kernels::masked_sum::gpu_weight_groups(indices, weights)?;
    let mut acc = vec![ExactSum::default(); res.shape.frames()];
    for (bits, pixels) in groups {
        let w = f64::from_bits(bits);
        for (a, s) in acc.iter_mut().zip(sums(&pixels)?) {
            add(a, w, s);
        }
    }
    Ok(acc.iter().map(ExactSum::value).collect())
}
