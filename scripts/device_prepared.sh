#!/usr/bin/env bash
# On the H200 machine (as scripts/device_native.sh), after device_compressed.sh made
# /tmp/syn.h5: the benchmark acquisition prepared (`stem4d prepare`, decision 0037), then
# its reopen from the page cache, natively.
#   bash scripts/device_prepared.sh OUTDIR
set -uo pipefail
OUT=${1:?usage: device_prepared.sh OUTDIR}
export LD_LIBRARY_PATH=$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
S=.device/stem4d
run() { echo "\$ $*"; timeout 280 "$@"; echo "exit $?"; }
{
  ls -l /tmp/syn.h5
  [ -s /tmp/syn.stem4d ] || run $S prepare /tmp/syn.h5 --out /tmp/syn.stem4d
  ls -l /tmp/syn.stem4d
  run $S bench gpu /tmp/syn.stem4d --reps 5 --json "$OUT/prepared_gpu.json"
  run $S bench viewer /tmp/syn.stem4d --reps 5 --json "$OUT/prepared_viewer.json"
} > "$OUT/prepared.txt" 2>&1
grep -v "^  chunk" "$OUT/prepared.txt" | head -60
