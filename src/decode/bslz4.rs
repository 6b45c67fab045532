//! Bitshuffle + LZ4 (HDF5 filter 32008) chunk decoder.
//!
//! Layout: 8-byte BE total bytes, 4-byte BE block bytes (0 = default 8192), then per block a
//! 4-byte BE compressed length and an LZ4 block that decodes to the block's bit planes. The
//! last partial block holds a multiple of 8 elements; the final `n % 8` elements are raw.

use super::{be_u32, be_u64, bitshuffle, lz4_block_exact, stored, BlockRef, DecodeError};

pub const DEFAULT_BLOCK_BYTES: usize = 8192;

/// Parsed chunk header: what the chunk claims about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub total_bytes: u64,
    pub block_elems: usize,
}

pub fn header<S: super::Stored + ?Sized>(chunk: &S, elem: usize) -> Result<Header, DecodeError> {
    let total_bytes = be_u64(chunk, 0)?;
    let block_bytes = be_u32(chunk, 8)? as usize;
    let block_elems = if block_bytes == 0 {
        DEFAULT_BLOCK_BYTES / elem
    } else {
        if !block_bytes.is_multiple_of(elem) {
            return Err(DecodeError::new(format!(
                "bitshuffle block size {block_bytes} is not a multiple of the element size {elem}"
            )));
        }
        block_bytes / elem
    };
    if block_elems == 0 || block_elems % 8 != 0 {
        return Err(DecodeError::new(format!(
            "bitshuffle block of {block_elems} elements is not a positive multiple of 8"
        )));
    }
    Ok(Header {
        total_bytes,
        block_elems,
    })
}

/// The blocks of a chunk whose logical size is `logical` bytes, after every header check:
/// LZ4 blocks of bit planes, then the raw tail of the last `n % 8` elements.
pub fn layout<S: super::Stored + ?Sized>(
    chunk: &S,
    elem: usize,
    logical: usize,
) -> Result<(Header, Vec<BlockRef>), DecodeError> {
    let h = header(chunk, elem)?;
    if h.total_bytes != logical as u64 {
        return Err(DecodeError::new(format!(
            "bitshuffle header claims a decoded size of {} bytes but the chunk's logical size is {logical} bytes",
            h.total_bytes,
        )));
    }
    if !logical.is_multiple_of(elem) {
        return Err(DecodeError::new(format!(
            "chunk of {logical} bytes is not a whole number of {elem}-byte elements"
        )));
    }
    let n = logical / elem;
    let compressed_elems = n - n % 8;
    // Grown as blocks are read (each consumes stored bytes), never sized by the header.
    let mut blocks = Vec::new();
    let (mut pos, mut done) = (12usize, 0usize);
    while done < compressed_elems {
        let elems = (compressed_elems - done).min(h.block_elems);
        let clen = be_u32(chunk, pos)? as usize;
        pos += 4;
        let src = stored(chunk, pos, clen, |remain| {
            format!(
                "truncated: block at byte {} claims {clen} compressed bytes, {remain} remain",
                pos - 4
            )
        })?;
        pos = src.end;
        blocks.push(BlockRef {
            src,
            dst: done * elem..(done + elems) * elem,
            raw: false,
        });
        done += elems;
    }
    let tail = (n - done) * elem;
    if tail > 0 {
        let src = stored(chunk, pos, tail, |remain| {
            format!("truncated: {tail} raw tail bytes expected at byte {pos}, {remain} remain")
        })?;
        blocks.push(BlockRef {
            src,
            dst: done * elem..logical,
            raw: true,
        });
    }
    Ok((h, blocks))
}

/// Decode one chunk into `out`, whose length is the chunk's logical size.
pub fn decode_into(chunk: &[u8], elem: usize, out: &mut [u8]) -> Result<(), DecodeError> {
    let (h, blocks) = layout(chunk, elem, out.len())?;
    // The header's block size is not trusted: no block is larger than the chunk.
    let compressed_elems = out.len() / elem / 8 * 8;
    let mut scratch = vec![0u8; h.block_elems.min(compressed_elems) * elem];
    for b in blocks {
        if b.raw {
            out[b.dst].copy_from_slice(&chunk[b.src]);
        } else {
            let planes = &mut scratch[..b.dst.len()];
            lz4_block_exact(&chunk[b.src], planes)?;
            bitshuffle::unshuffle_block(planes, &mut out[b.dst], elem);
        }
    }
    Ok(())
}

/// Encoder used by tests, fuzz round trips and the bench's synthetic data.
pub fn encode(data: &[u8], elem: usize, block_elems: usize) -> Vec<u8> {
    let n = data.len() / elem;
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    out.extend_from_slice(&(data.len() as u64).to_be_bytes());
    out.extend_from_slice(&((block_elems * elem) as u32).to_be_bytes());
    let compressed_elems = n - n % 8;
    let mut done = 0;
    let mut planes = vec![0u8; block_elems * elem];
    while done < compressed_elems {
        let elems = (compressed_elems - done).min(block_elems);
        let bytes = elems * elem;
        bitshuffle::shuffle_block(
            &data[done * elem..done * elem + bytes],
            &mut planes[..bytes],
            elem,
        );
        let c = lz4_flex::block::compress(&planes[..bytes]);
        out.extend_from_slice(&(c.len() as u32).to_be_bytes());
        out.extend_from_slice(&c);
        done += elems;
    }
    out.extend_from_slice(&data[done * elem..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_partial_block_and_raw_tail() {
        for elem in [1usize, 2, 4] {
            for n in [0usize, 5, 8, 126, 1000, 4099] {
                let data: Vec<u8> = (0..n * elem).map(|i| ((i * 7) % 251) as u8).collect();
                let enc = encode(&data, elem, 64);
                let mut out = vec![0u8; data.len()];
                decode_into(&enc, elem, &mut out).unwrap();
                assert_eq!(out, data, "elem {elem} n {n}");
            }
        }
    }

    /// Found by `cargo fuzz run bslz4`: a 4 GiB block size in the header allocated a 4 GiB
    /// scratch buffer for a 64-byte chunk.
    #[test]
    fn huge_block_size_does_not_allocate_by_it() {
        let data = vec![7u8; 64];
        let mut enc = encode(&data, 1, 64);
        enc[8..12].copy_from_slice(&0xFFFF_FFF8u32.to_be_bytes());
        let mut out = vec![0u8; 64];
        decode_into(&enc, 1, &mut out).unwrap();
        assert_eq!(out, data);
    }

    #[test]
    fn lying_sizes_are_errors() {
        let data = vec![3u8; 512];
        let mut enc = encode(&data, 2, 64);
        let mut out = vec![0u8; 512];
        enc[0..8].copy_from_slice(&(1u64 << 40).to_be_bytes());
        assert!(decode_into(&enc, 2, &mut out).is_err());
        let mut enc = encode(&data, 2, 64);
        enc[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_into(&enc, 2, &mut out).is_err());
        let enc = encode(&data, 2, 64);
        assert!(decode_into(&enc[..enc.len() - 3], 2, &mut out).is_err());
    }
}
