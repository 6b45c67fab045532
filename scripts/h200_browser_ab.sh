#!/usr/bin/env bash
# On the H200 machine, from the project root, with Chromium's parts in /tmp/chrparts and
# .device/chrome/web in place (../shared/setup/chrome-h200/), and the bslz4 file of the
# synthetic acquisition in /tmp/syn.h5 (BENCHMARKS.md, load table):
#   bash scripts/h200_browser_ab.sh OUTDIR DIST_A DIST_B [ORDER]
# Times the load of the file (two loads a turn) with two builds of the page in one lease of
# the machine, in ORDER (default "a b a": the spread across leases is larger than most
# changes), then checks the last file's products against the synthetic acquisition
# generated on the GPU. Prints each load's first-image time and profile stages. LAUNCH
# (default the H200 Chromium's launch.sh) runs e2e/h200.py elsewhere, e.g. `LAUNCH=env` with
# CHROMIUM and CHROMIUM_FLAGS set for SwiftShader under xvfb-run.
set -uo pipefail
OUT=${1:?usage: h200_browser_ab.sh OUTDIR DIST_A DIST_B [ORDER]}
A=${2:?DIST_A}
B=${3:?DIST_B}
FILE=${LOCAL_FILE:-/tmp/syn.h5}
mkdir -p "$OUT"
keep=$(mktemp -d)
# Either build may be ./dist itself, which each turn replaces: copy both first.
cp -r "$A" "$keep/a" && cp -r "$B" "$keep/b" || exit 1
A=$keep/a
B=$keep/b
[ -d dist ] && mv dist "$keep/dist"
i=0
for v in ${4:-a b a}; do
  i=$((i + 1))
  rm -rf dist
  if [ "$v" = a ]; then cp -r "$A" dist; else cp -r "$B" dist; fi
  PARTS=none LOCAL_OPTIONS='[{},{}]' LOCAL_SYNTHETIC=${LOCAL_SYNTHETIC:-512,512,192,192} \
    LOCAL_FILE=$FILE timeout 300 ${LAUNCH:-bash .device/chrome/web/launch.sh} \
    python3 e2e/h200.py "$OUT/h200_$i$v.json" > "$OUT/log_$i$v.txt" 2>&1
  echo "exit $?" >> "$OUT/log_$i$v.txt"
  python3 - "$OUT/h200_$i$v.json" "$i$v" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(print(sys.argv[2], "no result:", e))
for lf in r.get("local_files", []):
    st = {s["name"]: round(s["ms"]) for s in lf.get("profile", {}).get("stages", [])}
    print(sys.argv[2], round(lf.get("first_image_ms", 0)), "ms, settled", round(lf.get("settled_ms", 0)), "ms", st)
print(sys.argv[2], "synthetic match:", (r.get("synthetic_match") or {}).get("same"), "error:", r.get("error"))
PY
done
rm -rf dist
# (An if, not &&: without a dist of its own the script still ends with success.)
if [ -d "$keep/dist" ]; then mv "$keep/dist" dist; fi
