"""Padding past ``size`` dropped on each rank from the per-rank counts, and the ShardingWarning cases."""

from __future__ import annotations

import itertools
import warnings
from typing import Any, Dict, List

import numpy as np
import pytest
from hub_backend import run_ranks
from metric_helpers import Ids

from mmeval import Accuracy
from mmeval.core.errors import ShardingWarning
from mmeval.core.results import ArrayResults
from mmeval.core.sync.gather import collect, truncate
from mmeval.core.sync.ordering import kept_by_size
from mmeval.metrics.average_precision import AveragePrecision

N_ISSUE = 1003


def issue_data(n: int = N_ISSUE):
    """10-class scores whose top-1 accuracy is near the issue's 0.47."""
    rng = np.random.default_rng(15)
    labels = rng.integers(0, 10, n)
    scores = rng.normal(size=(n, 10))
    scores[np.arange(n), labels] += 2.2 * rng.random(n) + 0.3
    return scores, labels


# -- the positions each rank keeps are exactly those the gather-then-truncate path kept ---------------------------


@pytest.mark.parametrize("mode", ["unzip", "cat"])
def test_kept_by_size_matches_collect_then_truncate(mode):
    rng = np.random.default_rng(0)
    for _ in range(300):
        ws = int(rng.integers(1, 5))
        counts = [int(c) for c in rng.integers(0, 9, ws)]
        total = sum(counts)
        size = int(rng.integers(0, total + 2))
        # tag each sample with (rank, position on the rank); the old path gathered then truncated
        parts = [
            ArrayResults(tag=np.array([(r, j) for j in range(c)], dtype=np.int64).reshape(c, 2))
            for r, c in enumerate(counts)
        ]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = {tuple(t) for t in truncate(collect(parts, mode, "m"), size, "m")["tag"]}
        got = set()
        for r, c in enumerate(counts):
            mask = kept_by_size(counts, r, mode, size)
            got |= {(r, j) for j in range(c) if mask is None or mask[j]}
        assert got == want, (counts, size, mode)


# -- the issue's example: 1003 samples, DistributedSampler on 3 ranks -------------------------------------------


def _issue_worker(backend: Any, n: int) -> Dict[str, Any]:
    scores, labels = issue_data(n)
    ws, rank = backend.world_size, backend.rank
    order = list(range(n)) + list(range(-n % ws))  # DistributedSampler pads with the first samples
    mine = order[rank::ws]
    out: Dict[str, Any] = {}
    for name, make in (
        ("acc", lambda: Accuracy(topk=(1, 3), thrs=None, dist_backend=backend)),
        ("ap", lambda: AveragePrecision(dist_backend=backend)),
    ):
        m = make()
        for s in range(0, len(mine), 64):
            batch = mine[s : s + 64]
            if name == "acc":
                m.add(scores[batch], labels[batch])
            else:
                m.add(scores[batch], np.eye(10, dtype=np.int64)[labels[batch]])
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            out[name + "_sized"] = m.compute(size=n)
        out[name + "_sized_warnings"] = [w.category.__name__ for w in record]
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            out[name + "_unsized"] = m.compute()
        out[name + "_unsized_warnings"] = [str(w.message) for w in record if w.category is ShardingWarning]
    return out


def test_1003_samples_on_3_ranks_drop_padding_and_warn_without_size():
    scores, labels = issue_data()
    want = Accuracy(topk=(1, 3), thrs=None)(scores, labels)
    want_ap = AveragePrecision()(scores, np.eye(10, dtype=np.int64)[labels])
    assert 0.45 < want["top1"] < 0.5
    out = run_ranks(_issue_worker, 3, N_ISSUE, timeout=120)
    for rank in range(3):
        status, got = out[rank]
        assert status == "ok", got
        assert got["acc_sized"] == want and got["ap_sized"] == want_ap, rank
        assert got["acc_sized_warnings"] == [] and got["ap_sized_warnings"] == []
        # without size the two padded duplicates are counted (the issue's silent 0.4726) -- and now said so
        assert got["acc_unsized"] != want
        for key in ("acc_unsized_warnings", "ap_unsized_warnings"):
            (message,) = got[key]
            assert "without size= or indices=" in message and "DistributedSampler" in message


# -- more results than any per-sample sampler pads: a batch-level sharding -------------------------------------


def _accelerate_like_worker(backend: Any, n: int, batch: int) -> List[str]:
    """Whole batches dealt round-robin, the last round padded by wrapping to the start (HF accelerate)."""
    scores, labels = issue_data(n)
    ws, rank = backend.world_size, backend.rank
    batches = [list(range(s, min(s + batch, n))) for s in range(0, n, batch)]
    batches += [list(range(batch)) for _ in range(-len(batches) % ws)]
    acc = Accuracy(thrs=None, dist_backend=backend)
    for b in batches[rank::ws]:
        acc.add(scores[b], labels[b])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        acc.compute(size=n)
    return [str(w.message) for w in record if w.category is ShardingWarning]


def test_more_results_than_size_plus_padding_is_an_error_on_every_rank():
    out = run_ranks(_accelerate_like_worker, 3, 100, 16, timeout=120)  # 7 batches -> 9 dealt: 132 samples
    for rank in range(3):
        status, got = out[rank]
        assert status == "error", got
        kind, message, _ = got
        assert kind == "ValueError" and "132 samples were added on 3 ranks" in message and "indices=" in message


def test_one_process_refuses_results_past_size():
    scores, labels = issue_data(50)
    acc = Accuracy()
    acc.add(scores, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShardingWarning)
        acc.compute()
        acc.compute(size=50)
    # one process has no sampler padding: results past size are stale or a wrong size (issue 32, item 9)
    with pytest.raises(ValueError, match=r"50 samples were added; .*reset\(\)"):
        acc.compute(size=40)


@pytest.mark.parametrize("size", [0, 1, 37, 49, 50])
def test_state_metric_single_process_size_cuts_like_the_per_sample_path(size):
    scores, labels = issue_data(50)
    acc = Accuracy(topk=(1, 2), thrs=(None, 0.5))
    for s in range(0, 50, 16):
        acc.add(scores[s : s + 16], labels[s : s + 16])
    if size == 0:
        with pytest.raises(ValueError, match="size must be positive"):
            acc.compute(size=0)
    elif size < 50:  # more samples than size explains: refused (issue 32, item 9), on either path
        for metric in (acc, Ids()):
            if isinstance(metric, Ids):
                metric.add(list(range(50)))
            with pytest.raises(ValueError, match="50 samples were added"):
                metric.compute(size=size)
    else:
        assert acc.compute(size=size) == Accuracy(topk=(1, 2), thrs=(None, 0.5))(scores[:size], labels[:size])


def test_size_beyond_the_results_warns_and_counts_all():
    scores, labels = issue_data(20)
    acc = Accuracy(thrs=None)
    acc.add(scores, labels)
    with pytest.warns(RuntimeWarning, match="only 20 results were collected"):
        assert acc.compute(size=25) == acc(scores, labels)


def test_kept_by_size_keeps_everything_when_nothing_is_padding():
    for counts, mode in itertools.product(([3, 3, 3], [4, 0, 2]), ("unzip", "cat")):
        assert kept_by_size(counts, 1, mode, None) is None
        assert kept_by_size(counts, 1, mode, sum(counts)) is None
