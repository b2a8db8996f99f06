"""Rank 0's peak extra memory in one per-sample ``compute()``, measured inside a launched rank.

The check a backend's own tests run in real processes (its launcher, its
group): every rank keeps ``rows`` rows of ten float64 scores and an int64 label
(88 bytes a row) in batches of 1,000 that own their memory, rank 0 resets its
peak RSS (``/proc/self/clear_refs``), runs ``compute()`` once -- the first of
the process, so nothing a transport pooled earlier hides what it pays -- and
reads ``VmHWM``: tracemalloc does not see a transport's buffers. The ratio is
that peak over the world's results (``world_size * rows * 88`` bytes); the
result is checked against the same rows put in dataset order here.

glibc gives freed heap blocks back late, so a peak depends on what ran before
in the process; launch the ranks with :data:`RANK_ENV` (large blocks mapped on
their own and unmapped when freed) for a stable figure. Linux only (``/proc``).
"""

from __future__ import annotations

import gc
import hashlib
from typing import Any, Dict, Optional

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.dist_backends.base_backend import BaseDistBackend

__all__ = ["CLASSES", "RANK_ENV", "measure_rank0_memory", "rank_rows"]

#: Scores per row.
CLASSES = 10
#: Environment of the measured ranks: glibc maps every block of 64 KiB and more on its own and unmaps it when freed.
RANK_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}
_ROW_BYTES = CLASSES * 8 + 8


def rank_rows(rank: int, rows: int) -> Dict[str, np.ndarray]:
    """Rank ``rank``'s rows: ``scores`` (rows x :data:`CLASSES` float64) and ``labels`` (int64)."""
    rng = np.random.default_rng(7 + rank)
    return {"scores": rng.random((rows, CLASSES)), "labels": rng.integers(0, CLASSES, rows)}


def _digest(results: Any) -> Dict[str, str]:
    """Each column's sha256, over the output's own memory (no copy of a contiguous column)."""
    return {k: hashlib.sha256(np.ascontiguousarray(results[k]).data.cast("B")).hexdigest() for k in results}


def _vm(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _trim_heap() -> None:
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class _Kept(BaseMetric):
    """Keeps the rows; its computation is a digest, so what is measured is the path, not a metric's work."""

    def add(self, scores: Any, labels: Any) -> None:
        self._add_batch(scores=scores, labels=labels)

    def compute_metric(self, results: Any) -> Dict[str, Any]:
        return {"rows": len(results), "digest": _digest(results)}


def measure_rank0_memory(backend: BaseDistBackend, rows: int, mode: str = "unzip") -> Dict[str, Any]:
    """Run the measurement on this rank (every rank of ``backend``'s group calls it); what it saw.

    Returns ``{"rank", "world_size", "peak_extra_bytes", "world_results_bytes",
    "ratio", "result_ok"}``: ``ratio`` is this rank's peak extra memory over the
    world's results (the figure that counts is rank 0's), ``result_ok``
    whether ``compute()`` returned every rank's rows in ``mode``'s dataset
    order (``'unzip'``: round robin, ``'cat'``: rank after rank).
    """
    rank, ws = backend.rank, backend.world_size
    metric = _Kept(dist_backend=backend, dist_collect_mode=mode)
    data = rank_rows(rank, rows)
    for s in range(0, rows, 1000):
        metric.add(data["scores"][s : s + 1000].copy(), data["labels"][s : s + 1000].copy())
    del data
    world = ws * rows * _ROW_BYTES
    gc.collect()
    _trim_heap()
    backend.barrier()
    before = _vm("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    result = metric.compute(size=ws * rows)
    peak = _vm("VmHWM") - before
    parts = [rank_rows(r, rows) for r in range(ws)]
    want: Optional[Dict[str, np.ndarray]]
    if mode == "unzip":
        want = {k: np.stack([p[k] for p in parts], axis=1).reshape(ws * rows, *parts[0][k].shape[1:]) for k in parts[0]}
    else:
        want = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    ok = result == {"rows": ws * rows, "digest": _digest(want)}
    del parts, want
    return {
        "rank": rank,
        "world_size": ws,
        "peak_extra_bytes": peak,
        "world_results_bytes": world,
        "ratio": round(peak / world, 3),
        "result_ok": bool(ok),
    }
