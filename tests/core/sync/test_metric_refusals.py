"""Refusals that must reach every rank at once, dedup whose cost follows the samples, stale answers that warn.

Each multi-rank test runs real processes over the hub test backend (TCP); see
hub_backend.py. The timeouts are short so that a peer left waiting shows as
a slow rank, not as a hung test.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import time
import warnings
from typing import Any, Dict, Tuple

import numpy as np
import pytest
from hub_backend import run_ranks
from metric_helpers import Ids, class_scores

from mmeval import Accuracy
from mmeval.core import BaseMetric

C = 4
#: Seconds a collective may wait in these tests; every rank must raise well before it.
TIMEOUT = 20.0
#: Seconds every rank stays alive after its compute(): a refusing rank that lives on must not leave its peers waiting.
HOLD = 6.0


def data(n: int = 12) -> Tuple[np.ndarray, np.ndarray]:
    return class_scores(n, C, 11)  # type: ignore[no-any-return]


def _timed_compute(metric: BaseMetric, **kwargs: Any) -> Tuple[str, str, float]:
    start = time.monotonic()
    try:
        metric.compute(**kwargs)
    except Exception as exc:
        return type(exc).__name__, str(exc), time.monotonic() - start
    return "ok", "", time.monotonic() - start


# -- item 1: indices that wrap or exceed int64 ------------------------------------------------------------------------


def _wrapping_index_worker(backend: Any, bad: int, kind: str) -> Dict[str, Any]:
    scores, labels = data()
    rank = backend.rank
    metric: BaseMetric = Accuracy(thrs=None, dist_backend=backend) if kind == "state" else Ids(dist_backend=backend)
    mine = list(range(rank, 10, backend.world_size))
    add_error = ""
    for i in mine:
        idx = np.array([i], dtype=np.uint64)
        if rank == 1 and i == mine[-1]:
            idx = np.array([bad], dtype=np.uint64)
        try:
            if kind == "state":
                metric.add(scores[[i]], labels[[i]], indices=idx)
            else:
                metric.add([i], indices=idx)
        except ValueError as exc:
            add_error = str(exc)
    outcome = _timed_compute(metric)
    time.sleep(HOLD)
    return {"add": add_error, "compute": outcome}


@pytest.mark.parametrize("bad", [2**64 - 1, 2**63])
@pytest.mark.parametrize("kind", ["state", "per_sample"])
def test_uint64_indices_past_int64_are_refused_on_every_rank_at_once(bad, kind):
    out = run_ranks(_wrapping_index_worker, 2, bad, kind, timeout=90, backend_kwargs={"timeout": TIMEOUT})
    assert out[1][0] == "ok", out[1]
    assert "indices=" in out[1][1]["add"] and str(bad) in out[1][1]["add"], out[1]
    for rank in range(2):
        status, got = out[rank]
        assert status == "ok", got
        name, message, seconds = got["compute"]
        assert name != "ok", (rank, got)  # nothing computed on a silently shorter set of samples
        assert "indices=" in message and "rank 1" in message, (rank, message)
        assert seconds < HOLD - 1, (rank, seconds, message)


# -- item 2: the cost of deduplication follows the samples, not the largest index -------------------------------------


def _huge_index_worker(backend: Any, top: int) -> Dict[str, Any]:
    from mmeval.core.hooks import enable_comm_stats

    scores, labels = data()
    rank = backend.rank
    acc = Accuracy(thrs=None, dist_backend=backend)
    ids = Ids(dist_backend=backend)
    # dataset indices 0..4 and one huge one, held by both ranks (counted once)
    mine = [i for i in range(5) if i % 2 == rank] + [top]
    rows = [i if i < 5 else 5 for i in mine]
    acc.add(scores[rows], labels[rows], indices=np.array(mine, dtype=np.int64))
    ids.add(rows, indices=np.array(mine, dtype=np.int64))
    stats = enable_comm_stats(print_at_exit=False)
    stats.reset()
    got_acc = acc.compute()
    sent = sum(int(row["bytes_sent"]) for row in stats.rows())
    return {"acc": got_acc, "ids": ids.compute(), "bytes": sent}


@pytest.mark.parametrize("top", [2**40, 2**62, 2**63 - 1])
def test_a_huge_dataset_index_costs_what_the_samples_cost(top):
    scores, labels = data()
    want = Accuracy(thrs=None)(scores[:6], labels[:6])
    out = run_ranks(_huge_index_worker, 2, top, timeout=90, backend_kwargs={"timeout": TIMEOUT})
    for rank in range(2):
        status, got = out[rank]
        assert status == "ok", got
        assert got["acc"] == want, (rank, got)
        assert got["ids"] == {"ids": [0, 1, 2, 3, 4, 5]}, (rank, got)
        assert got["bytes"] < 64 * 1024, (rank, got)  # a few small messages, whatever the largest index


def test_one_process_dedup_with_a_huge_index():
    m = Ids()
    m.add([1, 2, 3], indices=np.array([2**62, 5, 2**62]))
    assert m.compute() == {"ids": [2, 1]}


# -- item 4: an argument refused on one rank only ---------------------------------------------------------------------


def _bad_size_worker(backend: Any, kind: str, bad: Any) -> Tuple[str, str, float]:
    scores, labels = data()
    metric: BaseMetric = Accuracy(thrs=None, dist_backend=backend) if kind == "state" else Ids(dist_backend=backend)
    mine = list(range(backend.rank, 12, backend.world_size))
    if kind == "state":
        metric.add(scores[mine], labels[mine])
    else:
        metric.add(mine)
    outcome = _timed_compute(metric, size=bad if backend.rank == 1 else 12)
    time.sleep(HOLD)
    return outcome


@pytest.mark.parametrize("bad", [-1, "12"])
@pytest.mark.parametrize("kind", ["state", "per_sample"])
def test_a_size_refused_on_one_rank_reaches_every_rank_at_once(kind, bad):
    out = run_ranks(_bad_size_worker, 3, kind, bad, timeout=90, backend_kwargs={"timeout": TIMEOUT})
    for rank in range(3):
        status, (name, message, seconds) = out[rank]
        assert status == "ok", message
        assert name != "ok", (rank, message)
        assert "size" in message and "rank 1" in message, (rank, message)
        assert seconds < HOLD - 1, (rank, seconds, message)
    assert out[1][1][0] == "ValueError", out[1]


# -- item 11: a named backend whose runtime is not running under a launcher ------------------------------------------

_INACTIVE_PROGRAM = textwrap.dedent(
    """
    import sys
    import numpy as np
    from mmeval import Accuracy
    from mmeval.core import dist
    from mmeval.core.dist_backends import BaseDistBackend

    class Sleeping(BaseDistBackend):
        is_initialized = False
        rank = 0
        world_size = 1
        def all_gather_object(self, obj):
            return [obj]
        def broadcast_object(self, obj, src=0):
            return obj

    dist.register_dist_backend("sleeping", Sleeping)
    how = sys.argv[1]
    if how == "default":
        dist.set_default_dist_backend("sleeping")
        acc = Accuracy(thrs=None)
    else:
        acc = Accuracy(thrs=None, dist_backend="sleeping")
    acc.add(np.eye(3), np.arange(3))
    try:
        print("RESULT", acc.compute(size=3))
    except RuntimeError as exc:
        print("ERROR", exc)
    """
)


@pytest.mark.parametrize("how", ["argument", "default"])
def test_a_named_backend_not_running_under_a_launcher_is_an_error(how):
    outputs = []
    for rank in range(2):
        env = dict(os.environ, WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank))
        env.pop("MMEVAL_DIST_BACKEND", None)
        proc = subprocess.run(
            [sys.executable, "-c", _INACTIVE_PROGRAM, how], env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
    for out in outputs:
        assert "ERROR" in out, out
        assert "'sleeping'" in out and "WORLD_SIZE=2" in out and "not active" in out, out


# -- item 13: stale results, a size that is not the dataset's ---------------------------------------------------------


def test_results_past_size_in_one_process_are_refused_with_the_likely_causes():
    scores, labels = data()
    for metric in (Accuracy(thrs=None), Ids()):

        def add(lo: int, hi: int, m: BaseMetric = metric) -> None:
            if isinstance(m, Accuracy):
                m.add(scores[lo:hi], labels[lo:hi])
            else:
                m.add(list(range(lo, hi)))

        add(0, 2)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            metric.compute(size=2)
        add(2, 4)
        with pytest.raises(ValueError) as caught:  # issue 32, item 9: an error, never a number
            metric.compute(size=2)
        text = str(caught.value)
        assert "4 samples were added" in text and "reset()" in text and "len(dataset)" in text and "indices=" in text, (
            text
        )


def _too_many_worker(backend: Any) -> Tuple[str, str]:
    scores, labels = data(30)
    acc = Accuracy(thrs=None, dist_backend=backend)
    mine = list(range(backend.rank, 30, backend.world_size))
    acc.add(scores[mine], labels[mine])
    outcome = _timed_compute(acc, size=6)
    return outcome[0], outcome[1]


def test_more_results_than_size_on_three_ranks_names_reset_and_the_dataset_size():
    out = run_ranks(_too_many_worker, 3, timeout=90)
    for rank in range(3):
        status, (kind, text) = out[rank]
        assert status == "ok", text
        assert kind == "ValueError", (rank, kind, text)
        assert "reset()" in text and "size=len(dataset)" in text and "indices=" in text, (rank, text)


def test_size_zero_says_size_must_be_positive():
    scores, labels = data()
    acc = Accuracy(thrs=None)
    acc.add(scores, labels)
    with pytest.raises(ValueError, match="size must be positive"):
        acc.compute(size=0)


# -- item 14: a metric pickled on one rank and restored on another ---------------------------------------------------


def _restored_worker(backend: Any) -> Tuple[str, str, float]:
    scores, labels = data()
    acc = Accuracy(thrs=None, dist_backend=backend)
    mine = list(range(backend.rank, 12, backend.world_size))
    acc.add(scores[mine], labels[mine])
    acc.dist_backend = None  # a backend instance (its sockets) does not pickle
    blob = pickle.dumps(acc)
    # every rank restores rank 0's metric (as from one checkpoint file): its results would count twice
    blobs = backend.all_gather_object(blob)
    restored = pickle.loads(blobs[0])
    restored.dist_backend = backend
    outcome = _timed_compute(restored, size=12)
    time.sleep(HOLD)
    return outcome


def test_a_metric_restored_on_another_rank_is_refused():
    out = run_ranks(_restored_worker, 2, timeout=90, backend_kwargs={"timeout": TIMEOUT})
    for rank in range(2):
        status, (name, message, seconds) = out[rank]
        assert status == "ok", message
        assert name != "ok", (rank, message)
        assert "rank 0" in message and "pickle" in message, (rank, message)
        assert seconds < HOLD - 1, (rank, seconds)
