"""stem4d on a Dask cluster: many acquisitions at once, or one split by scan rows.

Each task opens its acquisition (or its rows of one) on the worker that runs it, with the
backend that worker has, so only paths and parameters travel to workers and only products
come back. Results are byte for byte those of one process (:func:`stem4d.open` then
``.product``): per-position products of row blocks are joined in order, pattern sums are
added as exact integers in a tree, means divided once from the exact total, maxima taken.

    >>> from dask.distributed import Client
    >>> import stem4d.dask
    >>> client = Client("scheduler:8786")
    >>> bf = stem4d.dask.products(["a_master.h5", "b_master.h5"], "bf", center=(36, 31), radius=12)
    >>> total = stem4d.dask.split_rows("big_master.h5", "total", rows_per_task=64)
"""

from __future__ import annotations

import glob as _glob
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np

import stem4d

__all__ = ["products", "stacked", "split_rows", "ROW_KINDS", "PATTERN_KINDS"]

#: Products computed position by position: row blocks join along the scan rows.
ROW_KINDS = ("total", "bf", "adf", "df", "rect", "mask", "com", "binned")
#: Products over positions: row blocks combine exactly (sums added, maxima taken).
PATTERN_KINDS = ("sum-dp", "mean-dp", "max-dp")

Paths = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]


def _dask():
    try:
        import dask
    except ImportError as e:  # pragma: no cover - dask is an optional dependency
        raise stem4d.Error("stem4d.dask needs dask: pip install 'dask[array]' distributed") from e
    return dask


def _acquisitions(acquisitions: Union[str, Sequence[Paths]]) -> List[Paths]:
    """A glob pattern's files, sorted (each one acquisition), or the list as given."""
    if isinstance(acquisitions, (str, os.PathLike)):
        found = sorted(_glob.glob(os.fspath(acquisitions)))
        if not found:
            raise stem4d.Error(f"{os.fspath(acquisitions)}: no file matches")
        return found
    return list(acquisitions)


def _product(paths: Paths, kind: str, open_kw: Dict[str, Any], params: Dict[str, Any]) -> np.ndarray:
    return stem4d.open(paths, **open_kw).product(kind, **params)


def _compute(items: list, client=None) -> list:
    if client is not None:
        return client.gather(client.compute(items))
    return list(_dask().compute(*items))


def products(
    acquisitions: Union[str, Sequence[Paths]],
    kind: str,
    *,
    open_kw: Optional[Dict[str, Any]] = None,
    client=None,
    **params: Any,
) -> List[np.ndarray]:
    """Product ``kind`` of every acquisition (a glob pattern, or a list whose items are a
    path or a list of paths), one task each, as numpy arrays in order. ``open_kw`` goes to
    :func:`stem4d.open` on the worker (``backend``, ``scan_shape``, ``bin``, …)."""
    delayed = _dask().delayed(_product, pure=True)
    tasks = [delayed(p, kind, dict(open_kw or {}), params) for p in _acquisitions(acquisitions)]
    return _compute(tasks, client)


def stacked(
    acquisitions: Union[str, Sequence[Paths]],
    kind: str,
    *,
    open_kw: Optional[Dict[str, Any]] = None,
    **params: Any,
):
    """The products of :func:`products` as one lazy dask array stacked over acquisitions
    (the first is computed here for its shape and dtype; every other must share them)."""
    dask = _dask()
    import dask.array as da

    items = _acquisitions(acquisitions)
    open_kw = dict(open_kw or {})
    first = _product(items[0], kind, open_kw, params)
    delayed = dask.delayed(_product, pure=True)
    parts = [da.from_array(first, chunks=first.shape)] + [
        da.from_delayed(delayed(p, kind, open_kw, params), shape=first.shape, dtype=first.dtype)
        for p in items[1:]
    ]
    return da.stack(parts)


def _rows_part(paths, kind, open_kw, params, rows, cols):
    """Product ``kind`` of scan rows ``rows`` (all ``cols`` columns), reading only theirs."""
    return stem4d.open(paths, crop=(rows[0], rows[1], 0, cols), **open_kw).product(kind, **params)


def _add_exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two exact pattern sums added; refused where 64 bits would wrap, as the engine refuses."""
    if a.dtype.kind == "u":
        out = a + b
        if np.any(out < a):
            raise stem4d.Error("a pattern sum of the row blocks passes 64 bits")
        return out
    return a + b


def _tree(items: list, combine: Callable) -> Any:
    """``combine`` applied pairwise, level by level, as delayed tasks."""
    dask = _dask()
    join = dask.delayed(combine, pure=True)
    while len(items) > 1:
        items = [join(items[i], items[i + 1]) if i + 1 < len(items) else items[i] for i in range(0, len(items), 2)]
    return items[0]


def _mean(total: np.ndarray, count: int) -> np.ndarray:
    """The mean pattern from an exact integer sum: each quotient rounded once (Python's
    int / int is correctly rounded), as the engine rounds it."""
    if total.dtype.kind == "u":
        flat = [int(v) / count for v in total.ravel().tolist()]
        return np.array(flat, dtype=np.float64).reshape(total.shape)
    return total / count


def split_rows(
    paths: Paths,
    kind: str,
    *,
    rows_per_task: int = 64,
    open_kw: Optional[Dict[str, Any]] = None,
    client=None,
    **params: Any,
) -> np.ndarray:
    """Product ``kind`` of one acquisition computed in blocks of ``rows_per_task`` scan rows,
    one task each (each reads only its rows' frames), assembled into the array one process
    gives: per-position products (:data:`ROW_KINDS`) joined along the rows, pattern products
    (:data:`PATTERN_KINDS`, over the whole scan) combined exactly in a tree reduction."""
    open_kw = dict(open_kw or {})
    if "crop" in open_kw:
        raise stem4d.Error("split_rows reads every scan row: open with a crop in stem4d.open instead")
    if kind not in ROW_KINDS and kind not in PATTERN_KINDS:
        raise stem4d.Error(
            f"{kind} is not split by scan rows (it needs the whole scan at once): "
            f"one of {', '.join(ROW_KINDS + PATTERN_KINDS)}, or stem4d.dask.products"
        )
    if "scan_roi" in params:
        raise stem4d.Error("split_rows computes the whole scan: scan_roi is for stem4d.open(...).product")
    whole_acq = stem4d.open(paths, **open_kw)
    rows, cols = whole_acq.shape[:2]
    if kind in ("sum-dp", "mean-dp") and whole_acq.dtype.kind == "f":
        raise stem4d.Error(
            f"{kind} of float32 data is rounded once over the whole scan: row blocks would round "
            "it once each; compute it with stem4d.open(...).product"
        )
    step = max(1, int(rows_per_task))
    blocks = [(r0, min(r0 + step, rows)) for r0 in range(0, rows, step)]
    part = _dask().delayed(_rows_part, pure=True)
    if kind in ROW_KINDS:
        got = _compute([part(paths, kind, open_kw, params, b, cols) for b in blocks], client)
        # com is (2, rows, cols): its blocks join on their row axis, the second.
        axis = 1 if kind == "com" else 0
        return np.concatenate(got, axis=axis)
    # Each block's exact sum (sum-dp, mean-dp) or maximum.
    piece = "max-dp" if kind == "max-dp" else "sum-dp"
    pieces = [part(paths, piece, open_kw, params, b, cols) for b in blocks]
    combine = np.maximum if kind == "max-dp" else _add_exact
    (whole,) = _compute([_tree(pieces, combine)], client)
    if kind == "mean-dp":
        return _mean(whole, rows * cols)
    return whole
