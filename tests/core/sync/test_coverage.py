"""The coverage report (issue 35, item 4): positions never seen and seen more than once, world-wide, over real ranks.

Each case deals a dataset of N positions to the ranks with gaps and repeats (within a rank and across ranks),
computes a state metric (Accuracy) and a per-sample metric (AveragePrecision) with ``coverage = True``, and
checks every rank's report against the truth counted from the whole deal; the comm-stats hook shows that the
report adds no collective. Dense indices (the owner array), sparse ones (the all-gather of distinct indices),
``size=`` without indices, and one process.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, List

import numpy as np
import pytest
from hub_backend import run_ranks
from metric_helpers import class_scores

from mmeval import Accuracy
from mmeval.core.errors import CollectiveMismatchError
from mmeval.metrics.average_precision import AveragePrecision

N, C = 97, 4


def _deal(rank: int, ws: int, n: int, stride: int) -> List[int]:
    """Rank ``rank``'s dataset indices (times ``stride``): every position but a few, some twice, one on two ranks."""
    mine = [i for i in range(rank, n, ws) if i % 10 != 7]  # ..., 7, 17, 27, ... never seen
    if rank == 0:
        mine += [0, 4]  # seen twice on rank 0 (0 is rank 0's already; 4 is rank 0's when ws is 2 or 4)
    if rank == ws - 1:
        mine += [1, 2]  # 1 and 2 are held by lower ranks too: seen on two ranks
    return [i * stride for i in mine]


def _truth(ws: int, n: int, stride: int) -> Dict[str, Any]:
    every = np.concatenate([_deal(r, ws, n, stride) for r in range(ws)])
    values, counts = np.unique(every, return_counts=True)
    return {"samples": every.size, "seen": values.size, "repeated": values[counts > 1].tolist(), "values": values}


def _worker(backend: Any, stride: int, size: Any, by_index: bool) -> Dict[str, Any]:
    from mmeval.core.hooks import enable_comm_stats

    scores, labels = class_scores(N * stride, C, 3)
    rank, ws = backend.rank, backend.world_size
    mine = _deal(rank, ws, N, stride) if by_index else list(range(rank, N, ws))
    stats = enable_comm_stats(print_at_exit=False)
    out: Dict[str, Any] = {}
    for name, make in (("acc", lambda: Accuracy(thrs=None, dist_backend=backend)), ("ap", None)):
        calls = []
        for with_report in (False, True):
            metric = make() if make else AveragePrecision(dist_backend=backend)
            metric.coverage = with_report
            for s in range(0, len(mine), 8):
                b = mine[s : s + 8]
                target = labels[b] if name == "acc" else np.eye(C, dtype=np.int64)[labels[b]]
                metric.add(scores[b], target, **({"indices": b} if by_index else {}))
            stats.reset()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = metric.compute(size=size)
            calls.append(sum(row["calls"] for row in stats.rows()))
            report = metric.coverage_report
            out[name, with_report] = (result, None if report is None else _plain(report))
        out[name, "calls"] = calls
    return out


def _plain(report: Any) -> Dict[str, Any]:
    return {
        "basis": report.basis,
        "size": report.size,
        "samples": report.samples,
        "seen": report.seen,
        "never_seen": None if report.never_seen is None else report.never_seen.tolist(),
        "never_seen_count": report.never_seen_count,
        "repeated": report.repeated.tolist(),
        "extra": report.extra,
        "complete": report.complete,
    }


@pytest.mark.parametrize("ws", [2, 3])
@pytest.mark.parametrize("stride", [1, 1000])  # dense indices (the owner array) and sparse ones (the all-gather)
def test_the_report_by_indices_is_the_world_truth_on_every_rank_at_no_extra_collective(ws, stride):
    truth = _truth(ws, N, stride)
    size = N * stride if stride == 1 else None  # the sparse range is known only from size=
    out = run_ranks(_worker, ws, stride, size, True, timeout=180)
    for rank in range(ws):
        status, got = out[rank]
        assert status == "ok", got
        for name in ("acc", "ap"):
            without, with_report = got[name, False], got[name, True]
            assert without[1] is None and with_report[0] == without[0]  # the same result, with a report
            report = with_report[1]
            assert report["basis"] == "indices" and report["samples"] == truth["samples"]
            assert report["seen"] == truth["seen"] and report["extra"] == truth["samples"] - truth["seen"]
            assert report["repeated"] == truth["repeated"] and {0, 1, 2, 4} <= {v // stride for v in report["repeated"]}
            if stride == 1:
                never = sorted(set(range(N)) - set(truth["values"].tolist()))
                assert report["never_seen"] == never and report["never_seen_count"] == len(never)
                assert {7, 17, 27} <= set(never) and report["size"] == N
            else:
                assert report["never_seen"] is None and report["size"] is None
            assert report["complete"] is False
            assert got[name, "calls"][0] == got[name, "calls"][1], got[name, "calls"]  # no collective added


def _size_worker(backend: Any, n: int, size: int) -> Dict[str, Any]:
    scores, labels = class_scores(n, C, 3)
    rank, ws = backend.rank, backend.world_size
    padded = list(range(n)) + list(range(-n % ws))  # DistributedSampler: the first positions repeat
    mine = padded[rank::ws]
    out = {}
    for mode in ("unzip", "cat"):
        acc = Accuracy(thrs=None, dist_backend=backend, dist_collect_mode=mode)
        acc.coverage = True
        take = mine if mode == "unzip" else padded[rank * len(mine) : (rank + 1) * len(mine)]
        acc.add(scores[take], labels[take])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            acc.compute(size=size)
        out[mode] = _plain(acc.coverage_report)
    return out


def test_the_report_by_size_follows_the_samplers_padding():
    out = run_ranks(_size_worker, 3, 100, 100, timeout=120)  # 100 on 3 ranks: 2 padded samples repeat 0 and 1
    for rank in range(3):
        status, got = out[rank]
        assert status == "ok", got
        for mode in ("unzip", "cat"):
            r = got[mode]
            assert (r["basis"], r["samples"], r["seen"], r["repeated"], r["never_seen_count"]) == (
                "size",
                102,
                100,
                [0, 1],
                0,
            )
    short = run_ranks(_size_worker, 2, 90, 100, timeout=120)  # size= larger than what was added: 90..99 unseen
    r = short[1][1]["unzip"]
    assert r["never_seen"] == list(range(90, 100)) and r["repeated"] == [] and r["seen"] == 90


def _mismatch_worker(backend: Any) -> str:
    acc = Accuracy(dist_backend=backend)
    acc.coverage = backend.rank == 0  # part of the question: the ranks must agree
    acc.add(np.eye(3), np.arange(3), indices=[3 * backend.rank, 3 * backend.rank + 1, 3 * backend.rank + 2])
    try:
        acc.compute()
    except CollectiveMismatchError as exc:
        return str(exc)
    return "no error"


def test_ranks_that_disagree_on_coverage_raise_naming_it():
    out = run_ranks(_mismatch_worker, 2, timeout=120)
    for rank in range(2):
        status, message = out[rank]
        assert status == "ok" and "coverage" in message, message


def test_one_process():
    acc = Accuracy(thrs=None)
    assert acc.coverage_report is None
    acc.coverage = True
    acc.add(np.eye(3)[[0, 1, 2, 0]], np.array([0, 1, 2, 0]), indices=[0, 1, 1, 4])
    acc.compute(size=6)
    r = acc.coverage_report
    assert r is not None and r.never_seen.tolist() == [2, 3, 5] and r.repeated.tolist() == [1] and r.extra == 1
    assert "never seen: 3" in str(r) and not r.complete
    acc.reset()
    acc.add(np.eye(3), np.arange(3))
    acc.compute(size=3)
    assert acc.coverage_report.complete and acc.coverage_report.basis == "size"
