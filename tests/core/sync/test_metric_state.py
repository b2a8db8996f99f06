"""State metrics: declared statistics, one packed reduction, exact over ranks, bytes independent of the sample count."""

from __future__ import annotations

import warnings
from typing import Any, Dict

import numpy as np
import pytest
from hub_backend import run_ranks
from metric_helpers import compute_sharded

from mmeval import Accuracy
from mmeval.core import BaseMetric
from mmeval.core.results import RankResults
from mmeval.core.state import MetricState, StateSpec, pack, reduce_rows, unpack

N, C = 203, 6


def data(n: int = N):
    rng = np.random.default_rng(11)
    labels = rng.integers(0, C, n)
    scores = rng.normal(size=(n, C))
    scores[np.arange(n), labels] += 1.0
    values = rng.normal(size=(n, 3)) * 1e3
    return scores, labels, values


class Moments(BaseMetric):
    """Every kind of statistic: float64 sums, an int64 min, a float64 max."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._declare_state("total", (3,), "float64")
        self._declare_state("smallest_bucket", (), "int64", "min")
        self._declare_state("largest", (3,), "float64", "max")

    def add(self, values: Any) -> None:  # type: ignore[override]
        v = np.asarray(values, dtype=np.float64)
        self._add_rows(total=v, smallest_bucket=np.floor(v[:, 0] / 100).astype(np.int64), largest=v)

    def compute_metric(self, results: MetricState) -> Dict[str, Any]:
        n = results.num_samples
        if n == 0:
            raise ValueError("Moments: nothing was added")
        return {
            "mean": (results["total"] / n).tolist(),
            "min_bucket": int(results["smallest_bucket"]),
            "max": results["largest"].tolist(),
            "n": n,
        }


# -- the building blocks ------------------------------------------------------------------------------------------


def test_specs_are_validated():
    for args, match in (
        (("bad name", (), "int64", "sum"), "identifier"),
        (("x", (), "int32", "sum"), "dtype"),
        (("x", (), "int64", "mean"), "reduction"),
        (("x", (-1,), "int64", "sum"), "shape"),
    ):
        with pytest.raises(ValueError, match=match):
            StateSpec(*args)
    m = Moments()
    with pytest.raises(ValueError, match="declared twice"):
        m._declare_state("total", (3,), "float64")
    with pytest.raises(ValueError, match="exactly the declared states"):
        m._add_rows(total=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="per-sample shape"):
        m._add_rows(total=np.zeros((2, 4)), smallest_bucket=np.zeros(2), largest=np.zeros((2, 3)))
    assert m.num_results == 0


def test_reduce_pack_unpack_round_trip_with_identities():
    specs = Moments()._state_specs
    empty = reduce_rows(specs, None)
    assert empty.num_samples == 0 and int(empty["smallest_bucket"]) == np.iinfo(np.int64).max
    assert np.all(empty["largest"] == -np.inf) and np.all(empty["total"] == 0)
    rows = {
        "total": np.arange(6.0).reshape(2, 3),
        "smallest_bucket": np.array([4, -2]),
        "largest": np.arange(6.0).reshape(2, 3),
    }
    state = reduce_rows(specs, rows, np.array([True, False]))
    packed = pack(specs, state)
    assert sorted(packed) == [("float64", "max"), ("float64", "sum"), ("int64", "min"), ("int64", "sum")]
    back = unpack(specs, packed)
    assert back.num_samples == 1 and int(back["smallest_bucket"]) == 4 and back["total"].tolist() == [0, 1, 2]


def test_one_process_state_metric():
    _, _, values = data()
    m = Moments()
    for s in range(0, N, 50):
        m.add(values[s : s + 50])
    got = m.compute()
    assert got["n"] == N and np.allclose(got["mean"], values.mean(axis=0), rtol=1e-12, atol=1e-9)
    assert got["max"] == values.max(axis=0).tolist() and got["min_bucket"] == int(np.floor(values[:, 0] / 100).min())
    assert m(values[:10])["n"] == 10 and m.num_results == N  # a stateless call leaves the state alone


# -- over ranks -----------------------------------------------------------------------------------------------------


def _state_worker(backend: Any, n: int) -> Dict[str, Any]:
    from mmeval.core.errors import CollectiveMismatchError
    from mmeval.core.hooks import enable_comm_stats

    scores, labels, values = data(n)
    rank, ws = backend.rank, backend.world_size
    out: Dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # compute() without size: the ShardingWarning (tested elsewhere)
        out["moments"] = compute_sharded(
            backend, n, Moments, lambda m, idx: [m.add(values[idx[s : s + 16]]) for s in range(0, len(idx), 16)]
        )
        out["accuracy"] = compute_sharded(
            backend,
            n,
            lambda **kw: Accuracy(topk=(1, 3), thrs=(None, 0.2), **kw),
            lambda m, idx: [m.add(scores[idx[s : s + 16]], labels[idx[s : s + 16]]) for s in range(0, len(idx), 16)],
        )
    # bytes Accuracy.compute(size=...) sends: one reduction of one slot, whatever the number of samples
    stats = enable_comm_stats(print_at_exit=False)
    for per_rank in (10, 20_000):
        rng = np.random.default_rng(rank)
        acc = Accuracy(topk=(1, 5), dist_backend=backend)
        acc.add(rng.random((per_rank, 10)), rng.integers(0, 10, per_rank))
        stats.reset()
        acc.compute(size=per_rank * ws - (ws - 1))  # DistributedSampler padding: ws - 1 samples dropped
        out[f"rows_{per_rank}"] = stats.rows()

    # compute_metric runs on every rank: each raises the same exception
    class Failing(Accuracy):
        def compute_metric(self, results: Any) -> Dict[str, float]:
            raise KeyError("no result from these counts")

    failing = Failing(dist_backend=backend)
    failing.add(scores[:3], labels[:3])
    try:
        failing.compute()
    except KeyError as exc:
        out["failing"] = str(exc)
    # a rank asking another question (topk) raises CollectiveMismatchError on every rank (last: it poisons the group)
    odd = Accuracy(topk=(1, 2) if rank == 1 else (1, 3), dist_backend=backend)
    odd.add(scores[:4], labels[:4])
    try:
        odd.compute(size=4 * ws)
    except CollectiveMismatchError as exc:
        out["mismatch"] = str(exc)

    return out


@pytest.mark.parametrize("ws", [2, 3])
def test_state_metrics_over_ranks_equal_one_process_in_one_reduction(ws):
    scores, labels, values = data()
    want_acc = Accuracy(topk=(1, 3), thrs=(None, 0.2))(scores, labels)
    want_mom = Moments()(values)
    out = run_ranks(_state_worker, ws, N, timeout=180)
    for rank in range(ws):
        status, got = out[rank]
        assert status == "ok", got
        for scheme in ("padded", "uneven", "cat"):
            assert got["accuracy"][scheme] == want_acc, (rank, scheme)
            mom = got["moments"][scheme]
            assert mom["n"] == N and mom["max"] == want_mom["max"] and mom["min_bucket"] == want_mom["min_bucket"]
            # float64 sums: equal up to the order of the additions
            assert np.allclose(mom["mean"], want_mom["mean"], rtol=1e-12, atol=1e-9), (mom, want_mom)
        small, large = got["rows_10"], got["rows_20000"]
        assert [(r["op"], r["calls"]) for r in small] == [("all_reduce", 1)], small
        assert small[0]["bytes_sent"] == large[0]["bytes_sent"] <= 4096, (small, large)
        assert "topk" in got["mismatch"]
        assert got["failing"] == "'no result from these counts'"


def _no_pass_over_rows(backend: Any, n: int) -> Dict[str, Any]:
    """compute() with DistributedSampler padding reads no row but the last ws-1: the state was folded in at add()."""
    scores, labels, _ = data(n)
    idx = np.arange(backend.rank, n + (-n) % backend.world_size, backend.world_size) % n  # padded shards
    acc = Accuracy(topk=(1, 2), dist_backend=backend)
    for start in range(0, len(idx), 16):
        acc.add(scores[idx[start : start + 16]], labels[idx[start : start + 16]])

    def refuse(*_: Any) -> Any:
        raise AssertionError("compute() concatenated every row")

    # what the rank kept is a RankResults; every pass over all its rows goes through merged() (rows() too).
    # This function runs in the rank's own process, so patching the class here touches no other test.
    RankResults.merged = refuse  # type: ignore[method-assign]
    RankResults.rows = refuse  # type: ignore[method-assign]
    return {"result": acc.compute(size=n)}


@pytest.mark.parametrize("ws", [2, 3])
def test_compute_folds_the_state_at_add_and_reads_only_the_padding_rows(ws):
    want = Accuracy(topk=(1, 2))(*data(N)[:2])
    for status, value in run_ranks(_no_pass_over_rows, ws, N, timeout=120).values():
        assert status == "ok", value
        assert value["result"] == want


def test_the_running_state_survives_stateless_calls_and_reset():
    scores, labels, _ = data()
    acc = Accuracy(topk=(1, 2))
    acc.add(scores[:100], labels[:100])
    assert acc(scores[100:150], labels[100:150]) == Accuracy(topk=(1, 2))(scores[100:150], labels[100:150])
    acc.add(scores[100:], labels[100:])
    assert acc._whole_state().num_samples == N
    assert acc.compute() == Accuracy(topk=(1, 2))(scores, labels)
    acc.reset()
    acc.add(scores[:7], labels[:7])
    assert acc.compute() == Accuracy(topk=(1, 2))(scores[:7], labels[:7])
