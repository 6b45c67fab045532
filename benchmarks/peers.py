#!/usr/bin/env python3
"""What a user would write instead, timed beside stem4d on the same acquisition (issue #31).

The acquisition is stem4d's synthetic benchmark acquisition (`wgsl/synthetic.wgsl`: a BF
disk, a ring and counting noise, uint16), generated here sample for sample with the array
library under test, so both sides hold the same integers; `--check STEM4D` proves it by
comparing this script's BF image with `stem4d product --synthetic … --kind bf`.

The peers are written the way their users write them:
- virtual images: a boolean detector mask, gathered and summed (`data[..., mask].sum(-1)`);
- CoM: the frames as float32 times a (pixels × 2) matrix of coordinates, over the total;
- the bandwidth limit: bytes a product must read ÷ the device's copy rate (read + write).

stem4d's own times come from `stem4d bench gpu --synthetic R,C,KR,KC --json FILE`
(`--stem4d-json FILE`, WGSL on Vulkan) and `stem4d bench gpu FILE --backend cuda --json FILE`
(`--stem4d-cuda-json FILE`, the CUDA backend, on the synthetic acquisition exported to a
file): kernel times on the same acquisition, made on the same GPU.

    python3 benchmarks/peers.py --shape 512,512,192,192 --xp cupy,torch \\
        --stem4d-json OUT/bench_gpu.json --stem4d-cuda-json OUT/cuda.json --json OUT/peers.json

On a machine without a GPU, `--xp numpy --shape 24,20,18,22 --check target/debug/stem4d`
checks the generator and the products against stem4d (what CI-sized runs can do).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BF_RADIUS = 30.0


# ------------------------------------------------------------------ the acquisition


class Ops:
    """The few array operations the generator and the products need, per library."""

    def __init__(self, name: str):
        self.name = name
        if name == "cupy":
            import cupy

            self.xp = cupy
        elif name == "torch":
            import torch

            self.xp = torch
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            self.xp = np

    def release(self):
        """Give the library's cached GPU memory back, so the next library finds it free
        (CuPy's pool kept the 19 GB acquisition, and PyTorch then ran out on the H200)."""
        if self.name == "cupy":
            self.xp.get_default_memory_pool().free_all_blocks()
        elif self.name == "torch":
            self.xp.cuda.empty_cache()

    def arange(self, n):
        if self.name == "torch":
            return self.xp.arange(n, dtype=self.xp.int64, device=self.device)
        return self.xp.arange(n, dtype=self.xp.int64)

    def asarray(self, a):
        if self.name == "torch":
            return self.xp.as_tensor(a, device=self.device)
        return self.xp.asarray(a)

    def to_numpy(self, a):
        if self.name == "torch":
            return a.cpu().numpy()
        if self.name == "cupy":
            return a.get()
        return np.asarray(a)

    def empty_u16(self, shape):
        if self.name == "torch":
            # torch has no uint16 arithmetic worth timing: int16 storage of the same bits,
            # widened where it is summed (values stay below 2^15 here).
            return self.xp.empty(shape, dtype=self.xp.int16, device=self.device)
        return self.xp.empty(shape, dtype=self.xp.uint16)

    def sync(self):
        if self.name == "cupy":
            self.xp.cuda.Device().synchronize()
        elif self.name == "torch" and self.device == "cuda":
            self.xp.cuda.synchronize()


def mix32(h):
    """The generator's hash on int64 arrays holding u32 values (wrapping as u32 does)."""
    m = 0xFFFFFFFF
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & m
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & m
    return h ^ (h >> 16)


def triangle(x, period):
    half = period // 2
    p = x % period
    up = p * (p < half) + (period - p) * (p >= half)
    return up * 48 // half - 24


def trunc_div(a, b):
    """Integer division rounding toward zero (WGSL's i32 `/`), on int64 arrays."""
    q = abs(a) // b
    return q * ((a >= 0) * 2 - 1)


def synth_rows(ops: Ops, shape, r0, r1):
    """Scan rows [r0, r1) of the synthetic acquisition, as int64 (rows, C, KR, KC)."""
    rows, cols, kr, kc = shape
    r = ops.arange(r1 - r0).reshape(-1, 1, 1, 1) + r0
    c = ops.arange(cols).reshape(1, -1, 1, 1)
    i = ops.arange(kr).reshape(1, 1, -1, 1)
    j = ops.arange(kc).reshape(1, 1, 1, -1)
    frame = r * cols + c
    k = i * kc + j
    cr = 8 * kr + triangle(r, 126)
    cc = 8 * kc + triangle(c, 90)
    d2 = (16 * i - cr) ** 2 + (16 * j - cc) ** 2
    rad = min(kr, kc) * 256 // 100
    ring = 22 * rad // 10
    in_disk = d2 <= rad * rad
    in_ring = (d2 > (ring - 32) ** 2) & (d2 < (ring + 32) ** 2) & ~in_disk
    base = 3 + 897 * in_disk + 37 * in_ring
    amp = 2 + 28 * in_disk + 4 * in_ring
    m = 0xFFFFFFFF
    noise = mix32(((frame * 0x9E3779B1) & m) ^ ((k * 0x85EBCA77) & m)) % 61 - 30
    v = base + trunc_div(noise * amp, 17)
    return v * (v > 0)


def make(ops: Ops, shape, rows_per_step=8):
    rows = shape[0]
    data = ops.empty_u16(tuple(shape))
    for r0 in range(0, rows, rows_per_step):
        r1 = min(rows, r0 + rows_per_step)
        block = synth_rows(ops, shape, r0, r1)
        data[r0:r1] = block.to(data.dtype) if ops.name == "torch" else block.astype(data.dtype)
    ops.sync()
    return data


# ------------------------------------------------------------------ the products, as users write them


def masks(kr, kc, radius=BF_RADIUS):
    """The bench's detectors (`stem4d bench gpu`): the BF disk of radius 30 and the ADF
    annulus from 60 to the edge, both about the detector's middle (C-MASK)."""
    i, j = np.mgrid[0:kr, 0:kc]
    ci, cj = (kr - 1) / 2, (kc - 1) / 2
    d2 = (i - ci) ** 2 + (j - cj) ** 2
    outer = (min(kr, kc) - 1) / 2
    bf = d2 <= radius**2
    adf = ((2 * radius) ** 2 < d2) & (d2 <= outer**2)
    return bf, adf


def products(ops: Ops, data, radius=BF_RADIUS):
    xp = ops.xp
    _, _, kr, kc = data.shape
    bf_np, adf_np = masks(kr, kc, radius)
    bf, adf, df = ops.asarray(bf_np), ops.asarray(adf_np), ops.asarray(~bf_np)
    i, j = np.mgrid[0:kr, 0:kc]
    coords = ops.asarray(np.stack([i.ravel(), j.ravel()], axis=1).astype(np.float32))
    flat = data.reshape(data.shape[0] * data.shape[1], -1)

    if ops.name == "torch":
        def gather_sum(m):
            return data[..., m].sum(dim=-1, dtype=xp.int64)

        def com():
            f = flat.to(xp.float32)
            return (f @ coords) / f.sum(dim=1, keepdim=True)
    else:
        def gather_sum(m):
            return data[..., m].sum(axis=-1, dtype=xp.uint64)

        def com():
            f = flat.astype(xp.float32)
            return (f @ coords) / f.sum(axis=1, keepdims=True)

    return {
        "BF": (lambda: gather_sum(bf), int(bf_np.sum())),
        "ADF": (lambda: gather_sum(adf), int(adf_np.sum())),
        "DF": (lambda: gather_sum(df), int((~bf_np).sum())),
        "CoM": (com, kr * kc),
    }


def timed(ops: Ops, fn, reps):
    fn()
    ops.sync()
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ops.sync()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def copy_rate(ops: Ops, data, reps):
    """Bytes moved per second (read + write) by a device-to-device copy of the acquisition."""
    dst = ops.xp.empty_like(data)

    def copy():
        if ops.name == "torch":
            dst.copy_(data)
        else:
            dst[...] = data

    t = timed(ops, copy, reps)
    del dst
    nbytes = data.numel() * data.element_size() if ops.name == "torch" else data.nbytes
    return 2 * nbytes / t


# ------------------------------------------------------------------ stem4d's side


# The lines of `stem4d bench gpu --json` that time the same products.
STEM4D_KEYS = {
    "BF": "kernel BF r=30 (2828 px)",
    "ADF": "kernel ADF 60..96 (17296 px)",
    "DF": "kernel DF = total - BF (cached total)",
    "CoM": "kernel CoM/DPC moments (fused)",
}
# The same on the CUDA backend: DF there is the BF sum subtracted from a cached total too.
STEM4D_CUDA_KEYS = {
    "BF": "kernel BF r=30 (2828 px)",
    "ADF": "kernel ADF 60..96 (17296 px)",
    "DF": "kernel BF r=30 (2828 px)",
    "CoM": "kernel CoM/DPC moments",
}


def stem4d_times(path: Path | None, keys=STEM4D_KEYS):
    if path is None:
        return {}, None
    # `stem4d bench gpu --json` writes its figures under "figures", the machine once.
    doc = json.loads(path.read_text())
    figures = {r.get("key"): r for r in doc.get("figures", [])}
    out = {}
    for name, key in keys.items():
        if key in figures:
            out[name] = float(figures[key]["value"].split()[0]) / 1e3
    return out, doc.get("machine")


def check_against_stem4d(binary: str, shape, ops: Ops, data):
    """This script's BF images (a disk of a third of the detector, which parts the disk of
    the acquisition, and the bench's) equal `stem4d product --synthetic` byte for byte: the
    two hold the same acquisition and the same detectors."""
    _, _, kr, kc = shape
    for radius in (min(kr, kc) / 3, BF_RADIUS):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "bf.npy"
            cmd = [
                binary, "product", "--synthetic", ",".join(map(str, shape)), "--kind", "bf",
                "--center", f"{(kr - 1) / 2},{(kc - 1) / 2}", "--radius", str(radius),
                "--backend", "cpu", "--out", str(out),
            ]
            subprocess.run(cmd, check=True, capture_output=True)
            want = np.load(out)
        got = ops.to_numpy(products(ops, data, radius)["BF"][0]()).astype(np.uint64)
        if got.shape != want.shape or not np.array_equal(got, want):
            raise SystemExit(f"peers.py: {ops.name}'s BF r={radius:g} differs from stem4d's on {shape}")
    print(f"check: {ops.name}'s acquisition and BF images equal stem4d's on {shape}")


# ------------------------------------------------------------------ the table


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="512,512,192,192")
    ap.add_argument("--xp", default="cupy,torch", help="array libraries: cupy, torch, numpy")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--stem4d-json", type=Path, help="`stem4d bench gpu --json` of the same shape")
    ap.add_argument("--stem4d-cuda-json", type=Path,
                    help="`stem4d bench gpu FILE --backend cuda --json` of the same acquisition")
    ap.add_argument("--check", metavar="STEM4D", help="a stem4d binary: compare the BF images")
    ap.add_argument("--json", type=Path, help="write the figures as BENCHMARKS records")
    ap.add_argument("--commit", default="")
    a = ap.parse_args(argv)
    shape = tuple(int(x) for x in a.shape.split(","))
    if len(shape) != 4:
        raise SystemExit("--shape takes R,C,KR,KC")
    ours, machine = stem4d_times(a.stem4d_json)
    cuda, cuda_machine = stem4d_times(a.stem4d_cuda_json, STEM4D_CUDA_KEYS)
    machine = machine or cuda_machine
    rows = []
    for name in [x.strip() for x in a.xp.split(",") if x.strip()]:
        ops = Ops(name)
        data = make(ops, shape)
        if a.check:
            check_against_stem4d(a.check, shape, ops, data)
        rate = copy_rate(ops, data, a.reps)
        for product, (fn, pixels) in products(ops, data).items():
            t = timed(ops, fn, a.reps)
            frames = shape[0] * shape[1]
            limit = frames * pixels * 2 / rate
            rows.append((product, name, t, limit))
        del data
        gc.collect()
        ops.release()
    print(f"{'product':<6} {'peer':<7} {'peer ms':>9} {'limit ms':>9} {'WGSL ms':>9} {'WGSL ×':>7}"
          f" {'CUDA ms':>9} {'CUDA ×':>7}")
    records = []
    for product, peer, t, limit in rows:
        s, c = ours.get(product), cuda.get(product)
        ratio = lambda v: f"{t / v:.1f}" if v else "-"
        print(f"{product:<6} {peer:<7} {t * 1e3:9.3f} {limit * 1e3:9.3f} "
              f"{(s or 0) * 1e3:9.3f} {ratio(s):>7} {(c or 0) * 1e3:9.3f} {ratio(c):>7}")
        said = [f"stem4d {name} {v * 1e3:.3f} ms, {t / v:.1f}× faster" for name, v in (("WGSL", s), ("CUDA", c)) if v]
        records.append({
            "figure": f"{product}: {peer} ({'gather + sum' if product != 'CoM' else 'float32 matmul'})",
            "value": f"{t * 1e3:.3f} ms" + (f" ({'; '.join(said)})" if said else "")
            + f"; bandwidth limit {limit * 1e3:.3f} ms",
            "target": "stem4d ≥ 10× faster",
            "command": f"python3 benchmarks/peers.py --shape {a.shape} --xp {peer} --stem4d-json … --stem4d-cuda-json …",
            "machine": machine or "",
            "commit": a.commit,
            "date": time.strftime("%Y-%m-%d"),
            "key": f"peer {product} {peer}",
        })
    if a.json:
        a.json.write_text(json.dumps({"records": records}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    sys.exit(main())
