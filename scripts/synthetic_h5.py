#!/usr/bin/env python3
"""Wrap chunks exported by `stem4d bench export-chunks --synthetic R,C,KR,KC --compressed
--out PREFIX` into an HDF5 file laid out as Dectris writes data: a 4-D uint16 (or, with
`u8` last and `--synthetic-dtype u8` given to stem4d, uint8) data set `/entry/data/data`
(R, C, KR, KC), one bitshuffle+LZ4 (filter 32008) chunk per frame. The chunks are written
as they are (h5py `write_direct_chunk`), so neither hdf5plugin nor any encoder is needed:
the load benchmarks get a real file of any size.

    python3 scripts/synthetic_h5.py PREFIX OUT.h5 R C KR KC [u16|u8]
"""
import sys

import h5py
import numpy as np


def main():
    prefix, out = sys.argv[1], sys.argv[2]
    r, c, kr, kc = (int(v) for v in sys.argv[3:7])
    kind = sys.argv[7] if len(sys.argv) > 7 else "u16"
    if kind not in ("u8", "u16"):
        sys.exit(f"{kind}: the sample type is u8 or u16")
    elem = 1 if kind == "u8" else 2
    sizes = np.fromfile(prefix + ".sizes", dtype="<u8")
    if len(sizes) != r * c:
        sys.exit(f"{prefix}.sizes holds {len(sizes)} chunks, not {r}x{c}")
    with open(prefix + ".chunks", "rb") as src, h5py.File(out, "w") as f:
        ds = f.create_dataset(
            "/entry/data/data",
            shape=(r, c, kr, kc),
            dtype="<u1" if elem == 1 else "<u2",
            chunks=(1, 1, kr, kc),
            compression=32008,
            # What the bitshuffle filter's set_local would store (it is not loaded here):
            # filter version 0.2, the element size, default block, LZ4.
            compression_opts=(0, 2, elem, 0, 2),
            allow_unknown_filter=True,
        )
        for k, n in enumerate(sizes):
            ds.id.write_direct_chunk((k // c, k % c, 0, 0), src.read(int(n)))
    print(f"wrote {out}: {r}x{c}x{kr}x{kc} uint{8 * elem}, {int(sizes.sum())} compressed bytes")


if __name__ == "__main__":
    main()
