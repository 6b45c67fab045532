"""stem4d: exact 4D-STEM products of local acquisitions, on the GPU or the CPU reference.

    >>> import stem4d
    >>> a = stem4d.open(["scan_master.h5"])          # its data files are found beside it
    >>> bf = a.product("bf", center=(36, 31), radius=12)

Products, their dtypes, shapes and conventions are the CLI's (``stem4d product``) and the
page's: one parameter vocabulary, in snake_case here (``scan_roi=(r0, r1, c0, c1)``).
Every error is a :class:`stem4d.Error` whose message names the file and the problem.
Long work (a product's upload, a streamed pass, the CPU reference, a frame read) stops at
its next block on Ctrl-C (``KeyboardInterrupt``) and leaves the acquisition usable; pass
``progress=callable(stage, done, total)`` to follow it.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from . import _stem4d
from ._stem4d import Error

__all__ = ["open", "compare", "Acquisition", "Error", "PRODUCT_KEYS"]

#: A callback hearing long work: ``(stage, done, total)``, ``done`` of ``total`` in the
#: stage's own units (frames, scan rows).
Progress = Callable[[str, int, int], Any]

#: Keyword arguments :meth:`Acquisition.product` takes, and their page/JSON names.
PRODUCT_KEYS = {
    "center": "center",
    "radius": "radius",
    "inner": "inner",
    "outer": "outer",
    "rect": "rect",
    "mask": "mask",
    "scan_roi": "scanRoi",
    "at": "at",
    "rotation": "rotation",
    "flip": "flip",
}


def _plain(value: Any) -> Any:
    """numpy values and tuples as JSON takes them."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


class Acquisition:
    """An opened acquisition (see :func:`open`)."""

    def __init__(self, inner: "_stem4d.Acquisition"):
        self._inner = inner

    @property
    def shape(self) -> Tuple[int, int, int, int]:
        """(scan rows, scan cols, detector rows, detector cols) as stored, before the bin."""
        return self._inner.shape

    @property
    def dtype(self) -> np.dtype:
        """The samples' dtype."""
        return np.dtype(self._inner.dtype)

    @property
    def bin(self) -> int:
        return self._inner.bin

    @property
    def mask_bad_pixels(self) -> bool:
        return self._inner.mask_bad_pixels

    @property
    def backend(self) -> str:
        """Where products are computed: ``cpu`` or ``wgpu (ADAPTER, API)``."""
        return self._inner.backend

    @property
    def files(self) -> list:
        """Every file read: those given and those found beside them."""
        return [os.fspath(p) for p in self._inner.files]

    @property
    def provenance(self) -> list:
        """What the engine said while opening and computing: backend, plans, fallbacks."""
        return list(self._inner.provenance)

    @property
    def info(self) -> dict:
        """The dict ``stem4d info --json`` prints."""
        return json.loads(self._inner.info_json())

    @property
    def calibration(self) -> dict:
        """Scan step, detector pixel size, high tension, camera length, each with its source."""
        return self.info.get("calibration", {})

    def product(self, kind: str, progress: Optional[Progress] = None, **params: Any) -> np.ndarray:
        """One product (``sum-dp``, ``bf``, ``adf``, ``com``, ``idpc``, ``dpc-rotation``, …) as
        a numpy array, with the CLI's dtype and shape. Keyword arguments: ``center``, ``radius``, ``inner``,
        ``outer``, ``rect``, ``mask`` (a boolean or weighted detector array), ``scan_roi``,
        ``at``, ``rotation``, ``flip``. ``progress(stage, done, total)`` hears the steps of
        long work; Ctrl-C stops it."""
        request = {"kind": kind, "bin": self.bin, "maskBadPixels": self.mask_bad_pixels}
        for key, value in params.items():
            if key in ("bin", "mask_bad_pixels"):
                raise Error(f"{key} belongs to stem4d.open: open the acquisition again to change it")
            if key not in PRODUCT_KEYS:
                known = ", ".join(sorted(PRODUCT_KEYS))
                raise Error(f"product parameter '{key}' is not one of {known}")
            if value is not None:
                request[PRODUCT_KEYS[key]] = _plain(value)
        return self._inner.product_json(json.dumps(request), progress)

    def frames(self, r0: int, r1: int, progress: Optional[Progress] = None) -> np.ndarray:
        """The frames of scan rows ``[r0, r1)`` decoded as stored, ``(n, Kr, Kc)``;
        ``progress(stage, done, total)`` hears each block read; Ctrl-C stops the read."""
        return self._inner.frames(r0, r1, progress)

    def prepare(self, out: Union[str, os.PathLike], progress: Optional[Callable[[str, int, int], Any]] = None) -> None:
        """Write the acquisition as a prepared file ``NAME.stem4d`` (as ``stem4d prepare``):
        decoded once into the GPU's layout, each block with its SHA-256, reopened by
        :func:`open` without decoding. ``progress(stage, done, total)`` hears each block;
        Ctrl-C stops it, and a file stopped short is never left."""
        self._inner.prepare(os.fspath(out), progress)

    def __repr__(self) -> str:
        r, c, kr, kc = self.shape
        return f"<stem4d.Acquisition {r}x{c} scan of {kr}x{kc} {self.dtype} on {self.backend}>"


def open(
    paths: Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]],
    *,
    scan_shape: Optional[Sequence[int]] = None,
    dataset: Optional[str] = None,
    bin: int = 1,
    mask_bad_pixels: bool = False,
    memory_budget: Optional[int] = None,
    memory_plan: Optional[str] = None,
    backend: str = "auto",
    crop: Optional[Sequence[int]] = None,
) -> Acquisition:
    """Open an acquisition: HDF5 (Arina/Eiger masters with their data files, found in the
    master's folder when not given; py4DSTEM EMD; plain stacks), EMPAD raw, Merlin MIB.

    ``backend``: ``"wgpu"`` (a GPU, or an error), ``"vulkan"``, ``"metal"`` or ``"dx12"``
    (a GPU on that graphics API, or an error naming the adapters there are), ``"cpu"`` (the
    reference), ``"auto"`` (a hardware adapter for wgpu where there is one, else CUDA where
    it is, else the CPU reference; :attr:`Acquisition.provenance` says which and why) or
    ``"cuda"`` (the native CUDA backend: the
    NVIDIA driver and NVRTC found at run time, or an error saying CUDA is absent; it holds
    the whole acquisition, raw or, with ``memory_plan="compressed"``, compressed).
    ``memory_budget`` (bytes) and ``memory_plan`` (``resident``, ``compressed``,
    ``streaming``, ``cpu``) choose how the wgpu engine holds the acquisition, as the CLI's
    ``--memory-budget`` and ``--memory-plan`` do. ``crop=(r0, r1, c0, c1)`` keeps those
    scan rows and columns (half-open) and reads only their frames."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    shape = None if scan_shape is None else (int(scan_shape[0]), int(scan_shape[1]))
    inner = _stem4d.open(
        [os.fspath(p) for p in paths],
        scan_shape=shape,
        dataset=dataset,
        bin=int(bin),
        mask_bad_pixels=bool(mask_bad_pixels),
        memory_budget=None if memory_budget is None else int(memory_budget),
        memory_plan=memory_plan,
        backend=backend,
        crop=None if crop is None else tuple(int(v) for v in crop),
    )
    return Acquisition(inner)


def compare(
    acquisitions: Sequence[Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]],
    kind: str,
    *,
    bin: int = 1,
    mask_bad_pixels: bool = False,
    backend: str = "auto",
    scan_shape: Optional[Sequence[int]] = None,
    progress: Optional[Progress] = None,
    **params: Any,
) -> list:
    """One product of several acquisitions with one shared detector (the page's compare
    grid, ``stem4d compare``): each acquisition (a path, or the list of its files) opened as
    :func:`open` opens it, with the same ``bin`` and masking, and its product computed with
    the same parameters; a list of numpy arrays in the order given. An acquisition whose
    detector (binned) has another shape than the first's is refused, naming both, before
    any product is computed."""
    opened = [
        open(a, scan_shape=scan_shape, bin=bin, mask_bad_pixels=mask_bad_pixels, backend=backend)
        for a in acquisitions
    ]
    if len(opened) < 2:
        raise Error("compare takes two acquisitions or more; for one, use Acquisition.product")

    def detector(a: Acquisition) -> Tuple[int, int]:
        kr, kc = a.shape[2], a.shape[3]
        return (-(-kr // a.bin), -(-kc // a.bin))

    first = opened[0]
    for a in opened[1:]:
        if detector(a) != detector(first):
            (r, c), (fr, fc) = detector(a), detector(first)
            binned = f" (bin {bin})" if bin > 1 else ""
            raise Error(
                f"{os.path.basename(a.files[0])}: its detector is {r}\u00d7{c} pixels{binned} and that of "
                f"{os.path.basename(first.files[0])} is {fr}\u00d7{fc}: one detector cannot be shared "
                "between them"
            )
    return [a.product(kind, progress=progress, **params) for a in opened]
