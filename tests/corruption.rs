//! Property tests: randomly corrupted fixtures never panic, and every failure is a
//! non-empty message naming one of the files; the raw chunk decoders never panic on
//! arbitrary bytes and round-trip their own encoders.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use stem4d::frames::Correction;

use common::fixtures;
use proptest::prelude::*;
use stem4d::formats::{Acquisition, OpenOptions};
use stem4d::products::{ProductKind, ProductParams};
use stem4d::source::{ByteSource, FileSet, MemSource};

/// One acquisition's files, read once.
struct Set {
    files: Vec<(&'static str, Vec<u8>)>,
    scan_shape: Option<[usize; 2]>,
}

fn load(names: &[&'static str], scan_shape: Option<[usize; 2]>) -> Set {
    let files = names
        .iter()
        .map(|n| {
            let p = fixtures().join("data").join(n);
            (
                *n,
                std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
            )
        })
        .collect();
    Set { files, scan_shape }
}

fn sets() -> Vec<Set> {
    vec![
        load(&["lz4_stack_u16.h5"], Some([6, 4])),
        load(&["gzip_stack_u16.h5"], None),
        load(
            &["arina_u8_master.h5", "arina_u8_data_000001.h5"],
            Some([4, 6]),
        ),
    ]
}

#[derive(Clone, Debug)]
enum Corruption {
    /// Keep the first `frac` of the file.
    Truncate { frac: f64 },
    /// XOR bytes at relative positions with non-zero masks.
    Flip { at: Vec<(f64, u8)> },
    /// Overwrite a range starting at a relative position with these bytes.
    Overwrite { at: f64, bytes: Vec<u8> },
}

fn corruption() -> impl Strategy<Value = Corruption> {
    prop_oneof![
        (0.0f64..1.0).prop_map(|frac| Corruption::Truncate { frac }),
        prop::collection::vec((0.0f64..1.0, 1u8..=255), 1..16)
            .prop_map(|at| Corruption::Flip { at }),
        (0.0f64..1.0, prop::collection::vec(any::<u8>(), 1..256))
            .prop_map(|(at, bytes)| Corruption::Overwrite { at, bytes }),
    ]
}

/// Random bytes (incompressible: raw LZ4 blocks) or a small alphabet (compressible).
fn data() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..3000),
        prop::collection::vec(0u8..4, 0..3000),
    ]
}

fn pos(frac: f64, len: usize) -> usize {
    ((frac * len as f64) as usize).min(len.saturating_sub(1))
}

fn apply(c: &Corruption, mut data: Vec<u8>) -> Vec<u8> {
    if data.is_empty() {
        return data;
    }
    let len = data.len();
    match c {
        Corruption::Truncate { frac } => data.truncate((frac * len as f64) as usize),
        Corruption::Flip { at } => {
            for &(f, mask) in at {
                data[pos(f, len)] ^= mask;
            }
        }
        Corruption::Overwrite { at, bytes } => {
            let start = pos(*at, len);
            let end = (start + bytes.len()).min(len);
            data[start..end].copy_from_slice(&bytes[..end - start]);
        }
    }
    data
}

/// Open and compute sum-dp and com; `Err(message)` on the first failure.
fn open_and_compute(
    files: Vec<(&str, Vec<u8>)>,
    scan_shape: Option<[usize; 2]>,
) -> Result<(), String> {
    let sources: Vec<Arc<dyn ByteSource>> = files
        .into_iter()
        .map(|(n, b)| Arc::new(MemSource::new(n, b)) as Arc<dyn ByteSource>)
        .collect();
    let run = || -> stem4d::Result<()> {
        let acq = Acquisition::open(
            FileSet::new(sources)?,
            &OpenOptions {
                scan_shape,
                dataset: None,
            },
        )?;
        stem4d::cpu::compute(
            &acq,
            &ProductParams::new(ProductKind::SumDp),
            Correction::default(),
        )?;
        stem4d::cpu::compute(
            &acq,
            &ProductParams::new(ProductKind::Com),
            Correction::default(),
        )?;
        Ok(())
    };
    run().map_err(|e| e.to_string())
}

fn check(set: &Set, which: usize, c: &Corruption) -> Result<(), TestCaseError> {
    let which = which % set.files.len();
    let files: Vec<(&str, Vec<u8>)> = set
        .files
        .iter()
        .enumerate()
        .map(|(i, (n, b))| {
            (
                *n,
                if i == which {
                    apply(c, b.clone())
                } else {
                    b.clone()
                },
            )
        })
        .collect();
    let result = catch_unwind(AssertUnwindSafe(|| open_and_compute(files, set.scan_shape)));
    match result {
        Err(_) => Err(TestCaseError::fail(format!(
            "panicked on {} with {c:?}",
            set.files[which].0
        ))),
        Ok(Ok(())) => Ok(()),
        Ok(Err(msg)) => {
            prop_assert!(!msg.trim().is_empty(), "empty message for {c:?}");
            prop_assert!(!msg.contains('\n'), "multi-line message {msg:?}");
            prop_assert!(
                set.files.iter().any(|(n, _)| msg.contains(n)),
                "message names no file: {msg} ({c:?} on {})",
                set.files[which].0
            );
            Ok(())
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_lz4_stack_fails_cleanly(c in corruption()) {
        let s = &sets()[0];
        check(s, 0, &c)?;
    }

    #[test]
    fn corrupted_gzip_stack_fails_cleanly(c in corruption()) {
        let s = &sets()[1];
        check(s, 0, &c)?;
    }

    #[test]
    fn corrupted_arina_fails_cleanly(which in 0usize..2, c in corruption()) {
        let s = &sets()[2];
        check(s, which, &c)?;
    }

    #[test]
    fn bslz4_decoder_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        elem in prop::sample::select(vec![1usize, 2, 4, 3, 8]),
        out_len in 0usize..2048,
    ) {
        let r = catch_unwind(|| {
            let mut out = vec![0u8; out_len];
            let _ = stem4d::decode::bslz4::decode_into(&bytes, elem, &mut out);
        });
        prop_assert!(r.is_ok(), "bslz4 panicked");
    }

    #[test]
    fn lz4h5_decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512), out_len in 0usize..2048) {
        let r = catch_unwind(|| {
            let mut out = vec![0u8; out_len];
            let _ = stem4d::decode::lz4h5::decode_into(&bytes, &mut out);
        });
        prop_assert!(r.is_ok(), "lz4h5 panicked");
    }

    /// A valid header with a random body: exercises the block loop past the header checks.
    #[test]
    fn decoders_never_panic_on_plausible_headers(
        body in prop::collection::vec(any::<u8>(), 0..512),
        out_len in 0usize..1024,
        block in prop::sample::select(vec![0u32, 8, 64, 1024, 8192]),
        elem in prop::sample::select(vec![1usize, 2, 4]),
    ) {
        let mut chunk = (out_len as u64).to_be_bytes().to_vec();
        chunk.extend_from_slice(&block.to_be_bytes());
        chunk.extend_from_slice(&body);
        let r = catch_unwind(|| {
            let mut out = vec![0u8; out_len];
            let _ = stem4d::decode::bslz4::decode_into(&chunk, elem, &mut out);
            let _ = stem4d::decode::lz4h5::decode_into(&chunk, &mut out);
        });
        prop_assert!(r.is_ok(), "decoder panicked");
    }

    #[test]
    fn bslz4_round_trips(
        data in data(),
        elem in prop::sample::select(vec![1usize, 2, 4]),
        block_elems in prop::sample::select(vec![8usize, 64, 1024, 2048]),
    ) {
        let data = &data[..data.len() - data.len() % elem];
        let enc = stem4d::decode::bslz4::encode(data, elem, block_elems);
        let mut out = vec![0u8; data.len()];
        stem4d::decode::bslz4::decode_into(&enc, elem, &mut out).map_err(|e| TestCaseError::fail(e.0))?;
        prop_assert_eq!(&out[..], data);
    }

    #[test]
    fn lz4h5_round_trips(
        data in data(),
        elem in prop::sample::select(vec![1usize, 2, 4]),
        block in prop::sample::select(vec![1usize, 64, 1000, 4096]),
    ) {
        let data = &data[..data.len() - data.len() % elem];
        let enc = stem4d::decode::lz4h5::encode(data, block * elem);
        let mut out = vec![0u8; data.len()];
        stem4d::decode::lz4h5::decode_into(&enc, &mut out).map_err(|e| TestCaseError::fail(e.0))?;
        prop_assert_eq!(&out[..], data);
    }
}

/// Inputs the fuzzers (`fuzz/`) found crashing, kept as regressions: each must open or fail
/// with a message, never panic.
#[test]
fn fuzz_regressions_do_not_panic() {
    let dir = fixtures().join("fuzz");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        for scan_shape in [None, Some([1, 1])] {
            let r = catch_unwind(AssertUnwindSafe(|| {
                open_and_compute(vec![("fuzz.h5", bytes.clone())], scan_shape)
            }));
            match r {
                Err(_) => panic!("{} panicked (scan shape {scan_shape:?})", path.display()),
                Ok(Err(msg)) => assert!(msg.contains("fuzz.h5"), "{}: {msg}", path.display()),
                Ok(Ok(())) => {}
            }
        }
        n += 1;
    }
    assert!(n > 0, "no regression inputs in {}", dir.display());
}

/// Found by `corrupted_arina_fails_cleanly`: the master cut at 3% of its length made
/// hdf5-reader index past a short read (our storage clipped reads at the end of the file).
#[test]
fn truncated_arina_master_does_not_panic() {
    let s = &sets()[2];
    for frac in [0.01, 0.0303, 0.05, 0.1, 0.5] {
        check(s, 0, &Corruption::Truncate { frac }).unwrap();
    }
}
