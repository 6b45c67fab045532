#!/usr/bin/env python3
"""Write a deflate-compressed 4-D uint16 acquisition (R, C, KR, KC), one shuffle+deflate
chunk per frame: a bright disk of radius KR/8 on a weak background, Poisson counts. The
GPU decoder does not take deflate, so opening it measures the CPU inflate path (native
threads; the page's decode Workers).

    python3 scripts/deflate_h5.py OUT.h5 R C KR KC
"""
import sys

import h5py
import numpy as np


def main():
    out = sys.argv[1]
    r, c, kr, kc = (int(v) for v in sys.argv[2:6])
    y, x = np.mgrid[0:kr, 0:kc]
    disk = ((y - kr / 2) ** 2 + (x - kc / 2) ** 2 < (kr / 8) ** 2).astype(np.float64)
    lam = 0.05 + 40.0 * disk
    rng = np.random.default_rng(4)
    with h5py.File(out, "w") as f:
        ds = f.create_dataset("/entry/data/data", shape=(r, c, kr, kc), dtype="<u2",
                              chunks=(1, 1, kr, kc), compression="gzip", compression_opts=1,
                              shuffle=True)
        for row in range(r):
            ds[row] = rng.poisson(np.broadcast_to(lam, (c, kr, kc))).astype(np.uint16)
    print(f"wrote {out}: {r}x{c}x{kr}x{kc} uint16, shuffle+deflate")


if __name__ == "__main__":
    main()
