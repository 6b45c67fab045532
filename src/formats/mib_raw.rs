//! Merlin's raw readout (MIB pixel type `R64`, decision 0030): each chip's counters as the
//! readout sends them, in 64-bit words whose order within the word is reversed, row after
//! row. A counter of `depth` bits is one bit (1-bit), one byte (6-bit) or a big-endian
//! 16-bit word (12-bit); so a 64-bit word holds 64, 8 or 4 pixels, the last pixel of the
//! word first. A quad (2×2 chips of 256²) is read out as rows of its four chips side by
//! side: the fourth chip's row is the top-left quadrant's, the third's the top-right's, and
//! the second's and first's are the bottom-left and bottom-right quadrants' rows turned by
//! 180°. This is the layout LiberTEM decodes; on the recordings in `../shared/data/` the
//! decoded 1-bit frames agree with the processed frames of the same detector settings
//! (`tests/mib.rs`). A 24-bit counter is read out as two 12-bit images one after the other,
//! the most significant 12 bits first; the frame header gives them as one image twice as
//! wide. LiberTEM decodes it so for single chips only, and so does this; 24-bit quads are
//! refused (decision 0032).

use crate::contract::Dtype;
use crate::error::{Error, Result};

/// How a raw frame's counters are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MibRaw {
    /// Counter depth in bits: 1, 6, 12 or 24.
    pub depth: u32,
    /// Pixels of one stored row (all chips side by side; for 24-bit counters both 12-bit
    /// images' rows, as the frame header counts them).
    pub stored_cols: usize,
    pub stored_rows: usize,
    /// A 2×2 quad, its chips side by side in each stored row.
    pub quad: bool,
}

impl MibRaw {
    /// The layout of `R64` frames of `depth`-bit counters, `chips` chips in `layout`,
    /// stored `[rows, cols]` as the frame header says; with the decoded detector shape and
    /// sample type. Anything else is refused naming `file`.
    pub fn new(
        file: &str,
        depth: u32,
        chips: u32,
        layout: &str,
        stored: [usize; 2],
    ) -> Result<(MibRaw, [usize; 2], Dtype)> {
        let bad = |what: String| Error::format(file, what);
        let dtype = match depth {
            1 | 6 => Dtype::U8,
            12 => Dtype::U16,
            24 => Dtype::U32,
            d => {
                return Err(bad(format!(
                    "raw MIB counter depth {d} is not one of 1, 6, 12, 24"
                )))
            }
        };
        let [rows, stored_cols] = stored;
        // 24-bit: the header's width holds both 12-bit images.
        let wide = depth == 24;
        if wide && (chips != 1 || stored_cols % 2 != 0) {
            return Err(bad(format!(
                "raw MIB frames of 24-bit counters are decoded for single chips whose header gives both 12-bit images side by side, not {chips} chips in layout '{}' of {stored_cols} columns: record with raw output off (U32)",
                layout.trim()
            )));
        }
        let cols = if wide { stored_cols / 2 } else { stored_cols };
        // Pixels of one 64-bit word: a row is whole words.
        let per_word = 64 / Self::stored_bits(depth);
        let quad = match (chips, layout.trim()) {
            (1, "1x1") => false,
            (4, "2x2") => true,
            _ => {
                return Err(bad(format!(
                    "raw MIB frames of {chips} chips in layout '{}' are not decoded (single chips and 2x2 quads are)",
                    layout.trim()
                )))
            }
        };
        let chip_cols = if quad { cols / 4 } else { cols };
        if chip_cols == 0 || chip_cols % per_word != 0 || (quad && cols % 4 != 0) {
            return Err(bad(format!(
                "raw MIB rows of {cols} pixels are not whole 64-bit words of {depth}-bit counters{}",
                if quad { " per chip" } else { "" }
            )));
        }
        let det = if quad {
            [2 * rows, 2 * chip_cols]
        } else {
            [rows, cols]
        };
        Ok((
            MibRaw {
                depth,
                stored_cols,
                stored_rows: rows,
                quad,
            },
            det,
            dtype,
        ))
    }

    /// Bits one counter takes as stored.
    fn stored_bits(depth: u32) -> usize {
        match depth {
            1 => 1,
            6 => 8,
            _ => 16,
        }
    }

    /// Bytes of one frame's counters as stored.
    pub fn stored_bytes(&self) -> usize {
        self.stored_rows * self.stored_cols * Self::stored_bits(self.depth) / 8
    }

    /// Decode one frame's stored counters into `out`: the detector's samples, row-major,
    /// little-endian (one byte for 1- and 6-bit counters, two for 12-bit, four for 24-bit).
    pub fn decode(&self, stored: &[u8], out: &mut [u8]) {
        if self.depth == 24 {
            return self.decode_24(stored, out);
        }
        let row_bytes = self.stored_cols * Self::stored_bits(self.depth) / 8;
        let size = if self.depth == 12 { 2 } else { 1 };
        let mut row = vec![0u16; self.stored_cols];
        if !self.quad {
            for (r, bytes) in stored.chunks_exact(row_bytes).enumerate() {
                self.decode_row(bytes, &mut row);
                for (c, &v) in row.iter().enumerate() {
                    put(out, (r * self.stored_cols + c) * size, v, size);
                }
            }
            return;
        }
        let (w, h) = (self.stored_cols / 4, self.stored_rows);
        let cols = 2 * w;
        for (r, bytes) in stored.chunks_exact(row_bytes).enumerate() {
            self.decode_row(bytes, &mut row);
            for (chip, pixels) in row.chunks_exact(w).enumerate() {
                for (x, &v) in pixels.iter().enumerate() {
                    // Chips 3 and 2: the top quadrants as stored; 1 and 0: the bottom ones
                    // turned by 180°.
                    let (i, j) = match chip {
                        3 => (r, x),
                        2 => (r, w + x),
                        1 => (2 * h - 1 - r, w - 1 - x),
                        _ => (2 * h - 1 - r, 2 * w - 1 - x),
                    };
                    put(out, (i * cols + j) * size, v, size);
                }
            }
        }
    }

    /// A 24-bit frame: two images of 12-bit counters, the high bits' first, each stored as
    /// 12-bit counters are.
    fn decode_24(&self, stored: &[u8], out: &mut [u8]) {
        let cols = self.stored_cols / 2;
        let (high, low) = stored.split_at(stored.len() / 2);
        let (mut hi, mut lo) = (vec![0u16; cols], vec![0u16; cols]);
        for (r, (h, l)) in high
            .chunks_exact(2 * cols)
            .zip(low.chunks_exact(2 * cols))
            .enumerate()
        {
            self.decode_row(h, &mut hi);
            self.decode_row(l, &mut lo);
            for (c, (&a, &b)) in hi.iter().zip(&lo).enumerate() {
                let at = 4 * (r * cols + c);
                let v = ((a as u32) << 12) + b as u32;
                out[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }

    /// One stored row's counters, in the chips' pixel order.
    fn decode_row(&self, bytes: &[u8], out: &mut [u16]) {
        match self.depth {
            1 => {
                for (word, px) in bytes.chunks_exact(8).zip(out.chunks_exact_mut(64)) {
                    for (b, &byte) in word.iter().rev().enumerate() {
                        for bit in 0..8 {
                            px[8 * b + bit] = ((byte >> bit) & 1) as u16;
                        }
                    }
                }
            }
            6 => {
                for (word, px) in bytes.chunks_exact(8).zip(out.chunks_exact_mut(8)) {
                    for (k, &v) in word.iter().enumerate() {
                        px[7 - k] = v as u16;
                    }
                }
            }
            _ => {
                for (word, px) in bytes.chunks_exact(8).zip(out.chunks_exact_mut(4)) {
                    for (k, be) in word.chunks_exact(2).enumerate() {
                        px[3 - k] = u16::from_be_bytes([be[0], be[1]]);
                    }
                }
            }
        }
    }
}

fn put(out: &mut [u8], at: usize, v: u16, size: usize) {
    if size == 2 {
        out[at..at + 2].copy_from_slice(&v.to_le_bytes());
    } else {
        out[at] = v as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_depth_reverses_its_words_and_a_quad_turns_its_bottom_chips() {
        // 12-bit, one word: pixels 3, 2, 1, 0 stored first to last.
        let (raw, det, dtype) = MibRaw::new("f", 12, 1, "1x1", [1, 4]).unwrap();
        assert_eq!((det, dtype), ([1, 4], Dtype::U16));
        let mut out = vec![0u8; 8];
        raw.decode(&[0, 3, 0, 2, 0, 1, 0x0f, 0xff], &mut out);
        assert_eq!(out, [0xff, 0x0f, 1, 0, 2, 0, 3, 0]);
        // 6-bit: bytes reversed in each word.
        let (raw, ..) = MibRaw::new("f", 6, 1, "1x1", [1, 8]).unwrap();
        let mut out = vec![0u8; 8];
        raw.decode(&[8, 7, 6, 5, 4, 3, 2, 1], &mut out);
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8]);
        // 1-bit: the word's last byte holds pixels 0-7, least significant bit first.
        let (raw, ..) = MibRaw::new("f", 1, 1, "1x1", [1, 64]).unwrap();
        let mut out = vec![0u8; 64];
        raw.decode(&[0x80, 0, 0, 0, 0, 0, 0, 0b101], &mut out);
        let ones: Vec<usize> = (0..64).filter(|&k| out[k] == 1).collect();
        assert_eq!(ones, vec![0, 2, 63]);
        // A quad of 2 x 8 chips (6-bit), one stored row per chip row: chip 3 top-left.
        let (raw, det, _) = MibRaw::new("f", 6, 4, "2x2", [1, 32]).unwrap();
        assert_eq!(det, [2, 16]);
        let stored: Vec<u8> = (0..32)
            .map(|k| (k / 8) as u8 * 10 + (7 - k % 8) as u8)
            .collect();
        let mut out = vec![0u8; 32];
        raw.decode(&stored, &mut out);
        // Row 0: chip 3 then chip 2, as stored; row 1: chip 1 then chip 0, turned.
        let want: Vec<u8> = (0..8)
            .map(|x| 30 + x)
            .chain((0..8).map(|x| 20 + x))
            .chain((0..8).map(|x| 10 + 7 - x))
            .chain((0..8).map(|x| 7 - x))
            .collect();
        assert_eq!(out, want);
    }

    #[test]
    fn a_24_bit_frame_is_its_high_image_then_its_low_one() {
        // One row of 4 pixels: the header says 8 columns (both images).
        let (raw, det, dtype) = MibRaw::new("f", 24, 1, "1x1", [1, 8]).unwrap();
        assert_eq!((det, dtype), ([1, 4], Dtype::U32));
        assert_eq!(raw.stored_bytes(), 16);
        // High image: pixels 3, 2, 1, 0 = 0, 1, 0xfff, 2; low: 5, 0xfff, 7, 0.
        let stored = [0, 0, 0, 1, 0x0f, 0xff, 0, 2, 0, 5, 0x0f, 0xff, 0, 7, 0, 0];
        let mut out = vec![0u8; 16];
        raw.decode(&stored, &mut out);
        let got: Vec<u32> = out
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(got, vec![2 << 12, 0xfff << 12 | 7, 1 << 12 | 0xfff, 5]);
    }

    #[test]
    fn other_layouts_and_depths_are_refused_by_name() {
        let say = |d, c, l: &str, s| {
            MibRaw::new("x.mib", d, c, l, s)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(
            say(24, 4, "2x2", [256, 2048]).contains("24-bit counters are decoded for single chips")
        );
        assert!(say(24, 1, "1x1", [256, 255]).contains("255 columns"));
        assert!(say(4, 1, "1x1", [256, 256]).contains("depth 4"));
        assert!(say(1, 4, "4x1", [256, 1024]).contains("layout '4x1'"));
        assert!(say(1, 1, "1x1", [256, 100]).contains("whole 64-bit words"));
        assert!(say(12, 1, "1x1", [256, 6]).starts_with("x.mib: "));
    }
}
