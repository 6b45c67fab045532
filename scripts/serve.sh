#!/usr/bin/env bash
# Build the viewer (Trunk, release, offline) and serve it on 127.0.0.1; prints the URL.
# Installs what it needs first (scripts/setup.sh). PORT=8080 by default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="${XDG_DATA_HOME:-$HOME/.local/share}/webtools/bin:$PATH"
PORT="${PORT:-8080}"
trunk build --release
echo
echo "stem4d viewer: http://127.0.0.1:${PORT}/  (Chrome/Edge with WebGPU; Ctrl-C stops)"
exec python3 -m http.server "$PORT" --bind 127.0.0.1 --directory dist
