"""stem4d.dask on a LocalCluster of two worker processes: many acquisitions at once, and one
acquisition split by scan rows, each byte for byte what one process computes."""

from __future__ import annotations

import numpy as np
import pytest

import stem4d
import stem4d.dask
from test_stem4d import MANIFEST, paths

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


def fixture(name):
    return next(f for f in MANIFEST["fixtures"] if f["name"] == name)


def test_many_acquisitions_at_once(client):
    names = ["arina_u16", "hot_stack_u16", "mib_u16", "emd_f32"]
    fxs = [fixture(n) for n in names]
    got = stem4d.dask.products([paths(fx) for fx in fxs], "total", open_kw={"backend": "cpu"}, client=client)
    for fx, g in zip(fxs, got):
        want = stem4d.open(paths(fx), backend="cpu").product("total")
        assert g.dtype == want.dtype and g.tobytes() == want.tobytes(), fx["name"]
    same = [fixture("arina_u16")] * 3
    lazy = stem4d.dask.stacked([paths(fx) for fx in same], "max-dp", open_kw={"backend": "cpu"})
    stack = client.compute(lazy).result()
    one = stem4d.open(paths(same[0]), backend="cpu").product("max-dp")
    assert stack.shape == (3,) + one.shape and all(np.array_equal(s, one) for s in stack)


@pytest.mark.parametrize("name", ["arina_u16", "mib_quad_u32", "hot_stack_u16"])
def test_one_acquisition_split_by_rows(client, name):
    fx = fixture(name)
    open_kw = {"backend": "cpu", "scan_shape": fx["scan_shape"], "mask_bad_pixels": False}
    whole = stem4d.open(paths(fx), **open_kw)
    r, c, kr, kc = fx["shape"]
    centre = (kr / 2 - 0.3, kc / 2 + 0.4)
    for kind, params in [
        ("total", {}),
        ("bf", {"center": centre, "radius": min(kr, kc) / 4}),
        ("com", {}),
        ("binned", {}),
        ("sum-dp", {}),
        ("mean-dp", {}),
        ("max-dp", {}),
    ]:
        want = whole.product(kind, **params)
        got = stem4d.dask.split_rows(paths(fx), kind, rows_per_task=2, open_kw=open_kw, client=client, **params)
        assert got.dtype == want.dtype and got.shape == want.shape, (name, kind)
        assert got.tobytes() == want.tobytes(), (name, kind)


def test_what_cannot_be_split_is_refused():
    fx = fixture("arina_u16")
    with pytest.raises(stem4d.Error, match="not split by scan rows"):
        stem4d.dask.split_rows(paths(fx), "idpc")
    with pytest.raises(stem4d.Error, match="rounded once"):
        stem4d.dask.split_rows(paths(fixture("emd_f32")), "sum-dp", open_kw={"backend": "cpu"})
