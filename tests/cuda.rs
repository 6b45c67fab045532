//! The CUDA backend (`cargo test --features cuda`). Where CUDA is found: the parity matrix
//! of every fixture, with and without bad-pixel masking, passes on it (integer products
//! byte-identical to the CPU reference, floats within the contract's bounds), every product
//! kind of every dtype (float32, iDPC and the DPC rotation included), declining only what
//! the wgpu engine declines by design (moments past 64 bits), by name. Where it is not:
//! the backend says CUDA is absent and `stem4d product --backend cuda` fails with that
//! message, never a panic. `STEM4D_REQUIRE_CUDA=1` (the H200 machine) makes an absent CUDA
//! a failure. The kernels compile with NVRTC alone, for several architectures, wherever
//! NVRTC is found (`STEM4D_REQUIRE_NVRTC=1` in CI, which installs it from PyPI).
#![cfg(feature = "cuda")]

#[path = "common/mod.rs"]
mod common;

use common::*;
use stem4d::contract::Dtype;
use stem4d::cuda::{CudaEngine, CudaResident};
use stem4d::parity::{self, Outcome};
use stem4d::upload::memory::CudaHeld;

fn required() -> bool {
    std::env::var("STEM4D_REQUIRE_CUDA").is_ok_and(|v| v == "1")
}

/// The CUDA engine, or why there is none (a failure where `STEM4D_REQUIRE_CUDA=1` asks for
/// one).
fn cuda_engine() -> Result<CudaEngine, String> {
    CudaEngine::new().map_err(|e| {
        assert!(!required(), "STEM4D_REQUIRE_CUDA=1: {e}");
        e.to_string()
    })
}

#[test]
fn cuda_matches_the_reference_on_every_fixture_or_says_it_is_absent() {
    let engine = match cuda_engine() {
        Ok(e) => e,
        Err(said) => {
            assert!(said.contains("CUDA"), "{said}");
            eprintln!("SKIPPED: {said}");
            absent_cuda_is_said_by_the_cli();
            return;
        }
    };
    eprintln!("CUDA backend on {}", engine.line());
    let listed = stem4d::cuda::devices().unwrap();
    assert!(
        listed.contains(&engine.name),
        "{listed:?} lists {}",
        engine.name
    );
    let (mut checked, mut declined, mut floats) = (0, 0, 0);
    for fx in manifest()["fixtures"].as_array().unwrap() {
        let acq = open_fixture(fx);
        let name = fx["name"].as_str().unwrap_or("?");
        for masking in [false, true] {
            let requests = parity::matrix(&acq, masking).unwrap();
            for row in parity::run_cuda(&engine, &acq, &requests, CudaHeld::Raw) {
                let what = format!(
                    "{name} (masking {masking}): {} on {}",
                    row.product, row.backend
                );
                match &row.outcome {
                    Outcome::Pass => {
                        checked += 1;
                        floats += (acq.dtype == Dtype::F32) as usize;
                    }
                    Outcome::Declined(why) => {
                        // As the wgpu engine: moments that could pass 64 bits (u32 data),
                        // float32 spans too wide for 128-bit sums.
                        let expected = why.contains("64 bits") || why.contains("128-bit");
                        assert!(expected, "{what} declined: {why}");
                        declined += 1;
                    }
                    other => panic!("{what}: {other:?}"),
                }
            }
        }
    }
    eprintln!("CUDA: {checked} rows passed ({floats} of float32 data), {declined} declined");
    assert!(checked > 300, "only {checked} products checked on CUDA");
    assert!(
        floats > 20,
        "only {floats} float32 products checked on CUDA"
    );
}

/// The compressed resident (decision 0064): every fixture's products, with and without
/// bad-pixel masking, pass the parity matrix on it as they pass on the raw resident; the
/// integer fixtures are held compressed, float32 raw (said by name).
#[test]
fn cuda_compressed_matches_the_reference_on_every_fixture() {
    let Ok(engine) = cuda_engine() else {
        eprintln!("SKIPPED: CUDA is absent");
        return;
    };
    let (mut checked, mut compressed) = (0, 0);
    for fx in manifest()["fixtures"].as_array().unwrap() {
        let acq = open_fixture(fx);
        let name = fx["name"].as_str().unwrap_or("?");
        let res =
            CudaResident::upload_held(&engine, &acq, Default::default(), CudaHeld::Compressed)
                .unwrap();
        assert_eq!(res.is_compressed(), acq.dtype != Dtype::F32, "{name}");
        compressed += res.is_compressed() as usize;
        if !res.is_compressed() {
            assert!(res.held_words().contains("float32 is kept raw"), "{name}");
        }
        for masking in [false, true] {
            let requests = parity::matrix(&acq, masking).unwrap();
            for row in parity::run_cuda(&engine, &acq, &requests, CudaHeld::Compressed) {
                let what = format!("{name} (masking {masking}): {}", row.product);
                assert_eq!(row.backend, "cuda-compressed");
                match &row.outcome {
                    Outcome::Pass => checked += 1,
                    Outcome::Declined(why) => {
                        assert!(
                            why.contains("64 bits") || why.contains("128-bit"),
                            "{what}: {why}"
                        )
                    }
                    other => panic!("{what}: {other:?}"),
                }
            }
        }
    }
    eprintln!("CUDA compressed: {checked} rows passed, {compressed} fixtures held compressed");
    assert!(checked > 300, "only {checked} products checked");
    assert!(compressed > 5, "only {compressed} fixtures held compressed");
}

/// Acquisitions no fixture has (sectors of every width on odd shapes, u8/u16/u32; narrow
/// sectors with a hot and a dead pixel found after the upload), compressed from windows of
/// 1, 5 and 37 frames so that tiles span windows: every product of the matrix, with and
/// without masking, within the contract of the CPU reference, and every frame read back
/// equal to the raw resident's.
#[test]
fn cuda_compressed_equals_raw_on_every_width_and_window() {
    let Ok(engine) = cuda_engine() else {
        eprintln!("SKIPPED: CUDA is absent");
        return;
    };
    let mut checked = 0;
    let mut acqs = every_width(0x64);
    acqs.extend(narrow_with_bad_pixels(0x64));
    for (name, acq) in &acqs {
        for masking in [false, true] {
            let corr = stem4d::frames::Correction {
                mask_bad_pixels: masking,
                bin: 1,
            };
            let raw = CudaResident::upload(&engine, acq, corr).unwrap();
            for window in [1, 5, 37] {
                let what = format!("{name} (masking {masking}, windows of {window})");
                let res =
                    CudaResident::upload_compressed_in_windows(&engine, acq, corr, window).unwrap();
                assert!(res.is_compressed(), "{what}");
                assert_eq!(res.found_bad, raw.found_bad, "{what}");
                let n = acq.shape.frames();
                assert_eq!(
                    res.frames(&engine, 0, n).unwrap(),
                    raw.frames(&engine, 0, n).unwrap(),
                    "{what}: frames read back"
                );
                for r in parity::matrix(acq, masking).unwrap() {
                    let Ok(reference) = stem4d::cpu::compute(acq, &r.params, r.correction) else {
                        continue;
                    };
                    let got = if r.correction == corr {
                        stem4d::cuda::compute_resident(&engine, acq, &res, &r.params)
                    } else {
                        CudaResident::upload_compressed_in_windows(
                            &engine,
                            acq,
                            r.correction,
                            window,
                        )
                        .and_then(|b| stem4d::cuda::compute_resident(&engine, acq, &b, &r.params))
                    };
                    let got = match got {
                        Ok(g) => g,
                        Err(e) if e.is_gpu_unsupported() => continue,
                        Err(e) => panic!("{what}: {:?}: {e}", r.params.kind),
                    };
                    let verdict = stem4d::products::judge::judge(r.params.kind, &got, &reference);
                    assert!(
                        verdict.failure.is_none(),
                        "{what}: {:?}: {:?}",
                        r.params.kind,
                        verdict.failure
                    );
                    checked += 1;
                }
            }
        }
    }
    eprintln!("CUDA compressed from windows: {checked} products checked");
    assert!(checked > 400, "only {checked} products checked");
}

/// Without CUDA, a binary built with the backend refuses it by name and exits with an error.
fn absent_cuda_is_said_by_the_cli() {
    let fx = fixture_named("arina_u16");
    let out = std::env::temp_dir().join(format!("stem4d-cuda-absent-{}.npy", std::process::id()));
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_stem4d"))
        .args(["product", "--backend", "cuda", "--kind", "total", "--out"])
        .arg(&out)
        .args(fixture_paths(&fx))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{stderr}");
    assert!(
        stderr.contains("CUDA is not available on this machine"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out.exists());
    // `stem4d parity` lists the CUDA devices beside the adapters, here none and why.
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_stem4d"))
        .args(["parity", "--backends", "cpu"])
        .args(fixture_paths(&fx))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let listed = stdout
        .lines()
        .find(|l| l.starts_with("CUDA devices: none ("));
    assert!(
        listed.is_some_and(|l| l.contains("CUDA is not available on this machine")),
        "{stdout}"
    );
}

/// Corrupt bitshuffle/LZ4 chunks decoded on the CUDA device are refused with the file's name
/// and the problem, never a wrong image (C-DECODE-GPU); a good one is decoded there.
#[test]
fn cuda_decode_refuses_corrupt_chunks_by_name() {
    let engine = match cuda_engine() {
        Ok(e) => e,
        Err(said) => {
            eprintln!("SKIPPED: {said}");
            return;
        }
    };
    let good = open_fixture(&fixture_named("arina_u16"));
    let res = CudaResident::upload(&engine, &good, Default::default()).unwrap();
    assert!(
        res.decoded_on_gpu,
        "arina_u16 (bitshuffle+LZ4) decoded on the GPU"
    );
    corrupt_bslz4_refused(|_, acq| {
        CudaResident::upload(&engine, acq, Default::default()).map(drop)
    });
}

/// The kernels' entry points as the sources declare them: `extern "C" __global__ void NAME`,
/// a macro's `NAME_##T` taken for u16 (every sample-type macro is applied to u16).
fn entry_points() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wgsl");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "cu") {
            let text = std::fs::read_to_string(&path).unwrap();
            let key = "extern \"C\" __global__ void ";
            let mut at = 0;
            while let Some(i) = text[at..].find(key) {
                let start = at + i + key.len();
                let name: String = text[start..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '#')
                    .collect();
                names.push(name.replace("##T", "u16"));
                at = start;
            }
        }
    }
    names.sort();
    names
}

fn nvrtc_required() -> bool {
    std::env::var("STEM4D_REQUIRE_NVRTC").is_ok_and(|v| v == "1")
}

/// Every CUDA source compiles with NVRTC into one CUBIN for the architectures users run
/// (Turing, the oldest CUDA 13 targets, then Ada, Hopper and consumer Blackwell), and every
/// entry point is in it. NVRTC needs no driver and no device, so CI runs this with NVRTC
/// from PyPI (`STEM4D_REQUIRE_NVRTC=1`); elsewhere an absent NVRTC is said and skipped.
#[test]
fn the_kernels_compile_with_nvrtc_for_every_architecture() {
    let names = entry_points();
    assert!(names.len() >= 20, "{names:?}");
    for arch in [(7, 5), (8, 9), (9, 0), (12, 0)] {
        let cubin = match stem4d::cuda::compile_kernels(arch) {
            Ok(c) => c,
            Err(e) => {
                let said = e.to_string();
                assert!(!nvrtc_required(), "STEM4D_REQUIRE_NVRTC=1: {said}");
                assert!(said.contains("NVRTC (libnvrtc"), "{said}");
                eprintln!("SKIPPED: {said}");
                return;
            }
        };
        let symbols = String::from_utf8_lossy(&cubin);
        for name in &names {
            assert!(
                symbols.contains(name.as_str()),
                "sm_{}{}: {name} is not in the CUBIN",
                arch.0,
                arch.1
            );
        }
    }
}
