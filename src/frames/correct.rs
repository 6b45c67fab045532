//! Correcting decoded frames: bad pixels zeroed (the file's mask, saturated values, those
//! found in the mean pattern) and the detector binned, exactly as every backend must.

use super::*;

/// Widen, zero bad pixels, then bin: the contract's order (C-BAD: the file's mask and the
/// saturation sentinel; C-BIN).
pub fn correct(
    acq: &Acquisition,
    raw: &[u8],
    first: usize,
    count: usize,
    corr: Correction,
) -> Result<FrameBlock> {
    let det = acq.shape.det;
    let n = acq.shape.det_len();
    let bad = corr
        .mask_bad_pixels
        .then_some(acq.pixel_mask.as_deref())
        .flatten();
    let sentinel = if corr.mask_bad_pixels {
        acq.dtype.sentinel()
    } else {
        None
    };
    let is_bad = |k: usize| bad.is_some_and(|m| m[k % n]);
    let samples = match acq.dtype {
        Dtype::F32 => Samples::Float(
            raw.chunks_exact(4)
                .enumerate()
                .map(|(k, b)| {
                    if is_bad(k) {
                        0.0
                    } else {
                        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
                    }
                })
                .collect(),
        ),
        dt => {
            let widen = |k: usize, v: u32| {
                if is_bad(k) || Some(v) == sentinel {
                    0
                } else {
                    v
                }
            };
            Samples::Int(match dt {
                Dtype::U8 => raw
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| widen(k, v as u32))
                    .collect(),
                Dtype::U16 => raw
                    .chunks_exact(2)
                    .enumerate()
                    .map(|(k, b)| widen(k, u16::from_le_bytes([b[0], b[1]]) as u32))
                    .collect(),
                _ => raw
                    .chunks_exact(4)
                    .enumerate()
                    .map(|(k, b)| widen(k, u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                    .collect(),
            })
        }
    };
    let block = FrameBlock {
        first,
        count,
        det,
        samples,
    };
    if corr.bin > 1 {
        bin_block(&block, corr.bin, &acq.primary)
    } else {
        Ok(block)
    }
}

/// Count-preserving `b × b` detector bin; partial edge blocks are kept (C-BIN). Integer sums
/// narrow to u32 or fail, float sums are the float32 of the float64 sum (C-BIN-COMPOSE).
pub fn bin_block(block: &FrameBlock, b: usize, file: &str) -> Result<FrameBlock> {
    let [kr, kc] = block.det;
    let out_shape = Shape4 {
        scan: [1, 1],
        det: block.det,
    }
    .binned(b);
    let [or, oc] = out_shape.det;
    let samples = match &block.samples {
        Samples::Int(v) => {
            let mut out = vec![0u64; block.count * or * oc];
            for f in 0..block.count {
                for i in 0..kr {
                    for j in 0..kc {
                        out[f * or * oc + (i / b) * oc + j / b] +=
                            v[f * kr * kc + i * kc + j] as u64;
                    }
                }
            }
            let mut narrow = Vec::with_capacity(out.len());
            for v in out {
                narrow.push(u32::try_from(v).map_err(|_| {
                    Error::format(
                        file,
                        format!("a {b}x{b} binned sum ({v}) exceeds uint32: use a smaller bin"),
                    )
                })?);
            }
            Samples::Int(narrow)
        }
        Samples::Float(v) => {
            let mut out = vec![0f64; block.count * or * oc];
            for f in 0..block.count {
                for i in 0..kr {
                    for j in 0..kc {
                        out[f * or * oc + (i / b) * oc + j / b] +=
                            v[f * kr * kc + i * kc + j] as f64;
                    }
                }
            }
            Samples::Float(out.into_iter().map(|x| x as f32).collect())
        }
    };
    Ok(FrameBlock {
        first: block.first,
        count: block.count,
        det: [or, oc],
        samples,
    })
}
