"""``add(..., indices=)``: each dataset index counted once, per-sample results in index order, any sampler."""

from __future__ import annotations

import warnings
from typing import Any, Dict, List

import numpy as np
import pytest
from hub_backend import run_ranks
from metric_helpers import Ids, ObjectIds, class_scores

from mmeval import Accuracy
from mmeval.metrics import MeanIoU, MultiLabelMetric, SingleLabelMetric
from mmeval.metrics.average_precision import AveragePrecision

N, C = 101, 5


def data(n: int = N):
    return class_scores(n, C, 7)


class FakeTensor:
    """Duck-types a torch tensor: indices arrive through .detach().cpu().numpy()."""

    def __init__(self, values: Any) -> None:
        self.values = np.asarray(values)

    def detach(self) -> "FakeTensor":
        return self

    def cpu(self) -> "FakeTensor":
        return self

    def numpy(self) -> np.ndarray:
        return self.values


# -- one process ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("metric", [Ids, ObjectIds])
def test_one_process_counts_each_index_once_in_index_order(metric):
    m = metric()
    m.add([30, 10, 20], indices=[3, 1, 2])
    m.add([10, 0], indices=np.array([1, 0]))  # index 1 again: counted once (its first occurrence)
    m.add([40], indices=FakeTensor([4]))
    assert m.compute() == {"ids": [0, 10, 20, 30, 40]}


def test_one_process_accuracy_with_duplicates_equals_the_unique_samples():
    scores, labels = data()
    acc = Accuracy(topk=(1, 2), thrs=None)
    order = list(range(N)) + list(range(10))  # wrap-around padding
    for s in range(0, len(order), 16):
        b = order[s : s + 16]
        acc.add(scores[b], labels[b], indices=b)
    assert acc.compute() == Accuracy(topk=(1, 2), thrs=None)(scores, labels)


def test_bad_indices_are_refused_and_nothing_is_kept():
    scores, labels = data()
    acc = Accuracy()
    for bad, match in (
        ([0, 1], "2 dataset indices for a batch of 3"),
        ([[0, 1, 2]], r"shape \(N,\)"),
        ([0.0, 1.0, 2.0], "integer dataset indices"),
        ([0, -1, 2], "non-negative"),
    ):
        with pytest.raises(ValueError, match=match):
            acc.add(scores[:3], labels[:3], indices=bad)
        assert acc.num_results == 0
    acc.add(scores[:3], labels[:3], indices=[0, 1, 2])
    assert acc.num_results == 3


def test_indices_on_some_add_calls_only_is_an_error():
    m = Ids()
    m.add([1, 2], indices=[1, 2])
    m.add([3])
    with pytest.raises(ValueError, match="indices= to some add"):
        m.compute()


def test_subclass_calling_super_add_keeps_the_indices_once():
    class Twice(Accuracy):
        def add(self, predictions: Any, labels: Any) -> None:  # type: ignore[override]
            super().add(predictions, labels)

    scores, labels = data()
    t = Twice(thrs=None)
    t.add(scores[:4], labels[:4], indices=[0, 1, 2, 0])
    assert t.compute() == Accuracy(thrs=None)(scores[:3], labels[:3])


#: The other state metrics, each over the same samples (see :func:`state_inputs`).
STATE_METRICS = {
    "single_label": lambda **kw: SingleLabelMetric(num_classes=C, thrs=(None, 0.6), average=None, **kw),
    "multi_label": lambda **kw: MultiLabelMetric(num_classes=C, thr=0.3, items=("precision", "support"), **kw),
    "mean_iou": lambda **kw: MeanIoU(num_classes=C, **kw),
}


def state_inputs(scores: np.ndarray, labels: np.ndarray) -> List[Any]:
    """(predictions, labels) for each of STATE_METRICS: softmax scores, one-hot labels, 2x3 label maps."""
    prob = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    maps = np.stack([np.roll(np.arange(6) % C, int(i)).reshape(2, 3) for i in labels])
    return [(prob, labels), (prob, np.eye(C, dtype=np.int64)[labels]), (maps, (maps + (labels[:, None, None] % 2)) % C)]


# -- over ranks ------------------------------------------------------------------------------------------------------


def _shards(scheme: str, rank: int, ws: int, n: int) -> List[List[int]]:
    """This rank's batches of dataset indices under a sampler ``scheme``."""
    if scheme == "shuffled":  # DistributedSampler(shuffle=True): a permutation padded with its start, dealt round robin
        perm = list(np.random.default_rng(3).permutation(n))
        perm += perm[: -n % ws]
        mine = perm[rank::ws]
    elif scheme == "duplicates":  # overlapping random subsets covering every index
        rng = np.random.default_rng(5)
        extra = [list(rng.choice(n, n // 3)) for _ in range(ws)]
        mine = list(range(n))[rank::ws] + extra[rank]
        mine = [int(i) for i in np.random.default_rng(rank).permutation(mine)]
    elif scheme == "drop_last":  # DistributedSampler(drop_last=True) sees n - n % ws samples; the rest come later
        cut = n - n % ws
        mine = list(range(cut))[rank::ws] + ([cut + rank] if cut + rank < n else [])
    else:  # accelerate: whole batches dealt round robin, the last round padded by wrapping to the start
        batches = [list(range(s, min(s + 8, n))) for s in range(0, n, 8)]
        batches += [list(range(8)) for _ in range(-len(batches) % ws)]
        return batches[rank::ws]
    return [mine[s : s + 8] for s in range(0, len(mine), 8)]


def _indices_worker(backend: Any, n: int) -> Dict[str, Any]:
    from mmeval.core.hooks import enable_comm_stats

    scores, labels = data(n)
    rank, ws = backend.rank, backend.world_size
    out: Dict[str, Any] = {}
    stats = enable_comm_stats(print_at_exit=False)
    for scheme in ("shuffled", "duplicates", "drop_last", "accelerate"):
        for mode in ("unzip", "cat"):
            acc = Accuracy(topk=(1, 3), thrs=None, dist_backend=backend, dist_collect_mode=mode)
            ap = AveragePrecision(average=None, dist_backend=backend, dist_collect_mode=mode)
            ids, objs = Ids(dist_backend=backend, dist_collect_mode=mode), ObjectIds(dist_backend=backend)
            states = [make(dist_backend=backend, dist_collect_mode=mode) for make in STATE_METRICS.values()]
            for b in _shards(scheme, rank, ws, n):
                for m, (pred, lab) in zip(states, state_inputs(scores[b], labels[b])):
                    m.add(pred, lab, indices=b)
                acc.add(scores[b], labels[b], indices=b)
                ap.add(scores[b], np.eye(C, dtype=np.int64)[labels[b]], indices=np.array(b))
                ids.add(b, indices=FakeTensor(b))
                objs.add(b, indices=b)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # indices: no ShardingWarning
                stats.reset()
                out[scheme, mode, "acc"] = acc.compute()
                out[scheme, mode, "acc_rows"] = stats.rows()
                out[scheme, mode, "ap"] = ap.compute()
                out[scheme, mode, "ids"] = ids.compute()
                out[scheme, mode, "objs"] = objs.compute()
                out[scheme, mode, "states"] = [m.compute() for m in states]
    return out


@pytest.mark.parametrize("ws", [2, 3])
def test_every_sampler_with_indices_equals_one_process(ws):
    scores, labels = data()
    want_acc = Accuracy(topk=(1, 3), thrs=None)(scores, labels)
    want_ap = AveragePrecision(average=None)(scores, np.eye(C, dtype=np.int64)[labels])
    want_states = [make()(*inputs) for make, inputs in zip(STATE_METRICS.values(), state_inputs(scores, labels))]
    out = run_ranks(_indices_worker, ws, N, timeout=180)
    for rank in range(ws):
        status, got = out[rank]
        assert status == "ok", got
        for scheme in ("shuffled", "duplicates", "drop_last", "accelerate"):
            for mode in ("unzip", "cat"):
                assert got[scheme, mode, "acc"] == want_acc, (rank, scheme, mode)
                assert got[scheme, mode, "ap"] == want_ap, (rank, scheme, mode)
                assert got[scheme, mode, "ids"] == {"ids": list(range(N))}, (rank, scheme, mode)
                assert got[scheme, mode, "objs"] == {"ids": list(range(N))}, (rank, scheme, mode)
                assert got[scheme, mode, "states"] == want_states, (rank, scheme, mode)
                # what the state path moves with indices: three reductions (the layout with the counts, the
                # int32 owner array of 4 bytes per dataset index, the kept counts) -- never the samples' scores
                (row,) = got[scheme, mode, "acc_rows"]
                assert row["op"] == "all_reduce" and row["calls"] == 3, row
                assert row["bytes_sent"] <= 3 * 4096 + 4 * N, row


def _partial_indices_worker(backend: Any, within_rank: bool) -> Any:
    scores, labels = data()
    acc = Accuracy(dist_backend=backend)
    ids = Ids(dist_backend=backend)
    mine = list(range(backend.rank, 40, backend.world_size))
    for s in range(0, len(mine), 5):
        b = mine[s : s + 5]
        give = (s == 0) if within_rank else backend.rank == 1
        acc.add(scores[b], labels[b], indices=b if give else None)
        ids.add(b, indices=b if give else None)
    errors = []
    for m in (acc, ids):
        try:
            m.compute()
        except ValueError as exc:
            errors.append(str(exc))
        else:
            errors.append("no error")
    return errors


@pytest.mark.parametrize("within_rank", [False, True])
def test_indices_on_some_ranks_only_raise_on_every_rank(within_rank):
    out = run_ranks(_partial_indices_worker, 3, within_rank, timeout=120)
    for rank in range(3):
        status, errors = out[rank]
        assert status == "ok", errors
        for message in errors:
            if within_rank:
                assert "rank(s) [0, 1, 2] passed indices= to some add() calls and not others" in message
            else:
                assert "rank(s) [1] passed indices= to add() and rank(s) [0, 2] did not" in message
