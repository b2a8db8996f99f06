"""MetricCollection: several metrics computed in one exchange, each equal to the metric computed alone.

Multi-rank tests run real processes over the hub test backend (TCP, hub_backend.py) and count the
collectives with the comm-stats hook: a collection of state and per-sample metrics is one all-gather
(the layouts, one question), one all-reduce (every state), one gather and one broadcast (every
per-sample result), whatever the number of metrics.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
from hub_backend import run_ranks
from metric_helpers import Ids, class_scores, same

from mmeval import Accuracy, AveragePrecision, MultiLabelMetric, SingleLabelMetric
from mmeval.collection import MetricCollection, compute_collection
from mmeval.core import BaseMetric

N, C = 30, 5
#: Seconds a collective may wait here; every failure must surface well before it.
TIMEOUT = 20.0
#: Seconds each rank stays alive after compute(): a rank that raised early must not leave its peers waiting.
HOLD = 6.0


def data() -> Tuple[np.ndarray, np.ndarray]:
    scores, labels = class_scores(N, C, 3)
    probs = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)  # MultiLabelMetric takes scores in [0, 1]
    return probs, labels


def five(backend: Any = None, **kwargs: Any) -> Dict[str, BaseMetric]:
    """Five metrics over one input: three state metrics and two per-sample ones."""
    b = {"dist_backend": backend, **kwargs}
    return {
        "acc": Accuracy(topk=(1, 3), thrs=None, **b),
        "single": SingleLabelMetric(**b),
        "multi": MultiLabelMetric(num_classes=C, **b),
        "ap": AveragePrecision(**b),
        "ids": SampleIds(**b),
    }


class SampleIds(BaseMetric):
    """A per-sample metric taking the Accuracy's inputs: the order of the samples its compute_metric saw."""

    def add(self, predictions: Any, labels: Any, ids: Any = None) -> None:  # type: ignore[override]
        self._add_batch(label=np.asarray(labels, dtype=np.int64), top=np.argmax(predictions, axis=1))

    def compute_metric(self, results: Any) -> Dict[str, Any]:
        return {"labels": results["label"].tolist(), "top": results["top"].tolist()}


class Boom(SampleIds):
    """A per-sample metric whose compute_metric raises (on rank 0, the computing rank)."""

    def compute_metric(self, results: Any) -> Dict[str, Any]:
        raise RuntimeError(f"boom over {len(results)} samples")


def shard(scheme: str, rank: int, ws: int) -> Tuple[List[int], Dict[str, Any], Dict[str, Any]]:
    """This rank's samples, the add() keywords and the compute() keywords of a sharding scheme."""
    if scheme == "padded":  # DistributedSampler: round robin, padded with the first samples
        order = list(range(N)) + list(range(-N % ws))
        return order[rank::ws], {}, {"size": N}
    if scheme == "indices":  # accelerate-like: shuffled, whole batches repeated at the end
        order = list(np.random.default_rng(5).permutation(N)) + list(range(7))
        mine = [int(i) for i in order[rank::ws]]
        return mine, {"indices": np.array(mine)}, {}
    bounds = np.linspace(0, N, ws + 1).astype(int)  # contiguous blocks
    return list(range(bounds[rank], bounds[rank + 1])), {}, {}


def _together_and_alone(backend: Any, scheme: str) -> Dict[str, Any]:
    from mmeval.core.hooks import enable_comm_stats

    scores, labels = data()
    mine, add_kw, compute_kw = shard(scheme, backend.rank, backend.world_size)
    extra = {"dist_collect_mode": "cat"} if scheme == "cat" else {}
    stats = enable_comm_stats(print_at_exit=False)
    collection = MetricCollection(five(backend, **extra), prefix="val_", postfix="_x")
    collection.add(scores[mine], labels[mine], **add_kw)
    stats.reset()
    together = collection.compute(**compute_kw)
    calls, sent = stats.calls, sum(r["bytes_sent"] for r in stats.rows())
    ops = sorted((r["op"], r["calls"]) for r in stats.rows())
    stats.reset()
    alone = {}
    for name, metric in five(backend, **extra).items():
        metric.add(scores[mine], labels[mine], **add_kw)
        alone[name] = metric.compute(**compute_kw)
    return {
        "together": together,
        "alone": collection.flatten(alone),
        "calls": (calls, stats.calls),
        "sent": (sent, sum(r["bytes_sent"] for r in stats.rows())),
        "ops": ops,
    }


@pytest.mark.parametrize("scheme, ws", [("padded", 3), ("indices", 2), ("indices", 3), ("cat", 2)])
def test_a_collection_equals_each_metric_alone_in_one_exchange(scheme, ws):
    scores, labels = data()
    want = MetricCollection(five(), prefix="val_", postfix="_x")
    want.add(scores, labels)
    one_process = want.compute()
    out = run_ranks(_together_and_alone, ws, scheme, timeout=120, backend_kwargs={"timeout": TIMEOUT})
    for rank in range(ws):
        status, got = out[rank]
        assert status == "ok", got
        assert same(got["together"], got["alone"]), (rank, got)
        assert same(got["together"], one_process), (rank, got["together"], one_process)
        assert "val_acc/top1_x" in got["together"] and "val_ids/labels_x" in got["together"]
        together, alone = got["calls"]
        # the layouts, [the indices' deduplication,] the states' reduction, the gather, the reply
        assert together == (5 if scheme == "indices" else 4), got["ops"]
        assert alone >= 2 * together, got["calls"]
        assert got["sent"][0] < got["sent"][1], got["sent"]
        assert dict(got["ops"]) == {
            "all_gather_object": 1,
            "all_reduce": 2 if scheme == "indices" else 1,
            "gather_object": 1,
            "broadcast_object": 1,
        }


def test_a_collection_under_the_safe_codec():
    """The safe codec moves plain data only: the layouts, the states and the results all pass through it."""
    out = run_ranks(
        _together_and_alone, 2, "indices", timeout=120, backend_kwargs={"timeout": TIMEOUT, "codec": "safe"}
    )
    for rank in range(2):
        status, got = out[rank]
        assert status == "ok", got
        assert same(got["together"], got["alone"]), (rank, got)
        assert got["calls"][0] == 5, got["ops"]


def _per_metric_inputs(backend: Any) -> Dict[str, Any]:
    """Each metric fed its own samples (other indices for each): still one reduction and one gather."""
    scores, labels = data()
    rank, ws = backend.rank, backend.world_size
    collection = MetricCollection([Accuracy(thrs=None, dist_backend=backend), Ids(dist_backend=backend)])
    acc_rows = list(range(N))[rank::ws]
    collection["Accuracy"].add(scores[acc_rows], labels[acc_rows], indices=np.array(acc_rows))
    ids_rows = list(range(10, 20))[::-1][rank::ws] + [12]  # both ranks hold 12
    collection["Ids"].add(ids_rows, indices=np.array(ids_rows))
    return collection.compute()


def test_metrics_fed_their_own_inputs_are_each_exact():
    scores, labels = data()
    out = run_ranks(_per_metric_inputs, 2, timeout=120, backend_kwargs={"timeout": TIMEOUT})
    want = {"Accuracy/top1": Accuracy(thrs=None)(scores, labels)["top1"], "Ids/ids": list(range(10, 20))}
    for rank in range(2):
        assert out[rank] == ("ok", want), out[rank]


def coco_images(n: int = 14, classes: int = 3) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """``n`` images' predictions and ground truths: boxes near the truths plus a few false ones."""
    rng = np.random.default_rng(35)
    preds, gts = [], []
    for i in range(n):
        m = int(rng.integers(1, 4))
        xy = rng.uniform(0, 60, (m, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(10, 40, (m, 2))], axis=1)
        labels = rng.integers(0, classes, m)
        false = rng.uniform(0, 80, (2, 4))
        false[:, 2:] += false[:, :2]
        gts.append({"img_id": i, "width": 100, "height": 120, "bboxes": boxes, "labels": labels})
        preds.append(
            {
                "img_id": i,
                "bboxes": np.concatenate([boxes + rng.normal(0, 3, (m, 4)), false]),
                "scores": rng.random(m + 2),
                "labels": np.concatenate([labels, rng.integers(0, classes, 2)]),
            }
        )
    return preds, gts


def _coco_worker(backend: Any) -> Dict[str, Any]:
    """COCODetection, which computes in parts alone, in a collection beside Accuracy (each fed its own inputs)."""
    from mmeval import COCODetection

    preds, gts = coco_images()
    scores, labels = data()
    meta = {"classes": ("a", "b", "c")}
    rank, ws = backend.rank, backend.world_size
    mine = list(range(len(preds)))[rank::ws]

    def coco() -> Any:
        metric = COCODetection(print_results=False, dataset_meta=meta, dist_backend=backend)
        metric.add([preds[i] for i in mine], [gts[i] for i in mine])
        return metric

    both = MetricCollection({"coco": coco(), "acc": Accuracy(thrs=None, dist_backend=backend)})
    both["acc"].add(scores[rank::ws], labels[rank::ws])
    alone = coco()
    return {"together": both.compute(), "alone": alone.compute(), "in_parts": alone._computes_in_parts()}


def test_a_metric_computing_in_parts_alone_gives_the_same_numbers_in_a_collection():
    out = run_ranks(_coco_worker, 2, timeout=120, backend_kwargs={"timeout": TIMEOUT})
    for rank in range(2):
        status, got = out[rank]
        assert status == "ok", got
        assert got["in_parts"]
        coco = {k[len("coco/") :]: v for k, v in got["together"].items() if k.startswith("coco/")}
        assert coco == got["alone"] and 0 < coco["bbox_mAP"] < 1, (coco, got["alone"])


def _timed(fn: Any) -> Tuple[str, str, float]:
    start = time.monotonic()
    try:
        fn()
    except Exception as exc:
        return type(exc).__name__, str(exc), time.monotonic() - start
    return "ok", "", time.monotonic() - start


def _failing_worker(backend: Any, case: str) -> Tuple[str, str, float]:
    scores, labels = data()
    rank = backend.rank
    mine = list(range(N))[rank :: backend.world_size]
    metrics = five(backend)
    size: Any = N
    if case == "boom":
        metrics["boom"] = Boom(dist_backend=backend)
    elif case == "refused_add" and rank == 1:
        try:  # a refused add() on rank 1 only: its results would be short
            metrics["acc"].add(scores[:1], labels[:1], indices=np.array([2**64 - 1], dtype=np.uint64))
        except ValueError:
            pass
    elif case == "bad_size" and rank == 1:
        size = 0
    elif case == "other_config" and rank == 1:
        metrics["acc"] = Accuracy(topk=(1, 2), thrs=None, dist_backend=backend)
    collection = MetricCollection(metrics)
    collection.add(scores[mine], labels[mine])
    outcome = _timed(lambda: collection.compute(size=size))
    time.sleep(HOLD)
    return outcome


@pytest.mark.parametrize(
    "case, rank1, rank0, says",
    [
        ("boom", "RuntimeError", "RuntimeError", "boom over 30 samples"),
        ("refused_add", "ValueError", "CollectiveMismatchError", "indices="),
        ("bad_size", "ValueError", "CollectiveMismatchError", "size must be positive"),
        ("other_config", "CollectiveMismatchError", "CollectiveMismatchError", "topk"),
    ],
)
def test_a_failure_reaches_every_rank_at_once(case, rank1, rank0, says):
    out = run_ranks(_failing_worker, 2, case, timeout=120, backend_kwargs={"timeout": TIMEOUT})
    for rank, want in ((0, rank0), (1, rank1)):
        status, (name, message, seconds) = out[rank]
        assert status == "ok", out[rank]
        assert name == want, (rank, name, message)
        assert says in message, (rank, message)
        assert seconds < HOLD - 1, (rank, seconds, message)  # raised at once, not at a timeout


# -- one process: keys, names, refusals -----------------------------------------------------------------------------------


def test_one_process_keys_prefix_postfix_and_separator():
    scores, labels = data()
    alone = {name: metric(scores, labels) for name, metric in five().items()}
    collection = MetricCollection(five(), prefix="val/", postfix="@1")
    collection.add(scores[:17], labels[:17])
    collection.add(scores[17:], labels[17:])
    got = collection.compute()
    assert same(got, {f"val/{n}/{k}@1": v for n, r in alone.items() for k, v in r.items()})
    plain = MetricCollection({"acc": Accuracy(topk=(1, 3), thrs=None)}, separator=None)
    plain.add(scores, labels)
    assert plain.compute() == alone["acc"]
    collection.reset()
    assert all(m.num_results == 0 for _, m in collection.items())


def test_names_that_collide_are_refused():
    with pytest.raises(ValueError, match="two metrics are named 'Accuracy'"):
        MetricCollection([Accuracy(), Accuracy(topk=2)])
    both = MetricCollection({"a": Accuracy(thrs=None), "b": Accuracy(thrs=None)}, separator=None)
    scores, labels = data()
    both.add(scores, labels)
    with pytest.raises(ValueError, match="two metrics return the key 'top1'"):
        both.compute()
    with pytest.raises(TypeError, match="not an mmeval metric"):
        MetricCollection({"x": object()})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="at least one metric"):
        MetricCollection({})
    with pytest.raises(ValueError, match="at least one metric"):
        compute_collection({})


def test_metrics_on_other_backends_are_refused():
    from mmeval.core.dist_backends.non_dist import NonDist

    with pytest.raises(ValueError, match=r"\['b'\] run on another backend"):
        compute_collection({"a": Accuracy(), "b": Accuracy(dist_backend=NonDist())}, size=None)


def test_one_process_refusal_names_the_metric():
    collection = MetricCollection({"acc": Accuracy(thrs=None)})
    with pytest.raises(ValueError, match=r"acc: Accuracy\.compute\(size=0\)"):
        collection.compute(size=0)
