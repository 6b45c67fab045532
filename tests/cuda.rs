//! The CUDA backend (`cargo test --features cuda`). Where CUDA is found: the parity matrix
//! of every fixture, with and without bad-pixel masking, passes on it (integer products
//! byte-identical to the CPU reference, floats within the contract's bounds), and what it
//! declines is only float32 data, iDPC and the DPC rotation, each by name. Where it is not:
//! the backend says CUDA is absent and `stem4d product --backend cuda` fails with that
//! message, never a panic. `STEM4D_REQUIRE_CUDA=1` (the H200 machine) makes an absent CUDA
//! a failure.
#![cfg(feature = "cuda")]

#[path = "common/mod.rs"]
mod common;

use common::*;
use stem4d::contract::Dtype;
use stem4d::cuda::CudaEngine;
use stem4d::parity::{self, Outcome};

fn required() -> bool {
    std::env::var("STEM4D_REQUIRE_CUDA").is_ok_and(|v| v == "1")
}

#[test]
fn cuda_matches_the_reference_on_every_fixture_or_says_it_is_absent() {
    let engine = match CudaEngine::new() {
        Ok(e) => e,
        Err(e) if required() => panic!("STEM4D_REQUIRE_CUDA=1: {e}"),
        Err(e) => {
            let said = e.to_string();
            assert!(said.contains("CUDA"), "{said}");
            eprintln!("SKIPPED: {said}");
            absent_cuda_is_said_by_the_cli();
            return;
        }
    };
    eprintln!("CUDA backend on {}", engine.line());
    let mut checked = 0;
    for fx in manifest()["fixtures"].as_array().unwrap() {
        let acq = open_fixture(fx);
        let name = fx["name"].as_str().unwrap_or("?");
        for masking in [false, true] {
            let requests = parity::matrix(&acq, masking).unwrap();
            for row in parity::run_cuda(&engine, &acq, &requests) {
                let what = format!(
                    "{name} (masking {masking}): {} on {}",
                    row.product, row.backend
                );
                match &row.outcome {
                    Outcome::Pass => checked += 1,
                    Outcome::Declined(why) => {
                        let expected = acq.dtype == Dtype::F32
                            || row.product.starts_with("idpc")
                            || row.product.starts_with("dpc-rotation")
                            || why.contains("64 bits");
                        assert!(expected, "{what} declined: {why}");
                    }
                    other => panic!("{what}: {other:?}"),
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} products checked on CUDA");
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
}
