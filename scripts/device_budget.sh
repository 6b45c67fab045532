#!/usr/bin/env bash
# On the H200 machine (as scripts/device_native.sh): the 512×512×192×192 uint16 benchmark
# acquisition as a bslz4 HDF5 file on local disk, then `stem4d bench gpu --memory-budget`
# at 8 GiB and 2 GiB (a streaming pass of six products together) and without a budget.
#   bash scripts/device_budget.sh OUTDIR
set -uo pipefail
OUT=${1:?usage: device_budget.sh OUTDIR}
export LD_LIBRARY_PATH=$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
S=.device/stem4d
run() { echo "\$ $*"; timeout 280 "$@"; echo "exit $?"; }
{
  run $S bench export-chunks --synthetic 512,512,192,192 --compressed --out /tmp/syn &&
  run python3 scripts/synthetic_h5.py /tmp/syn /tmp/syn.h5 512 512 192 192 &&
  rm -f /tmp/syn.chunks
  ls -l /tmp/syn.h5
  # The whole file loaded as a resident (from the page cache: it was just written).
  run $S bench gpu /tmp/syn.h5 --reps 3 --json "$OUT/load.json"
  for b in 8GiB 2GiB 256MiB; do
    run $S info /tmp/syn.h5 --memory-budget $b
    run $S bench gpu /tmp/syn.h5 --reps 3 --memory-budget $b --json "$OUT/stream_$b.json"
  done
} > "$OUT/budget.txt" 2>&1
cat "$OUT/budget.txt" | grep -v "^  chunk" | tail -60
