#!/usr/bin/env bash
# On the H200 machine (see ../shared/setup/device-vulkan.md), from the project root, with the
# stripped release binary in .device/stem4d and the Vulkan libraries in .device/lib:
#   bash scripts/device_native.sh OUTDIR        (FILES=0: without the on-disk file benchmarks)
# Runs `stem4d parity` on integer and float fixtures and a GPU-generated synthetic acquisition,
# then `stem4d bench gpu` / `bench viewer` on a 512×512×192×192 uint16 synthetic acquisition
# (made on the GPU, then as bslz4 chunks, then as an HDF5 file on disk).
set -uo pipefail
OUT=${1:?usage: device_native.sh OUTDIR}
export LD_LIBRARY_PATH=$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
S=.device/stem4d
D=tests/fixtures/data
mkdir -p "$OUT/parity"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
run() { echo "\$ $*"; timeout 240 "$@"; echo "exit $?"; }
{
  run $S parity --backends cpu,vulkan --json "$OUT/parity/01.json" $D/arina_u16_master.h5 $D/arina_u16_data_000001.h5 $D/arina_u16_data_000002.h5 $D/arina_u16.h5 --mask-bad-pixels
  run $S parity --backends cpu,vulkan --json "$OUT/parity/02.json" $D/arina_u8_master.h5 $D/arina_u8_data_000001.h5 --scan-shape 4,6
  run $S parity --backends cpu,vulkan --json "$OUT/parity/03.json" $D/arina_u32_master.h5 $D/arina_u32_data_000001.h5 $D/arina_u32.h5
  run $S parity --backends cpu,vulkan --json "$OUT/parity/04.json" $D/gzip_stack_u16.h5
  run $S parity --backends cpu,vulkan --json "$OUT/parity/05.json" $D/lz4_stack_u16.h5 --scan-shape 6,4
  run $S parity --backends cpu,vulkan --json "$OUT/parity/06.json" $D/contiguous_f32_4d.h5
  run $S parity --backends cpu,vulkan --json "$OUT/parity/07.json" $D/emd_f32.h5
  run $S parity --backends cpu,vulkan --json "$OUT/parity/08.json" $D/emd_f32.h5 --mask-bad-pixels
  run $S parity --backends cpu,vulkan --json "$OUT/parity/09.json" --synthetic 96,80,192,192
} > "$OUT/parity.txt" 2>&1
# One JSON of every matrix (benchmarks/parity.json keeps it).
python3 -c 'import glob, json, sys; json.dump([json.load(open(p)) for p in sorted(glob.glob(sys.argv[1] + "/parity/*.json"))], open(sys.argv[1] + "/parity.json", "w"), indent=1)' "$OUT"
# Registers and workgroup memory per kernel, as the driver compiled them.
run $S bench kernel-stats > "$OUT/kernel_stats.txt" 2>&1
run $S bench gpu --synthetic 512,512,192,192 --reps 20 --json "$OUT/bench_gpu.json" > "$OUT/bench_gpu.txt" 2>&1
# What a user would write instead (CuPy, PyTorch) on the same acquisition, beside stem4d's
# kernel times: first the peers' generator and detectors checked against stem4d's.
{ run python3 benchmarks/peers.py --shape 64,48,192,192 --xp cupy,torch --reps 3 --check $S &&
  run python3 benchmarks/peers.py --shape 512,512,192,192 --xp cupy,torch --reps 10 \
    --stem4d-json "$OUT/bench_gpu.json" --json "$OUT/peers.json" --commit "$(git rev-parse --short HEAD 2>/dev/null)"; } > "$OUT/peers.txt" 2>&1
# The viewer's interactions (the page's session code) natively, for the in-page figures.
run $S bench viewer --synthetic 512,512,192,192 --reps 30 --json "$OUT/bench_viewer.json" > "$OUT/bench_viewer.txt" 2>&1
run $S bench viewer --synthetic 512,512,192,192 --reps 30 --no-subgroups --json "$OUT/bench_viewer_nosub.json" > "$OUT/bench_viewer_nosub.txt" 2>&1
# The same acquisition held as bslz4 chunks (encoded on the host's cores): GPU decode figures.
run $S bench gpu --synthetic 512,512,192,192 --compressed --reps 20 --json "$OUT/bench_gpu_compressed.json" > "$OUT/bench_gpu_compressed.txt" 2>&1
# The same acquisition as a real bslz4 HDF5 file (the project's encoder + h5py, when present):
# load from a local file, natively. e2e/h200.py LOCAL_FILE=/tmp/syn.h5 times it in Chromium.
if [ "${FILES:-1}" != 0 ] && python3 -c "import h5py" 2>/dev/null; then
  { run $S bench export-chunks --synthetic 512,512,192,192 --compressed --out /tmp/syn &&
    run python3 scripts/synthetic_h5.py /tmp/syn /tmp/syn.h5 512 512 192 192 &&
    rm -f /tmp/syn.chunks &&
    run $S bench gpu /tmp/syn.h5 --reps 5; } > "$OUT/bench_file.txt" 2>&1
  # A shuffle+deflate file: the CPU inflate path (native threads here, decode Workers in
  # the page: e2e/h200.py LOCAL_FILE=/tmp/syn.h5,/tmp/gz.h5).
  { run python3 scripts/deflate_h5.py /tmp/gz.h5 128 128 192 192 &&
    run $S bench gpu /tmp/gz.h5 --reps 3; } > "$OUT/bench_deflate.txt" 2>&1
fi
cat "$OUT/kernel_stats.txt" "$OUT/bench_gpu.txt" "$OUT/bench_viewer.txt" "$OUT/bench_gpu_compressed.txt"
[ -f "$OUT/bench_file.txt" ] && head -12 "$OUT/bench_file.txt"
[ -f "$OUT/bench_deflate.txt" ] && head -12 "$OUT/bench_deflate.txt"
grep -E "PASS|FAIL|exit" "$OUT/parity.txt" | sort | uniq -c | sort -rn | head -20
