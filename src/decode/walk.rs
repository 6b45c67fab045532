//! Header walks of the chunks the GPU decoder inflates, as word lists that can travel
//! between threads. In the browser the pool Workers that read a window's file pieces walk
//! the chunks in them with these same functions, so that the one thread that builds and
//! submits every window only stitches the lists (the walks took it 0.5–0.6 s of the 5.6 GB
//! file's load on the H200, decision 0013). The GPU decode's block tables come from these
//! walks (C-DECODE-GPU).
//!
//! A job list is `[elem, then per chunk: at, stored, logical, kind]` (byte offset in the
//! buffer, stored and logical bytes, [`KIND_BSLZ4`] or [`KIND_LZ4`]); a walk is, per chunk,
//! `[param, n, then n blocks of BLOCK_WORDS]`, `param` being the bitshuffle block's elements
//! or the LZ4 block's bytes.

use super::{bslz4, lz4h5, BlockRef, DecodeError, Slice, Stored};

pub const KIND_BSLZ4: u32 = 0;
pub const KIND_LZ4: u32 = 1;
/// Words a block takes: source start and length, output start and length (raw in bit 31),
/// relative to the chunk — the GPU block table's entry less the window's bases.
pub const BLOCK_WORDS: usize = 4;

/// The chunk's layout after every header check, and its `param`.
pub fn chunk_layout<S: Stored + ?Sized>(
    chunk: &S,
    elem: usize,
    logical: usize,
    kind: u32,
) -> Result<(u32, Vec<BlockRef>), DecodeError> {
    let (param, blocks) = match kind {
        KIND_LZ4 => lz4h5::layout(chunk, logical)?,
        KIND_BSLZ4 => {
            let (h, blocks) = bslz4::layout(chunk, elem, logical)?;
            (h.block_elems, blocks)
        }
        other => return Err(DecodeError::new(format!("unknown chunk walk kind {other}"))),
    };
    let param = u32::try_from(param)
        .map_err(|_| DecodeError::new(format!("a block of {param} is too large")))?;
    Ok((param, blocks))
}

/// A block as the GPU table holds it, `src_base`/`dst_base` added.
pub fn block_words(b: &BlockRef, src_base: u32, dst_base: u32) -> [u32; BLOCK_WORDS] {
    [
        src_base + b.src.start as u32,
        b.src.len() as u32,
        dst_base + b.dst.start as u32,
        b.dst.len() as u32 | (b.raw as u32) << 31,
    ]
}

/// One chunk of a job list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    pub at: usize,
    pub stored: usize,
    pub logical: usize,
    pub kind: u32,
}

pub fn encode_jobs(elem: usize, jobs: &[Job]) -> Vec<u32> {
    let mut out = Vec::with_capacity(1 + 4 * jobs.len());
    out.push(elem as u32);
    for j in jobs {
        out.extend_from_slice(&[j.at as u32, j.stored as u32, j.logical as u32, j.kind]);
    }
    out
}

/// Walk every chunk of the job list `jobs` in `bytes`, up to the first that fails: the walks
/// of the chunks before it, and its place in the list with what is wrong with it.
pub fn walk<S: Stored + ?Sized>(
    bytes: &S,
    jobs: &[u32],
) -> (Vec<u32>, Option<(usize, DecodeError)>) {
    let mut out = Vec::new();
    let malformed = (0, DecodeError::new("malformed chunk walk job list"));
    let Some((&elem, list)) = jobs.split_first().filter(|(_, l)| l.len() % 4 == 0) else {
        return (out, Some(malformed));
    };
    for (k, j) in list.chunks_exact(4).enumerate() {
        let (base, len) = (j[0] as usize, j[1] as usize);
        if base
            .checked_add(len)
            .is_none_or(|end| end > bytes.stored_len())
        {
            let outside = DecodeError::new("chunk lies outside the bytes read");
            return (out, Some((k, outside)));
        }
        let chunk = Slice {
            inner: bytes,
            base,
            len,
        };
        match chunk_layout(&chunk, elem as usize, j[2] as usize, j[3]) {
            Ok((param, blocks)) => {
                out.extend_from_slice(&[param, blocks.len() as u32]);
                for b in &blocks {
                    out.extend_from_slice(&block_words(b, 0, 0));
                }
            }
            Err(e) => return (out, Some((k, e))),
        }
    }
    (out, None)
}

/// A piece's walks as a Worker sent them: its chunks' lists up to the first failure, and
/// that chunk's place in the piece's job list with why it failed.
pub struct PieceWalk {
    pub words: Vec<u32>,
    pub failed: Option<(usize, String)>,
}

/// Where the walk after the one at `at` starts, if the one at `at` is whole.
fn next_start(words: &[u32], at: usize) -> Option<usize> {
    let n = *words.get(at + 1)? as usize;
    n.checked_mul(BLOCK_WORDS)
        .and_then(|w| w.checked_add(at + 2))
        .filter(|&end| end <= words.len())
}

/// Where each walk of `words` starts; `None` unless they are whole walks back to back.
fn starts(words: &[u32]) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < words.len() {
        out.push(at);
        at = next_start(words, at)?;
    }
    Some(out)
}

/// The walks of a window's chunks, in window order: where each chunk's list starts.
pub struct Walked {
    words: Vec<u32>,
    starts: Vec<usize>,
    /// The first chunk whose walk failed (its place in the window) and why; the chunks
    /// before it walked.
    pub failed: Option<(usize, String)>,
}

impl Walked {
    /// Index the concatenated walks `words`; `Err` if they are not walk lists.
    pub fn new(words: Vec<u32>, failed: Option<(usize, String)>) -> Result<Walked, DecodeError> {
        let starts = starts(&words).ok_or_else(|| DecodeError::new("truncated chunk walk"))?;
        Ok(Walked {
            words,
            starts,
            failed,
        })
    }

    /// Chunks in the walk list `words` (those whole, if it is cut short).
    pub fn count(words: &[u32]) -> usize {
        let mut n = 0;
        let mut at = 0usize;
        while let Some(next) = next_start(words, at) {
            (n, at) = (n + 1, next);
        }
        n
    }

    pub fn chunks(&self) -> usize {
        self.starts.len()
    }

    /// Chunk `k`'s `param` and its blocks' words.
    pub fn chunk(&self, k: usize) -> Option<(u32, &[u32])> {
        let at = *self.starts.get(k)?;
        let n = self.words[at + 1] as usize;
        Some((
            self.words[at],
            &self.words[at + 2..at + 2 + n * BLOCK_WORDS],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bitshuffle/LZ4 chunk of `n` u16 elements in blocks of `block` elements.
    fn bslz4_chunk(n: usize, block: usize) -> Vec<u8> {
        let data: Vec<u8> = (0..n * 2).map(|i| (i * 7 % 251) as u8).collect();
        bslz4::encode(&data, 2, block)
    }

    #[test]
    fn walks_match_the_layouts_of_each_chunk() {
        let (a, b) = (bslz4_chunk(4099, 1024), bslz4_chunk(512, 4096));
        let plain: Vec<u8> = (0..3000u32).map(|i| (i % 13) as u8).collect();
        let c = lz4h5::encode(&plain, 1024);
        let gap = 5;
        let mut bytes = vec![0xAAu8; gap];
        bytes.extend_from_slice(&a);
        bytes.extend_from_slice(&b);
        bytes.extend_from_slice(&c);
        let jobs = [
            Job {
                at: gap,
                stored: a.len(),
                logical: 4099 * 2,
                kind: KIND_BSLZ4,
            },
            Job {
                at: gap + a.len(),
                stored: b.len(),
                logical: 512 * 2,
                kind: KIND_BSLZ4,
            },
            Job {
                at: gap + a.len() + b.len(),
                stored: c.len(),
                logical: plain.len(),
                kind: KIND_LZ4,
            },
        ];
        let (words, failed) = walk(&bytes[..], &encode_jobs(2, &jobs));
        assert_eq!(failed, None);
        let walked = Walked::new(words, None).unwrap();
        assert_eq!(walked.chunks(), 3);
        for (k, (chunk, j)) in [&a, &b, &c].into_iter().zip(&jobs).enumerate() {
            let (param, blocks) = chunk_layout(&chunk[..], 2, j.logical, j.kind).unwrap();
            let want: Vec<u32> = blocks.iter().flat_map(|b| block_words(b, 0, 0)).collect();
            assert_eq!(walked.chunk(k), Some((param, &want[..])));
        }
        assert_eq!(walked.chunk(0).unwrap().0, 1024);
        // The raw tail of 4099 % 8 elements is a block of its own.
        assert!(walked
            .chunk(0)
            .unwrap()
            .1
            .chunks(4)
            .any(|w| w[3] >> 31 == 1));
        assert_eq!(walked.chunk(2).unwrap().0, 1024);
        assert_eq!(walked.chunk(3), None);
    }

    #[test]
    fn a_failing_chunk_is_named_by_its_place_with_the_layouts_message() {
        let a = bslz4_chunk(600, 4096);
        let mut bytes = a.clone();
        bytes.extend_from_slice(&a[..a.len() - 3]);
        let job = |at, stored| Job {
            at,
            stored,
            logical: 1200,
            kind: KIND_BSLZ4,
        };
        let jobs = encode_jobs(2, &[job(0, a.len()), job(a.len(), a.len() - 3)]);
        let (words, failed) = walk(&bytes[..], &jobs);
        let (k, e) = failed.unwrap();
        assert_eq!(k, 1);
        // The chunk before it walked.
        assert_eq!(Walked::new(words, None).unwrap().chunks(), 1);
        let direct = chunk_layout(&a[..a.len() - 3], 2, 1200, KIND_BSLZ4).unwrap_err();
        assert_eq!(e, direct);
        assert!(e.0.contains("truncated"), "{e}");
        // A chunk said to lie past the bytes read, and a wrong logical size.
        let past = walk(&bytes[..], &encode_jobs(2, &[job(4, bytes.len())]));
        assert_eq!(past.1.unwrap().0, 0);
        let wrong = encode_jobs(
            2,
            &[Job {
                logical: 1202,
                ..job(0, a.len())
            }],
        );
        assert!(walk(&bytes[..], &wrong)
            .1
            .unwrap()
            .1
             .0
            .contains("logical size"));
    }

    #[test]
    fn malformed_lists_are_errors_not_panics() {
        let none: &[u8] = &[];
        assert!(walk(none, &[]).1.is_some());
        assert!(walk(none, &[2, 0, 0]).1.is_some());
        assert_eq!(walk(none, &[2]), (vec![], None));
        assert!(Walked::new(vec![1], None).is_err());
        assert!(Walked::new(vec![1, 2, 0, 0, 0, 0], None).is_err());
        assert!(Walked::new(vec![1, u32::MAX], None).is_err());
        assert_eq!(Walked::new(vec![], None).unwrap().chunks(), 0);
        assert_eq!(Walked::count(&[7, 0, 9, 1, 0, 0, 0, 0, 5]), 2);
    }
}
