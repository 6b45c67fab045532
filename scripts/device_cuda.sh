#!/usr/bin/env bash
# On the H200 machine (as scripts/device_native.sh), with .device/stem4d built with
# `--features cuda`: the parity matrix of every fixture on CPU, Vulkan (wgpu) and CUDA in one
# run each, with and without bad-pixel masking, JSON rows under OUTDIR (the fixtures of
# ../shared/data are not on that machine and are left out).
#   bash scripts/device_cuda.sh OUTDIR
set -uo pipefail
OUT=${1:?usage: device_cuda.sh OUTDIR}
export LD_LIBRARY_PATH=$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# NVRTC from the CUDA toolkit, wherever this machine keeps it.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  if compgen -G "$d/libnvrtc.so*" >/dev/null; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; fi
done
S=.device/stem4d
run() { echo "\$ $*"; timeout 280 "$@"; echo "exit $?"; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 - <<'PY' > /tmp/fixture_args.txt
import json
m = json.load(open('tests/fixtures/manifest.json'))
for f in m['fixtures']:
    if f.get('root') == 'shared':
        continue
    args = [f"tests/fixtures/data/{x}" for x in f['files']]
    if f.get('scan_shape'): args += ['--scan-shape', ','.join(map(str, f['scan_shape']))]
    if f.get('dataset'): args += ['--dataset', f['dataset']]
    print(f['name'] + '\t' + ' '.join(args))
PY
  while IFS=$'\t' read -r name args; do
    for mask in "" "--mask-bad-pixels"; do
      tag=${name}${mask:+_masked}
      # shellcheck disable=SC2086
      run $S parity --backends cpu,vulkan,cuda $mask --json "$OUT/parity_$tag.json" $args | grep -E "FAIL|n/a|unavailable|exit|cuda " | head -20
    done
  done < /tmp/fixture_args.txt
} > "$OUT/cuda.txt" 2>&1
grep -c '"pass": true' "$OUT"/parity_*.json | tail -3
grep -h -E "FAIL|exit [^0]|unavailable|panicked" "$OUT/cuda.txt" | head -40
