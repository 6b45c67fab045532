#!/usr/bin/env bash
# On the H200 machine (as scripts/device_native.sh), with dist/ built here and Chromium's
# parts delivered (../shared/setup/chrome-h200/): the page on the benchmark files within
# memory budgets (issue #30) and the prepared file's reopen (issue #33), beside the same
# natively. Steps (default: make native page):
#   make   — the 512×512×192×192 uint16 benchmark acquisition as a bslz4 file (/tmp/syn.h5,
#            as device_budget.sh makes it) and prepared from it (/tmp/syn.stem4d);
#   prepared — the prepared file alone, made from the acquisition generated on the GPU;
#   native — `stem4d bench gpu` of both files from the page cache;
#   reopen — the prepared file reopened twice in Chromium, its products checked against the
#            acquisition generated on the GPU;
#   budgets — the bslz4 file opened in Chromium within 8 GiB and within 2 GiB, each followed
#            by suite.js's benchOpened (detectors dragged);
#   page   — reopen, then budgets;
#   u8     — the 1024×1024×192×192 uint8 file (/tmp/u8.h5) streamed in Chromium: in one block,
#            then within 4 GiB (blocks of scan rows).
#   bash scripts/device_page_plans.sh OUTDIR [STEP...]
set -uo pipefail
OUT=${1:?usage: device_page_plans.sh OUTDIR [STEP...]}
shift
export LD_LIBRARY_PATH=$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
S=.device/stem4d
. scripts/device_common.sh
# page NAME ENV...: e2e/h200.py in the delivered Chromium with ENV, its result summarised.
page() {
  local name=$1
  shift
  env PARTS=none NEED_ADAPTER=nvidia "$@" timeout 290 bash .device/chrome/web/launch.sh \
    python3 e2e/h200.py "$OUT/page_$name.json" > "$OUT/page_$name.txt" 2>&1
  echo "page $name: exit $?"
  python3 - "$OUT/page_$name.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(print("no result:", e))
print("adapter:", (r.get("adapter") or {}).get("description"))
for lf in r.get("local_files", []):
    st = {s["name"]: round(s["ms"]) for s in lf.get("profile", {}).get("stages", [])}
    plan = (lf.get("profile", {}).get("memory_plan") or {}).get("kind")
    taken = lf.get("profile", {}).get("reads_taken_in_flight")
    print(lf["file"], lf["options"], plan, "first image %.0f ms, settled %.0f ms" % (lf["first_image_ms"], lf["settled_ms"]), "reads taken in flight:", taken, st)
    if "bench" in lf:
        print("  bench:", json.dumps(lf["bench"]))
print("synthetic match:", (r.get("synthetic_match") or {}).get("same"), "error:", r.get("error"))
PY
}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  [ $# -gt 0 ] || set -- make native page
  for step in "$@"; do
    case $step in
      make)
        make_file 512,512,192,192 u16 /tmp/syn.h5
        [ -s /tmp/syn.stem4d ] || run $S prepare /tmp/syn.h5 --out /tmp/syn.stem4d
        ls -l /tmp/syn.h5 /tmp/syn.stem4d
        ;;
      prepared)
        [ -s /tmp/syn.stem4d ] || run $S prepare --synthetic 512,512,192,192 --out /tmp/syn.stem4d
        ;;
      native)
        run $S bench gpu /tmp/syn.h5 --reps 3 --json "$OUT/native_load.json" | grep -E "stage|read\+decode"
        run $S bench gpu /tmp/syn.stem4d --reps 2 --json "$OUT/native_reopen.json" | grep -E "stage|read\+decode|of which"
        ;;
      reopen|page)
        page reopen LOCAL_FILE=/tmp/syn.stem4d LOCAL_OPTIONS='[{},{}]' LOCAL_SYNTHETIC=512,512,192,192
        ;;&
      budgets|page)
        page budgets LOCAL_FILE=/tmp/syn.h5 LOCAL_BENCH=1 \
          LOCAL_OPTIONS='[{"memoryBudget":8589934592},{"memoryBudget":2147483648}]'
        ;;&
      reopen|budgets|page) ;;
      u8)
        make_file 1024,1024,192,192 u8 /tmp/u8.h5
        ls -l /tmp/u8.h5
        page u8 LOCAL_FILE=/tmp/u8.h5 \
          LOCAL_OPTIONS='[{"memoryPlan":"streaming"},{"memoryPlan":"streaming","memoryBudget":4294967296}]'
        ;;
      *) echo "unknown step $step" ;;
    esac
  done
} 2>&1 | tee "$OUT/page_plans.txt" | grep -v "^  chunk"
