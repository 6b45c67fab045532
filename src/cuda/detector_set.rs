//! A detector pixel set as the masked-sum kernels read it (`wgsl/masked_sum.cu`): the
//! samples' form (spans of long runs, the other pixels listed) for any frame, and the
//! words' form (16-byte words with a bit per sample taken, spans of whole words) for frames
//! a multiple of 16 bytes long, read 16 bytes a load (decision 0048).

use cudarc::driver::CudaSlice;

use super::engine::{driver_error, CudaEngine};
use crate::error::Result;

/// The shortest run a warp reads as a span: eight loads of each lane, so that the run's
/// tail and its header cost little beside it. Shorter runs (the rows of a BF disk or an
/// ADF annulus) are listed: measured on an H100, spans of 16 or more made BF and ADF 1.7×
/// slower than the list, while the whole detector as one span was 1.25× faster (decision
/// 0040).
const SPAN_MIN: u32 = 256;

/// The fewest whole words read as a span in the words' form: two loads of each lane.
/// Shorter runs of whole words stay listed, as the samples' form keeps short runs listed.
const WORD_SPAN_MIN: u32 = 64;

/// Bytes of a load in the words' form.
pub const WORD_BYTES: u64 = 16;

/// The samples' form: runs of at least [`SPAN_MIN`] consecutive pixels as (start, length)
/// pairs, read by a whole warp, and the pixels of shorter runs listed one by one.
pub struct DetectorSet {
    pub spans: CudaSlice<u32>,
    pub n_spans: u32,
    pub pixels: CudaSlice<u32>,
    pub n_pixels: u32,
}

/// The words' form: (word, bits of its samples taken) pairs and (first word, words) spans
/// of whole words, words counted in 16 bytes from the frame's start.
pub struct DetectorWords {
    pub spans: CudaSlice<u32>,
    pub n_spans: u32,
    pub words: CudaSlice<u32>,
    pub n_words: u32,
}

/// A set in the form the resident's frames take.
pub enum MaskedSet {
    Samples(DetectorSet),
    Words(DetectorWords),
    /// A compressed resident's: (group, selection) pairs (`packed::group_items`).
    Groups(super::packed::GroupSet),
}

fn upload_u32(engine: &CudaEngine, v: &[u32]) -> Result<CudaSlice<u32>> {
    engine
        .stream
        .clone_htod(if v.is_empty() { &[0u32][..] } else { v })
        .map_err(driver_error("detector pixels"))
}

/// `pixels` as (spans, the pixels of shorter runs), each pixel once where it was given once.
pub fn split_runs(pixels: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let (mut spans, mut single) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < pixels.len() {
        let mut j = i + 1;
        while j < pixels.len() && pixels[j] == pixels[j - 1].wrapping_add(1) {
            j += 1;
        }
        let len = (j - i) as u32;
        if len >= SPAN_MIN {
            spans.extend([pixels[i], len]);
        } else {
            single.extend_from_slice(&pixels[i..j]);
        }
        i = j;
    }
    (spans, single)
}

/// `pixels` as 16-byte words of `per_word` samples (4, 8 or 16): (spans of at least
/// [`WORD_SPAN_MIN`] whole words, the other words with a bit per sample taken), in word
/// order. `None` where a pixel is given twice: a bit cannot count it twice, and the
/// samples' form can.
pub fn word_runs(pixels: &[u32], per_word: u32) -> Option<(Vec<u32>, Vec<u32>)> {
    let mut sorted = pixels.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    let mut taken: Vec<(u32, u32)> = Vec::new();
    for p in sorted {
        let (word, bit) = (p / per_word, 1u32 << (p % per_word));
        match taken.last_mut() {
            Some(last) if last.0 == word => last.1 |= bit,
            _ => taken.push((word, bit)),
        }
    }
    let whole = if per_word == 32 {
        u32::MAX
    } else {
        (1u32 << per_word) - 1
    };
    let (mut spans, mut words) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < taken.len() {
        let mut j = i;
        while j < taken.len() && taken[j].1 == whole && (j == i || taken[j].0 == taken[j - 1].0 + 1)
        {
            j += 1;
        }
        if (j - i) as u32 >= WORD_SPAN_MIN {
            spans.extend([taken[i].0, (j - i) as u32]);
        } else {
            // The run is too short for a span (or empty): its first word listed, and on.
            j = j.max(i + 1);
            words.extend(taken[i..j].iter().flat_map(|&(w, m)| [w, m]));
        }
        i = j;
    }
    Some((spans, words))
}

impl DetectorSet {
    pub fn upload(engine: &CudaEngine, pixels: &[u32]) -> Result<DetectorSet> {
        let (spans, single) = split_runs(pixels);
        Ok(DetectorSet {
            n_spans: (spans.len() / 2) as u32,
            spans: upload_u32(engine, &spans)?,
            n_pixels: single.len() as u32,
            pixels: upload_u32(engine, &single)?,
        })
    }
}

impl MaskedSet {
    /// The words' form where frames of `frame_bytes` allow it (a multiple of 16) and every
    /// pixel is given once, else the samples' form.
    pub fn upload(
        engine: &CudaEngine,
        pixels: &[u32],
        sample_bytes: u64,
        frame_bytes: u64,
    ) -> Result<MaskedSet> {
        let per_word = (WORD_BYTES / sample_bytes) as u32;
        let words = match frame_bytes % WORD_BYTES {
            0 => word_runs(pixels, per_word),
            _ => None,
        };
        Ok(match words {
            Some((spans, words)) => MaskedSet::Words(DetectorWords {
                n_spans: (spans.len() / 2) as u32,
                spans: upload_u32(engine, &spans)?,
                n_words: (words.len() / 2) as u32,
                words: upload_u32(engine, &words)?,
            }),
            None => MaskedSet::Samples(DetectorSet::upload(engine, pixels)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{split_runs, word_runs, WORD_SPAN_MIN};

    /// Runs of at least 256 pixels become spans, shorter runs stay listed, and every pixel is
    /// in exactly one of the two, whatever the order it came in.
    #[test]
    fn runs_split_into_spans_and_single_pixels() {
        let mut pixels: Vec<u32> = (1000..1400).collect(); // a run of 400
        pixels.extend([7, 8, 9]); // a short run after a jump back
        pixels.extend(2000..2256); // exactly the shortest span
        pixels.extend(3000..3255); // one short of it
        pixels.extend([300, 302]);
        let (spans, single) = split_runs(&pixels);
        assert_eq!(spans, vec![1000, 400, 2000, 256]);
        let short: Vec<u32> = [7, 8, 9]
            .into_iter()
            .chain(3000..3255)
            .chain([300, 302])
            .collect();
        assert_eq!(single, short);
        let mut back: Vec<u32> = spans
            .chunks_exact(2)
            .flat_map(|s| s[0]..s[0] + s[1])
            .chain(single)
            .collect();
        back.sort_unstable();
        let mut want = pixels.clone();
        want.sort_unstable();
        assert_eq!(back, want);
        assert_eq!(split_runs(&[]), (vec![], vec![]));
    }

    /// The pixels a words' form takes, back as a sorted list.
    fn pixels_of(spans: &[u32], words: &[u32], per_word: u32) -> Vec<u32> {
        let mut back: Vec<u32> = spans
            .chunks_exact(2)
            .flat_map(|s| s[0] * per_word..(s[0] + s[1]) * per_word)
            .collect();
        for w in words.chunks_exact(2) {
            back.extend(
                (0..per_word)
                    .filter(|b| w[1] >> b & 1 == 1)
                    .map(|b| w[0] * per_word + b),
            );
        }
        back.sort_unstable();
        back
    }

    /// Every pixel is taken once in either form, in any order it came; whole-word runs of
    /// at least 64 words become spans, shorter ones and partial words stay listed; a pixel
    /// given twice leaves the words' form.
    #[test]
    fn pixels_become_words_and_spans_of_whole_words() {
        for per_word in [4u32, 8, 16] {
            let span = WORD_SPAN_MIN * per_word;
            // A long run that starts and ends inside words (65 whole words between), then
            // one of 63 whole words, then scattered pixels; all given backwards.
            let mut pixels: Vec<u32> = (3..(WORD_SPAN_MIN + 2) * per_word + 3).collect();
            let short_at = 4 * span;
            pixels.extend(short_at..short_at + span - per_word);
            pixels.extend([9 * span + 1, 9 * span, 7 * span + per_word - 1].iter());
            pixels.reverse();
            let (spans, words) = word_runs(&pixels, per_word).expect("no pixel twice");
            // The long run: its first partial word listed, then whole words as one span.
            assert_eq!(spans, vec![1, WORD_SPAN_MIN + 1], "per_word {per_word}");
            assert_eq!(words[0..2], [0, ((1u32 << per_word) - 1) & !0b111]);
            let mut want = pixels.clone();
            want.sort_unstable();
            assert_eq!(pixels_of(&spans, &words, per_word), want);
            // Consecutive listed words keep their order.
            let listed: Vec<u32> = words.chunks_exact(2).map(|w| w[0]).collect();
            assert!(listed.windows(2).all(|w| w[0] < w[1]));
            let mut twice = pixels.clone();
            twice.push(pixels[5]);
            assert_eq!(word_runs(&twice, per_word), None);
        }
        assert_eq!(word_runs(&[], 8), Some((vec![], vec![])));
    }
}
