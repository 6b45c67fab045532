//! Scan shapes from every place the user's files and flags give one: an Arina companion
//! whose bytes are the input's (seeded with a real companion, so NumPixelsY/X take whatever
//! types and values libFuzzer finds), an EMPAD raw file whose name carries the input's
//! numbers (`scan_x{C}_y{R}.raw`), and an explicit scan shape from the input. Errors are
//! fine; a panic, or an open whose rows × cols is not exactly its frame count (a product
//! that wrapped, a zero), is the bug.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use stem4d::formats::{Acquisition, OpenOptions};
use stem4d::source::{ByteSource, FileSet, MemSource};

const MASTER: &[u8] = include_bytes!("../../tests/fixtures/data/arina_u16_master.h5");
const DATA_1: &[u8] = include_bytes!("../../tests/fixtures/data/arina_u16_data_000001.h5");
const DATA_2: &[u8] = include_bytes!("../../tests/fixtures/data/arina_u16_data_000002.h5");
/// Frames of the Arina fixture.
const ARINA_FRAMES: usize = 35;
/// One EMPAD frame: 130 × 128 float32.
const EMPAD_FRAME_BYTES: usize = 130 * 128 * 4;

fn mem(name: &str, bytes: &[u8]) -> Arc<dyn ByteSource> {
    Arc::new(MemSource::new(name, bytes.to_vec()))
}

/// An open that succeeded holds exactly its frames; an error is one line naming something.
fn check(what: &str, r: stem4d::Result<Acquisition>, frames: usize) {
    match r {
        Ok(acq) => {
            let [rows, cols] = acq.shape.scan;
            assert!(rows > 0 && cols > 0, "{what}: scan {rows}x{cols}");
            assert_eq!(
                rows.checked_mul(cols),
                Some(frames),
                "{what}: scan {rows}x{cols} for {frames} frames"
            );
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.is_empty() && !msg.contains('\n'), "{what}: {msg:?}");
        }
    }
}

fn u64_at(data: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(data[at..at + 8].try_into().unwrap_or([0; 8]))
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 17 {
        return;
    }
    let (a, b) = (u64_at(data, 1), u64_at(data, 9));
    // Small numbers half the time, so that shapes that fit are found too.
    let (a, b) = if data[0] & 1 == 0 { (a % 64, b % 64) } else { (a, b) };
    let explicit = (data[0] & 2 != 0).then_some([a as usize, b as usize]);
    let opts = OpenOptions {
        scan_shape: explicit,
        dataset: None,
    };
    // The Arina fixture with the input as its companion.
    let companion = &data[17..];
    if let Ok(files) = FileSet::new(vec![
        mem("arina_u16_master.h5", MASTER),
        mem("arina_u16_data_000001.h5", DATA_1),
        mem("arina_u16_data_000002.h5", DATA_2),
        mem("arina_u16.h5", companion),
    ]) {
        check("arina", Acquisition::open(files, &opts), ARINA_FRAMES);
    }
    // An EMPAD raw file of one or two frames whose name says the input's numbers.
    let frames = 1 + (data[0] >> 2 & 1) as usize;
    let name = format!("scan_x{a}_y{b}.raw");
    if let Ok(files) = FileSet::new(vec![mem(&name, &vec![0u8; frames * EMPAD_FRAME_BYTES])]) {
        check(&name, Acquisition::open(files, &opts), frames);
    }
});
