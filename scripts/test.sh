#!/usr/bin/env bash
# The project's whole test suite, as README says and CI runs: installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
export PATH="${XDG_DATA_HOME:-$HOME/.local/share}/webtools/bin:$PATH"
# lavapipe (software Vulkan) runs the WGSL tests; a private runtime dir keeps WSI quiet.
XDG_RUNTIME_DIR=$(mktemp -d)
chmod 700 "$XDG_RUNTIME_DIR"
export XDG_RUNTIME_DIR
# CI has lavapipe: a missing adapter must fail the GPU parity tests, not skip them.
export STEM4D_REQUIRE_GPU=1

step() { printf '\n== %s\n' "$*"; }
step "cargo fmt --check"
cargo fmt --check
cargo fmt --check --manifest-path python/Cargo.toml
step "cargo clippy --all-targets -D warnings"
cargo clippy --all-targets -- -D warnings
step "BENCHMARKS.md is what benchmarks/*.json render"
python3 scripts/benchmarks_md.py --check
step "cargo test"
cargo test
step "the CUDA backend built in (cudarc loads CUDA at run time: here it says CUDA is absent)"
cargo clippy --all-targets --features cuda -- -D warnings
# NVRTC (the CUDA toolkit's run-time compiler, from PyPI) needs no GPU: with it the kernels
# are compiled for several architectures; the driver stays absent, so the rest says so.
python3 -m venv --system-site-packages .venv
.venv/bin/python -m pip install -q --disable-pip-version-check "nvidia-cuda-nvrtc>=13,<14"
NVRTC_LIB="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')/nvidia/cu13/lib"
LD_LIBRARY_PATH="$NVRTC_LIB" STEM4D_REQUIRE_NVRTC=1 cargo test --features cuda --test cuda
cargo test --features cuda --lib cuda::
step "the Python package: pip install of the repository, then pytest"
# A venv that sees the setup's numpy; pip builds the engine with maturin (from PyPI).
# dask and distributed pinned to one release: unpinned, a dask release that distributed
# has not followed yet made pip take a distributed of 2021 that cannot import it.
python3 -m venv --system-site-packages .venv
.venv/bin/python -m pip install -q --disable-pip-version-check . pytest "dask[array]==2026.8.0" "distributed==2026.8.0"
cargo build --bin stem4d
.venv/bin/python -m pytest -q python/tests
step "wasm32-unknown-unknown build of the library"
cargo clippy --lib --target wasm32-unknown-unknown -- -D warnings
step "the kernels in headless Chromium's WebGPU (wasm-bindgen-test, SwiftShader)"
# SwiftShader builds every pipeline per engine: the runner's default 20 s is too close.
WASM_BINDGEN_TEST_TIMEOUT=400 CHROMEDRIVER=/usr/bin/chromedriver cargo test --target wasm32-unknown-unknown --test web_kernels
step "viewer build (trunk build --release)"
trunk build --release
step "browser end-to-end tests (Chromium + SwiftShader WebGPU, headed under Xvfb)"
# The screen holds the largest window the suite opens (layout goldens at 1920×1080).
xvfb-run -a -s "-screen 0 1920x1080x24" node e2e/run.mjs
