#!/usr/bin/env python3
"""Write an Arina-like uint16 bitshuffle+LZ4 acquisition for decode benchmarks.

usage: make_bench_file.py OUT_DIR ROWS COLS KR KC [FRAMES_PER_FILE]
A BF disk drifting with scan position plus Poisson noise, written with h5py + hdf5plugin
exactly like a Dectris master (external links) + data files + companion scan shape.
"""
import os
import sys

import h5py
import hdf5plugin
import numpy as np


def main():
    out, rows, cols, kr, kc = sys.argv[1], *map(int, sys.argv[2:6])
    per_file = int(sys.argv[6]) if len(sys.argv) > 6 else 10000
    os.makedirs(out, exist_ok=True)
    n = rows * cols
    rng = np.random.default_rng(7)
    ii, jj = np.mgrid[0:kr, 0:kc]
    name = "bench"
    links = []
    for fi, f0 in enumerate(range(0, n, per_file)):
        f1 = min(n, f0 + per_file)
        fname = f"{name}_data_{fi + 1:06d}.h5"
        with h5py.File(os.path.join(out, fname), "w", libver=("v108", "v108")) as h:
            ds = h.create_dataset("entry/data/data", shape=(f1 - f0, kr, kc), dtype="u2",
                                  chunks=(1, kr, kc), maxshape=(None, kr, kc),
                                  **hdf5plugin.Bitshuffle(cname="lz4"))
            step = 256
            for a in range(f0, f1, step):
                b = min(f1, a + step)
                f = np.arange(a, b)
                cr = kr / 2 + 1.5 * np.sin((f // cols) * 0.05)
                cc = kc / 2 + 1.5 * np.cos((f % cols) * 0.07)
                d2 = (ii[None] - cr[:, None, None]) ** 2 + (jj[None] - cc[:, None, None]) ** 2
                lam = np.where(d2 <= (0.16 * min(kr, kc)) ** 2, 900.0, 3.0)
                ds[a - f0:b - f0] = rng.poisson(lam).astype("u2")
        links.append(fname)
    with h5py.File(os.path.join(out, f"{name}_master.h5"), "w", libver=("v108", "v108")) as m:
        for i, fname in enumerate(links):
            m[f"entry/data/data_{i + 1:06d}"] = h5py.ExternalLink(fname, "/entry/data/data")
        m["entry/instrument/detector/detectorSpecific/ntrigger"] = np.uint64(n)
        m["entry/instrument/detector/detectorSpecific/pixel_mask"] = np.zeros((kr, kc), "u4")
    with h5py.File(os.path.join(out, f"{name}.h5"), "w") as c:
        g = c.create_group("STEM Metadata")
        g.attrs["NumPixelsX"] = cols
        g.attrs["NumPixelsY"] = rows
    print(" ".join(os.path.join(out, f) for f in [f"{name}_master.h5", *links, f"{name}.h5"]))


if __name__ == "__main__":
    main()
