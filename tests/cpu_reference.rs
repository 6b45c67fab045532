//! The CPU reference against numpy float64 references computed from files written by the
//! real encoders (h5py + hdf5plugin): every product of every fixture, and the decoded
//! arrays byte for byte.
//!
//! `every_product_matches_numpy` proves, against numpy's own implementation of each rule:
//! C-MASK, C-REDUCE, C-BIN, C-COM, C-DPC, C-IDPC (every product); C-BAD and C-BAD-FOUND (with
//! and without masking); C-BIN-COMPOSE (products of binned frames); C-DPC-MEAN (fixtures with
//! all-zero frames); C-FIT (`fit-bf`); C-FLOAT-CPU (float sums, and `mean-dp-f32` bit for
//! bit: C-BOUND-FLOAT-MEAN); C-DTYPE (the reference's dtypes).

mod common;

use common::*;
use stem4d::cpu;
use stem4d::frames::FrameReader;
use stem4d::products::ArrayData;

/// The logical shape `[Rr, Rc, Kr, Kc]` and dtype of every fixture, and its samples (C-AXES).
#[test]
fn decoded_arrays_match_h5py_byte_for_byte() {
    for fx in manifest()["fixtures"].as_array().unwrap() {
        let name = fx["name"].as_str().unwrap();
        let acq = open_fixture(fx);
        let shape: Vec<usize> = fx["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(acq.shape.as_array().to_vec(), shape, "{name}: shape");
        assert_eq!(
            acq.dtype.name(),
            fx["dtype"].as_str().unwrap(),
            "{name}: dtype"
        );
        let want = read_npy(&fixtures().join(format!("ref/{name}/decoded.npy")));
        let raw = FrameReader::new(&acq)
            .read_raw(0, acq.shape.frames())
            .unwrap();
        let want_bytes: Vec<u8> = match &want.data {
            ArrayData::U8(v) => v.clone(),
            ArrayData::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ArrayData::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ArrayData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            other => panic!("{name}: unexpected decoded dtype {}", other.dtype_name()),
        };
        assert!(raw == want_bytes, "{name}: decoded bytes differ from h5py");
    }
}

#[test]
fn every_product_matches_numpy() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for fx in manifest()["fixtures"].as_array().unwrap() {
        let name = fx["name"].as_str().unwrap();
        let acq = open_fixture(fx);
        for p in fx["products"].as_array().unwrap() {
            let kind = p["kind"].as_str().unwrap();
            let reference = p["ref"].as_str().unwrap();
            let (params, corr) = params(kind, &p["params"]);
            let what = format!("{name} {reference}");
            let got = match cpu::compute(&acq, &params, corr) {
                Ok(g) => g,
                Err(e) => {
                    failures.push(format!("{what}: {e}"));
                    continue;
                }
            };
            let want = read_npy(&fixtures().join(reference));
            if let Err(e) = against_numpy(&what, kind, &got, &want) {
                failures.push(e);
            }
            checked += 1;
        }
    }
    assert!(checked > 300, "only {checked} products checked");
    assert!(
        failures.is_empty(),
        "{} of {checked} products differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The metadata C-AXES asks for, whatever the storage layout.
#[test]
fn info_reports_what_the_files_hold() {
    for fx in manifest()["fixtures"].as_array().unwrap() {
        let name = fx["name"].as_str().unwrap();
        let acq = open_fixture(fx);
        let info = stem4d::formats::info::Info::of(&acq, false);
        let json = serde_json::to_value(&info).unwrap();
        for key in INFO_KEYS {
            assert!(json.get(key).is_some(), "{name}: info lacks {key}");
        }
        let filters: Vec<&str> = json["filters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let mut want: Vec<&str> = fx["filters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let mut got = filters.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{name}: filters");
        assert_eq!(
            json["chunk_shape"], fx["chunk_shape"],
            "{name}: chunk shape"
        );
        assert_eq!(json["format"], fx["format"], "{name}: format");
    }
}
