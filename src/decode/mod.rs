//! CPU decoders for the HDF5 filters the project supports, and the filter pipeline that
//! applies them in reverse write order while honouring each chunk's filter mask.
//! Every decoder checks every length against the buffer it reads and the size it must
//! produce: a lying header is an error, never an allocation beyond the expected size.

pub mod bitshuffle;
pub mod bslz4;
pub mod deflate;
pub mod lz4h5;
pub mod pipeline;
pub mod shuffle;
pub mod walk;

pub use pipeline::{decode_chunk, Filter, FilterKind};

/// A decoder failure without file context; the caller adds file and chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

impl DecodeError {
    pub fn new(msg: impl Into<String>) -> Self {
        DecodeError(msg.into())
    }
}

/// One block of a chunk as stored: its bytes and the output range they decode to. The CPU
/// decoders walk these, and the GPU decoder uploads them as its block table, so both read
/// the same headers with the same checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRef {
    pub src: std::ops::Range<usize>,
    pub dst: std::ops::Range<usize>,
    /// Stored as is (copied), not LZ4-compressed.
    pub raw: bool,
}

/// A stored chunk as the header walks read it: its length and big-endian words. Bytes in
/// memory, or (the browser) the File API's buffers, which the GPU path uploads without
/// copying them into wasm memory first.
pub trait Stored {
    fn stored_len(&self) -> usize;
    /// The big-endian word at `at`, `None` when it passes the end.
    fn be_u32_at(&self, at: usize) -> Option<u32>;
}

impl Stored for [u8] {
    fn stored_len(&self) -> usize {
        self.len()
    }

    fn be_u32_at(&self, at: usize) -> Option<u32> {
        let b = self.get(at..at.checked_add(4)?)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// The `len` stored bytes at `base` of `inner` (a chunk of a larger buffer): nothing past
/// them is readable through it.
pub struct Slice<'a, S: ?Sized> {
    pub inner: &'a S,
    pub base: usize,
    pub len: usize,
}

impl<S: Stored + ?Sized> Stored for Slice<'_, S> {
    fn stored_len(&self) -> usize {
        self.len
    }

    fn be_u32_at(&self, at: usize) -> Option<u32> {
        if at.checked_add(4)? > self.len {
            return None;
        }
        self.inner.be_u32_at(self.base + at)
    }
}

/// The `len` bytes at `pos` of `chunk`, or the truncation error `what` describes.
pub(crate) fn stored<S: Stored + ?Sized>(
    chunk: &S,
    pos: usize,
    len: usize,
    what: impl FnOnce(usize) -> String,
) -> Result<std::ops::Range<usize>, DecodeError> {
    let n = chunk.stored_len();
    match pos.checked_add(len) {
        Some(end) if end <= n => Ok(pos..end),
        _ => Err(DecodeError::new(what(n.saturating_sub(pos)))),
    }
}

pub(crate) fn be_u32<S: Stored + ?Sized>(buf: &S, at: usize) -> Result<u32, DecodeError> {
    buf.be_u32_at(at)
        .ok_or_else(|| DecodeError::new(format!("truncated: header field at byte {at} missing")))
}

pub(crate) fn be_u64<S: Stored + ?Sized>(buf: &S, at: usize) -> Result<u64, DecodeError> {
    let hi = be_u32(buf, at)?;
    let lo = buf
        .be_u32_at(at + 4)
        .ok_or_else(|| DecodeError::new(format!("truncated: header field at byte {at} missing")))?;
    Ok((hi as u64) << 32 | lo as u64)
}

/// LZ4 block decode into exactly `out.len()` bytes.
pub(crate) fn lz4_block_exact(src: &[u8], out: &mut [u8]) -> Result<(), DecodeError> {
    let n = lz4_flex::block::decompress_into(src, out)
        .map_err(|e| DecodeError::new(format!("corrupt LZ4 block: {e}")))?;
    if n != out.len() {
        return Err(DecodeError::new(format!(
            "LZ4 block decoded to {n} bytes, expected {}",
            out.len()
        )));
    }
    Ok(())
}
