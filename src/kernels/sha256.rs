//! SHA-256 of prepared payload blocks on the GPU (`wgsl/sha256.wgsl`, decision 0056): each
//! block's pieces SHA-256 ([`crate::formats::prepared::pieces_sha256`]) computed where the
//! block was copied, and compared with the one its description states.
//!
//! Its parity tests: `tests/gpu_parity/sha256.rs`.

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::formats::prepared::{PIECE_BYTES, RUN_DIGESTS};
use crate::gpu::{Batch, Engine};
use crate::kernels::{self, grid, uniform};

uniform! {
    #[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
    pub struct HashParams {
        pub level: u32,
        pub items: u32,
        pub blocks: u32,
        pub runs_at: u32,
        pub piece_words: u32,
        pub run_digests: u32,
        pub groups_x: u32,
        pub _pad0: u32,
    }
}

/// Where a block's words lie in a buffer: its first `head_words` from word `head_at`, the
/// rest from word `tail_at` (all at `head_at` where `head_words` is `words`).
#[derive(Clone, Copy, Debug)]
pub struct BlockView {
    pub words: u32,
    pub head_words: u32,
    pub head_at: u32,
    pub tail_at: u32,
}

impl BlockView {
    /// A block of `bytes` (whole words) lying whole from byte `at`.
    pub fn whole(bytes: u64, at: u64) -> Result<BlockView> {
        BlockView::split(bytes, (bytes, at), at)
    }

    /// A block of `bytes` whose first `head` bytes lie from byte `head_at`, the rest from
    /// byte `tail_at` (all whole words).
    pub fn split(bytes: u64, (head, head_at): (u64, u64), tail_at: u64) -> Result<BlockView> {
        Ok(BlockView {
            words: words_of(bytes)?,
            head_words: words_of(head)?,
            head_at: words_of(head_at)?,
            tail_at: words_of(tail_at)?,
        })
    }
}

fn words_of(bytes: u64) -> Result<u32> {
    if !bytes.is_multiple_of(4) {
        return Err(Error::Gpu(
            "a block hashed on the GPU is not whole words".into(),
        ));
    }
    u32::try_from(bytes / 4).map_err(|_| Error::Gpu("a block of over 2^32 words".into()))
}

/// The expected digests of a payload's blocks, what the GPU computed of those hashed, and
/// its verdicts (0 not hashed, 1 equal, 2 differs).
pub struct BlockHashes {
    digests: wgpu::Buffer,
    expected: wgpu::Buffer,
    roots: wgpu::Buffer,
    verdicts: wgpu::Buffer,
    blocks: usize,
    max_pieces: u64,
    /// Blocks hashed together at most (the digests' scratch holds theirs).
    most_at_once: usize,
}

/// Pieces of a block of `bytes`, and runs of their digests.
fn levels(bytes: u64) -> (u64, u64) {
    let pieces = bytes.div_ceil(PIECE_BYTES as u64).max(1);
    (pieces, pieces.div_ceil(RUN_DIGESTS as u64))
}

impl BlockHashes {
    /// For blocks whose expected digests are `expected` (32 bytes each), the largest
    /// `largest_bytes` long, up to `most_at_once` of them hashed together.
    pub fn new(
        engine: &Engine,
        expected: &[[u8; 32]],
        largest_bytes: u64,
        most_at_once: usize,
    ) -> BlockHashes {
        let words: Vec<u32> = expected
            .iter()
            .flat_map(|d| {
                d.chunks_exact(4)
                    .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
            })
            .collect();
        let (max_pieces, max_runs) = levels(largest_bytes);
        let most_at_once = most_at_once.max(1);
        let scratch = (max_pieces + max_runs) * 32 * most_at_once as u64;
        let slots = (expected.len() as u64 * 4).max(4);
        BlockHashes {
            digests: engine.storage("piece digests", scratch),
            expected: engine.input(&words),
            roots: engine.storage("block digests", slots * 8),
            verdicts: engine.storage("block verdicts", slots),
            blocks: expected.len(),
            max_pieces,
            most_at_once,
        }
    }

    /// Hash blocks `blocks` (each lying in `src` as its view says) and compare them, in
    /// one submission.
    pub fn submit(
        &self,
        engine: &Engine,
        src: &wgpu::Buffer,
        blocks: &[(BlockView, usize)],
    ) -> Result<()> {
        let mut batch = Batch::default();
        self.add(engine, &mut batch, src, blocks)?;
        let mut enc = engine.device.create_command_encoder(&Default::default());
        batch.flush(&mut enc);
        engine.queue.submit([enc.finish()]);
        Ok(())
    }

    /// Queue the hashes of `blocks` (each lying in `src` as its view says, up to
    /// `most_at_once` of them) and their comparisons: three dispatches, whatever their
    /// number (decision 0057).
    pub(crate) fn add(
        &self,
        engine: &Engine,
        batch: &mut Batch,
        src: &wgpu::Buffer,
        blocks: &[(BlockView, usize)],
    ) -> Result<()> {
        if blocks.is_empty() {
            return Ok(());
        }
        if blocks.len() > self.most_at_once {
            return Err(Error::Gpu(format!(
                "{} blocks hashed together, more than the {} the digests' scratch holds",
                blocks.len(),
                self.most_at_once
            )));
        }
        let mut table = Vec::with_capacity(blocks.len() * 8);
        let (mut pieces_all, mut runs_all) = (0u32, 0u32);
        for (view, block) in blocks {
            let (pieces, runs) = levels(view.words as u64 * 4);
            if *block >= self.blocks || pieces > self.max_pieces {
                return Err(Error::Gpu(format!(
                    "block {block} passes its hashes' buffers"
                )));
            }
            let v = view;
            table.extend([*block as u32, v.words, v.head_words, v.head_at, v.tail_at]);
            table.extend([pieces_all, runs_all, pieces as u32]);
            pieces_all += pieces as u32;
            runs_all += runs as u32;
        }
        let table = engine.input(&table);
        // The pieces, from the blocks; runs of their digests; each block's root.
        let levels = [pieces_all, runs_all, blocks.len() as u32];
        for (level, items) in levels.into_iter().enumerate() {
            let g = grid(items.div_ceil(64));
            let p = engine.uniform(&HashParams {
                level: level as u32,
                items,
                blocks: blocks.len() as u32,
                runs_at: pieces_all * 8,
                piece_words: PIECE_BYTES as u32 / 4,
                run_digests: RUN_DIGESTS as u32,
                groups_x: g.0,
                _pad0: 0,
            });
            let bindings = [
                (0, &p),
                (1, src),
                (2, &self.digests),
                (3, &self.expected),
                (4, &self.roots),
                (5, &self.verdicts),
                (6, &table),
            ];
            batch.add(engine, &kernels::SHA256_RUNS, &bindings, g)?;
        }
        Ok(())
    }
    /// The verdicts, block by block: 0 not hashed, 1 its digest the expected one, 2 not.
    pub async fn verdicts(&self, engine: &Engine) -> Result<Vec<u32>> {
        let bytes = engine
            .read_back(&self.verdicts, self.blocks as u64 * 4)
            .await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// The digests computed, block by block (zeros where not hashed).
    pub async fn roots(&self, engine: &Engine) -> Result<Vec<[u8; 32]>> {
        let bytes = engine
            .read_back(&self.roots, self.blocks as u64 * 32)
            .await?;
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
        Ok(words
            .chunks_exact(8)
            .map(|d| {
                let mut out = [0u8; 32];
                for (o, w) in out.chunks_exact_mut(4).zip(d) {
                    o.copy_from_slice(&w.to_be_bytes());
                }
                out
            })
            .collect())
    }
}
