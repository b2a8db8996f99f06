"""COCODetection's masks decoded by mmeval-coco-native, kept as their runs until they are matched.

:class:`BatchRuns` holds an ``add()`` batch's (or one list's) masks, their runs in one buffer;
:class:`MaskRuns` is one image's list, a range of it (so the matching joins many images' masks by ranges);
:class:`DecodedMasks` reads such a list as pycocotools' compressed RLE dicts, for the pure path's fallbacks.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .extras import import_extra

__all__ = ["BatchRuns", "DecodedMasks", "MaskRuns"]


class BatchRuns:
    """Masks decoded by mmeval-coco-native, their runs in one buffer (an ``add()`` batch's, or one list's):
    mask ``j``'s runs are ``runs[start[j]:end[j]]`` (uint32, exactly the mask's runs; int64 bounds), its area
    ``area[j]`` (pycocotools' ``area``, float64) and its size ``hw[j]`` (height * 2**32 + width, int64)."""

    __slots__ = ("runs", "start", "end", "area", "hw")

    def __init__(self, runs: np.ndarray, start: np.ndarray, end: np.ndarray, area: np.ndarray, hw: np.ndarray) -> None:
        self.runs, self.start, self.end, self.area, self.hw = runs, start, end, area, hw

    @classmethod
    def one_list(cls, runs: Any, offsets: Any, area: Any, hw: Any, n: int) -> "MaskRuns":
        """The ``n`` masks of one list as the kernels give them (buffers: uint32 runs, int64 offsets of each
        mask's first run and then the end, float64 areas, int64 sizes; any room past ``n`` ignored)."""
        off = np.frombuffer(offsets, dtype=np.int64)
        f8, i8 = np.frombuffer(area, dtype=np.float64)[:n], np.frombuffer(hw, dtype=np.int64)[:n]
        return MaskRuns(cls(np.frombuffer(runs, dtype=np.uint32), off[:n], off[1 : n + 1], f8, i8), 0, n)


class MaskRuns:
    """One list of masks as decoded: masks ``m0 .. m1`` of a :class:`BatchRuns` (a batch's lists lie one after
    another there, so the matching joins many images' masks by ranges, not mask by mask)."""

    __slots__ = ("batch", "m0", "m1")

    def __init__(self, batch: BatchRuns, m0: int, m1: int) -> None:
        self.batch, self.m0, self.m1 = batch, m0, m1

    def __len__(self) -> int:
        return self.m1 - self.m0

    @property
    def area(self) -> np.ndarray:
        """The masks' areas (pycocotools' ``area``)."""
        return self.batch.area[self.m0 : self.m1]


class DecodedMasks(Sequence[Any]):
    """A list of compressed RLE masks kept as their runs, decoded at ``add()`` (:data:`MaskRuns`): item ``j`` is
    the compressed RLE dict pycocotools encodes of mask ``j``'s runs -- the runs pycocotools decodes of the mask
    given, so the same area and IoU -- made when read (only the pure path's fallbacks read them)."""

    __slots__ = ("runs",)

    def __init__(self, runs: MaskRuns) -> None:
        self.runs = runs

    def __len__(self) -> int:
        return len(self.runs)

    def __getitem__(self, j: Any) -> Any:
        if isinstance(j, slice):
            return [self[i] for i in range(*j.indices(len(self)))]
        n = len(self)
        if not -n <= j < n:
            raise IndexError(f"mask {j} of {n}")
        j = int(j) % n
        b, k = self.runs.batch, self.runs.m0 + j
        h, w = divmod(int(b.hw[k]), 1 << 32)
        mask = import_extra("pycocotools.mask", "COCODetection")
        return mask.frPyObjects({"size": [h, w], "counts": b.runs[b.start[k] : b.end[k]].tolist()}, h, w)
