#!/usr/bin/env bash
# Installs everything the project's builds and tests need, idempotently (Debian 12, amd64):
# the Rust wasm target, wasm-bindgen-cli, Trunk, wasm-opt, Chromium + chromedriver, Xvfb,
# playwright-core, lavapipe (scripts/toolchain.sh, a copy of the tested shared recipe), the
# Rust lint components, and the Python packages of the fixture and benchmark scripts.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

if grep -q '^name = "wasm-bindgen"$' Cargo.lock 2>/dev/null; then
  export CARGO_LOCK="$PWD/Cargo.lock"
fi
bash scripts/toolchain.sh

# A plain `trunk build --release` (README) must find wasm-opt 132 beside trunk and
# wasm-bindgen in cargo's bin folder, which rustup puts on PATH.
CARGO_BIN="${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}/bin"
WEBTOOLS_BIN="${WEBTOOLS_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/webtools}/bin"
if [ -x "$WEBTOOLS_BIN/wasm-opt" ] && [ -d "$CARGO_BIN" ]; then
  ln -sfn "$WEBTOOLS_BIN/wasm-opt" "$CARGO_BIN/wasm-opt"
fi

for c in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
done

# h5py + hdf5plugin write the fixtures and run the reference decode benchmark.
if ! python3 -c 'import h5py, hdf5plugin, numpy' 2>/dev/null; then
  log "pip install h5py hdf5plugin numpy"
  python3 -m pip install -q --disable-pip-version-check "h5py==3.16.0" "hdf5plugin==7.1.0" "numpy==2.4.6"
fi
log "done"
