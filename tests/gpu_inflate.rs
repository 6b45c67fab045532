//! The GPU's LZ4 inflate on streams written sequence by sequence: literal runs and match
//! lengths with and without extension bytes, offsets 1–3 that repeat a period, overlapping
//! and chained matches, blocks past the sequences a region holds (inflated in place), partial
//! blocks, raw tails, blocks whose edges fall inside a 32-pixel group, and a last plain-LZ4
//! block that is not whole words. Each decodes on the GPU exactly as the CPU decoder does,
//! unbinned and binned, with and without bad pixels masked (bad pixels at every column of a
//! 32-pixel group, holding ordinary values), and only the blocks meant to are inflated in
//! place. The GPU decode of C-DECODE-GPU, sequence shape by sequence shape.

mod common;

use common::*;
use stem4d::contract::{Dtype, Shape4};
use stem4d::decode::pipeline::{Filter, FilterKind};
use stem4d::formats::synthetic;
use stem4d::frames::{Correction, FrameReader, Samples};
use stem4d::products::gpu as products;

/// Sequences a block's region holds at most (`SEQ_CAP` in `wgsl/bslz4.wgsl`).
const SEQ_CAP: usize = 512;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick(&mut self, from: &[usize]) -> usize {
        from[(self.next() % from.len() as u64) as usize]
    }
}

/// An LZ4 block being written: its stream, the bytes it decodes to, its sequences.
#[derive(Default)]
struct Lz4Block {
    stream: Vec<u8>,
    made: Vec<u8>,
    seqs: usize,
}

impl Lz4Block {
    fn length(&mut self, mut n: usize) {
        while n >= 255 {
            self.stream.push(255);
            n -= 255;
        }
        self.stream.push(n as u8);
    }

    /// One sequence: `lits`, then `ml` bytes from `off` back (`ml` = 0: the last).
    fn seq(&mut self, lits: &[u8], off: usize, ml: usize) {
        let lt = lits.len().min(15);
        let mt = if ml == 0 { 0 } else { (ml - 4).min(15) };
        self.stream.push((lt << 4 | mt) as u8);
        if lits.len() >= 15 {
            self.length(lits.len() - 15);
        }
        self.stream.extend_from_slice(lits);
        self.made.extend_from_slice(lits);
        if ml > 0 {
            self.stream.extend_from_slice(&(off as u16).to_le_bytes());
            if ml >= 19 {
                self.length(ml - 19);
            }
            for _ in 0..ml {
                self.made.push(self.made[self.made.len() - off]);
            }
        }
        self.seqs += 1;
    }
}

/// A block of `len` bytes in `style`: 0 many short sequences (past a region's capacity),
/// 1 a random mix of every kind of sequence, 2 long runs needing extension bytes.
fn crafted(len: usize, style: usize, rng: &mut Rng) -> Lz4Block {
    let mut b = Lz4Block::default();
    loop {
        let left = len - b.made.len();
        if left <= 24 {
            let lits: Vec<u8> = (0..left).map(|_| rng.next() as u8).collect();
            b.seq(&lits, 0, 0);
            return b;
        }
        let (lit, off, ml) = match style {
            0 => (1, rng.pick(&[1, 2, 3, 4, 5]), 4),
            1 => (
                rng.pick(&[0, 1, 2, 3, 5, 14, 15, 16, 40]),
                rng.pick(&[1, 2, 3, 4, 5, 6, 7, 8, 31, 64, 300, 1 << 16]),
                rng.pick(&[4, 5, 6, 7, 8, 18, 19, 20, 33, 100, 271]),
            ),
            _ => (
                rng.pick(&[270, 600]),
                rng.pick(&[1, 2, 3, 9]),
                rng.pick(&[300, 1000, 2000]),
            ),
        };
        let lit = lit.min(left - 16).max(usize::from(b.made.is_empty()));
        let off = off.clamp(1, b.made.len() + lit).min(65_535);
        let ml = ml.min(left - lit - 8);
        let lits: Vec<u8> = (0..lit).map(|_| (rng.next() % 255 + 1) as u8).collect();
        b.seq(&lits, off, ml);
    }
}

/// How a case's chunks are cut into blocks.
#[derive(Clone, Copy)]
enum Blocks {
    /// Bitshuffle blocks of this many bytes (Dectris: 8192).
    Shuffled(usize),
    /// Plain LZ4 blocks of this many bytes.
    Plain(usize),
}

/// Frames of `det` (`elem`-byte samples) as chunks of crafted LZ4 blocks, and how many blocks
/// pass a region's capacity.
fn chunks(
    frames: usize,
    det: [usize; 2],
    elem: usize,
    blocks: Blocks,
    rng: &mut Rng,
) -> (Vec<Vec<u8>>, usize) {
    let n = det[0] * det[1];
    let logical = n * elem;
    let (mut out, mut over) = (Vec::new(), 0);
    for f in 0..frames {
        let mut c = (logical as u64).to_be_bytes().to_vec();
        let (lens, tail) = match blocks {
            Blocks::Plain(block) => {
                c.extend_from_slice(&(block as u32).to_be_bytes());
                let lens: Vec<usize> = (0..logical)
                    .step_by(block)
                    .map(|d| (logical - d).min(block))
                    .collect();
                (lens, 0)
            }
            Blocks::Shuffled(bytes) => {
                let block_elems = bytes / elem;
                c.extend_from_slice(&((block_elems * elem) as u32).to_be_bytes());
                let comp = n - n % 8;
                let lens: Vec<usize> = (0..comp)
                    .step_by(block_elems)
                    .map(|e| (comp - e).min(block_elems) * elem)
                    .collect();
                (lens, (n - comp) * elem)
            }
        };
        for (i, &len) in lens.iter().enumerate() {
            let b = crafted(len, (f + i) % 3, rng);
            assert_eq!(b.made.len(), len);
            over += usize::from(b.seqs > SEQ_CAP);
            c.extend_from_slice(&(b.stream.len() as u32).to_be_bytes());
            c.extend_from_slice(&b.stream);
        }
        c.extend((0..tail).map(|_| rng.next() as u8));
        out.push(c);
    }
    (out, over)
}

#[test]
fn crafted_lz4_streams_inflate_on_the_gpu_as_on_the_cpu() {
    let Some(engine) = engine() else { return };
    // On Vulkan the LZ4 copies are built from SPIR-V whose storage barriers have the
    // workgroup scope WGSL gives them (naga writes Device scope): these cases check that build.
    if engine.adapter.backend == "Vulkan" {
        assert_eq!(engine.workgroup_scoped_kernels(), ["bslz4"]);
    }
    let bslz4 = |elem: u32| Filter {
        kind: FilterKind::BitshuffleLz4,
        id: 32008,
        cd_values: vec![0, 2, elem, 0, 2],
    };
    let lz4 = Filter {
        kind: FilterKind::Lz4,
        id: 32004,
        cd_values: vec![],
    };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // (scan, detector, dtype, filter, blocks); 1,000-element blocks put 32-pixel groups
    // across block edges.
    let (dectris, odd) = (Blocks::Shuffled(8192), Blocks::Shuffled(2000));
    let cases = [
        ([3, 4], [97, 85], Dtype::U8, bslz4(1), dectris),
        ([2, 5], [61, 67], Dtype::U16, bslz4(2), dectris),
        ([3, 3], [96, 96], Dtype::U16, bslz4(2), dectris),
        ([2, 2], [50, 71], Dtype::U16, bslz4(2), odd),
        ([2, 3], [45, 47], Dtype::U32, bslz4(4), dectris),
        ([3, 2], [97, 85], Dtype::U8, lz4, Blocks::Plain(4096)),
    ];
    let mut over_seen = 0;
    for (scan, det, dtype, filter, blocks) in cases {
        let shape = Shape4 { scan, det };
        let (chunks, over) = chunks(shape.frames(), det, dtype.size(), blocks, &mut rng);
        let name = format!("crafted_{dtype:?}_{det:?}_{:?}", filter.kind);
        let mut acq = synthetic::chunked(&name, shape, dtype, filter, chunks).unwrap();
        // Bad pixels at every column of a 32-pixel group, holding ordinary values (the
        // streams' random bytes), so masking cannot lean on the stored sentinel.
        acq.pixel_mask = Some((0..shape.det_len()).map(|k| k % 7 == 3).collect());
        assert!(
            stem4d::upload::gpu_decode::supported(&acq, Correction::default()),
            "{name}"
        );
        // Random u32 samples would pass u32 when binned (the contract refuses that).
        let bins: &[usize] = if dtype == Dtype::U32 { &[1] } else { &[1, 2] };
        for (&bin, mask_bad_pixels) in bins.iter().flat_map(|b| [(b, false), (b, true)]) {
            let corr = Correction {
                mask_bad_pixels,
                bin,
            };
            let Samples::Int(want) = FrameReader::new(&acq)
                .block(0, shape.frames(), corr)
                .unwrap()
                .samples
            else {
                panic!("integer samples");
            };
            let res = pollster::block_on(engine.upload(&acq, corr)).unwrap();
            assert_eq!(
                res.gpu_inflated_in_place as usize, over,
                "{name} bin {bin} masked {mask_bad_pixels}: blocks inflated in place"
            );
            let got =
                pollster::block_on(products::frames(&engine, &res, 0, shape.frames())).unwrap();
            if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
                let d = res.plan.shape.det_len();
                panic!(
                    "{name} bin {bin} masked {mask_bad_pixels}: frame {} pixel {}: GPU {} CPU {}",
                    i / d,
                    i % d,
                    got[i],
                    want[i]
                );
            }
            assert_eq!(got.len(), want.len());
        }
        over_seen += over;
    }
    assert!(over_seen > 0, "some blocks pass a region's capacity");
}
