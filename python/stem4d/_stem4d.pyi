"""Type stubs of the compiled engine (`python/src/lib.rs`)."""

from os import PathLike
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import numpy as np

class Error(Exception):
    """An error of the stem4d engine: the message names the file and the problem."""

class Acquisition:
    @property
    def shape(self) -> Tuple[int, int, int, int]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def bin(self) -> int: ...
    @property
    def mask_bad_pixels(self) -> bool: ...
    @property
    def backend(self) -> str: ...
    @property
    def files(self) -> list[str]: ...
    @property
    def provenance(self) -> list[str]: ...
    def info_json(self) -> str: ...
    def product_json(
        self, request: str, progress: Optional[Callable[[str, int, int], Any]] = None
    ) -> np.ndarray: ...
    def frames(
        self, r0: int, r1: int, progress: Optional[Callable[[str, int, int], Any]] = None
    ) -> np.ndarray: ...
    def prepare(
        self, out: str, progress: Optional[Callable[[str, int, int], Any]] = None
    ) -> None: ...

def open(
    paths: Sequence[Union[str, PathLike]],
    scan_shape: Optional[Tuple[int, int]] = None,
    dataset: Optional[str] = None,
    bin: int = 1,
    mask_bad_pixels: bool = False,
    memory_budget: Optional[int] = None,
    memory_plan: Optional[str] = None,
    backend: str = "auto",
    crop: Optional[Tuple[int, int, int, int]] = None,
) -> Acquisition: ...
