//! The GPU decode kernels' host side: a window of compressed chunks with its block table,
//! the sequence regions `bslz4_parse` fills, and the encoder that records parse, inflate
//! (`wgsl/bslz4.wgsl`) and unshuffle + pack (`wgsl/unshuffle.wgsl`) into the resident
//! buffers. Which windows to decode and when is the upload's business (`upload::gpu_decode`).
//! The rule the kernels keep is C-DECODE-GPU of docs/CONTRACT.md.
//!
//! Its parity tests: `tests/gpu_parity/decode.rs`.

use crate::error::Result;
use crate::formats::Acquisition;
use crate::frames::Correction;
use crate::gpu::{Batch, Engine};
use crate::kernels::uniform;
use crate::kernels::{self, grid};
use crate::upload::plan::ResidentPlan;
use bytemuck::{Pod, Zeroable};

/// Largest LZ4 block inflated from parsed sequences (`LOCAL_BYTES` in `wgsl/bslz4.wgsl`);
/// A window's bytes waiting in a staging buffer: copied into its storage buffer first.
pub(crate) type Staged = Option<(wgpu::Buffer, u64)>;

/// larger ones are inflated in place by one invocation.
pub(crate) const LOCAL_BYTES: u32 = 8192;

/// Sequences one block's region holds at most (`SEQ_CAP` in `wgsl/bslz4.wgsl`).
pub(crate) const SEQ_CAP: u32 = 512;

/// Detector pixels of a tile an `unshuffle` workgroup packs (`PACK_PIXELS` in
/// `wgsl/unshuffle.wgsl`).
pub(crate) const PACK_PIXELS: u32 = 1024;

/// Entries of the sequence region `bslz4_parse` writes for block `e` (a block table entry):
/// a count word and room for as many sequences as the block can hold — every sequence but
/// the last takes at least 3 source bytes (token, offset) and makes at least 4 output bytes
/// — up to `SEQ_CAP`, and up to `room` beyond its count word (a block that finds too little
/// room is inflated in place). None for raw and large blocks, which are not parsed.
pub(crate) fn seq_region(e: &[u32; 4], room: u64) -> u64 {
    let (src_len, len, raw) = (e[1], e[3] & 0x7fff_ffff, e[3] >> 31 != 0);
    if raw || len > LOCAL_BYTES {
        return 0;
    }
    let bound = SEQ_CAP.min(len / 4 + 1).min(src_len / 3 + 1) as u64;
    1 + if bound <= room { bound } else { 0 }
}

/// Every block's first sequence entry, then the total: regions back to back, all of them
/// within `budget` entries (the count words first, then whole regions while they fit).
pub(crate) fn seq_starts(blocks: &[[u32; 4]], budget: u64) -> Vec<u32> {
    let counts = blocks.iter().filter(|e| seq_region(e, 0) > 0).count() as u64;
    let mut room = budget.saturating_sub(counts);
    let mut at = Vec::with_capacity(blocks.len() + 1);
    let mut total = 0u64;
    for e in blocks {
        at.push(total as u32);
        let r = seq_region(e, room);
        room -= r.saturating_sub(1);
        total += r;
    }
    at.push(total as u32);
    at
}

/// One upload window: whole chunks' compressed bytes and tables on the GPU, ready to decode
/// the frames `[first_frame, first_frame + frames)` into a resident segment.
pub struct Window {
    pub(crate) src: wgpu::Buffer,
    /// Where `src`'s bytes wait to be copied in (the browser's staging buffers).
    pub(crate) staged: Staged,
    pub(crate) blocks: wgpu::Buffer,
    pub(crate) chunks: wgpu::Buffer,
    pub(crate) frame_map: wgpu::Buffer,
    pub(crate) scratch: wgpu::Buffer,
    /// Per block: where its parsed sequences go (`seq_starts`), and the sequences.
    pub(crate) seq_at: wgpu::Buffer,
    pub(crate) seqs: wgpu::Buffer,
    /// Every chunk bit-shuffled (not plain LZ4): the tiled unshuffle applies unbinned.
    pub(crate) bitshuffled: bool,
    /// Per chunk: its first block in the window and its index in the slots the window was
    /// built from (to name the chunk of a failing block).
    pub(crate) chunk_blocks: Vec<(u32, usize)>,
    /// The window's first block among all blocks of the upload.
    pub(crate) block_base: u32,
    pub(crate) n_blocks: u32,
    pub(crate) src_bytes: u32,
    pub(crate) dst_bytes: u32,
    pub first_frame: usize,
    pub frames: usize,
    /// Decoded bytes the window produces (benchmarks).
    pub decoded_bytes: u64,
}

/// Where and how a window's frames are packed: the resident segment buffer holding frames
/// from `seg_first` on, laid out by `plan`, corrected by `corr`, from `elem`-byte samples.
#[derive(Clone, Copy)]
pub struct PackTarget<'a> {
    pub plan: &'a ResidentPlan,
    pub corr: Correction,
    pub seg_first: usize,
    pub resident: &'a wgpu::Buffer,
    pub elem: usize,
}

/// Decode-time inputs shared by every window of an upload.
pub struct Decoder {
    bad: wgpu::Buffer,
    status: wgpu::Buffer,
    /// The stored (unbinned) detector.
    det: [usize; 2],
}

impl Decoder {
    pub fn new(engine: &Engine, acq: &Acquisition) -> Decoder {
        let det_len = acq.shape.det_len();
        let mut bad_bits = vec![0u32; det_len.div_ceil(32).max(1)];
        if let Some(mask) = &acq.pixel_mask {
            for (k, &b) in mask.iter().enumerate() {
                if b {
                    bad_bits[k / 32] |= 1 << (k % 32);
                }
            }
        }
        Decoder {
            bad: engine.input(&bad_bits),
            status: engine.storage("decode status", 12),
            det: acq.shape.det,
        }
    }

    /// Record decoding `w` into `to`.
    pub fn encode(
        &self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        w: &Window,
        to: &PackTarget<'_>,
    ) -> Result<()> {
        if let Some((staging, bytes)) = &w.staged {
            enc.copy_buffer_to_buffer(staging, 0, &w.src, 0, *bytes);
        }
        enc.clear_buffer(&w.scratch, 0, None);
        enc.clear_buffer(&w.seqs, 0, None);
        self.encode_inflate(engine, enc, w)?;
        self.encode_pack(engine, enc, w, to)
    }

    /// The window's parameters for a kernel over `groups`.
    pub(crate) fn block_params(
        &self,
        engine: &Engine,
        w: &Window,
        groups: (u32, u32),
    ) -> wgpu::Buffer {
        engine.uniform(&DecodeParams {
            blocks: w.n_blocks,
            groups_x: groups.0,
            block_base: w.block_base,
            src_bytes: w.src_bytes,
            dst_bytes: w.dst_bytes,
            ..Default::default()
        })
    }

    /// The bindings every LZ4 kernel takes, with `params` and `extra`.
    pub(crate) fn lz4_bindings<'a>(
        &'a self,
        params: &'a wgpu::Buffer,
        w: &'a Window,
        extra: &[(u32, &'a wgpu::Buffer)],
    ) -> Vec<(u32, &'a wgpu::Buffer)> {
        let mut b = vec![
            (0, params),
            (1, &w.src),
            (2, &w.blocks),
            (4, &self.status),
            (9, &w.seq_at),
        ];
        b.extend_from_slice(extra);
        b
    }

    /// Queue parsing the window's LZ4 blocks into their sequence regions.
    pub(crate) fn add_parse(&self, engine: &Engine, batch: &mut Batch, w: &Window) -> Result<()> {
        let groups = grid(w.n_blocks.div_ceil(64));
        let params = self.block_params(engine, w, groups);
        let bindings = self.lz4_bindings(&params, w, &[(7, &w.seqs)]);
        batch.add(engine, &kernels::BSLZ4_PARSE, &bindings, groups)
    }

    /// Record parsing the window's LZ4 blocks alone (benchmarks).
    pub fn encode_parse(
        &self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        w: &Window,
    ) -> Result<()> {
        let mut batch = Batch::default();
        self.add_parse(engine, &mut batch, w)?;
        batch.flush(enc);
        Ok(())
    }

    /// Record inflating the window's LZ4 blocks into its scratch buffer: parse, inflate the
    /// blocks that cannot be parsed into their regions in place, copy the others.
    pub fn encode_inflate(
        &self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        w: &Window,
    ) -> Result<()> {
        let mut batch = Batch::default();
        self.add_parse(engine, &mut batch, w)?;
        // `bslz4_serial`: an invocation a block; `bslz4`: a workgroup a block. Both read
        // the parse's sequences and write disjoint blocks of the scratch.
        let serial = grid(w.n_blocks.div_ceil(64));
        for (kernel, groups) in [
            (&kernels::BSLZ4_SERIAL, serial),
            (&kernels::BSLZ4, grid(w.n_blocks)),
        ] {
            let params = self.block_params(engine, w, groups);
            let bindings = self.lz4_bindings(&params, w, &[(3, &w.scratch), (8, &w.seqs)]);
            batch.add(engine, kernel, &bindings, groups)?;
        }
        batch.flush(enc);
        Ok(())
    }

    /// Record unshuffling, correcting and packing the window's frames into `to`.
    pub fn encode_pack(
        &self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        w: &Window,
        to: &PackTarget<'_>,
    ) -> Result<()> {
        let PackTarget {
            plan,
            corr,
            seg_first,
            resident,
            elem,
        } = *to;
        let (rel0, rel1) = (
            w.first_frame - seg_first,
            w.first_frame + w.frames - seg_first,
        );
        let tile = plan.tile as usize;
        let tiles = (rel1.div_ceil(tile) - rel0 / tile) as u32;
        let det_len = plan.shape.det_len() as u32;
        // Unbinned bit planes: a workgroup per tile and PACK_PIXELS pixels; otherwise one
        // invocation per resident pixel's sector of the tiles the window's frames touch.
        let tiled = corr.bin <= 1 && w.bitshuffled;
        let (kernel, groups) = if tiled {
            (
                &kernels::UNSHUFFLE,
                grid(tiles * det_len.div_ceil(PACK_PIXELS)),
            )
        } else {
            (
                &kernels::UNSHUFFLE_PACK,
                grid((tiles * det_len).div_ceil(64)),
            )
        };
        let params = engine.uniform(&DecodeParams {
            groups_x: groups.0,
            frames: w.frames as u32,
            first_frame: w.first_frame as u32,
            seg_first_frame: seg_first as u32,
            tile_words: plan.tile_words,
            bits: plan.bits,
            det_len: (self.det[0] * self.det[1]) as u32,
            elem: elem as u32,
            bin: corr.bin as u32,
            det_rows: self.det[0] as u32,
            det_cols: self.det[1] as u32,
            out_cols: plan.shape.det[1] as u32,
            mask_bad: corr.mask_bad_pixels as u32,
            ..Default::default()
        });
        let mut bindings = vec![
            (0, &params),
            (1, &w.frame_map),
            (2, &w.chunks),
            (3, &w.scratch),
            (5, &self.bad),
        ];
        if tiled {
            // Whole sectors as vectors.
            bindings.push((10, resident));
        } else {
            // Binned sums report an overflow; words are or-ed in atomically.
            bindings.extend([(4, &self.status), (6, resident)]);
        }
        engine.dispatch_at(enc, kernel, &bindings, groups)
    }

    /// The lowest failing block of the last decode, if any, whether a binned sum passed
    /// u32, and how many blocks were inflated in place (reset for the next upload).
    pub(crate) async fn take_status(&self, engine: &Engine) -> Result<(Option<u32>, bool, u32)> {
        let st = engine.read_back(&self.status, 12).await?;
        self.reset(engine);
        let word =
            |i: usize| u32::from_le_bytes([st[4 * i], st[4 * i + 1], st[4 * i + 2], st[4 * i + 3]]);
        let failed = word(0);
        Ok((
            (failed != u32::MAX).then_some(failed),
            word(1) != 0,
            word(2),
        ))
    }

    pub(crate) fn reset(&self, engine: &Engine) {
        engine
            .queue
            .write_buffer(&self.status, 0, bytemuck::cast_slice(&[u32::MAX, 0, 0]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The constant `name` of the decode kernels' WGSL text (inflate or unshuffle).
    pub(crate) fn wgsl_const(name: &str) -> u32 {
        let decl = format!("const {name}: u32 = ");
        let rest = [kernels::BSLZ4.body, kernels::UNSHUFFLE.body]
            .into_iter()
            .find_map(|t| t.find(&decl).map(|at| &t[at..]))
            .unwrap_or_else(|| panic!("{name} in bslz4.wgsl or unshuffle.wgsl"));
        let value = &rest[rest.find('=').unwrap() + 1..rest.find("u;").unwrap()];
        value.trim().parse().unwrap()
    }

    #[test]
    pub(crate) fn region_bounds_match_the_kernels() {
        assert_eq!(wgsl_const("SEQ_CAP"), SEQ_CAP);
        assert_eq!(wgsl_const("LOCAL_BYTES"), LOCAL_BYTES);
        assert_eq!(wgsl_const("PACK_PIXELS"), PACK_PIXELS);
    }

    #[test]
    pub(crate) fn regions_hold_what_a_block_can_hold() {
        let lz4 = |src_len: u32, len: u32| [0, src_len, 0, len];
        // Raw and large blocks are not parsed.
        assert_eq!(seq_region(&[0, 64, 0, 64 | 1 << 31], u64::MAX), 0);
        assert_eq!(seq_region(&lz4(100, LOCAL_BYTES + 8), u64::MAX), 0);
        // A count word, then the least of the cap, len / 4 + 1 and src / 3 + 1.
        assert_eq!(seq_region(&lz4(9000, 8192), u64::MAX), 1 + 512);
        assert_eq!(seq_region(&lz4(9000, 400), u64::MAX), 1 + 101);
        assert_eq!(seq_region(&lz4(30, 8192), u64::MAX), 1 + 11);
        // Too little room: the count word alone (the block is inflated in place).
        assert_eq!(seq_region(&lz4(30, 8192), 10), 1);
        let blocks = [
            lz4(30, 8192),
            [0, 8, 0, 8 | 1 << 31],
            lz4(30, 8192),
            lz4(30, 8192),
        ];
        // The count words come out of the budget first: 3 of 23, then one region of 11.
        assert_eq!(seq_starts(&blocks, 23), vec![0, 12, 12, 13, 14]);
        assert_eq!(seq_starts(&blocks, 36), vec![0, 12, 12, 24, 36]);
    }
}

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct DecodeParams {
        pub blocks: u32,
        pub groups_x: u32,
        pub frames: u32,
        pub first_frame: u32,
        pub seg_first_frame: u32,
        pub tile_words: u32,
        pub bits: u32,
        pub det_len: u32,
        pub elem: u32,
        pub bin: u32,
        pub det_cols: u32,
        pub mask_bad: u32,
        pub src_bytes: u32,
        pub dst_bytes: u32,
        pub out_cols: u32,
        pub det_rows: u32,
        /// Index of the window's first block among all blocks of the upload (failures name it).
        pub block_base: u32,
        pub _pad0: u32,
        pub _pad1: u32,
        pub _pad2: u32,
    }
}
