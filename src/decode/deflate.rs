//! Deflate (HDF5 filter 1, zlib stream), bounded by the chunk's logical size.

use super::DecodeError;

pub fn inflate(chunk: &[u8], expected: usize) -> Result<Vec<u8>, DecodeError> {
    // The limit is the chunk's logical size: more output than that is corruption.
    let out = miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(chunk, expected)
        .map_err(|e| DecodeError::new(format!("corrupt deflate stream: {:?}", e.status)))?;
    if out.len() != expected {
        return Err(DecodeError::new(format!(
            "deflate stream decoded to {} bytes, expected {expected}",
            out.len()
        )));
    }
    Ok(out)
}
