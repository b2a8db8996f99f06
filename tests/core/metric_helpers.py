"""Shared by the metric tests: a metric over real ranks under each sharding, NaN-aware equality, bad-input checks."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List

import numpy as np

from mmeval.core import BaseMetric


def class_scores(n: int, c: int, seed: int) -> Any:
    """``n`` samples' scores (n, c), their true class a unit above the noise, and the labels (n,)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n)
    scores = rng.normal(size=(n, c))
    scores[np.arange(n), labels] += 1.0
    return scores, labels


class Ids(BaseMetric):
    """A per-sample metric reporting the sample ids it was given, in the order compute_metric sees them."""

    def add(self, ids: Any) -> None:  # type: ignore[override]
        self._add_batch(id=np.asarray(ids, dtype=np.int64))

    def compute_metric(self, results: Any) -> Dict[str, Any]:
        return {"ids": results["id"].tolist()}


class ObjectIds(BaseMetric):
    """The same with one Python object per sample (MMEval style)."""

    def add(self, ids: Any) -> None:  # type: ignore[override]
        self._results.extend(int(i) for i in ids)

    def compute_metric(self, results: Any) -> Dict[str, Any]:
        return {"ids": list(results)}


def same(a: Any, b: Any) -> bool:
    """Exact equality, NaN equal to NaN, through dicts and lists."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b) or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def compute_sharded(
    backend: Any, n: int, make: Callable[..., Any], add: Callable[[Any, List[int]], None]
) -> Dict[str, Any]:
    """``make(**kwargs)``'s result on this rank's shard of ``n`` samples, three ways.

    ``padded``: DistributedSampler's round robin padded with the first samples,
    then ``compute(size=n)``; ``uneven``: round robin without padding;
    ``cat``: contiguous blocks with ``dist_collect_mode='cat'``. ``add(metric,
    indices)`` adds the samples at ``indices``.
    """
    rank, ws = backend.rank, backend.world_size
    out = {}
    metric = make(dist_backend=backend)
    order = list(range(n)) + list(range(-n % ws))
    add(metric, order[rank::ws])
    out["padded"] = metric.compute(size=n)
    metric.reset()
    add(metric, list(range(n))[rank::ws])
    out["uneven"] = metric.compute()
    cat = make(dist_backend=backend, dist_collect_mode="cat")
    bounds = np.linspace(0, n, ws + 1).astype(int)
    add(cat, list(range(bounds[rank], bounds[rank + 1])))
    out["cat"] = cat.compute()
    return out


def assert_all_rejected(metric: Any, cases: List[Any]) -> None:
    """Each ``(args, match)``: ``metric.add(*args)`` raises a ValueError matching ``match``; nothing is kept."""
    import pytest

    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            metric.add(*args)
    assert metric.num_results == 0
    with pytest.raises(ValueError, match="refused since reset"):  # a refused add() is remembered (issue 32, item 2)
        metric.compute()
    metric.reset()
    with pytest.raises(ValueError, match="nothing was added"):
        metric.compute()


def assert_ranks_match(worker: Callable[..., Dict[str, Any]], ws: int, n: int, want: Dict[str, Any]) -> None:
    """Run ``worker(backend, n)`` (a :func:`compute_sharded` caller) on ``ws`` spawned ranks: every rank, under
    every sharding, must return exactly ``want`` (the single-process result)."""
    from hub_backend import run_ranks

    out = run_ranks(worker, ws, n, timeout=120)
    for rank in range(ws):
        status, value = out[rank]
        assert status == "ok", value
        for scheme in ("padded", "uneven", "cat"):
            assert same(value[scheme], want), (rank, scheme, value[scheme], want)


def real_torch() -> Any:
    """torch, or the test skipped where it is not installed.

    tests/ holds a folder named ``torch`` (the torch plugin's suite); the shared metric case table puts
    tests/ on sys.path, and then, where torch is not installed, ``import torch`` finds that folder as an
    empty namespace package. ``torch.nn`` exists only in the real one.
    """
    import pytest

    pytest.importorskip("torch.nn", reason="torch is not installed")
    import torch

    return torch
