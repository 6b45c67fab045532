#!/usr/bin/env bash
# On the H200 machine (as scripts/device_native.sh): the Dask benchmark,
# benchmarks/dask_bench.py, with the stem4d wheel and dask's wheels (for the machine's
# Python) unpacked into .device/pylib, since the machine has no network:
#   bash scripts/device_dask.sh OUTDIR COMMIT
# Eight 128×128×192×192 uint16 bslz4 files and one 256×256×192×192 file are made there.
set -uo pipefail
OUT=${1:?usage: device_dask.sh OUTDIR COMMIT}
COMMIT=${2:?usage: device_dask.sh OUTDIR COMMIT}
export LD_LIBRARY_PATH=$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$PWD/.device/pylib${PYTHONPATH:+:$PYTHONPATH}
S=.device/stem4d
mkdir -p /tmp/dk
make() {  # make PREFIX R C: a synthetic acquisition as a bslz4 HDF5 file
  $S bench export-chunks --synthetic "$2,$3,192,192" --compressed --out "/tmp/dk/$1" &&
    python3 scripts/synthetic_h5.py "/tmp/dk/$1" "/tmp/dk/$1.h5" "$2" "$3" 192 192 &&
    rm -f "/tmp/dk/$1.chunks"
}
{
  [ -s /tmp/dk/acq_0.h5 ] || make acq_0 128 128
  for i in 1 2 3 4 5 6 7; do [ -s /tmp/dk/acq_$i.h5 ] || cp /tmp/dk/acq_0.h5 /tmp/dk/acq_$i.h5; done
  [ -s /tmp/dk/big.h5 ] || make big 256 256
  ls -l /tmp/dk/*.h5
  timeout 420 python3 benchmarks/dask_bench.py --many '/tmp/dk/acq_*.h5' --big /tmp/dk/big.h5 \
    --kind bf --workers 4,8 --backend wgpu --reps 3 --rows-per-task 32 --json "$OUT/dask.json" \
    --machine "NVIDIA H200 machine: 16 cores, one GPU shared by the workers (Vulkan)" --commit "$COMMIT"
  echo "exit $?"
} > "$OUT/dask.txt" 2>&1
cat "$OUT/dask.txt"
