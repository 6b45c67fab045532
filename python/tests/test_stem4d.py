"""The Python package against the CLI and the numpy references on the fixtures
(tests/fixtures/manifest.json): every product of every fixture, on the CPU reference and on
wgpu, byte for byte what `stem4d product` writes; integer products also equal the numpy
reference. Then errors, frames, master files found beside them, and the plans."""

from __future__ import annotations

import _thread
import json
import os
import signal
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stem4d

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
CAMEL = {v: k for k, v in stem4d.PRODUCT_KEYS.items()}
# Fixtures whose float products on wgpu are compared with the CLI (u8, u16, float32, MIB).
WGPU_CLI_FIXTURES = {"arina_u8", "hot_stack_u16", "emd_f32", "mib_quad_u32"}


def cli() -> str:
    """The CLI binary `cargo test` built (STEM4D_BIN names another)."""
    if os.environ.get("STEM4D_BIN"):
        return os.environ["STEM4D_BIN"]
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    path = target / "debug" / "stem4d"
    assert path.exists(), f"{path}: build the CLI first (cargo build)"
    return str(path)


def paths(fx) -> list:
    base = FIXTURES / "data" if fx["root"] == "fixtures" else ROOT.parent / "shared" / "data"
    return [str(base / f) for f in fx["files"]]


def kwargs(params: dict) -> dict:
    """A manifest entry's parameters as `product` keywords (masks loaded)."""
    out = {}
    for k, v in params.items():
        if k in ("mask_bad_pixels", "bin"):
            continue
        if k == "mask":
            v = np.load(FIXTURES / v)
        out[CAMEL.get(k, k)] = v
    return out


def cli_run(fx, kind, params, out: Path, backend: str) -> subprocess.CompletedProcess:
    args = [cli(), "product", "--kind", kind, "--backend", backend, "--out", str(out)]
    for k, v in params.items():
        flag = "--" + k.replace("_", "-")
        if k == "mask":
            args += ["--mask", str(FIXTURES / v)]
        elif isinstance(v, bool):
            args += [flag] if v else []
        elif isinstance(v, list):
            args += [flag, ",".join(str(x) for x in v)]
        else:
            args += [flag, str(v)]
    if fx["scan_shape"]:
        args += ["--scan-shape", ",".join(map(str, fx["scan_shape"]))]
    if fx["dataset"]:
        args += ["--dataset", fx["dataset"]]
    return subprocess.run(args + paths(fx), capture_output=True, text=True)


def cuda_or_skip():
    """Skip a CUDA test, saying why, where this machine has no CUDA (the package is built with
    the backend; the driver and NVRTC are found at run time); STEM4D_REQUIRE_CUDA=1 (the GPU
    machine) makes an absent CUDA a failure."""
    fx = MANIFEST["fixtures"][0]
    try:
        stem4d.open(paths(fx), scan_shape=fx["scan_shape"], dataset=fx["dataset"], backend="cuda")
    except stem4d.Error as e:
        if os.environ.get("STEM4D_REQUIRE_CUDA") == "1":
            raise
        assert "CUDA is not available on this machine" in str(e), e
        pytest.skip(f"backend cuda: {e}")


def backend_or_skip(backend: str):
    if backend == "cuda":
        cuda_or_skip()


def cli_product(fx, kind, params, out: Path, backend: str) -> np.ndarray:
    done = cli_run(fx, kind, params, out, backend)
    assert done.returncode == 0, done.stderr
    return np.load(out)


@pytest.mark.parametrize("backend", ["cpu", "wgpu", "cuda"])
def test_every_product_is_the_clis(backend, tmp_path):
    backend_or_skip(backend)
    compared = 0
    for fx in MANIFEST["fixtures"]:
        opened = {}
        for n, entry in enumerate(fx["products"]):
            params = entry["params"]
            key = (params.get("bin", 1), params.get("mask_bad_pixels", False))
            if key not in opened:
                opened[key] = stem4d.open(
                    paths(fx),
                    scan_shape=fx["scan_shape"],
                    dataset=fx["dataset"],
                    bin=key[0],
                    mask_bad_pixels=key[1],
                    backend=backend,
                )
            acq = opened[key]
            kind = entry["kind"].replace("mean-dp-f32", "mean-dp")
            what = f"{fx['name']} #{n} {kind} {params}"
            try:
                got = acq.product(kind, **kwargs(params))
            except stem4d.Error as e:
                # Refused only where the CLI refuses, in the same words.
                done = cli_run(fx, kind, params, tmp_path / "refused.npy", backend)
                assert done.returncode != 0 and str(e) in done.stderr, f"{what}: {e} / {done.stderr}"
                continue
            ref = np.load(FIXTURES / entry["ref"])
            exact = ref.dtype.kind in "ui" and entry["kind"] != "mean-dp-f32"
            if exact:
                assert got.dtype == ref.dtype and np.array_equal(got, ref), f"{what}: differs from numpy"
            # Each CLI run on a GPU builds a device (seconds on a software GPU) or compiles
            # the CUDA kernels: there, the float products of a few fixtures are compared
            # with it, the rest with numpy.
            if backend == "cpu" or (not exact and fx["name"] in WGPU_CLI_FIXTURES):
                want = cli_product(fx, kind, params, tmp_path / f"{n}.npy", backend)
                assert got.dtype == want.dtype and got.shape == want.shape, what
                assert got.tobytes() == want.tobytes(), f"{what}: differs from the CLI"
            compared += 1
    # 398 of the manifest's products on the CPU reference; the GPU refuses a few more.
    assert compared > 350, compared


def test_shape_dtype_info_frames():
    fx = next(f for f in MANIFEST["fixtures"] if f["name"] == "arina_u16")
    a = stem4d.open(paths(fx), backend="cpu")
    assert a.shape == tuple(fx["shape"])
    assert a.dtype == np.uint16
    assert a.info["format"] == "arina" or a.info["format"].lower() == "arina"
    assert a.calibration, a.info
    decoded = np.load(FIXTURES / "ref" / "arina_u16" / "decoded.npy")
    r, c, kr, kc = fx["shape"]
    frames = a.frames(1, 3)
    assert frames.shape == (2 * c, kr, kc) and frames.dtype == np.uint16
    assert np.array_equal(frames, decoded[1:3].reshape(-1, kr, kc))
    assert a.backend == "cpu"


def test_auto_says_what_it_took():
    """`auto` takes a hardware adapter for wgpu, else CUDA, else the CPU reference, and its
    provenance says which and why (here, on a software adapter without CUDA: the CPU)."""
    fx = next(f for f in MANIFEST["fixtures"] if f["name"] == "arina_u16")
    a = stem4d.open(paths(fx), backend="auto")
    said = " ".join(a.provenance)
    if a.backend == "cpu":
        assert "backend auto: wgpu has" in said and "not CUDA either" in said, a.provenance
        assert "CPU reference computes the products" in said, a.provenance
    elif a.backend.startswith("cuda"):
        assert "backend auto: CUDA on" in said, a.provenance
    else:
        assert a.backend.startswith("wgpu"), a.backend
    # A budget is the wgpu engine's: never CUDA then.
    b = stem4d.open(paths(fx), backend="auto", memory_budget=262144)
    assert not b.backend.startswith("cuda"), b.backend


def test_a_master_alone_finds_its_files(tmp_path):
    fx = next(f for f in MANIFEST["fixtures"] if f["name"] == "arina_u16")
    for p in paths(fx):
        shutil.copy(p, tmp_path)
    master = tmp_path / "arina_u16_master.h5"
    a = stem4d.open(master, backend="cpu")
    assert len(a.files) == 4, a.files
    b = stem4d.open(paths(fx), backend="cpu")
    assert np.array_equal(a.product("total"), b.product("total"))
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(master, lone)
    with pytest.raises(stem4d.Error, match="arina_u16_data_000001.h5"):
        stem4d.open(lone / "arina_u16_master.h5")


def test_errors_name_the_file_and_the_problem(tmp_path):
    bad = tmp_path / "empty.h5"
    bad.write_bytes(b"")
    with pytest.raises(stem4d.Error, match="empty.h5"):
        stem4d.open(bad)
    fx = next(f for f in MANIFEST["fixtures"] if f["name"] == "arina_u16")
    a = stem4d.open(paths(fx), backend="cpu")
    with pytest.raises(stem4d.Error, match="radius"):
        a.product("bf", center=(3, 3))
    with pytest.raises(stem4d.Error, match="not one of"):
        a.product("bf", centre=(3, 3), radius=2)
    with pytest.raises(stem4d.Error, match="belongs to stem4d.open"):
        a.product("total", bin=2)
    with pytest.raises(stem4d.Error, match="backend 'tpu'"):
        stem4d.open(paths(fx), backend="tpu")
    # The CUDA backend holds the whole acquisition: a budget there is refused, not ignored.
    with pytest.raises(stem4d.Error, match="backend 'cuda' holds the whole acquisition"):
        stem4d.open(paths(fx), backend="cuda", memory_budget=262144)
    if sys.platform != "darwin":
        # A graphics API this machine has no adapter for is named with the adapters there are.
        with pytest.raises(stem4d.Error, match="backend 'metal' has no adapter on this machine"):
            stem4d.open(paths(fx), backend="metal")
    with pytest.raises(stem4d.Error, match="not within"):
        a.frames(3, 99)


def test_plans_give_the_residents_products():
    fx = next(f for f in MANIFEST["fixtures"] if f["name"] == "arina_u16")
    plain = stem4d.open(paths(fx), backend="wgpu", mask_bad_pixels=True)
    for plan in ("compressed", "streaming", "cpu"):
        a = stem4d.open(paths(fx), backend="wgpu", mask_bad_pixels=True, memory_budget=262144,
                        memory_plan=plan)
        # (CoM on the CPU reference is float64, the GPU's float32: integer products only there.)
        kinds = [("bf", dict(center=(6, 5), radius=3)), ("max-dp", {})] + ([("com", {})] if plan != "cpu" else [])
        for kind, kw in kinds:
            assert a.product(kind, **kw).tobytes() == plain.product(kind, **kw).tobytes(), (plan, kind)
        assert any(f"memory plan: {plan}" in line for line in a.provenance), a.provenance


def test_cuda_compressed_gives_the_raw_residents_products():
    """``memory_plan="compressed"`` on the CUDA backend holds the counts compressed (decision
    0064) and gives the raw resident's products, said in the provenance."""
    cuda_or_skip()
    fx = next(f for f in MANIFEST["fixtures"] if f["name"] == "arina_u16")
    raw = stem4d.open(paths(fx), backend="cuda", mask_bad_pixels=True)
    packed = stem4d.open(paths(fx), backend="cuda", mask_bad_pixels=True, memory_plan="compressed")
    for kind, kw in [("bf", dict(center=(6, 5), radius=3)), ("max-dp", {}), ("com", {}), ("total", {})]:
        assert packed.product(kind, **kw).tobytes() == raw.product(kind, **kw).tobytes(), kind
    assert any("CUDA compressed resident" in line for line in packed.provenance), packed.provenance


@pytest.fixture(autouse=True)
def sigint_handled():
    """Ctrl-C as in a terminal, however the tests were started: a shell that runs them in
    the background ignores SIGINT, and `_thread.interrupt_main` then does nothing."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_stops_long_work_and_leaves_the_acquisition_usable():
    fx = next(f for f in MANIFEST["fixtures"] if f["name"] == "arina_u16")
    a = stem4d.open(paths(fx), backend="cpu")
    want = a.product("sum-dp")
    heard = []

    def ctrl_c(stage, done, total):
        heard.append((stage, done, total))
        _thread.interrupt_main()  # what Ctrl-C does: the SIGINT handler's flag

    with pytest.raises(KeyboardInterrupt):
        a.product("sum-dp", progress=ctrl_c)
    assert heard and heard[0][0] == "computing on the CPU reference", heard
    assert a.product("sum-dp").tobytes() == want.tobytes()
    heard.clear()
    with pytest.raises(KeyboardInterrupt):
        a.frames(0, 2, progress=ctrl_c)
    assert heard and heard[0][0] == "reading frames", heard

    # An exception from the callback stops the work too, and is the one raised.
    def fails(stage, done, total):
        raise ValueError("enough")

    with pytest.raises(ValueError, match="enough"):
        a.product("total", progress=fails)
    assert a.frames(0, 1).shape[0] == fx["shape"][1]


def test_ctrl_c_stops_a_streamed_pass():
    fx = next(f for f in MANIFEST["fixtures"] if f["name"] == "hot_stack_u16")
    plain = stem4d.open(paths(fx), backend="wgpu")
    a = stem4d.open(paths(fx), backend="wgpu", memory_budget=262144, memory_plan="streaming")
    stages = []

    def ctrl_c(stage, done, total):
        stages.append(stage)
        _thread.interrupt_main()

    with pytest.raises(KeyboardInterrupt):
        a.product("com", progress=ctrl_c)
    assert stages, "the streamed pass reported no step"
    assert a.product("com").tobytes() == plain.product("com").tobytes()


@pytest.mark.parametrize("backend", ["cpu", "wgpu", "cuda"])
def test_the_dpc_rotation_is_the_clis(backend, tmp_path):
    """`dpc-rotation` (C-DPC-ROTATION) from Python is `[theta_deg, flip, curl_energy]`, byte for
    byte what the CLI writes on the same backend; a scan without a 2 x 2 cell is refused."""
    backend_or_skip(backend)
    fx = next(f for f in MANIFEST["fixtures"] if f["name"] == "hot_stack_u16")
    acq = stem4d.open(paths(fx), scan_shape=fx["scan_shape"], dataset=fx["dataset"], backend=backend)
    params = {"center": [20.0, 17.5], "inner": 6.0, "outer": 14.0}
    got = acq.product("dpc-rotation", **params)
    assert got.dtype == np.float64 and got.shape == (3,), got
    assert 0.0 <= got[0] < 360.0 and got[1] in (0.0, 1.0) and got[2] >= 0.0, got
    want = cli_product(fx, "dpc-rotation", params, tmp_path / "rotation.npy", backend)
    assert got.tobytes() == want.tobytes(), (got, want)
    one_row = stem4d.open(paths(fx), scan_shape=fx["scan_shape"], dataset=fx["dataset"], crop=(0, 1, 0, 5), backend=backend)
    with pytest.raises(stem4d.Error, match="2 x 2"):
        one_row.product("dpc-rotation", **params)


def test_prepare_writes_what_the_cli_writes_and_reopens(tmp_path):
    fx = next(f for f in MANIFEST["fixtures"] if f["name"] == "arina_u16")
    a = stem4d.open(paths(fx), backend="cpu")
    out = tmp_path / "arina.stem4d"
    heard = []
    a.prepare(out, progress=lambda *step: heard.append(step))
    assert heard and heard[-1][0] == "writing the prepared file", heard
    # The same bytes as the committed fixture `stem4d prepare` wrote.
    assert out.read_bytes() == (FIXTURES / "data" / "arina_u16.stem4d").read_bytes()
    b = stem4d.open(out, backend="cpu")
    assert b.info["format"] == "prepared"
    for kind in ["total", "com", "max-dp"]:
        assert b.product(kind).tobytes() == a.product(kind).tobytes(), kind
    with pytest.raises(stem4d.Error, match="NAME.stem4d"):
        a.prepare(tmp_path / "arina.h5")
    with pytest.raises(stem4d.Error, match="overwrite"):
        b.prepare(out)

    def ctrl_c(stage, done, total):
        _thread.interrupt_main()

    with pytest.raises(KeyboardInterrupt):
        a.prepare(tmp_path / "stopped.stem4d", progress=ctrl_c)
    # Stopped before its last piece, nothing is left; a file that was whole already stays.
    assert not list(tmp_path.glob("*.partial")), list(tmp_path.iterdir())
    if (tmp_path / "stopped.stem4d").exists():
        assert (tmp_path / "stopped.stem4d").read_bytes() == out.read_bytes()


def test_compare_gives_each_acquisitions_product_with_one_detector(tmp_path):
    """stem4d.compare: the Arina fixture, its prepared copy and a prepared crop, one BF
    detector: each array is what Acquisition.product gives for it alone; another detector
    shape is refused naming both files."""
    fx = next(f for f in MANIFEST["fixtures"] if f["name"] == "arina_u16")
    data = FIXTURES / "data"
    groups = [paths(fx), data / "arina_u16.stem4d", [data / "arina_u16_crop.stem4d"]]
    bf = dict(center=(6.3, 4.6), radius=2.7)
    got = stem4d.compare(groups, "bf", backend="cpu", **bf)
    assert [g.shape for g in got] == [(5, 7), (5, 7), (3, 5)]
    for g, a in zip(got, groups):
        assert g.tobytes() == stem4d.open(a, backend="cpu").product("bf", **bf).tobytes()
    other = next(f for f in MANIFEST["fixtures"] if f["name"] == "emd_u16_contig")
    with pytest.raises(stem4d.Error, match="emd_u16_contig.h5: its detector is 8\u00d79 pixels and that of arina_u16_master.h5 is 13\u00d711"):
        stem4d.compare([paths(fx), paths(other)], "bf", backend="cpu", **bf)
