"""The partitioned per-sample path (mmeval.core.partitioned), on real ranks (hub backend, TCP).

A toy metric -- per key, the sum of its samples' values, each key summed on
rank ``key % world_size`` -- stands for any metric that computes in parts
(COCODetection is the real one, tests/core/test_metric_coco_detection.py). The
reference is the same sums over the dataset itself, in dataset order.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest
from hub_backend import run_ranks

from mmeval.core.base_metric import BaseMetric

N, KEYS = 23, 5  # 23 samples divide by no world size used


def dataset() -> Tuple[List[int], List[float]]:
    rng = np.random.default_rng(7)
    return [int(k) for k in rng.integers(0, KEYS, N)], [float(v) for v in rng.normal(size=N)]


def reference(samples: Sequence[int], world_size: int) -> Dict[str, Any]:
    """The sums in dataset order, the places 0..n-1, and where each key is summed (rank key % world size)."""
    keys, values = dataset()
    sums: Dict[int, float] = {}
    for i in samples:
        sums[keys[i]] = sums.get(keys[i], 0.0) + values[i]
    return {"sums": {str(k): v for k, v in sorted(sums.items())}, "positions": list(range(len(samples))),
            "summed_on": {str(k): k % world_size for k in sorted(sums)}}


class KeySums(BaseMetric):
    """Per key, the sum of the samples' values (in dataset order), computed in parts: key k on rank k % ws."""

    def __init__(self, fail_at: Optional[Tuple[str, int]] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fail_at = fail_at

    def add(self, keys: Sequence[int], values: Sequence[float]) -> None:  # type: ignore[override]
        for k, v in zip(keys, values):
            self._results.append((int(k), float(v)))

    def _fail(self, step: str) -> None:
        rank = self.dist_comm.rank if self.dist_comm.is_initialized else 0
        if self.fail_at is not None and tuple(self.fail_at) == (step, rank):
            raise ValueError(f"KeySums: asked to fail at {step}")

    def _computes_in_parts(self) -> bool:
        return True

    def _partition(self, results: List[Any], positions: np.ndarray, world_size: int) -> List[Any]:
        self._fail("partition")
        parts: List[List[Tuple[int, int, float]]] = [[] for _ in range(world_size)]
        for (k, v), p in zip(results, positions.tolist()):
            parts[k % world_size].append((int(p), k, v))
        return parts

    def _compute_part(self, parts: List[Any]) -> Any:
        self._fail("part")
        items = sorted(tuple(x) for part in parts for x in part)  # dataset order: the reference's float order
        sums: Dict[int, float] = {}
        for _, k, v in items:
            sums[k] = sums.get(k, 0.0) + v
        rank = self.dist_comm.rank if self.dist_comm.is_initialized else 0
        return {"sums": [[k, v] for k, v in sums.items()], "positions": [p for p, _, _ in items], "rank": rank}

    def _combine_parts(self, partials: List[Any]) -> Dict[str, Any]:
        self._fail("combine")
        sums = {int(k): float(v) for part in partials for k, v in part["sums"]}
        positions = sorted(p for part in partials for p in part["positions"])
        where = {str(k): part["rank"] for part in partials for k, _ in part["sums"]}
        return {"sums": {str(k): v for k, v in sorted(sums.items())}, "positions": positions,
                "summed_on": dict(sorted(where.items()))}

    def compute_metric(self, results: Any) -> Dict[str, Any]:
        return self._combine_parts([self._compute_part(self._partition(list(results), np.arange(len(results)), 1))])


def _worker(backend: Any, scheme: str, fail_at: Optional[Tuple[str, int]]) -> Any:
    keys, values = dataset()
    rank, ws = backend.rank, backend.world_size
    metric = KeySums(fail_at=fail_at, dist_backend=backend, dist_collect_mode="cat" if scheme == "cat" else "unzip")
    if scheme == "padded":  # DistributedSampler: round-robin, the last ranks wrap around to the start
        order = list(range(N)) + list(range(-N % ws))
        mine = order[rank::ws]
        metric.add([keys[i] for i in mine], [values[i] for i in mine])
        return metric.compute(size=N)
    if scheme == "cat":  # contiguous, uneven shards
        bounds = np.linspace(0, N, ws + 1).astype(int)
        mine = list(range(bounds[rank], bounds[rank + 1]))
        metric.add([keys[i] for i in mine], [values[i] for i in mine])
        return metric.compute()
    # indices=: shuffled, with duplicates across ranks; each index counts once
    order = [int(i) for i in np.random.default_rng(ws).permutation(N)] + [0, 3, 3, 17]
    mine = order[rank::ws]
    metric.add([keys[i] for i in mine], [values[i] for i in mine], indices=mine)
    return metric.compute()


@pytest.mark.parametrize("ws", [2, 3])
@pytest.mark.parametrize("scheme", ["padded", "cat", "indices"])
def test_every_rank_gets_the_reference(ws: int, scheme: str) -> None:
    single = KeySums()
    keys, values = dataset()
    single.add(keys, values)
    assert single.compute() == reference(range(N), 1)
    want = reference(range(N), ws)  # each key summed on its own rank, the same floats as one process
    out = run_ranks(_worker, ws, scheme, None, timeout=60)
    for rank in range(ws):
        assert out[rank] == ("ok", want), (rank, out[rank])


@pytest.mark.parametrize("step,rank", [("partition", 0), ("partition", 1), ("part", 1), ("part", 0),
                                       ("combine", 0)])
def test_a_failure_on_one_rank_reaches_every_rank(step: str, rank: int) -> None:
    out = run_ranks(_worker, 3, "padded", (step, rank), timeout=60)
    for r in range(3):
        status, value = out[r]
        assert status == "error", (r, value)
        name, message, _ = value
        assert name == "ValueError" and f"asked to fail at {step}" in message, (r, value)
        if step != "combine":
            assert f"rank {rank}" in message, (r, message)  # which rank failed, on every rank
