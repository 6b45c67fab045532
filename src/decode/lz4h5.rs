//! HDF5 LZ4 filter (32004): 8-byte BE total size, 4-byte BE block size, then blocks, each a
//! 4-byte BE compressed length and the block; a length equal to the block's raw size means
//! the block is stored raw.

use super::{be_u32, be_u64, lz4_block_exact, stored, BlockRef, DecodeError};

/// The block size and blocks of a chunk whose logical size is `logical` bytes, after every
/// header check; a block whose stored length equals its size is raw.
pub fn layout<S: super::Stored + ?Sized>(
    chunk: &S,
    logical: usize,
) -> Result<(usize, Vec<BlockRef>), DecodeError> {
    let total = be_u64(chunk, 0)?;
    if total != logical as u64 {
        return Err(DecodeError::new(format!(
            "LZ4 header claims a decoded size of {total} bytes but the chunk's logical size is {logical} bytes"
        )));
    }
    let block = be_u32(chunk, 8)? as usize;
    if block == 0 && logical > 0 {
        return Err(DecodeError::new("LZ4 block size is 0"));
    }
    let mut blocks = Vec::new();
    let (mut pos, mut done) = (12usize, 0usize);
    while done < logical {
        let raw_len = (logical - done).min(block);
        let clen = be_u32(chunk, pos)? as usize;
        pos += 4;
        let src = stored(chunk, pos, clen, |remain| {
            format!(
                "truncated: LZ4 block at byte {} claims {clen} bytes, {remain} remain",
                pos - 4
            )
        })?;
        pos = src.end;
        blocks.push(BlockRef {
            src,
            dst: done..done + raw_len,
            raw: clen == raw_len,
        });
        done += raw_len;
    }
    Ok((block, blocks))
}

pub fn decode_into(chunk: &[u8], out: &mut [u8]) -> Result<(), DecodeError> {
    let (_, blocks) = layout(chunk, out.len())?;
    for b in blocks {
        if b.raw {
            out[b.dst].copy_from_slice(&chunk[b.src]);
        } else {
            lz4_block_exact(&chunk[b.src], &mut out[b.dst])?;
        }
    }
    Ok(())
}

pub fn encode(data: &[u8], block: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(data.len() as u64).to_be_bytes());
    out.extend_from_slice(&(block as u32).to_be_bytes());
    for piece in data.chunks(block) {
        let c = lz4_flex::block::compress(piece);
        let stored = if c.len() >= piece.len() { piece } else { &c };
        out.extend_from_slice(&(stored.len() as u32).to_be_bytes());
        out.extend_from_slice(stored);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_raw_blocks() {
        let mut data: Vec<u8> = (0..5000u32).map(|i| (i % 13) as u8).collect();
        data.extend((0..777u32).map(|i| (i.wrapping_mul(2654435761) >> 24) as u8));
        let enc = encode(&data, 1024);
        let mut out = vec![0u8; data.len()];
        decode_into(&enc, &mut out).unwrap();
        assert_eq!(out, data);
        assert!(decode_into(&enc[..enc.len() - 1], &mut out).is_err());
    }
}
