//! CPU reference of every product: exact integers, float64 with error-free (double-double)
//! accumulation for float data, simple loops. Every GPU kernel is checked against this.

pub mod dpc_rotation;
mod exact;
mod fft;

pub use exact::{div_u128, Dd};

use crate::contract::{fftfreq, rotate_flip, Region, SparseMask};
use crate::error::Result;
use crate::formats::Acquisition;
use crate::frames::{Correction, FrameBlock, FrameReader, Samples, BLOCK_BYTES};
use crate::pattern;
use crate::products::{ArrayData, ProductArray, ProductKind, ProductParams};

/// Compute one product of `acq` on its frames corrected by `corr`. The frames stream in
/// blocks of [`BLOCK_BYTES`] decoded bytes: the memory is a few blocks plus the product,
/// whatever the acquisition's size.
pub fn compute(acq: &Acquisition, p: &ProductParams, corr: Correction) -> Result<ProductArray> {
    compute_in_blocks(acq, p, corr, BLOCK_BYTES)
}

/// [`compute`] streaming the frames in blocks of about `block_bytes` decoded bytes.
pub fn compute_in_blocks(
    acq: &Acquisition,
    p: &ProductParams,
    corr: Correction,
    block_bytes: usize,
) -> Result<ProductArray> {
    p.validate(acq.shape, corr)?;
    // C-BIN-COMPOSE: every product runs on the binned frames, its geometry in binned pixels.
    let shape = acq.shape.binned(corr.bin);
    // With bad-pixel masking, the hot and dead pixels of the mean pattern are left out too
    // (C-BAD-FOUND).
    let found = found_mask(acq, corr, block_bytes)?;
    let reader = FrameReader::new(acq)
        .with_found_bad(found.clone())
        .with_block_bytes(block_bytes);
    let scan = shape.scan.to_vec();
    let det = shape.det;
    let binned = corr.bin > 1;
    match p.kind {
        ProductKind::SumDp | ProductKind::MeanDp | ProductKind::MaxDp => {
            let roi = p.scan_roi.unwrap_or(Region::full(shape.scan));
            let r = pattern_reductions(&reader, corr, det, roi, p.kind == ProductKind::MaxDp)?;
            let count = roi.len() as u64;
            // C-REDUCE: mean = exact total ÷ count, rounded once.
            let data = match (p.kind, r) {
                (ProductKind::SumDp, Reduced::Int { sum, .. }) => ArrayData::U64(sum),
                (ProductKind::SumDp, Reduced::Float { sum, .. }) => {
                    ArrayData::F64(sum.iter().map(Dd::value).collect())
                }
                (ProductKind::MeanDp, Reduced::Int { sum, .. }) => ArrayData::F64(
                    sum.iter()
                        .map(|&s| Dd::from_u64(s).div_u64(count))
                        .collect(),
                ),
                (ProductKind::MeanDp, Reduced::Float { sum, .. }) => {
                    ArrayData::F64(sum.iter().map(|s| s.div_u64(count)).collect())
                }
                (_, Reduced::Int { max, .. }) => {
                    ArrayData::from_samples_u32(max, acq.dtype, binned)
                }
                (_, Reduced::Float { max, .. }) => ArrayData::F32(max),
            };
            Ok(ProductArray {
                shape: det.to_vec(),
                data,
            })
        }
        ProductKind::Total => {
            let all = SparseMask::all(det);
            Ok(ProductArray {
                shape: scan,
                data: masked_sums(&reader, corr, &all)?.into_array(),
            })
        }
        ProductKind::Bf | ProductKind::Adf | ProductKind::Rect | ProductKind::Mask => {
            let mask = p.detector_mask(det)?.sparse(det);
            Ok(ProductArray {
                shape: scan,
                data: masked_sums(&reader, corr, &mask)?.into_array(),
            })
        }
        ProductKind::Df => {
            // C-MASK: DF = total − BF, from the per-position total.
            let bf = p.detector_mask(det)?.sparse(det);
            let all = SparseMask::all(det);
            let total = masked_sums(&reader, corr, &all)?;
            let bf = masked_sums(&reader, corr, &bf)?;
            Ok(ProductArray {
                shape: scan,
                data: total.minus(&bf).into_array(),
            })
        }
        ProductKind::Com => {
            let com = center_of_mass(&reader, corr, det)?;
            Ok(ProductArray {
                shape: vec![2, shape.scan[0], shape.scan[1]],
                data: ArrayData::F64(com),
            })
        }
        ProductKind::Dpc => {
            let com = center_of_mass(&reader, corr, det)?;
            Ok(ProductArray {
                shape: vec![2, shape.scan[0], shape.scan[1]],
                data: ArrayData::F64(dpc_from_com(&com, p.rotation, p.flip)),
            })
        }
        ProductKind::Idpc => {
            let com = center_of_mass(&reader, corr, det)?;
            let dpc = dpc_from_com(&com, p.rotation, p.flip);
            Ok(ProductArray {
                shape: scan,
                data: ArrayData::F64(idpc(&dpc, shape.scan)),
            })
        }
        ProductKind::DpcRotation => {
            let com = center_of_mass(&reader, corr, det)?;
            let annulus = p.dark_field().detector_mask(det)?.sparse(det);
            let dark = masked_sums(&reader, corr, &annulus)?.into_array().to_f64();
            let dpc = dpc_from_com(&com, 0.0, false);
            Ok(dpc_rotation::find(&dpc, &dark, shape.scan, idpc)?.product())
        }
        ProductKind::Binned => {
            let mut ints = Vec::new();
            let mut floats = Vec::new();
            reader.for_each_block(corr, |b| {
                match &b.samples {
                    Samples::Int(v) => ints.extend_from_slice(v),
                    Samples::Float(v) => floats.extend_from_slice(v),
                }
                Ok(())
            })?;
            let data = if acq.dtype.is_float() {
                ArrayData::F32(floats)
            } else {
                ArrayData::U32(ints)
            };
            Ok(ProductArray {
                shape: vec![shape.scan[0], shape.scan[1], det[0], det[1]],
                data,
            })
        }
        ProductKind::Pattern => {
            let [r, c] = ProductParams::need(p.at, "at", p.kind)?;
            let f = r * shape.scan[1] + c;
            let block = reader.block(f, f + 1, corr)?;
            let data = match block.samples {
                Samples::Int(v) => ArrayData::from_samples_u32(v, acq.dtype, binned),
                Samples::Float(v) => ArrayData::F32(v),
            };
            Ok(ProductArray {
                shape: det.to_vec(),
                data,
            })
        }
        ProductKind::FitBf => {
            let mean = full_mean(&reader, corr, det)?;
            let known = pattern::file_known(acq.pixel_mask.as_deref(), acq.shape.det, corr);
            let known = pattern::union(known, found.as_deref());
            Ok(ProductArray {
                shape: vec![3],
                data: ArrayData::F64(pattern::fit(&mean, det, &known).product().to_vec()),
            })
        }
    }
}

/// The pixels left out beside the file's with bad-pixel masking on: the hot and dead pixels
/// of the mean pattern (C-BAD-FOUND), on the binned detector.
fn found_mask(
    acq: &Acquisition,
    corr: Correction,
    block_bytes: usize,
) -> Result<Option<Vec<bool>>> {
    let det = acq.shape.binned(corr.bin).det;
    Ok(match corr.mask_bad_pixels {
        true => Some(found_in_blocks(acq, corr, block_bytes)?.mask(det)),
        false => None,
    })
}

/// The `binned` product of `acq` written to `out` as `.npy`, block by block as the frames
/// stream: the whole corrected acquisition (u32, or float32 for float data) is never held
/// in memory, only a block of about `block_bytes`. `name` names `out` in errors.
pub fn write_binned_npy(
    acq: &Acquisition,
    corr: Correction,
    block_bytes: usize,
    out: &mut dyn std::io::Write,
    name: &str,
) -> Result<()> {
    ProductParams::new(ProductKind::Binned).validate(acq.shape, corr)?;
    let shape = acq.shape.binned(corr.bin);
    let reader = FrameReader::new(acq)
        .with_found_bad(found_mask(acq, corr, block_bytes)?)
        .with_block_bytes(block_bytes);
    let io = |e: std::io::Error| crate::error::Error::Io {
        file: name.to_string(),
        message: format!("cannot write output: {e}"),
    };
    let descr = if acq.dtype.is_float() { "<f4" } else { "<u4" };
    let dims = [shape.scan[0], shape.scan[1], shape.det[0], shape.det[1]];
    out.write_all(&crate::products::npy::header(&dims, descr))
        .map_err(io)?;
    reader.for_each_block(corr, |b| {
        let bytes: Vec<u8> = match &b.samples {
            Samples::Int(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Samples::Float(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        };
        out.write_all(&bytes).map_err(io)
    })
}

/// The exact mean pattern over every scan position, rounded once to float64.
fn full_mean(reader: &FrameReader, corr: Correction, det: [usize; 2]) -> Result<Vec<f64>> {
    let roi = Region::full(reader.acquisition().shape.scan);
    let count = roi.len() as u64;
    Ok(match pattern_reductions(reader, corr, det, roi, false)? {
        Reduced::Int { sum, .. } => sum
            .iter()
            .map(|&s| Dd::from_u64(s).div_u64(count))
            .collect(),
        Reduced::Float { sum, .. } => sum.iter().map(|s| s.div_u64(count)).collect(),
    })
}

/// The hot and dead pixels of `acq`'s mean pattern under `corr` (its file mask and saturated
/// values zeroed when masking, binned): `pattern::detect`, leaving out the file's bad pixels
/// (C-BAD-FOUND).
pub fn find_bad_pixels(acq: &Acquisition, corr: Correction) -> Result<pattern::BadPixels> {
    found_in_blocks(acq, corr, BLOCK_BYTES)
}

fn found_in_blocks(
    acq: &Acquisition,
    corr: Correction,
    block_bytes: usize,
) -> Result<pattern::BadPixels> {
    let det = acq.shape.binned(corr.bin).det;
    let reader = FrameReader::new(acq).with_block_bytes(block_bytes);
    let mean = full_mean(&reader, corr, det)?;
    let known = pattern::file_known(acq.pixel_mask.as_deref(), acq.shape.det, corr);
    Ok(pattern::detect(&mean, det, &known))
}

enum Reduced {
    Int { sum: Vec<u64>, max: Vec<u32> },
    Float { sum: Vec<Dd>, max: Vec<f32> },
}

/// Sum and maximum over the scan positions in `roi`, per detector pixel: integer sums exact,
/// float sums in double-double, a maximum started from the first value (C-REDUCE).
fn pattern_reductions(
    reader: &FrameReader,
    corr: Correction,
    det: [usize; 2],
    roi: Region,
    want_max: bool,
) -> Result<Reduced> {
    let n = det[0] * det[1];
    let cols = reader.acquisition().shape.scan[1];
    let float = reader.acquisition().dtype.is_float();
    let mut out = if float {
        Reduced::Float {
            sum: vec![Dd::ZERO; n],
            max: Vec::new(),
        }
    } else {
        Reduced::Int {
            sum: vec![0; n],
            max: Vec::new(),
        }
    };
    reader.for_each_block(corr, |b| {
        for f in 0..b.count {
            let pos = b.first + f;
            if !roi.contains(pos / cols, pos % cols) {
                continue;
            }
            match (&mut out, &b.samples) {
                (Reduced::Int { sum, max }, Samples::Int(v)) => {
                    let frame = &v[f * n..(f + 1) * n];
                    for (s, &x) in sum.iter_mut().zip(frame) {
                        *s += x as u64;
                    }
                    if want_max {
                        if max.is_empty() {
                            max.extend_from_slice(frame);
                        } else {
                            for (m, &x) in max.iter_mut().zip(frame) {
                                *m = (*m).max(x);
                            }
                        }
                    }
                }
                (Reduced::Float { sum, max }, Samples::Float(v)) => {
                    let frame = &v[f * n..(f + 1) * n];
                    for (s, &x) in sum.iter_mut().zip(frame) {
                        s.add(x as f64);
                    }
                    if want_max {
                        if max.is_empty() {
                            max.extend_from_slice(frame);
                        } else {
                            // IEEE total order: +0 above −0 and a NaN above every
                            // number, so the maximum does not depend on the order of frames
                            // (C-FLOAT-GPU: the same order on every backend).
                            for (m, &x) in max.iter_mut().zip(frame) {
                                if x.total_cmp(m).is_gt() {
                                    *m = x;
                                }
                            }
                        }
                    }
                }
                _ => unreachable!("sample kind follows the acquisition dtype"),
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// Per-position masked sums `V[s] = Σ mask[k]·I[s,k]` (C-MASK): exact u64 for 0/1 masks on
/// integer data, double-double else (C-FLOAT-CPU).
enum Sums {
    Int(Vec<u64>),
    Float(Vec<Dd>),
}

impl Sums {
    fn into_array(self) -> ArrayData {
        match self {
            Sums::Int(v) => ArrayData::U64(v),
            Sums::Float(v) => ArrayData::F64(v.iter().map(Dd::value).collect()),
        }
    }

    /// `total − complement`: exact for integers, one rounding for floats.
    fn minus(self, other: &Sums) -> Sums {
        match (self, other) {
            (Sums::Int(a), Sums::Int(b)) => {
                Sums::Int(a.iter().zip(b).map(|(x, y)| x - y).collect())
            }
            (Sums::Float(a), Sums::Float(b)) => Sums::Float(
                a.iter()
                    .zip(b)
                    .map(|(x, y)| {
                        let mut d = *x;
                        d.sub_dd(y);
                        d
                    })
                    .collect(),
            ),
            _ => unreachable!("both sums come from the same data and mask kind"),
        }
    }
}

fn masked_sums(reader: &FrameReader, corr: Correction, mask: &SparseMask) -> Result<Sums> {
    let frames = reader.acquisition().shape.frames();
    let int_exact = !reader.acquisition().dtype.is_float() && mask.weights.is_none();
    let mut out = if int_exact {
        Sums::Int(vec![0; frames])
    } else {
        Sums::Float(vec![Dd::ZERO; frames])
    };
    reader.for_each_block(corr, |b: &FrameBlock| {
        let n = b.det[0] * b.det[1];
        for f in 0..b.count {
            let pos = b.first + f;
            match (&mut out, &b.samples) {
                (Sums::Int(s), Samples::Int(v)) => {
                    let frame = &v[f * n..(f + 1) * n];
                    s[pos] = mask.indices.iter().map(|&k| frame[k as usize] as u64).sum();
                }
                (Sums::Float(s), samples) => {
                    let mut acc = Dd::ZERO;
                    for (i, &k) in mask.indices.iter().enumerate() {
                        let x = match samples {
                            Samples::Int(v) => v[f * n + k as usize] as f64,
                            Samples::Float(v) => v[f * n + k as usize] as f64,
                        };
                        match &mask.weights {
                            Some(w) => acc.add_product(w[i], x),
                            None => acc.add(x),
                        }
                    }
                    s[pos] = acc;
                }
                _ => unreachable!("integer sums only for integer samples"),
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// Centre of mass `[row plane, col plane]` in detector pixels; an empty frame gives 0.
/// Integer moments are exact (u128) and divided once (C-COM).
fn center_of_mass(reader: &FrameReader, corr: Correction, det: [usize; 2]) -> Result<Vec<f64>> {
    let frames = reader.acquisition().shape.frames();
    let mut com = vec![0f64; 2 * frames];
    reader.for_each_block(corr, |b| {
        let n = det[0] * det[1];
        for f in 0..b.count {
            let pos = b.first + f;
            let (r, c) = match &b.samples {
                Samples::Int(v) => {
                    let frame = &v[f * n..(f + 1) * n];
                    let (mut t, mut mr, mut mc) = (0u128, 0u128, 0u128);
                    for i in 0..det[0] {
                        for j in 0..det[1] {
                            let x = frame[i * det[1] + j] as u128;
                            t += x;
                            mr += x * i as u128;
                            mc += x * j as u128;
                        }
                    }
                    if t == 0 {
                        (0.0, 0.0)
                    } else {
                        (exact::div_u128(mr, t), exact::div_u128(mc, t))
                    }
                }
                Samples::Float(v) => {
                    let frame = &v[f * n..(f + 1) * n];
                    let (mut t, mut mr, mut mc) = (Dd::ZERO, Dd::ZERO, Dd::ZERO);
                    for i in 0..det[0] {
                        for j in 0..det[1] {
                            let x = frame[i * det[1] + j] as f64;
                            t.add(x);
                            mr.add_product(i as f64, x);
                            mc.add_product(j as f64, x);
                        }
                    }
                    if t.value() == 0.0 {
                        (0.0, 0.0)
                    } else {
                        (mr.div_dd(&t), mc.div_dd(&t))
                    }
                }
            };
            com[pos] = r;
            com[frames + pos] = c;
        }
        Ok(())
    })?;
    Ok(com)
}

/// Scan means of the two CoM planes `[row plane, col plane]`, summed in double-double, over
/// every position, empty frames (CoM 0) included (C-DPC-MEAN).
pub fn scan_means(com: &[f64]) -> [f64; 2] {
    let n = com.len() / 2;
    let mean = |plane: &[f64]| {
        let mut s = Dd::ZERO;
        for &v in plane {
            s.add(v);
        }
        s.div_u64(n.max(1) as u64)
    };
    [mean(&com[..n]), mean(&com[n..])]
}

/// DPC: CoM minus its scan mean per component, then flip and rotation (C-DPC).
pub fn dpc_from_com(com: &[f64], rotation_deg: f64, flip: bool) -> Vec<f64> {
    let n = com.len() / 2;
    let [mr, mc] = scan_means(com);
    let mut out = vec![0f64; 2 * n];
    for k in 0..n {
        let g = rotate_flip([com[k] - mr, com[n + k] - mc], rotation_deg, flip);
        out[k] = g[0];
        out[n + k] = g[1];
    }
    out
}

/// iDPC by exact Fourier integration: `φ̂ = (ν_r Ĝ_r + ν_c Ĝ_c) / (2πi |ν|²)`, `φ̂(0) = 0`
/// (C-IDPC).
pub fn idpc(dpc: &[f64], scan: [usize; 2]) -> Vec<f64> {
    use rustfft::num_complex::Complex;
    let [rows, cols] = scan;
    let n = rows * cols;
    let to_c = |p: &[f64]| p.iter().map(|&v| Complex::new(v, 0.0)).collect::<Vec<_>>();
    let mut gr = to_c(&dpc[..n]);
    let mut gc = to_c(&dpc[n..]);
    fft::fft2(&mut gr, rows, cols, false);
    fft::fft2(&mut gc, rows, cols, false);
    let (fr, fc) = (fftfreq(rows), fftfreq(cols));
    let mut phi = vec![Complex::new(0.0, 0.0); n];
    for (i, &vr) in fr.iter().enumerate() {
        for (j, &vc) in fc.iter().enumerate() {
            let k = i * cols + j;
            let nu2 = vr * vr + vc * vc;
            if nu2 == 0.0 {
                continue;
            }
            let num = gr[k] * vr + gc[k] * vc;
            // Divide by 2πi|ν|²: multiply by -i / (2π|ν|²).
            phi[k] = Complex::new(num.im, -num.re) / (2.0 * std::f64::consts::PI * nu2);
        }
    }
    fft::fft2(&mut phi, rows, cols, true);
    phi.iter().map(|c| c.re).collect()
}
