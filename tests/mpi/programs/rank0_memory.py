"""Issue 33 item 5: rank 0's peak extra memory in a per-sample compute() (its first, in a fresh process).

``mpiexec -n 3 python rank0_memory.py ROWS MODE``: every rank keeps ROWS
samples of 10 float64 scores and an int64 label (88 bytes a row), in batches
of 1,000 that own their memory; rank 0 resets its peak RSS
(``/proc/self/clear_refs``), runs ``compute()`` once and reads ``VmHWM``:
tracemalloc does not see the transport's buffers. Rank 0 must hold about one
output plus what it has not copied yet: at most :data:`LIMIT` times the world's
results (it held every received block and the output at once: 1 + (ws-1)/ws,
1.67x on 3 ranks, plus a pooled receive buffer, before). The result is checked
against the same rows put in order here.
"""

from __future__ import annotations

import gc
import hashlib
import sys
from typing import Any, Dict

import numpy as np
from _harness import Checker, report

#: rank 0's peak extra memory in compute() / the world's results
LIMIT = 1.35
CLASSES = 10


def _data(rank: int, rows: int) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(7 + rank)
    return {"scores": rng.random((rows, CLASSES)), "labels": rng.integers(0, CLASSES, rows)}


def _digest(results: Any) -> Dict[str, str]:
    # no copy: the digest of the output's own memory
    return {k: hashlib.sha256(memoryview(np.ascontiguousarray(results[k])).cast("B")).hexdigest() for k in results}


def _vm(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    from mmeval.core import BaseMetric
    from mmeval_mpi4py import MPI4PyDist

    rows, mode = int(sys.argv[1]), sys.argv[2]

    class Kept(BaseMetric):
        def add(self, scores: Any, labels: Any) -> None:  # type: ignore[override]
            self._add_batch(scores=scores, labels=labels)

        def compute_metric(self, results: Any) -> Dict[str, Any]:
            return {"rows": len(results), "digest": _digest(results)}

    c = Checker()
    b = MPI4PyDist()
    rank, ws = b.rank, b.world_size
    metric = Kept(dist_backend=b, dist_collect_mode=mode)
    data = _data(rank, rows)
    for s in range(0, rows, 1000):
        metric.add(data["scores"][s : s + 1000].copy(), data["labels"][s : s + 1000].copy())
    del data
    world = ws * rows * (CLASSES * 8 + 8)
    gc.collect()
    b.barrier()
    before = _vm("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    result = metric.compute(size=ws * rows)
    peak = _vm("VmHWM") - before
    parts = [_data(r, rows) for r in range(ws)]
    if mode == "unzip":
        want = {k: np.stack([p[k] for p in parts], axis=1).reshape(ws * rows, *parts[0][k].shape[1:]) for k in parts[0]}
    else:
        want = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    c.equal("the results, in dataset order", result, {"rows": ws * rows, "digest": _digest(want)})
    if rank == 0:
        ratio = peak / world
        c.info["ratio"] = round(ratio, 3)
        c.check(f"rank 0's peak extra memory <= {LIMIT}x the world's results", ratio <= LIMIT, f"{ratio:.2f}x")
    report(rank, c)


if __name__ == "__main__":
    main()
