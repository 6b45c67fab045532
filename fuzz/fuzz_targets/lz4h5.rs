//! HDF5 LZ4 filter (32004) chunk decoder on arbitrary bytes; the output is sized by the
//! chunk's own header when that is small, else by the first two bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let out_len = u16::from_le_bytes([data[0], data[1]]) as usize;
    let chunk = &data[2..];
    let mut out = vec![0u8; out_len];
    let _ = stem4d::decode::lz4h5::decode_into(chunk, &mut out);
    if let Some(total) = chunk
        .get(..8)
        .map(|b| u64::from_be_bytes(b.try_into().unwrap()))
    {
        if total <= 1 << 16 {
            let mut out = vec![0u8; total as usize];
            let _ = stem4d::decode::lz4h5::decode_into(chunk, &mut out);
        }
    }
});
