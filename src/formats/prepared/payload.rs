//! The payload of a prepared acquisition as its part reads it (decisions 0037, 0044): its
//! blocks, each checked against its SHA-256 (and a packed block against the structure of its
//! index) the first time it is read, before any of it is used; tiles and frames read out of
//! them, a packed block's decoded on the CPU.

use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

use super::{hex, packed_sectors, unhex, BlockEntry, Description, Layout, SavedSession};
use crate::error::{Error, Result};
use crate::source::ByteSource;

/// The payload of a prepared acquisition as its part reads it: its blocks, checked against
/// their hashes the first time each is read.
#[derive(Debug)]
pub struct TiledPayload {
    pub layout: Layout,
    pub det_len: usize,
    pub blocks: Vec<BlockEntry>,
    /// The settings a session saved it with, if any.
    pub session: Option<SavedSession>,
    checked: Vec<AtomicBool>,
}

impl TiledPayload {
    pub fn new(d: &Description) -> Self {
        TiledPayload {
            layout: d.layout,
            det_len: d.shape[2] * d.shape[3],
            checked: d.blocks.iter().map(|_| AtomicBool::new(false)).collect(),
            blocks: d.blocks.clone(),
            session: d.session.clone(),
        }
    }

    /// Read block `k` whole and check it against its hash (refused by name and block when
    /// it differs, and never used).
    pub fn read_block(&self, src: &dyn ByteSource, k: usize) -> Result<Vec<u8>> {
        let bytes = self.read_unchecked(src, k)?;
        self.check_block(src.name(), k, &bytes)?;
        self.accept(src.name(), k, &bytes)?;
        Ok(bytes)
    }

    /// The check of a packed block's index (`None` for a position-tiled payload).
    fn index_check(&self, k: usize) -> Option<packed_sectors::IndexCheck> {
        let b = &self.blocks[k];
        let (bits, det_len, tiles) = self.index_check_of(k)?;
        Some(packed_sectors::IndexCheck::of_block(
            bits, det_len, tiles, b.bytes,
        ))
    }

    /// Block `k`, whose SHA-256 matched: checked against the structure of a packed block
    /// (nothing to check in a position-tiled one) and then taken as checked. `bytes` is the
    /// block whole or its first [`TiledPayload::accepted_prefix_bytes`] (or more): the page
    /// checks a block without copying all of it into wasm memory; its length must be the
    /// table's. A file whose index something else made is refused by name, never decoded
    /// out of bounds.
    pub fn accept(&self, file: &str, k: usize, bytes: &[u8]) -> Result<()> {
        self.check_structure(file, k, bytes)?;
        self.checked[k].store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The structure check of [`TiledPayload::accept`] alone: block `k` is not taken as
    /// checked (its hash is checked elsewhere, on the GPU: decision 0056).
    pub fn check_structure(&self, file: &str, k: usize, bytes: &[u8]) -> Result<()> {
        if let Some(mut c) = self.index_check(k) {
            c.feed(bytes)
                .and_then(|_| c.finish())
                .map_err(|m| self.malformed(file, k, m))?;
        }
        Ok(())
    }

    /// How many of block `k`'s first bytes its structure check reads: a packed block's
    /// index (the data is checked by its length, which the block table gives), nothing of a
    /// position-tiled block.
    pub fn accepted_prefix_bytes(&self, k: usize) -> u64 {
        let b = &self.blocks[k];
        match self.layout.is_packed() {
            true => packed_sectors::index_bytes(b.tiles, self.det_len).min(b.bytes),
            false => 0,
        }
    }

    /// Block `k`, whose SHA-256 matched, taken as checked where `judged` (its structure check,
    /// [`packed_sectors::IndexCheck::of_block`] as the page's pool Worker that read it ran
    /// it: decision 0045) passed; refused by name and block as [`TiledPayload::accept`]
    /// refuses it otherwise.
    pub fn accept_judged(&self, file: &str, k: usize, judged: Result<(), String>) -> Result<()> {
        self.judged_structure(file, k, judged)?;
        self.checked[k].store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The structure verdict of [`TiledPayload::accept_judged`] alone: block `k` is not
    /// taken as checked.
    pub fn judged_structure(&self, file: &str, k: usize, judged: Result<(), String>) -> Result<()> {
        judged.map_err(|m| self.malformed(file, k, packed_sectors::Malformed(m)))
    }

    /// What a pool Worker is told to check of block `k` beside its SHA-256: the sample bits,
    /// the detector's pixels and the block's tiles of a packed block; `None` for a
    /// position-tiled one.
    pub fn index_check_of(&self, k: usize) -> Option<(u32, usize, u64)> {
        self.layout
            .is_packed()
            .then(|| (self.layout.bits, self.det_len, self.blocks[k].tiles))
    }

    fn malformed(&self, file: &str, k: usize, m: packed_sectors::Malformed) -> Error {
        Error::format(
            file,
            format!(
                "packed payload block {k} is malformed: {}; prepare the acquisition again",
                m.0
            ),
        )
    }

    /// Block `k` read in pieces of `piece` bytes, each hashed and handed to `sink` with its
    /// offset in the block while it is still in the CPU's caches (the block never lies
    /// whole in memory); then checked against its hash. What `sink` was given is unchecked
    /// until this returns `Ok`: the caller uses none of it before.
    pub fn read_block_in_pieces(
        &self,
        src: &dyn ByteSource,
        k: usize,
        piece: usize,
        sink: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        self.read_pieces(src, k, piece, true, sink)?;
        self.checked[k].store(true, Ordering::Relaxed);
        Ok(())
    }

    /// [`TiledPayload::read_block_in_pieces`] with the block's structure checked but not
    /// its SHA-256: the caller checks its pieces SHA-256 where it copied the block (on the
    /// GPU, decision 0056) before any of it is used. A block whose structure is wrong is
    /// hashed here, so that a corrupted one is refused as such.
    pub fn read_block_in_pieces_unhashed(
        &self,
        src: &dyn ByteSource,
        k: usize,
        piece: usize,
        sink: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        match self.read_pieces(src, k, piece, false, sink) {
            Err(Error::Format { .. }) if self.index_check(k).is_some() => {
                self.read_block(src, k).map(|_| ())
            }
            other => other,
        }
    }

    /// Block `k` read in pieces handed to `sink`, its structure checked (a packed block's
    /// index), and its SHA-256 where `hash` (first: a corrupted block is refused as such).
    fn read_pieces(
        &self,
        src: &dyn ByteSource,
        k: usize,
        piece: usize,
        hash: bool,
        mut sink: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        let b = self.block(src.name(), k)?;
        let mut buf = vec![0u8; piece.min(b.bytes as usize).max(1)];
        let mut digest = hash.then(Sha256::new);
        let mut index = self.index_check(k);
        let mut shaped = Ok(());
        let mut at = 0usize;
        while (at as u64) < b.bytes {
            let n = buf.len().min(b.bytes as usize - at);
            src.read_at(b.offset + at as u64, &mut buf[..n])?;
            if let Some(h) = digest.as_mut() {
                h.update(&buf[..n]);
            }
            if let (Some(c), Ok(())) = (index.as_mut(), &shaped) {
                shaped = c.feed(&buf[..n]);
            }
            sink(at, &buf[..n]);
            at += n;
        }
        if let Some(h) = digest {
            self.check_digest(src.name(), k, &h.finalize())?;
        }
        shaped
            .and_then(|_| index.as_ref().map_or(Ok(()), |c| c.finish()))
            .map_err(|m| self.malformed(src.name(), k, m))
    }

    /// The pieces SHA-256 of each block (decision 0056), where every one has it.
    pub fn pieces_digests(&self) -> Option<Vec<[u8; 32]>> {
        self.blocks
            .iter()
            .map(|b| {
                let bytes = unhex(&b.pieces_sha256)?;
                <[u8; 32]>::try_from(bytes.as_slice()).ok()
            })
            .collect()
    }

    /// Block `k` as stored, to be checked by the caller before any of it is used (the
    /// browser hashes it with its Web Crypto: `check_digest`).
    pub fn read_unchecked(&self, src: &dyn ByteSource, k: usize) -> Result<Vec<u8>> {
        let b = self.block(src.name(), k)?;
        src.read_vec(b.offset, b.bytes)
    }

    /// Bytes of its largest block (what a buffer holding any one of them needs).
    pub fn largest_block_bytes(&self) -> u64 {
        self.blocks.iter().map(|b| b.bytes).max().unwrap_or(0)
    }

    /// Block `k` of the table, or why `file` has none.
    fn block(&self, file: &str, k: usize) -> Result<&BlockEntry> {
        self.blocks
            .get(k)
            .ok_or_else(|| Error::format(file, format!("no payload block {k}")))
    }

    /// Check the bytes of block `k` against its SHA-256.
    pub fn check_block(&self, file: &str, k: usize, bytes: &[u8]) -> Result<()> {
        self.check_digest(file, k, &Sha256::digest(bytes))
    }

    /// Check block `k`'s SHA-256 `digest` (made here, or by the browser's Web Crypto)
    /// against the one the description holds.
    pub fn check_digest(&self, file: &str, k: usize, digest: &[u8]) -> Result<()> {
        if hex(digest) != self.blocks[k].sha256 {
            return Err(self.corrupted(file, k));
        }
        Ok(())
    }

    /// Why block `k` is refused when its bytes do not match its SHA-256 (or its pieces
    /// SHA-256, decision 0056).
    pub fn corrupted(&self, file: &str, k: usize) -> Error {
        let b = &self.blocks[k];
        Error::format(
            file,
            format!(
                "payload block {k} (tiles {}..{}, {} bytes at {}) does not match its SHA-256: corrupted; prepare the acquisition again",
                b.first_tile,
                b.first_tile + b.tiles,
                b.bytes,
                b.offset
            ),
        )
    }

    /// The tiles `[t0, t1)` as the position-tiled layout holds them (a packed payload's
    /// decoded), each block they touch checked once.
    pub fn read_tiles(&self, src: &dyn ByteSource, t0: u64, t1: u64) -> Result<Vec<u8>> {
        let tb = self.layout.tile_bytes;
        let mut out = Vec::with_capacity(((t1 - t0) * tb) as usize);
        for (k, b) in self.blocks.iter().enumerate() {
            let (b0, b1) = (b.first_tile, b.first_tile + b.tiles);
            let (a, z) = (t0.max(b0), t1.min(b1));
            if a >= z {
                continue;
            }
            if self.layout.is_packed() {
                out.extend_from_slice(&self.read_packed_tiles(src, k, a - b0, z - b0)?);
            } else if !self.checked[k].load(Ordering::Relaxed) {
                let whole = self.read_block(src, k)?;
                out.extend_from_slice(&whole[((a - b0) * tb) as usize..((z - b0) * tb) as usize]);
            } else {
                let at = b.offset + (a - b0) * tb;
                out.extend_from_slice(&src.read_vec(at, (z - a) * tb)?);
            }
        }
        Ok(out)
    }

    /// Tiles `[a, z)` of packed block `k` (counted in the block), decoded: the whole block
    /// read and checked the first time, then only those tiles' index and data.
    fn read_packed_tiles(&self, src: &dyn ByteSource, k: usize, a: u64, z: u64) -> Result<Vec<u8>> {
        let b = &self.blocks[k];
        let gpt = packed_sectors::groups_per_tile(self.det_len) as u64;
        let groups = b.tiles * gpt;
        let words = b.bytes / 4;
        let (g0, g1) = (a * gpt, z * gpt);
        let decode = |index: &[u8], data: &[u8], data_word: u64| {
            packed_sectors::decode(&self.layout, self.det_len, index, data, data_word, z - a)
                .map_err(|m| self.malformed(src.name(), k, m))
        };
        if !self.checked[k].load(Ordering::Relaxed) {
            let whole = self.read_block(src, k)?;
            let (d0, d1) = packed_sectors::data_words(
                &whole,
                groups as usize,
                words,
                g0 as usize,
                g1 as usize,
            );
            let index = &whole[(8 * g0) as usize..(8 * g1) as usize];
            return decode(index, &whole[(4 * d0) as usize..(4 * d1) as usize], d0);
        }
        // The index of the groups read and of the one after them (where their data ends).
        let pairs = (g1 + 1).min(groups) - g0;
        let index = src.read_vec(b.offset + 8 * g0, 8 * pairs)?;
        let (d0, d1) =
            packed_sectors::data_words(&index, pairs as usize, words, 0, (g1 - g0) as usize);
        if d1 < d0 || d1 > words {
            return Err(self.malformed(
                src.name(),
                k,
                packed_sectors::Malformed(format!(
                    "its data words {d0}..{d1} are not within its {words}"
                )),
            ));
        }
        let data = src.read_vec(b.offset + 4 * d0, 4 * (d1 - d0))?;
        decode(&index[..(8 * (g1 - g0)) as usize], &data, d0)
    }

    /// Frames `[l0, l1)` of the payload into `dst`, frame after frame, each pixel's sample
    /// little-endian (as `FrameReader` hands frames on).
    pub fn read_frames(
        &self,
        src: &dyn ByteSource,
        l0: usize,
        l1: usize,
        dst: &mut [u8],
    ) -> Result<()> {
        let tile = self.layout.tile as usize;
        let (t0, t1) = (l0 / tile, l1.div_ceil(tile));
        let tiles = self.read_tiles(src, t0 as u64, t1 as u64)?;
        let l = self.layout;
        let sb = l.sample_bytes();
        let tb = l.tile_bytes as usize;
        let frame_bytes = self.det_len * sb;
        for f in l0..l1 {
            let tile_of = &tiles[(f / tile - t0) * tb..][..tb];
            let out = &mut dst[(f - l0) * frame_bytes..(f - l0 + 1) * frame_bytes];
            for (k, sample) in out.chunks_exact_mut(sb).enumerate() {
                let at = l.sample_at(k, f % tile);
                sample.copy_from_slice(&tile_of[at..at + sb]);
            }
        }
        Ok(())
    }
}
