#!/usr/bin/env bash
# On the H200 machine (as scripts/device_native.sh), with .device/stem4d built with
# `--features cuda`. Steps (default: parity bench):
#   tests  — tests/cuda.rs built here (`cargo test --release --features cuda --test cuda
#            --no-run`, stripped to .device/cuda_tests), run with STEM4D_REQUIRE_CUDA=1;
#   parity — the parity matrix of every fixture on CPU, Vulkan (wgpu), CUDA and CUDA's
#            compressed resident, with and without bad-pixel masking, merged into
#            OUTDIR/parity-cuda.json (the fixtures of ../shared/data where
#            .device/shared_data holds a copy of them);
#   bench  — the 512×512×192×192 uint16 benchmark file (made as device_compressed.sh makes
#            it): CUDA's upload and kernel times, raw and compressed, and Vulkan's beside
#            them in the same run;
#   u8     — the 1024×1024×192×192 uint8 file resident in CUDA and in Vulkan, timed alike;
#   python — the Python package's CUDA tests (python/tests/test_stem4d.py -k cuda), with the
#            wheel and pytest unpacked into .device/pylib;
#   peers  — benchmarks/peers.py (CuPy, PyTorch) beside the bench step's WGSL and CUDA times.
#   [S=BINARY] bash scripts/device_cuda.sh OUTDIR [STEP...]   (S: .device/stem4d by default)
set -uo pipefail
OUT=${1:?usage: device_cuda.sh OUTDIR [STEP...]}
shift
export LD_LIBRARY_PATH=$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# NVRTC from the CUDA toolkit, wherever this machine keeps it.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  if compgen -G "$d/libnvrtc.so*" >/dev/null; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; fi
done
S=${S:-.device/stem4d}
# The shared fixtures (../shared/data), where a copy was carried.
if [ -d .device/shared_data ] && [ ! -d ../shared/data ]; then
  mkdir -p ../shared && cp -r .device/shared_data ../shared/data
fi
. scripts/device_common.sh
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  [ $# -gt 0 ] || set -- parity bench
  for step in "$@"; do
    case $step in
      tests)
        # The tests find the repository where it was built (CARGO_MANIFEST_DIR).
        here=$(cd "$(dirname "$0")/.." && pwd)
        built=${CUDA_TESTS_ROOT:-/work/main}
        [ -e "$built" ] || { mkdir -p "$(dirname "$built")" && ln -s "$here" "$built"; }
        echo "\$ .device/cuda_tests"
        STEM4D_REQUIRE_CUDA=1 timeout 450 .device/cuda_tests --test-threads 1 --nocapture 2>&1 |
          grep -E "^test |result|CUDA|panicked|assert"
        echo "exit ${PIPESTATUS[0]}"
        ;;
      parity)
        python3 - <<'PY' > /tmp/fixture_args.txt
import json
m = json.load(open('tests/fixtures/manifest.json'))
import os
for f in m['fixtures']:
    base = 'tests/fixtures/data' if f.get('root') != 'shared' else '../shared/data'
    if not os.path.isdir(base):
        continue
    args = [f"{base}/{x}" for x in f['files']]
    if f.get('scan_shape'): args += ['--scan-shape', ','.join(map(str, f['scan_shape']))]
    if f.get('dataset'): args += ['--dataset', f['dataset']]
    print(f['name'] + '\t' + ' '.join(args))
PY
        mkdir -p /tmp/parity
        while IFS=$'\t' read -r name args; do
          for mask in "" "--mask-bad-pixels"; do
            # shellcheck disable=SC2086
            run $S parity --backends cpu,vulkan,cuda,cuda-compressed $mask --json "/tmp/parity/${name}${mask:+_masked}.json" $args |
              grep -E "FAIL|exit|unavailable"
          done
        done < /tmp/fixture_args.txt
        # Synthetic acquisitions whose frames are a multiple of 16 bytes: the kernels' 16-byte
        # loads (u16; u8 with a detector row shorter than a load, and longer).
        k=0
        for syn in "24,20,32,48" "20,12,8,8 --synthetic-dtype u8" "9,7,16,24 --synthetic-dtype u8"; do
          for mask in "" "--mask-bad-pixels"; do
            k=$((k + 1))
            # shellcheck disable=SC2086
            run $S parity --backends cpu,vulkan,cuda,cuda-compressed $mask --json "/tmp/parity/synthetic_$k.json" --synthetic $syn --compressed |
              grep -E "FAIL|exit|unavailable"
          done
        done
        python3 - "$OUT/parity-cuda.json" <<'PY'
import glob, json, sys
runs = [json.load(open(p)) for p in sorted(glob.glob('/tmp/parity/*.json'))]
rows = [r for run in runs for r in run['rows']]
def outcomes(b):
    seen = {}
    for r in rows:
        if r['backend'] == b:
            seen[r['outcome']['is']] = seen.get(r['outcome']['is'], 0) + 1
    return seen
json.dump({'runs': runs, 'summary': {b: {'pass': sum(r['pass'] for r in rows if r['backend'] == b),
           'rows': sum(r['backend'] == b for r in rows), 'outcomes': outcomes(b)}
           for b in sorted({r['backend'] for r in rows})}},
          open(sys.argv[1], 'w'), indent=1)
print(json.dumps(json.load(open(sys.argv[1]))['summary']))
PY
        ;;
      bench)
        make_file 512,512,192,192 u16 /tmp/syn.h5
        run $S bench gpu /tmp/syn.h5 --backend cuda --reps 20 --json "$OUT/cuda_512.json"
        run $S bench gpu /tmp/syn.h5 --backend cuda --memory-plan compressed --reps 20 \
          --json "$OUT/cuda_512_compressed.json"
        run $S bench gpu /tmp/syn.h5 --reps 20 --json "$OUT/vulkan_512.json" | grep -E "stage|kernel (BF|ADF|CoM|mean)"
        ;;
      u8)
        make_file 1024,1024,192,192 u8 /tmp/u8.h5
        run $S bench gpu /tmp/u8.h5 --backend cuda --reps 10 --json "$OUT/cuda_u8.json"
        run $S bench gpu /tmp/u8.h5 --reps 10 --json "$OUT/vulkan_u8.json" | grep -E "stage|kernel (BF|ADF|CoM|mean)"
        ;;
      python)
        PYTHONPATH=$PWD/.device/pylib STEM4D_BIN=$PWD/$S STEM4D_REQUIRE_CUDA=1 \
          run python3 -m pytest -q -p no:cacheprovider python/tests/test_stem4d.py -k "cuda or errors"
        ;;
      peers)
        make_file 512,512,192,192 u16 /tmp/syn.h5
        [ -s "$OUT/cuda_512.json" ] || run $S bench gpu /tmp/syn.h5 --backend cuda --reps 20 --json "$OUT/cuda_512.json"
        [ -s "$OUT/vulkan_512.json" ] || run $S bench gpu /tmp/syn.h5 --reps 20 --json "$OUT/vulkan_512.json" >/dev/null
        run python3 benchmarks/peers.py --shape 512,512,192,192 --xp cupy,torch --reps 10 \
          --stem4d-json "$OUT/vulkan_512.json" --stem4d-cuda-json "$OUT/cuda_512.json" --json "$OUT/peers.json" \
          --commit "${COMMIT:-unknown}"
        ;;
    esac
  done
} > "$OUT/cuda_$(date +%s).txt" 2>&1
cat "$OUT"/cuda_*.txt | grep -v "^  chunk" | tail -60
