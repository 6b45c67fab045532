#!/usr/bin/env python3
"""A few lines per e2e/h200.py result: checks, loads of LOCAL_FILE, how frames were presented,
and the interaction figures drawn / computed (ms, median of the run's steps), as BENCHMARKS.md
tabulates them.

    python3 e2e/bench_table.py RESULT.json...
"""
import json
import sys

SERIES = [("BF", "bf_drag"), ("ADF", "adf_drag"), ("DF", "df_drag"), ("DPC", "dpc_rotate"),
          ("iDPC", "idpc_rotate"), ("pattern", "pattern_cursor"), ("mean ROI", "mean_pattern_roi"),
          ("cmap", "pattern_cmap")]


def line(path):
    try:
        r = json.load(open(path))
    except (OSError, ValueError) as e:
        return "%s: no result (%s)" % (path, e)
    suite = r.get("suite") or {}
    b = (suite.get("figures") or {}).get("bench")
    head = "%s: %s passed, %s failed" % (path, suite.get("pass"), suite.get("fail"))
    if "error" in r:
        head += ", error %s" % r["error"]
    loads = ["%.2f s (settled %.2f)" % (lf["first_image_ms"] / 1e3, lf["settled_ms"] / 1e3)
             for lf in r.get("local_files", []) if "first_image_ms" in lf]
    if loads:
        same = (r.get("synthetic_match") or {}).get("same")
        head += "; loads to the first image: %s%s" % (", ".join(loads),
                                                     "" if same is None else ", products equal the generated: %s" % same)
    if not b:
        return head + ", no bench"
    p, o = b.get("present") or {}, b.get("other_present") or {}
    cells = ["%s %.1f/%.1f" % (name, b[k + "_ms"], b[k + "_compute_ms"]) for name, k in SERIES if k + "_ms" in b]
    out = [head, "  present %s (calibration: surface %.2f, readback %.2f ms a frame)"
           % (p.get("mode"), p.get("surface_ms") or float("nan"), p.get("readback_ms") or float("nan")),
           "  drawn/computed: " + ", ".join(cells)]
    if o:
        out.append("  %s instead: BF %.1f, pattern %.1f, cmap %.1f" % (
            o["mode"], o["bf_drag_ms"], o["pattern_cursor_ms"], o["pattern_cmap_ms"]))
    d, i = b.get("drag") or {}, b.get("idle") or {}
    if d and i:
        out.append("  dragging %.1f frames/s (%.1f images/s), idle %.1f frames/s with %d engine calls"
                   % (d["fps"], d["renders_per_s"], i["fps"], i["engine_calls"]))
    return "\n".join(out)


if __name__ == "__main__":
    print("\n".join(line(p) for p in sys.argv[1:]))
