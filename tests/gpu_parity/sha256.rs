//! The pieces SHA-256 of a block on the GPU (`src/kernels/sha256.rs`: `wgsl/sha256.wgsl`)
//! against the CPU's (`formats::prepared::pieces_sha256`, the `sha2` crate): blocks of every
//! padding case and of several pieces, lying whole or split in two, each digest the same
//! bytes and each verdict right, a wrong expected digest included (decision 0056).

use crate::common::*;
use stem4d::formats::prepared::{pieces_sha256, PIECE_BYTES, RUN_DIGESTS};
use stem4d::kernels::sha256::{BlockHashes, BlockView};

/// `n` pseudo-random words.
fn words(n: usize, seed: u32) -> Vec<u32> {
    let mut x = seed.wrapping_mul(2654435761) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect()
}

#[test]
fn block_digests_equal_the_cpus_whole_and_split() {
    let Some(engine) = engine() else { return };
    let (piece, run) = (PIECE_BYTES / 4, PIECE_BYTES / 4 * RUN_DIGESTS);
    // Padding fits the last chunk (13 words), takes one more (14), a whole chunk (16),
    // no words at all; pieces and runs of pieces whole, one word short and one over.
    let lengths = [
        0,
        1,
        13,
        14,
        16,
        17,
        piece - 1,
        piece,
        piece + 1,
        run - 1,
        run,
        run + 1,
        2 * run + 77,
    ];

    let blocks: Vec<Vec<u32>> = lengths
        .iter()
        .enumerate()
        .map(|(i, &n)| words(n, i as u32 + 7))
        .collect();
    let bytes = |b: &[u32]| -> Vec<u8> { b.iter().flat_map(|w| w.to_le_bytes()).collect() };
    let want: Vec<[u8; 32]> = blocks.iter().map(|b| pieces_sha256(&bytes(b))).collect();
    // Every third block expects a digest one bit off: its verdict is 2.
    let mut expected = want.clone();
    for (i, d) in expected.iter_mut().enumerate() {
        if i % 3 == 2 {
            d[31] ^= 1;
        }
    }
    // Laid out one after another, each split after its first 5 words (the rest 9 words on).
    let mut src = vec![0xdead_beefu32; 3];
    let mut split = Vec::new();
    let mut whole = Vec::new();
    for (k, b) in blocks.iter().enumerate() {
        let at = src.len() as u32;
        src.extend_from_slice(b);
        whole.push((
            BlockView {
                words: b.len() as u32,
                head_words: b.len() as u32,
                head_at: at,
                tail_at: at,
            },
            k,
        ));
        let head = b.len().min(5);
        let head_at = src.len() as u32;
        src.extend_from_slice(&b[..head]);
        src.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let tail_at = src.len() as u32;
        src.extend_from_slice(&b[head..]);
        split.push((
            BlockView {
                words: b.len() as u32,
                head_words: head as u32,
                head_at,
                tail_at,
            },
            k,
        ));
    }
    let largest = blocks.iter().map(|b| b.len() * 4).max().unwrap() as u64;
    let buffer = engine.input(&src);
    // Whole, all the blocks hashed together; split, in groups of 4 (decision 0057).
    for (how, views, together) in [("whole", &whole, whole.len()), ("split", &split, 4)] {
        let hashes = BlockHashes::new(&engine, &expected, largest, together);
        for group in views.chunks(together) {
            hashes.submit(&engine, &buffer, group).unwrap();
        }
        let roots = pollster::block_on(hashes.roots(&engine)).unwrap();
        let verdicts = pollster::block_on(hashes.verdicts(&engine)).unwrap();
        for (k, n) in lengths.iter().enumerate() {
            assert_eq!(roots[k], want[k], "{how}: block of {n} words");
            let right = if k % 3 == 2 { 2 } else { 1 };
            assert_eq!(verdicts[k], right, "{how}: block of {n} words");
        }
    }
}

#[test]
fn more_blocks_than_the_scratch_holds_are_refused() {
    let Some(engine) = engine() else { return };
    let views: Vec<(BlockView, usize)> = (0..3)
        .map(|k| (BlockView::whole(64, 64 * k as u64).unwrap(), k))
        .collect();
    let hashes = BlockHashes::new(&engine, &[[0u8; 32]; 3], 64, 2);
    let buffer = engine.input(&[0u32; 48]);
    let err = hashes.submit(&engine, &buffer, &views).unwrap_err();
    assert!(err.to_string().contains("more than the 2"), "{err}");
    hashes.submit(&engine, &buffer, &views[..2]).unwrap();
}
