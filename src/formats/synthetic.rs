//! A synthetic uint16 acquisition generated on the fly: a bright-field disk whose centre
//! drifts with scan position, a faint ring, and hashed counting noise. Every sample is a
//! pure function of (frame, pixel), so benchmarks can make an acquisition of any size on
//! the machine that measures it, without files, and every backend sees the same numbers
//! (C-SYNTH: `wgsl/synthetic.wgsl` generates the same integers on the GPU).

use std::sync::Arc;

use super::{Acquisition, Calibration, Format, Part, PartKind};
use crate::contract::{Dtype, Shape4};
use crate::error::{Error, Result};
use crate::source::{FileSet, MemSource};

/// Integer-only (no floats, no 64-bit) so that `wgsl/synthetic.wgsl` produces the same
/// samples on the GPU: benchmarks make a resident acquisition of any size in milliseconds.
pub fn sample(shape: Shape4, frame: usize, k: usize) -> u16 {
    let [kr, kc] = shape.det;
    let cols = shape.scan[1].max(1);
    let (r, c) = ((frame / cols) as u32, (frame % cols) as u32);
    let (i, j) = ((k / kc) as i32, (k % kc) as i32);
    // Geometry in 1/16 px: the disk centre drifts ±1.5 px along triangle waves.
    let cr = 8 * kr as i32 + triangle(r, 126);
    let cc = 8 * kc as i32 + triangle(c, 90);
    let (di, dj) = (16 * i - cr, 16 * j - cc);
    let d2 = di * di + dj * dj;
    let rad = (kr.min(kc) as i32 * 256) / 100;
    let ring = 22 * rad / 10;
    let (base, amp) = if d2 <= rad * rad {
        (900, 30)
    } else if d2 > (ring - 32) * (ring - 32) && d2 < (ring + 32) * (ring + 32) {
        (40, 6)
    } else {
        (3, 2)
    };
    let noise =
        (mix32((frame as u32).wrapping_mul(0x9E37_79B1) ^ (k as u32).wrapping_mul(0x85EB_CA77))
            % 61) as i32
            - 30;
    (base + noise * amp / 17).max(0) as u16
}

/// −24..=24 (1/16 px) along a triangle wave of `period` scan steps.
fn triangle(x: u32, period: u32) -> i32 {
    let half = period / 2;
    let p = x % period;
    let up = if p < half { p } else { period - p };
    (up * 48 / half) as i32 - 24
}

/// The uint8 synthetic sample: the uint16 one divided by 4, at most 255 (a BF disk near
/// 225 counts, a ring near 10, background 0–1), for the uint8 benchmark acquisitions of
/// issues #30 and #31 (`--synthetic-dtype u8`).
pub fn sample_u8(shape: Shape4, frame: usize, k: usize) -> u8 {
    (sample(shape, frame, k) / 4).min(255) as u8
}

/// murmur3's 32-bit finaliser: well-mixed counting noise from (frame, pixel).
fn mix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

pub fn frames_bytes(shape: Shape4, f0: usize, f1: usize, dst: &mut [u8]) {
    let n = shape.det_len();
    let fill = |(df, out): (usize, &mut [u8])| {
        for (k, b) in out.chunks_exact_mut(2).enumerate() {
            b.copy_from_slice(&sample(shape, f0 + df, k).to_le_bytes());
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        dst.par_chunks_mut(n * 2).enumerate().for_each(fill);
    }
    #[cfg(target_arch = "wasm32")]
    dst.chunks_mut(n * 2).enumerate().for_each(fill);
    let _ = f1;
}

pub fn open(dims: [usize; 4]) -> Result<Acquisition> {
    if dims.contains(&0) {
        return Err(Error::param(
            "--synthetic needs four positive sizes R,C,KR,KC",
        ));
    }
    // Sizes multiplied in 128 bits: a shape past what the engine indexes is refused by its
    // true size, never wrapped.
    let [r, c, kr, kc] = dims.map(|d| d as u128);
    if r * c > super::MAX_FRAMES as u128 || kr * kc > super::MAX_DET_PIXELS as u128 {
        return Err(Error::param(format!(
            "--synthetic {}x{}x{}x{}: {} positions of {} pixels is past what is supported (at most {} positions, {} pixels a frame)",
            dims[0],
            dims[1],
            dims[2],
            dims[3],
            r * c,
            kr * kc,
            super::MAX_FRAMES,
            super::MAX_DET_PIXELS
        )));
    }
    let shape = Shape4 {
        scan: [dims[0], dims[1]],
        det: [dims[2], dims[3]],
    };
    let name = format!("synthetic_{}x{}x{}x{}", dims[0], dims[1], dims[2], dims[3]);
    let src = Arc::new(MemSource::new(name.clone(), Vec::<u8>::new()));
    Ok(Acquisition {
        format: Format::Synthetic,
        files: FileSet::new(vec![src.clone()])?,
        primary: name,
        dataset_path: String::new(),
        shape,
        dtype: Dtype::U16,
        scan_shape_source: "--synthetic".into(),
        parts: vec![Part {
            source: src,
            first_frame: 0,
            frames: shape.frames(),
            kind: PartKind::Synthetic,
        }],
        pixel_mask: None,
        calibration: Calibration::default(),
        crop: None,
        unused_files: Vec::new(),
    })
}

/// The synthetic acquisition stored as bitshuffle+LZ4 chunks of one frame each (8 KiB
/// blocks, as Dectris writes them) in memory: the decoders' benchmark without files.
pub fn open_compressed(dims: [usize; 4]) -> Result<Acquisition> {
    open_compressed_blocks(dims, 4096)
}

/// [`open_compressed`] of `dtype` samples: uint16 ([`sample`]) or uint8 ([`sample_u8`]),
/// in 8 KiB blocks either way.
pub fn open_compressed_as(dims: [usize; 4], dtype: Dtype) -> Result<Acquisition> {
    match dtype {
        Dtype::U16 => open_compressed(dims),
        Dtype::U8 => compressed_of(dims, Dtype::U8, 8192),
        other => Err(Error::param(format!(
            "--synthetic-dtype {}: synthetic acquisitions are uint8 or uint16",
            other.name()
        ))),
    }
}

/// [`open_compressed`] with bitshuffle blocks of `block_elems` elements (tests take blocks
/// larger than the GPU decoder's workgroup-memory path).
pub fn open_compressed_blocks(dims: [usize; 4], block_elems: usize) -> Result<Acquisition> {
    compressed_of(dims, Dtype::U16, block_elems)
}

fn compressed_of(dims: [usize; 4], dtype: Dtype, block_elems: usize) -> Result<Acquisition> {
    use crate::decode::pipeline::{Filter, FilterKind};
    let plain = open(dims)?;
    let shape = plain.shape;
    let elem = dtype.size();
    let encode = |f: usize| {
        let raw: Vec<u8> = if dtype == Dtype::U8 {
            (0..shape.det_len())
                .map(|k| sample_u8(shape, f, k))
                .collect()
        } else {
            let mut raw = vec![0u8; shape.det_len() * 2];
            frames_bytes(shape, f, f + 1, &mut raw);
            raw
        };
        crate::decode::bslz4::encode(&raw, elem, block_elems)
    };
    #[cfg(not(target_arch = "wasm32"))]
    let chunks: Vec<Vec<u8>> = {
        use rayon::prelude::*;
        (0..shape.frames()).into_par_iter().map(encode).collect()
    };
    #[cfg(target_arch = "wasm32")]
    let chunks: Vec<Vec<u8>> = (0..shape.frames()).map(encode).collect();
    let filter = Filter {
        kind: FilterKind::BitshuffleLz4,
        id: 32008,
        cd_values: vec![0, 2, elem as u32, 0, 2],
    };
    let name = match dtype {
        Dtype::U16 => format!("{}_bslz4", plain.primary),
        _ => format!("{}_{}_bslz4", plain.primary, dtype.name()),
    };
    Ok(Acquisition {
        scan_shape_source: plain.scan_shape_source,
        ..chunked(&name, shape, dtype, filter, chunks)?
    })
}

/// An acquisition of `shape` stored in memory as `chunks` (one frame each, frame order) of
/// `/entry/data/data` through `filter`, as an HDF5 file of Dectris would hold them: the
/// decoders' inputs of any shape, values or stream structure, without files.
pub fn chunked(
    name: &str,
    shape: Shape4,
    dtype: Dtype,
    filter: crate::decode::pipeline::Filter,
    chunks: Vec<Vec<u8>>,
) -> Result<Acquisition> {
    use crate::hdf5_index::{ChunkRef, DatasetIndex, Layout};
    if chunks.len() != shape.frames() {
        return Err(Error::param(format!(
            "{name}: {} chunks for {} frames",
            chunks.len(),
            shape.frames()
        )));
    }
    let mut bytes = Vec::with_capacity(chunks.iter().map(Vec::len).sum());
    let mut refs = Vec::with_capacity(chunks.len());
    for (f, c) in chunks.iter().enumerate() {
        refs.push(ChunkRef {
            coords: vec![f as u64, 0, 0],
            offset: bytes.len() as u64,
            size: c.len() as u64,
            filter_mask: 0,
        });
        bytes.extend_from_slice(c);
    }
    drop(chunks);
    let src = Arc::new(MemSource::new(name.to_string(), bytes));
    let index = DatasetIndex {
        file: name.to_string(),
        path: "/entry/data/data".into(),
        shape: vec![
            shape.frames() as u64,
            shape.det[0] as u64,
            shape.det[1] as u64,
        ],
        dtype,
        layout: Layout::Chunked {
            chunk_shape: vec![1, shape.det[0] as u64, shape.det[1] as u64],
        },
        filters: vec![filter],
        chunks: refs,
        pending: None,
    };
    Ok(Acquisition {
        format: Format::Synthetic,
        files: FileSet::new(vec![src.clone()])?,
        primary: name.to_string(),
        dataset_path: "/entry/data/data".into(),
        shape,
        dtype,
        scan_shape_source: "stored chunks".into(),
        parts: vec![Part {
            source: src,
            first_frame: 0,
            frames: shape.frames(),
            kind: PartKind::Hdf5(index),
        }],
        pixel_mask: None,
        calibration: Calibration::default(),
        crop: None,
        unused_files: Vec::new(),
    })
}
