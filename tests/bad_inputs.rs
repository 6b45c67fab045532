//! Every malformed input of `tests/fixtures/bad/manifest.json` (written by
//! `tests/fixtures/make_bad_inputs.py`) fails with a one-line error that names the file and
//! says what is wrong — never a panic, never an allocation by a lying header's size. Among
//! them: scan shapes missing or wrong (C-SCAN), chunks past the end of the file and linked
//! files missing (C-INCOMPLETE).

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use stem4d::frames::Correction;

use common::*;
use serde_json::Value;
use stem4d::products::{ProductKind, ProductParams};

fn bad_manifest() -> Value {
    let path = fixtures().join("bad/manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("bad/manifest.json parses")
}

/// Open the case's files and force a full decode; the first error, if any.
fn first_error(paths: &[PathBuf], scan_shape: Option<[usize; 2]>) -> Option<stem4d::Error> {
    let acq = match open_paths(paths, scan_shape, None) {
        Ok(a) => a,
        Err(e) => return Some(e),
    };
    stem4d::cpu::compute(
        &acq,
        &ProductParams::new(ProductKind::SumDp),
        Correction::default(),
    )
    .err()
}

fn check_case(case: &Value) -> Result<String, String> {
    let name = case["name"].as_str().ok_or("case without a name")?;
    let expect = case["expect"]
        .as_str()
        .ok_or("case without expect")?
        .to_lowercase();
    let files: Vec<String> = case["files"]
        .as_array()
        .ok_or("case without files")?
        .iter()
        .map(|f| f.as_str().map(str::to_string).ok_or("file is not a string"))
        .collect::<Result<_, _>>()?;
    let paths: Vec<PathBuf> = files
        .iter()
        .map(|f| fixtures().join("bad").join(f))
        .collect();
    let scan_shape = usize2(&case["scan_shape"]);
    let err = catch_unwind(AssertUnwindSafe(|| first_error(&paths, scan_shape)))
        .map_err(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            format!("panicked: {msg}")
        })?
        .ok_or("opened and decoded without an error")?;
    let msg = err.to_string();
    if msg.contains('\n') {
        return Err(format!("message is not one line: {msg:?}"));
    }
    let lower = msg.to_lowercase();
    if !lower.contains(&expect) {
        return Err(format!("message does not contain {expect:?}: {msg}"));
    }
    // Every message names one of the case's files (base name, as the reader shows it).
    let names_a_file = files.iter().any(|f| {
        let base = f.rsplit('/').next().unwrap_or(f).to_lowercase();
        lower.contains(&base)
    });
    if !names_a_file {
        return Err(format!("message names none of {files:?}: {msg}"));
    }
    Ok(format!("{name}: {msg}"))
}

#[test]
fn every_bad_input_fails_with_a_clear_message() {
    let manifest = bad_manifest();
    let cases = manifest["cases"].as_array().expect("cases");
    assert!(!cases.is_empty(), "no cases in bad/manifest.json");
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap_or("?");
        match check_case(case) {
            Ok(line) => eprintln!("ok   {line}"),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} bad inputs failed:\n  {}",
        failures.len(),
        cases.len(),
        failures.join("\n  ")
    );
}

/// A chunk index may claim a stored size that lies inside the file yet is more than any
/// supported filter writes for the chunk: the open refuses it by name, before a read of that
/// size (the browser would read it into one buffer, the CPU into memory).
#[test]
fn a_stored_size_no_filter_writes_is_refused_at_open() {
    use std::sync::Arc;
    use stem4d::source::{ByteSource, FileSet, MemSource};
    let data_name = "arina_u8_data_000001.h5";
    let read = |n: &str| std::fs::read(fixtures().join("data").join(n)).expect("fixture");
    let (master, mut data) = (read("arina_u8_master.h5"), read(data_name));
    let open = |data: &[u8]| {
        let sources: Vec<Arc<dyn ByteSource>> = vec![
            Arc::new(MemSource::new("arina_u8_master.h5", master.clone())),
            Arc::new(MemSource::new(data_name, data.to_vec())),
        ];
        let opts = stem4d::formats::OpenOptions {
            scan_shape: Some([4, 6]),
            dataset: None,
        };
        stem4d::formats::Acquisition::open(FileSet::new(sources).expect("files"), &opts)
    };
    let acq = open(&data).expect("the fixture opens");
    let stem4d::formats::PartKind::Hdf5(ix) = &acq.parts[0].kind else {
        panic!("an HDF5 part");
    };
    let chunk = ix.chunks[0].clone();
    let logical = 9 * 14;
    // Room in the file for the lie: its chunk still ends before the end of the file.
    data.resize(data.len() + 16 * 1024, 0);
    let claim = stem4d::hdf5_index::max_stored_bytes(logical) + 1;
    assert!(chunk.offset + claim <= data.len() as u64);
    // The chunk's B-tree key: stored size, filter mask, offsets (rank + 1), child address.
    let mut key = (chunk.size as u32).to_le_bytes().to_vec();
    key.extend_from_slice(&0u32.to_le_bytes());
    key.extend_from_slice(&[0u8; 32]);
    key.extend_from_slice(&chunk.offset.to_le_bytes());
    let at: Vec<usize> = (0..data.len() - key.len())
        .filter(|&i| data[i..i + key.len()] == key[..])
        .collect();
    assert_eq!(at.len(), 1, "chunk 0's key once in the file");
    data[at[0]..at[0] + 4].copy_from_slice(&(claim as u32).to_le_bytes());
    let msg = open(&data)
        .err()
        .expect("a lying stored size is refused")
        .to_string();
    assert!(
        msg.contains(data_name) && msg.contains("corrupt chunk index"),
        "{msg}"
    );
    // Exactly at the bound it opens (and fails later, on what the chunk holds).
    data[at[0]..at[0] + 4].copy_from_slice(&((claim - 1) as u32).to_le_bytes());
    assert!(open(&data).is_ok());
}
