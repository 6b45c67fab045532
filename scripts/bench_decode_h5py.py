#!/usr/bin/env python3
"""Reference decode throughput: h5py + hdf5plugin reading every frame of an Arina master,
one process per core (HDF5 is not thread-safe), median of 3. usage: bench_decode_h5py.py MASTER"""
import os
import sys
import time
from multiprocessing import Pool

import h5py
import hdf5plugin  # noqa: F401  (registers the bitshuffle filter)


def links(master):
    with h5py.File(master, "r") as m:
        g = m["entry/data"]
        return [(k, g[k].shape[0]) for k in sorted(g) if k.startswith("data_")]


def read_range(args):
    master, key, a, b = args
    with h5py.File(master, "r") as m:
        x = m["entry/data"][key][a:b]
    return x.nbytes


def main():
    master = sys.argv[1]
    procs = os.cpu_count() or 1
    jobs = []
    for key, n in links(master):
        step = max(1, n // (4 * procs))
        jobs += [(master, key, a, min(n, a + step)) for a in range(0, n, step)]
    times = []
    for _ in range(3):
        t = time.perf_counter()
        with Pool(procs) as p:
            total = sum(p.map(read_range, jobs))
        times.append(time.perf_counter() - t)
    s = sorted(times)[1]
    print(f"h5py+hdf5plugin ({procs} processes): {s * 1e3:.1f} ms, {total / s / 1e9:.3f} GB/s decoded")


if __name__ == "__main__":
    main()
