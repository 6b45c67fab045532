//! Products of float32 residents. The upload audits the samples (`FloatRange`): each is an
//! integer multiple of `2^lsb`, so the kernels sum them as exact 128-bit integers, in any
//! order, and the host rounds each sum once into a double-double. Virtual images, CoM and
//! the mean pattern so equal the CPU reference's double-double results bit for bit; data
//! whose sums could pass 127 bits (or hold NaN/∞) are refused by name, never approximated
//! (C-FLOAT-GPU).

use crate::contract::{Region, ScanRoi, SparseMask};
use crate::error::{Error, Result};
use crate::formats::Acquisition;
use crate::products::gpu::{com_product, fit_on, PatternFacts};
use crate::products::host_exact::{self, scan_means, ExactSum};
use crate::products::{ArrayData, ProductArray, ProductKind, ProductParams};
use crate::upload::plan::FloatRange;

use crate::gpu::{Engine, Resident};
use crate::kernels::com_moments::encode_com_moments;
use crate::kernels::fft::{CentreSource, DpcSettings, Idpc};
use crate::kernels::masked_sum::{encode_masked_sums, gpu_weight_groups, DetectorList};
use crate::kernels::pattern_reduce::encode_pattern_reduce;

fn wide_values(bytes: &[u8]) -> Vec<i128> {
    bytes
        .chunks_exact(16)
        .map(|b| i128::from_le_bytes(b.try_into().unwrap_or([0; 16])))
        .collect()
}

pub(crate) fn range(res: &Resident) -> Result<FloatRange> {
    res.float
        .ok_or_else(|| Error::Gpu("not a float32 resident acquisition".into()))
}

/// Per-position exact sums of the detector pixels in `indices`, in units of `2^lsb`.
async fn masked_sums(
    engine: &Engine,
    file: &str,
    res: &Resident,
    indices: &[u32],
) -> Result<Vec<i128>> {
    let r = range(res)?;
    r.check_exact(indices.len() as u64, 1, file)?;
    let n = res.plan.shape.frames() as u64;
    let out = engine.storage("float sums", n * 16);
    let list = DetectorList::new(engine, indices)?;
    let mut enc = engine.device.create_command_encoder(&Default::default());
    encode_masked_sums(engine, &mut enc, res, &list, &out)?;
    engine.queue.submit([enc.finish()]);
    Ok(wide_values(&engine.read_back(&out, n * 16).await?))
}

/// Per-position exact (total, Σ i·x, Σ j·x), in units of `2^lsb`.
async fn moments(engine: &Engine, file: &str, res: &Resident) -> Result<Vec<[i128; 3]>> {
    let r = range(res)?;
    let det = res.plan.shape.det;
    r.check_exact(
        res.plan.shape.det_len() as u64,
        det[0].max(det[1]) as u64,
        file,
    )?;
    let n = res.plan.shape.frames() as u64;
    let out = engine.storage("float moments", n * 48);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    encode_com_moments(engine, &mut enc, res, &out)?;
    engine.queue.submit([enc.finish()]);
    let v = wide_values(&engine.read_back(&out, n * 48).await?);
    Ok(v.chunks_exact(3).map(|m| [m[0], m[1], m[2]]).collect())
}

/// Per-pixel exact sums (units of `2^lsb`) and maxima over the positions of `roi`.
pub(crate) async fn pattern_reduce(
    engine: &Engine,
    file: &str,
    res: &Resident,
    roi: Region,
) -> Result<(Vec<i128>, Vec<f32>)> {
    let r = range(res)?;
    r.check_exact(roi.len() as u64, 1, file)?;
    let shape = res.plan.shape;
    let det_len = shape.det_len();
    let bytes = det_len as u64 * 32;
    let out = engine.storage("float pattern", bytes);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    encode_pattern_reduce(engine, &mut enc, res, &ScanRoi::Rect(roi), &out)?;
    engine.queue.submit([enc.finish()]);
    let words: Vec<u32> = bytemuck::pod_collect_to_vec(&engine.read_back(&out, bytes).await?);
    let mut sums = Vec::with_capacity(det_len);
    let mut max = Vec::with_capacity(det_len);
    for w in words.chunks_exact(8) {
        let v = w[..4]
            .iter()
            .rev()
            .fold(0u128, |acc, &l| acc << 32 | l as u128);
        sums.push(v as i128);
        // Undo `float_key`: keys at or above 2^31 were non-negative floats.
        let key = w[4];
        max.push(f32::from_bits(if key >> 31 != 0 {
            key & 0x7fff_ffff
        } else {
            !key
        }));
    }
    Ok((sums, max))
}

/// Exact CoM planes [row, col] from the moments: each quotient of exact integers rounded once.
pub(crate) fn com_from_wide_moments(m: &[[i128; 3]]) -> Vec<f64> {
    let n = m.len();
    let mut com = vec![0f64; 2 * n];
    for (k, [t, r, c]) in m.iter().enumerate() {
        // The common scale 2^lsb cancels: r / t and c / t of the exact integers.
        if *t != 0 {
            let q = |v: i128| {
                host_exact::quotient(v.unsigned_abs(), t.unsigned_abs(), 0, (v < 0) != (*t < 0))
            };
            com[k] = q(*r);
            com[n + k] = q(*c);
        }
    }
    com
}

/// The exact CoM planes (row plane, then column plane) of a float32 resident.
pub(crate) async fn com_exact(engine: &Engine, file: &str, res: &Resident) -> Result<Vec<f64>> {
    Ok(com_from_wide_moments(&moments(engine, file, res).await?))
}

/// The exact CoM planes `com` less their scan means, in float64, rounded once to float32
/// (row, col) pairs (their bits): what the DPC of float32 data is packed from on every GPU
/// backend (see [`idpc_of_com`]).
pub(crate) fn centred_com_pairs(com: &[f64]) -> Vec<u32> {
    let n = com.len() / 2;
    let [mean_r, mean_c] = scan_means(com);
    (0..n)
        .flat_map(|k| {
            let d = [com[k] - mean_r, com[n + k] - mean_c];
            [(d[0] as f32).to_bits(), (d[1] as f32).to_bits()]
        })
        .collect()
}

fn centred_com_input(engine: &Engine, com: &[f64]) -> wgpu::Buffer {
    engine.input(&centred_com_pairs(com))
}

/// The `dpc-rotation` product of a float32 acquisition from its exact CoM planes `com` and
/// its dark-field image `dark`, on the GPU.
pub(crate) async fn rotation_of_com(
    engine: &Engine,
    scan: [usize; 2],
    com: &[f64],
    dark: &ProductArray,
) -> Result<ProductArray> {
    let buf = centred_com_input(engine, com);
    let centre = CentreSource::Com(&buf);
    let dark = dark.data.to_f64();
    let found =
        crate::products::dpc_rotation::on_gpu(engine, scan, centre, [0.0, 0.0], &dark).await?;
    Ok(found.product())
}

/// iDPC from the exact CoM of a float32 acquisition. The scan mean is taken off in float64
/// here, before the one rounding to float32: a CoM of several pixels rounded first keeps
/// only ~5e-7 px, which a weak DPC (1e-3 px) cannot spare against iDPC's bound.
pub(crate) async fn idpc_of_com(
    engine: &Engine,
    scan: [usize; 2],
    com: &[f64],
    p: &ProductParams,
) -> Result<ProductArray> {
    let centre = centred_com_input(engine, com);
    let idpc = Idpc::new(engine, scan);
    let mut enc = engine.device.create_command_encoder(&Default::default());
    let dpc = DpcSettings {
        mean: [0.0, 0.0],
        rotation: p.rotation,
        flip: p.flip,
    };
    idpc.encode(engine, &mut enc, CentreSource::Com(&centre), dpc)?;
    engine.queue.submit([enc.finish()]);
    crate::products::gpu::idpc_product(engine, &idpc, scan).await
}

/// The product `kind` of a pattern reduction from the exact per-pixel sums (units of
/// `2^lsb`) and maxima over `count` positions of a float32 acquisition.
pub(crate) fn pattern_product(
    acq: &Acquisition,
    res: PatternFacts,
    kind: ProductKind,
    sum: Vec<i128>,
    max: Vec<f32>,
    count: u64,
    lsb: i32,
) -> ProductArray {
    let det = res.det;
    let mean = || -> Vec<f64> {
        sum.iter()
            .map(|&s| host_exact::quotient(s.unsigned_abs(), count as u128, lsb, s < 0))
            .collect()
    };
    let (shape_out, data) = match kind {
        ProductKind::MeanDp => (det.to_vec(), ArrayData::F64(mean())),
        ProductKind::MaxDp => (det.to_vec(), ArrayData::F32(max)),
        ProductKind::FitBf => (vec![3], ArrayData::F64(fit_on(acq, res, &mean()).to_vec())),
        _ => (
            det.to_vec(),
            ArrayData::F64(
                sum.iter()
                    .map(|&s| host_exact::from_i128_scaled(s, lsb))
                    .collect(),
            ),
        ),
    };
    ProductArray {
        shape: shape_out,
        data,
    }
}

/// One product of a float32 resident (see the module note).
pub async fn compute(
    engine: &Engine,
    acq: &Acquisition,
    res: &Resident,
    p: &ProductParams,
) -> Result<ProductArray> {
    let lsb = range(res)?.lsb;
    let file = acq.primary.as_str();
    let shape = res.plan.shape;
    let det = shape.det;
    let scan = shape.scan.to_vec();
    let values = |v: Vec<i128>| -> Vec<f64> {
        v.into_iter()
            .map(|s| host_exact::from_i128_scaled(s, lsb))
            .collect()
    };
    Ok(match p.kind {
        ProductKind::Total => ProductArray {
            shape: scan,
            data: ArrayData::F64(values(
                masked_sums(engine, file, res, &SparseMask::all(det).indices).await?,
            )),
        },
        ProductKind::Bf
        | ProductKind::Adf
        | ProductKind::Rect
        | ProductKind::Mask
        | ProductKind::Df => {
            let SparseMask { indices, weights } = p.detector_mask(det)?.sparse(det);
            if let Some(w) = weights {
                let groups = gpu_weight_groups(&indices, &w)?;
                let mut acc = vec![ExactSum::default(); shape.frames()];
                for (bits, idx) in groups {
                    let w = f64::from_bits(bits);
                    for (a, s) in acc
                        .iter_mut()
                        .zip(masked_sums(engine, file, res, &idx).await?)
                    {
                        a.add_weighted_wide(w, s, lsb);
                    }
                }
                return Ok(ProductArray {
                    shape: scan,
                    data: ArrayData::F64(acc.iter().map(ExactSum::value).collect()),
                });
            }
            let mut sums = masked_sums(engine, file, res, &indices).await?;
            if p.kind == ProductKind::Df {
                let total = masked_sums(engine, file, res, &SparseMask::all(det).indices).await?;
                for (s, t) in sums.iter_mut().zip(total) {
                    *s = t - *s;
                }
            }
            ProductArray {
                shape: scan,
                data: ArrayData::F64(values(sums)),
            }
        }
        ProductKind::Com | ProductKind::Dpc => {
            com_product(p, shape.scan, &com_exact(engine, file, res).await?)
        }
        ProductKind::Idpc => {
            idpc_of_com(engine, shape.scan, &com_exact(engine, file, res).await?, p).await?
        }
        ProductKind::DpcRotation => {
            let com = com_exact(engine, file, res).await?;
            let dark = Box::pin(compute(engine, acq, res, &p.dark_field())).await?;
            rotation_of_com(engine, shape.scan, &com, &dark).await?
        }
        ProductKind::SumDp | ProductKind::MeanDp | ProductKind::MaxDp | ProductKind::FitBf => {
            let roi = p.reduction_roi(shape.scan);
            let (sum, max) = pattern_reduce(engine, file, res, roi).await?;
            pattern_product(acq, res.facts(), p.kind, sum, max, roi.len() as u64, lsb)
        }
        ProductKind::Pattern | ProductKind::Binned => {
            crate::products::gpu::stored_frames(engine, acq, res, p).await?
        }
    })
}
