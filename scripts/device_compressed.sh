#!/usr/bin/env bash
# On the H200 machine (as scripts/device_native.sh): the 512×512×192×192 uint16 benchmark
# acquisition as a bslz4 HDF5 file on local disk (made once per machine), then the
# compressed resident's ratio and kernel times, and the plans budgets of 8 and 2 GiB take.
#   bash scripts/device_compressed.sh OUTDIR [STEP...]   (steps: plan 8GiB 2GiB viewer viewer2)
set -uo pipefail
OUT=${1:?usage: device_compressed.sh OUTDIR [STEP...]}
shift
export LD_LIBRARY_PATH=$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
S=.device/stem4d
run() { echo "\$ $*"; timeout 280 "$@"; echo "exit $?"; }
{
  if [ ! -s /tmp/syn.h5 ]; then
    run $S bench export-chunks --synthetic 512,512,192,192 --compressed --out /tmp/syn &&
    run python3 scripts/synthetic_h5.py /tmp/syn /tmp/syn.h5 512 512 192 192
    rm -f /tmp/syn.chunks
  fi
  ls -l /tmp/syn.h5
  [ $# -gt 0 ] || set -- plan 8GiB
  for step in "$@"; do
    case $step in
      plan) run $S bench gpu /tmp/syn.h5 --reps 5 --memory-plan compressed --json "$OUT/compressed.json" ;;
      viewer) run $S bench viewer /tmp/syn.h5 --reps 5 --memory-budget 8GiB --json "$OUT/viewer_8GiB.json" ;;
      # A streamed session: detectors resized about the BF centre from its ring sums.
      viewer2) run $S bench viewer /tmp/syn.h5 --reps 10 --memory-budget 2GiB --json "$OUT/viewer_2GiB.json" ;;
      *) run $S bench gpu /tmp/syn.h5 --reps 5 --memory-budget "$step" --json "$OUT/budget_$step.json" ;;
    esac
  done
} > "$OUT/compressed_$(date +%s).txt" 2>&1
cat "$OUT"/compressed_*.txt | grep -v "^  chunk" | tail -80
