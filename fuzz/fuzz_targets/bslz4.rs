//! Bitshuffle+LZ4 chunk decoder on arbitrary bytes. Byte 0 picks the element size
//! (1, 2, 4 or 8), bytes 1..3 the logical size of the chunk (0..65535), the rest is the chunk.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let elem = [1usize, 2, 4, 8][(data[0] & 3) as usize];
    let out_len = u16::from_le_bytes([data[1], data[2]]) as usize;
    let chunk = &data[3..];
    let mut out = vec![0u8; out_len];
    if stem4d::decode::bslz4::decode_into(chunk, elem, &mut out).is_ok() {
        // A chunk that decodes must say so about itself.
        assert_eq!(
            stem4d::decode::bslz4::header(chunk, elem)
                .unwrap()
                .total_bytes,
            out_len as u64
        );
    }
    // The header's own size, when small, exercises the block loop of self-consistent chunks.
    if let Ok(h) = stem4d::decode::bslz4::header(chunk, elem) {
        if h.total_bytes <= 1 << 16 {
            let mut out = vec![0u8; h.total_bytes as usize];
            let _ = stem4d::decode::bslz4::decode_into(chunk, elem, &mut out);
        }
    }
});
