//! The filter pipeline of one dataset: filters run in reverse write order; bit `i` of a
//! chunk's filter mask means filter `i` was skipped when that chunk was written.

use serde::{Deserialize, Serialize};

use super::{bslz4, deflate, lz4h5, shuffle, DecodeError};

pub const FILTER_DEFLATE: u16 = 1;
pub const FILTER_SHUFFLE: u16 = 2;
pub const FILTER_FLETCHER32: u16 = 3;
pub const FILTER_LZ4: u16 = 32004;
pub const FILTER_BSLZ4: u16 = 32008;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FilterKind {
    Deflate,
    Shuffle,
    Lz4,
    BitshuffleLz4,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    pub kind: FilterKind,
    pub id: u16,
    pub cd_values: Vec<u32>,
}

impl FilterKind {
    pub fn name(self) -> &'static str {
        match self {
            FilterKind::Deflate => "deflate",
            FilterKind::Shuffle => "shuffle",
            FilterKind::Lz4 => "lz4",
            FilterKind::BitshuffleLz4 => "bitshuffle-lz4",
        }
    }
}

impl Filter {
    /// Map an HDF5 filter id to a supported decoder, or say clearly which is unsupported.
    pub fn from_hdf5(id: u16, name: Option<&str>, cd_values: &[u32]) -> Result<Self, String> {
        let kind = match id {
            FILTER_DEFLATE => FilterKind::Deflate,
            FILTER_SHUFFLE => FilterKind::Shuffle,
            FILTER_LZ4 => FilterKind::Lz4,
            FILTER_BSLZ4 => {
                // cd_values[4] is the compressor: 2 = LZ4; 0 = bitshuffle alone; 3 = zstd.
                match cd_values.get(4).copied() {
                    Some(2) => FilterKind::BitshuffleLz4,
                    other => {
                        return Err(format!(
                            "unsupported filter: bitshuffle with compressor {:?} (only LZ4 = 2 is supported)",
                            other
                        ))
                    }
                }
            }
            _ => {
                return Err(format!(
                    "unsupported filter {id}{} (supported: deflate 1, shuffle 2, lz4 32004, bitshuffle+lz4 32008)",
                    name.map(|n| format!(" '{n}'")).unwrap_or_default()
                ))
            }
        };
        Ok(Filter {
            kind,
            id,
            cd_values: cd_values.to_vec(),
        })
    }
}

/// Upper bound on the expansion of one compressing filter (deflate's limit is 1032:1).
const MAX_EXPANSION: u64 = 1100;

/// Decode one stored chunk to its `expected` logical bytes.
pub fn decode_chunk(
    filters: &[Filter],
    filter_mask: u32,
    raw: &[u8],
    expected: usize,
    elem: usize,
) -> Result<Vec<u8>, DecodeError> {
    // No supported compressor expands by more than ~1032:1 (deflate; LZ4 ~255:1): a chunk
    // claiming more is a lying chunk shape, refused before its output is allocated.
    let active = |i: usize| !(i < 32 && filter_mask & (1 << i) != 0);
    let max_out = filters
        .iter()
        .enumerate()
        .filter(|&(i, f)| active(i) && f.kind != FilterKind::Shuffle)
        .fold(raw.len() as u64, |n, _| {
            n.saturating_mul(MAX_EXPANSION).saturating_add(1 << 16)
        });
    if expected as u64 > max_out {
        return Err(DecodeError::new(format!(
            "chunk of {} stored bytes cannot decode to its logical size of {expected} bytes (corrupt chunk size or shape)",
            raw.len()
        )));
    }
    let mut data: Option<Vec<u8>> = None;
    for (i, f) in filters.iter().enumerate().rev() {
        if i < 32 && filter_mask & (1 << i) != 0 {
            continue;
        }
        let input: &[u8] = data.as_deref().unwrap_or(raw);
        let next = match f.kind {
            FilterKind::Deflate => deflate::inflate(input, expected)?,
            FilterKind::Shuffle => shuffle::unshuffle(input, elem),
            FilterKind::Lz4 => {
                let mut out = vec![0u8; expected];
                lz4h5::decode_into(input, &mut out)?;
                out
            }
            FilterKind::BitshuffleLz4 => {
                let mut out = vec![0u8; expected];
                bslz4::decode_into(input, elem, &mut out)?;
                out
            }
        };
        data = Some(next);
    }
    let out = match data {
        Some(d) => d,
        None => raw.to_vec(),
    };
    if out.len() != expected {
        return Err(DecodeError::new(format!(
            "chunk decoded to {} bytes, expected {expected}",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_filters_are_honoured() {
        let data: Vec<u8> = (0..400u32).map(|i| (i % 7) as u8).collect();
        let bs = Filter::from_hdf5(FILTER_BSLZ4, None, &[0, 3, 2, 0, 2]).unwrap();
        // mask bit 0 set: the chunk was stored without the filter
        assert_eq!(
            decode_chunk(std::slice::from_ref(&bs), 1, &data, 400, 2).unwrap(),
            data
        );
        let enc = bslz4::encode(&data, 2, 64);
        assert_eq!(decode_chunk(&[bs], 0, &enc, 400, 2).unwrap(), data);
    }

    #[test]
    fn unknown_filter_is_named() {
        let e = Filter::from_hdf5(32015, Some("zstd"), &[]).unwrap_err();
        assert!(e.contains("32015") && e.contains("zstd"), "{e}");
    }
}
