//! Resident stage, GPU-free part: how an acquisition is laid out in GPU memory — sample
//! width, word packing, position tiles, the split into buffers at the adapter's binding
//! limit — and the memory plan (payload and predicted peak) reported before anything is
//! allocated (C-MEM).
//!
//! The resident is **position-tiled**: scan positions are grouped in tiles of `tile`
//! positions (`256 / bits`: 32 for u8, 16 for u16, 8 for u32/f32), and a tile stores, pixel
//! after pixel, the 32 bytes (one GPU memory sector) holding that pixel's samples at the
//! tile's positions. A detector mask then costs the GPU exactly its own pixels' bytes (a
//! frame-major layout reads whole sectors around every mask edge and row), and dense
//! products still read each tile as one contiguous block. Word `w` (0..8) of a pixel's
//! sector holds positions `w · per_word ..` of the tile, position `p` in bits
//! `(p % per_word) · bits` up.

use serde::Serialize;

use crate::contract::{Dtype, Shape4};
use crate::error::{Error, Result};

/// Adapter limits that shape the plan (from `wgpu::Limits`, or made up in tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceLimits {
    pub max_buffer_size: u64,
    pub max_storage_binding: u64,
}

/// One GPU buffer holding frames `[first_frame, first_frame + frames)` in whole tiles
/// (`first_frame` is a multiple of the tile; the last tile of the last segment is padded
/// with zero samples).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Segment {
    pub first_frame: usize,
    pub frames: usize,
    pub bytes: u64,
}

/// Bits per resident sample of `dtype` (`binned`: sums widened to u32).
pub fn sample_bits(dtype: Dtype, binned: bool) -> u32 {
    match (dtype, binned) {
        (Dtype::U8, false) => 8,
        (Dtype::U16, false) => 16,
        // Float32 stays float32 when binned (C-BIN-COMPOSE: the float32 of each block's
        // float64 sum, made by the frame pipeline as it packs them on the CPU).
        _ => 32,
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResidentPlan {
    pub shape: Shape4,
    /// Bits per resident sample: 8/16 for native u8/u16, 32 for u32 and for binned sums.
    pub bits: u32,
    /// Scan positions per tile (`256 / bits`).
    pub tile: u32,
    /// Words per tile: 8 per detector pixel.
    pub tile_words: u32,
    /// Words per frame in the frame-major form the CPU path packs windows in (16-byte
    /// aligned) before the GPU tiles them.
    pub frame_words: u32,
    pub segments: Vec<Segment>,
    pub payload_bytes: u64,
    /// Payload plus the largest upload staging window plus product buffers.
    pub peak_bytes: u64,
    /// The largest storage binding the plan was made for: segments and upload windows stay
    /// within it.
    pub max_binding: u64,
}

impl ResidentPlan {
    /// Plan the resident copy of `shape` (already binned) for samples of `dtype` (`binned`:
    /// sums widened to u32).
    pub fn new(shape: Shape4, dtype: Dtype, binned: bool, limits: DeviceLimits) -> Result<Self> {
        let bits = sample_bits(dtype, binned);
        let det = shape.det_len() as u64;
        let per_word = (32 / bits) as u64;
        // Frames of the staged (frame-major) form start 16 bytes apart so kernels load whole
        // vec4s (zero padding, at most 12 bytes a frame).
        let frame_words = det.div_ceil(per_word).next_multiple_of(4);
        let tile = (256 / bits) as usize;
        let tile_words = det * 8;
        let tile_bytes = tile_words * 4;
        let limit = limits.max_storage_binding.min(limits.max_buffer_size) & !3;
        let tiles_per_segment = (limit / tile_bytes) as usize;
        if tiles_per_segment == 0 {
            return Err(Error::GpuUnsupported(format!(
                "one tile of {tile} scan positions ({tile_bytes} bytes) exceeds the adapter's storage binding limit ({limit} bytes): bin the detector"
            )));
        }
        if tile_words > u32::MAX as u64 / 2 || frame_words * 4 > u32::MAX as u64 {
            return Err(Error::GpuUnsupported(
                "detector too large for 32-bit indexing".into(),
            ));
        }
        let frames = shape.frames();
        let mut segments = Vec::new();
        let mut f = 0;
        while f < frames {
            let n = (tiles_per_segment * tile).min(frames - f);
            segments.push(Segment {
                first_frame: f,
                frames: n,
                bytes: n.div_ceil(tile) as u64 * tile_bytes,
            });
            f += n;
        }
        let payload_bytes: u64 = segments.iter().map(|s| s.bytes).sum();
        let mut plan = ResidentPlan {
            shape,
            bits,
            tile: tile as u32,
            tile_words: tile_words as u32,
            frame_words: frame_words as u32,
            segments,
            payload_bytes,
            peak_bytes: 0,
            max_binding: limits.max_storage_binding,
        };
        plan.peak_bytes = plan.peak(DECODE_WINDOW, DECODE_SCRATCH);
        Ok(plan)
    }

    /// The plan's peak for an acquisition whose largest chunk is `stored` bytes in its file
    /// and `logical` decoded: a window holds at least one chunk, so such a chunk makes the
    /// GPU decoder's windows and scratch larger than their usual size.
    pub fn with_largest_chunk(mut self, stored: u64, logical: u64) -> Self {
        self.peak_bytes = self.peak(DECODE_WINDOW.max(stored), DECODE_SCRATCH.max(logical));
        self
    }

    /// The plan's peak when the CPU packs the upload (no GPU decoder): payload, one staging
    /// window and the product buffers (a block of a streaming pass, a binned or cropped
    /// acquisition, data the GPU decoder does not take).
    pub fn without_gpu_decode(mut self) -> Self {
        let frame_bytes = self.frame_words as u64 * 4;
        let tile = self.tile as u64;
        let window_frames = (UPLOAD_WINDOW / frame_bytes / tile).max(1) * tile;
        let staging = window_frames.min(self.shape.frames() as u64) * frame_bytes;
        // Float32 moments and pattern sums are twice as wide; a detector list beside them.
        let products = self.shape.frames() as u64 * 48 + self.shape.det_len() as u64 * 36 + 4096;
        self.peak_bytes = self.payload_bytes + staging + products;
        self
    }

    /// The product buffers beside the resident: per-position sums and moments, per-pixel sums.
    pub(crate) fn product_bytes(&self) -> u64 {
        self.shape.frames() as u64 * 3 * 8 + self.shape.det_len() as u64 * 16
    }

    /// Payload, product buffers, and the larger of what the two upload paths hold beside
    /// them: the CPU path stages one window; the GPU decoder holds two windows' storage
    /// buffers (compressed bytes, parsed sequences, decoded scratch: reused window after
    /// window) and the compressed bytes of more on their way in (the staging ring: two
    /// windows on the GPU, the one being built and natively those read ahead), for windows
    /// of `window` compressed bytes (the bytes between their chunks
    /// included: `pick_window`) and `scratch` decoded.
    fn peak(&self, window: u64, scratch: u64) -> u64 {
        let products = self.product_bytes();
        let staging = self
            .segments
            .iter()
            .map(|s| s.bytes)
            .max()
            .unwrap_or(0)
            .min(UPLOAD_WINDOW);
        let decode = 2 * (window + DECODE_SEQS + scratch) + DECODE_STAGING_SLOTS as u64 * window;
        self.payload_bytes + staging.max(decode) + products
    }

    /// Samples per resident word.
    pub fn per_word(&self) -> u32 {
        32 / self.bits
    }

    /// Where frame `f` lives: its segment, the word offset of its tile in that segment's
    /// buffer, and its position in the tile.
    pub fn locate(&self, f: usize) -> Option<(usize, u32, u32)> {
        let s = self
            .segments
            .iter()
            .position(|s| f >= s.first_frame && f < s.first_frame + s.frames)?;
        let local = (f - self.segments[s].first_frame) as u32;
        Some((s, local / self.tile * self.tile_words, local % self.tile))
    }

    /// Sample `k` at position `p` of a tile's words.
    pub fn tile_sample(&self, tile: &[u32], k: usize, p: u32) -> u32 {
        let word = tile[k * 8 + (p / self.per_word()) as usize];
        match self.bits {
            32 => word,
            b => (word >> ((p % self.per_word()) * b)) & ((1 << b) - 1),
        }
    }

    /// The exact alternatives to offer when this plan does not fit: resident bytes with a
    /// further detector bin of 2 and 4 (sums widen to 32 bits), and with the first half of
    /// the scan rows (C-MEM, C-CROP).
    pub fn alternatives(&self) -> String {
        let frames = self.shape.frames() as u64;
        let gb = |b: u64| format!("{:.2} GB", b as f64 / 1e9);
        let binned = |b: usize| {
            frames * (self.shape.det[0].div_ceil(b) * self.shape.det[1].div_ceil(b)) as u64 * 4
        };
        let rows = self.shape.scan[0];
        let half = rows.div_ceil(2);
        format!(
            "open it again with a detector bin (bin 2: {}, bin 4: {} resident) or a scan crop (rows 0..{half} of {rows}: {})",
            gb(binned(2)),
            gb(binned(4)),
            gb(self.payload_bytes * half as u64 / rows.max(1) as u64)
        )
    }

    /// Pack float32 samples (one frame after another) into resident words (their bits).
    pub fn pack_float_frames(&self, samples: &[f32], words: &mut Vec<u32>) {
        let det = self.shape.det_len();
        for frame in samples.chunks_exact(det) {
            words.extend(frame.iter().map(|x| x.to_bits()));
            words.resize(words.len() + self.frame_words as usize - det, 0);
        }
    }

    /// Pack raw little-endian samples of an unbinned integer acquisition (one frame after
    /// another, `bits / 8` bytes each) into resident words: the bytes are the packed words
    /// already, so each frame is copied whole and only its bad pixels (`bad`, by detector
    /// index) and `sentinel` values are zeroed (C-BAD) — the result of widening, correcting and
    /// [`Self::pack_frames`], without a pass per sample (frames in parallel natively).
    pub fn pack_raw_frames(
        &self,
        raw: &[u8],
        bad: Option<&[bool]>,
        sentinel: Option<u32>,
        words: &mut Vec<u32>,
    ) {
        let det = self.shape.det_len();
        let size = (self.bits / 8) as usize;
        let frames = raw.len() / (det * size).max(1);
        let bad: Vec<usize> = bad
            .map(|m| (0..det).filter(|&k| m.get(k) == Some(&true)).collect())
            .unwrap_or_default();
        let fw = self.frame_words as usize;
        let start = words.len();
        words.resize(start + frames * fw, 0);
        let one = |(frame, src): (&mut [u32], &[u8])| {
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(frame);
            let (samples, pad) = bytes.split_at_mut(det * size);
            samples.copy_from_slice(src);
            pad.fill(0);
            for &k in &bad {
                samples[k * size..(k + 1) * size].fill(0);
            }
            if let Some(s) = sentinel {
                let s = s.to_le_bytes();
                for v in samples.chunks_exact_mut(size) {
                    if v == &s[..size] {
                        v.fill(0);
                    }
                }
            }
        };
        let out = &mut words[start..];
        #[cfg(not(target_arch = "wasm32"))]
        {
            use rayon::prelude::*;
            out.par_chunks_mut(fw)
                .zip(raw.par_chunks(det * size))
                .for_each(one);
        }
        #[cfg(target_arch = "wasm32")]
        out.chunks_mut(fw).zip(raw.chunks(det * size)).for_each(one);
    }

    /// Pack corrected u32 samples (one frame after another) into resident words.
    pub fn pack_frames(&self, samples: &[u32], words: &mut Vec<u32>) {
        let det = self.shape.det_len();
        let per_word = (32 / self.bits) as usize;
        for frame in samples.chunks_exact(det) {
            let start = words.len();
            words.resize(start + self.frame_words as usize, 0);
            for (k, &v) in frame.iter().enumerate() {
                words[start + k / per_word] |= v << ((k % per_word) as u32 * self.bits);
            }
        }
    }
}

/// What the upload saw of float32 samples: the binary orders that decide whether the GPU can
/// sum them exactly as 128-bit integers in units of `2^lsb` (the audit of C-FLOAT-GPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FloatRange {
    /// Every sample is an integer multiple of `2^lsb` (the smallest ulp exponent seen).
    pub lsb: i32,
    /// Every |sample| is below `2^top`.
    pub top: i32,
    /// A NaN or an infinity was seen.
    pub non_finite: bool,
}

impl Default for FloatRange {
    fn default() -> Self {
        // Empty (no non-zero sample yet): every bound holds.
        FloatRange {
            lsb: i32::MAX,
            top: i32::MIN,
            non_finite: false,
        }
    }
}

impl FloatRange {
    /// The range of samples seen by `self` or by `other`.
    pub fn merge(&mut self, other: FloatRange) {
        self.lsb = self.lsb.min(other.lsb);
        self.top = self.top.max(other.top);
        self.non_finite |= other.non_finite;
    }

    /// The range of little-endian float32 samples in `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> FloatRange {
        let mut r = FloatRange::default();
        let samples: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        r.take(&samples);
        r
    }

    pub fn take(&mut self, samples: &[f32]) {
        for x in samples {
            let b = x.to_bits();
            let e = ((b >> 23) & 0xff) as i32;
            if e == 0xff {
                self.non_finite = true;
                continue;
            }
            let m = b & 0x7f_ffff | if e != 0 { 0x80_0000 } else { 0 };
            if m == 0 {
                continue;
            }
            // x = ±m · 2^(max(e, 1) − 150), m < 2^24.
            let ulp = e.max(1) - 150;
            let top = ulp + (32 - m.leading_zeros()) as i32;
            self.lsb = self.lsb.min(ulp);
            self.top = self.top.max(top);
        }
    }

    /// Check that `terms` samples, each times an integer factor up to `max_factor`, sum
    /// exactly in a signed 128-bit integer of units `2^lsb`.
    pub fn check_exact(&self, terms: u64, max_factor: u64, file: &str) -> Result<()> {
        if self.non_finite {
            return Err(Error::GpuUnsupported(format!(
                "{file}: float32 data holds NaN or infinity; the GPU sums only finite values exactly (use --backend cpu)"
            )));
        }
        let log2 = |v: u64| 64 - v.max(1).saturating_sub(1).leading_zeros() as i32;
        if self.top < self.lsb {
            return Ok(());
        }
        let need = (self.top - self.lsb) + log2(terms) + log2(max_factor.max(1) + 1);
        if need > 127 {
            return Err(Error::GpuUnsupported(format!(
                "{file}: float32 values span 2^{}..2^{}, too wide for the GPU's exact 128-bit sums (needs {need} bits); use --backend cpu",
                self.lsb, self.top
            )));
        }
        Ok(())
    }
}

/// Bytes uploaded per `write_buffer` call: bounds the staging memory of the upload.
pub const UPLOAD_WINDOW: u64 = 64 << 20;
/// Compressed bytes per GPU-decode window.
pub const DECODE_WINDOW: u64 = 64 << 20;
/// Mappable buffers windows are staged in: one filled while the GPU copies from the two
/// before it; natively also one for each window read ahead, which the thread reading it
/// fills (`window_reads::read_staged`).
pub const DECODE_STAGING_SLOTS: usize = if cfg!(target_arch = "wasm32") {
    3
} else {
    3 + crate::upload::window_reads::READ_AHEAD
};
/// Decoded bytes per GPU-decode window (capped by the binding limit): more blocks per
/// dispatch keep more of the GPU busy.
pub const DECODE_SCRATCH: u64 = 256 << 20;
/// The parsed LZ4 sequences of a GPU-decode window at most (capped by the binding limit):
/// blocks past it are inflated by one invocation each instead.
pub const DECODE_SEQS: u64 = 128 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    /// Limits no test acquisition comes near.
    fn roomy() -> DeviceLimits {
        DeviceLimits {
            max_buffer_size: 1 << 20,
            max_storage_binding: 1 << 20,
        }
    }

    #[test]
    fn splits_at_the_binding_limit_on_tile_boundaries() {
        let shape = Shape4 {
            scan: [10, 10],
            det: [13, 11],
        };
        // u16: 16 positions a tile, 143 sectors of 32 bytes; room for three tiles.
        let limits = DeviceLimits {
            max_buffer_size: 1 << 30,
            max_storage_binding: 143 * 32 * 3 + 5,
        };
        let plan = ResidentPlan::new(shape, Dtype::U16, false, limits).unwrap();
        assert_eq!(
            (plan.tile, plan.tile_words, plan.frame_words),
            (16, 143 * 8, 72)
        );
        assert!(plan
            .segments
            .iter()
            .all(|s| s.bytes <= limits.max_storage_binding && s.first_frame % 16 == 0));
        let frames: Vec<usize> = plan.segments.iter().map(|s| s.frames).collect();
        assert_eq!(frames, [48, 48, 4]);
        // The last tile is padded: a whole tile of bytes for 4 positions.
        assert_eq!(plan.segments[2].bytes, 143 * 32);
        assert_eq!(plan.locate(0), Some((0, 0, 0)));
        assert_eq!(plan.locate(47), Some((0, 2 * 143 * 8, 15)));
        assert_eq!(plan.locate(99), Some((2, 0, 3)));
        assert_eq!(plan.locate(100), None);
        let u8_plan = ResidentPlan::new(shape, Dtype::U8, false, limits).unwrap();
        assert_eq!((u8_plan.tile, u8_plan.segments.len()), (32, 2));
    }

    #[test]
    fn the_peak_counts_a_chunk_larger_than_a_window() {
        let shape = Shape4 {
            scan: [64, 64],
            det: [96, 96],
        };
        let plan = ResidentPlan::new(shape, Dtype::U16, false, roomy()).unwrap();
        // Chunks within the usual windows change nothing.
        let same = plan
            .clone()
            .with_largest_chunk(DECODE_WINDOW, DECODE_SCRATCH);
        assert_eq!(same.peak_bytes, plan.peak_bytes);
        // One larger chunk: the compressed windows (two on the GPU, those staged) and two
        // scratch buffers grow by what it exceeds them by.
        let (stored, logical) = (DECODE_WINDOW + 1000, DECODE_SCRATCH + 10);
        let big = plan.clone().with_largest_chunk(stored, logical);
        let windows = 2 + DECODE_STAGING_SLOTS as u64;
        assert_eq!(big.peak_bytes, plan.peak_bytes + windows * 1000 + 2 * 10);
    }

    #[test]
    fn tile_samples_read_their_lane() {
        let shape = Shape4 {
            scan: [1, 40],
            det: [1, 2],
        };
        let limits = roomy();
        let plan = ResidentPlan::new(shape, Dtype::U8, false, limits).unwrap();
        // Pixel 1, positions 4..8 of the tile: word 9 (pixel 1's sector starts at word 8).
        let mut tile = vec![0u32; 16];
        tile[9] = 0x0403_0201;
        assert_eq!(plan.tile_sample(&tile, 1, 4), 1);
        assert_eq!(plan.tile_sample(&tile, 1, 7), 4);
        assert_eq!(plan.tile_sample(&tile, 0, 7), 0);
    }

    #[test]
    fn float_range_bounds_exact_sums() {
        let mut r = FloatRange::default();
        r.take(&[0.0, 1.5, -3.0, 0.25]);
        // 0.25 = 2^23 · 2^-25; 1.5 = 3·2^22 · 2^-23; |−3| < 2^2.
        assert_eq!((r.lsb, r.top, r.non_finite), (-25, 2, false));
        assert!(r.check_exact(1 << 16, 255, "f").is_ok());
        r.take(&[1e-30]);
        let e = r.check_exact(1 << 16, 255, "f.h5").unwrap_err();
        // Declined as unsupported: the one error the session computes on the CPU instead.
        assert!(e.is_gpu_unsupported(), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("f.h5") && e.contains("128-bit"), "{e}");
        r.take(&[f32::NAN]);
        let e = r.check_exact(1, 1, "f").unwrap_err();
        assert!(
            e.is_gpu_unsupported() && e.to_string().contains("NaN"),
            "{e:?}"
        );
        let mut sub = FloatRange::default();
        sub.take(&[f32::from_bits(1)]);
        assert_eq!((sub.lsb, sub.top), (-149, -148));
    }

    /// Raw frames packed directly equal widened, corrected, then packed ones, for every
    /// integer width, padded and unpadded frames, with bad pixels and sentinels.
    #[test]
    fn raw_frames_pack_like_corrected_samples() {
        let limits = roomy();
        for (dtype, det) in [
            (Dtype::U8, [3, 5]),
            (Dtype::U8, [4, 4]),
            (Dtype::U16, [7, 3]),
            (Dtype::U16, [2, 4]),
            (Dtype::U32, [5, 5]),
        ] {
            let shape = Shape4 { scan: [2, 3], det };
            let plan = ResidentPlan::new(shape, dtype, false, limits).unwrap();
            let size = dtype.size();
            let n = shape.frames() * shape.det_len();
            let max = dtype.sentinel().unwrap() as u64;
            // Every 7th sample saturated, the rest varied; pixels 1 and det-2 bad.
            let values: Vec<u32> = (0..n as u64)
                .map(|i| if i % 7 == 3 { max } else { (i * 2654435761) % max } as u32)
                .collect();
            let raw: Vec<u8> = values
                .iter()
                .flat_map(|v| v.to_le_bytes()[..size].to_vec())
                .collect();
            let mut bad = vec![false; shape.det_len()];
            bad[1] = true;
            bad[shape.det_len() - 2] = true;
            for masked in [false, true] {
                let (m, sentinel) = match masked {
                    true => (Some(bad.as_slice()), dtype.sentinel()),
                    false => (None, None),
                };
                let corrected: Vec<u32> = values
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let is_bad = m.is_some_and(|m| m[i % shape.det_len()]);
                        if is_bad || Some(v) == sentinel {
                            0
                        } else {
                            v
                        }
                    })
                    .collect();
                let (mut want, mut got) = (vec![7], vec![7]);
                plan.pack_frames(&corrected, &mut want);
                plan.pack_raw_frames(&raw, m, sentinel, &mut got);
                assert_eq!(got, want, "{dtype:?} {det:?} masked {masked}");
            }
        }
    }

    #[test]
    fn packs_u8_four_per_word() {
        let shape = Shape4 {
            scan: [1, 2],
            det: [1, 5],
        };
        let limits = roomy();
        let plan = ResidentPlan::new(shape, Dtype::U8, false, limits).unwrap();
        let mut words = Vec::new();
        plan.pack_frames(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], &mut words);
        assert_eq!(words, vec![0x04030201, 5, 0, 0, 0x09080706, 10, 0, 0]);
    }
}
