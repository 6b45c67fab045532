#!/usr/bin/env bash
# On the lent machine (as scripts/device_native.sh; .device/stem4d built with
# `--features cuda`, .device/lib and, for parity, .device/shared_data carried): the figures
# the open issues still need from an H200, in one call where the lease allows.
#   kept    — the packed prepared file reopened kept packed, twice (#33: ≤ 0.5 s natively);
#   load    — the 5.6 GB bslz4 benchmark file loaded from the page cache, twice (#30: ≤ 1.0 s);
#   kernels — the products on the compressed resident (#30: BF ≤ 0.5, ADF ≤ 2.5, CoM ≤ 4.9 ms);
#   parity  — the CPU/Vulkan/CUDA parity matrix (#31), through scripts/device_cuda.sh.
#   COMMIT=<rev> bash scripts/device_h200_open.sh OUTDIR [STEP...]   (default: every step)
set -uo pipefail
OUT=${1:?usage: device_h200_open.sh OUTDIR [STEP...]}
shift
export LD_LIBRARY_PATH=$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
S=.device/stem4d
. scripts/device_common.sh
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
[ $# -gt 0 ] || set -- kept load kernels parity
for step in "$@"; do
  case $step in
    kept)
      [ -s /tmp/p.stem4d ] || run $S prepare --synthetic 512,512,192,192 --out /tmp/p.stem4d | tail -1
      for i in 1 2; do
        run $S bench gpu /tmp/p.stem4d --memory-plan compressed --reps 2 --json "$OUT/kept$i.json" |
          grep -E "stage|waits|check|SHA|GPU:|peak|exit"
      done ;;
    load)
      make_file 512,512,192,192 u16 /tmp/syn.h5 > /dev/null
      for i in 1 2; do
        run $S bench gpu /tmp/syn.h5 --reps 3 --json "$OUT/load$i.json" | grep -E "stage|GPU:|peak|exit"
      done ;;
    kernels)
      run $S bench gpu --synthetic 512,512,192,192 --memory-plan compressed --reps 10 \
        --json "$OUT/compressed.json" | grep -E "kernel|exit" ;;
    parity)
      COMMIT=${COMMIT:-unknown} bash scripts/device_cuda.sh "$OUT" parity | tail -5 ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
  echo "$step done after $(( $(date +%s) - T0 )) s"
done
