#!/usr/bin/env python3
"""stem4d on a Dask cluster of one machine, timed against one process (issue #32).

Two workloads, each computed once in this process (`stem4d.open(...).product`) and once on a
`dask.distributed.LocalCluster` of worker processes (`stem4d.dask`), and the results compared
byte for byte:

- many acquisitions: `--many 'GLOB'` (one file each), product `--kind` of every one, one task
  each (`stem4d.dask.products`);
- one large acquisition split by scan rows: `--big FILE`, `--kind` and the exact sum pattern
  (`sum-dp`), in blocks of `--rows-per-task` scan rows (`stem4d.dask.split_rows`).

Every worker opens its files itself with `--backend` (on a machine with one GPU, every worker
shares it). The cluster is started and warmed up before timing; a figure is the median of
`--reps` runs, end to end (open, read, decode, compute, gather).

    python3 benchmarks/dask_bench.py --many '/tmp/dask/acq_*.h5' --big /tmp/syn.h5 \\
        --workers 4,8 --backend wgpu --json OUT/dask.json
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import stem4d
import stem4d.dask


def timed(fn, reps: int):
    """The result of `fn` and the median of `reps` timings, in seconds."""
    out, times = None, []
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, statistics.median(times)


def same(a, b) -> bool:
    """Equal arrays, dtype and bytes alike (lists of arrays item by item)."""
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def params_for(kind: str, acq) -> dict:
    """Product parameters about the detector's middle (BF radius a sixth of the detector)."""
    kr, kc = acq.shape[2:]
    centre = ((kr - 1) / 2, (kc - 1) / 2)
    if kind in ("bf", "df"):
        return {"center": centre, "radius": min(kr, kc) / 6}
    if kind == "adf":
        return {"center": centre, "inner": min(kr, kc) / 3, "outer": min(kr, kc) / 2}
    return {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--many", help="glob of acquisitions, one file each")
    ap.add_argument("--big", help="one acquisition split by scan rows")
    ap.add_argument("--kind", default="bf", help="product of both workloads (a per-position one)")
    ap.add_argument("--workers", default="4", help="worker processes, comma-separated counts")
    ap.add_argument("--rows-per-task", type=int, default=32)
    ap.add_argument("--backend", default="auto", help="stem4d backend in this process and on the workers")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write the figures here (scripts/benchmarks_md.py --update)")
    ap.add_argument("--machine", default="", help="where it ran, for the JSON")
    ap.add_argument("--commit", default="", help="the build measured, for the JSON")
    a = ap.parse_args()
    if not a.many and not a.big:
        ap.error("give --many, --big or both")

    from dask.distributed import Client, LocalCluster

    open_kw = {"backend": a.backend}
    figures = []

    def figure(key: str, value: str):
        print(f"{key}: {value}", flush=True)
        figures.append({"key": key, "value": value})

    files = sorted(glob.glob(a.many)) if a.many else []
    if a.many and not files:
        raise SystemExit(f"{a.many}: no file matches")
    if files:
        first = stem4d.open(files[0], **open_kw)
        p = params_for(a.kind, first)
        one, t1 = timed(lambda: [stem4d.open(f, **open_kw).product(a.kind, **p) for f in files], a.reps)
        figure(f"many: one process, {len(files)} acquisitions", f"{t1:.3f} s")
    if a.big:
        # Opened for each product, as each task on the cluster opens its rows.
        pb = params_for(a.kind, stem4d.open(a.big, **open_kw))
        whole, tb = timed(lambda: stem4d.open(a.big, **open_kw).product(a.kind, **pb), a.reps)
        whole_sum, ts = timed(lambda: stem4d.open(a.big, **open_kw).product("sum-dp"), a.reps)
        figure(f"big: one process, {a.kind}", f"{tb:.3f} s")
        figure("big: one process, sum-dp", f"{ts:.3f} s")

    for n in [int(x) for x in a.workers.split(",") if x.strip()]:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            # Warm-up: every worker imports stem4d and finds its adapter once.
            client.run(lambda: stem4d.open(files[0] if files else a.big, **open_kw).shape)
            if files:
                got, t = timed(lambda: stem4d.dask.products(files, a.kind, open_kw=open_kw, client=client, **p),
                               a.reps)
                if not same(got, one):
                    raise SystemExit(f"many: {n} workers differ from one process")
                figure(f"many: {n} workers, {len(files)} acquisitions",
                       f"{t:.3f} s ({t1 / t:.2f}× one process; identical)")
            if a.big:
                rows = a.rows_per_task
                got, t = timed(lambda: stem4d.dask.split_rows(a.big, a.kind, rows_per_task=rows, open_kw=open_kw,
                                                              client=client, **pb), a.reps)
                if not same(got, whole):
                    raise SystemExit(f"big: {a.kind} on {n} workers differs from one process")
                figure(f"big: {n} workers, {a.kind}", f"{t:.3f} s ({tb / t:.2f}× one process; identical)")
                got, t = timed(lambda: stem4d.dask.split_rows(a.big, "sum-dp", rows_per_task=rows,
                                                              open_kw=open_kw, client=client), a.reps)
                if not same(got, whole_sum):
                    raise SystemExit(f"big: sum-dp on {n} workers differs from one process")
                figure(f"big: {n} workers, sum-dp", f"{t:.3f} s ({ts / t:.2f}× one process; identical)")

    if a.json:
        # The command as BENCHMARKS.md cites it: without where its output and labels went.
        argv, shown = sys.argv[1:], []
        for i, arg in enumerate(argv):
            if arg in ("--json", "--machine", "--commit") or (i > 0 and argv[i - 1] in ("--json", "--machine", "--commit")):
                continue
            shown.append(arg)
        a.json.write_text(json.dumps({
            "command": "python3 benchmarks/dask_bench.py " + " ".join(shown),
            "machine": a.machine,
            "commit": a.commit,
            "date": time.strftime("%Y-%m-%d"),
            "software_adapter": False,
            "figures": figures,
        }, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
