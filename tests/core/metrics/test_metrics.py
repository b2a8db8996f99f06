"""BaseMetric collection logic and Accuracy against a plain numpy reference."""

from __future__ import annotations

import re

import numpy as np
import pytest

import mmeval
from mmeval import Accuracy
from mmeval.core import BaseMetric
from mmeval.core.results import ArrayResults
from mmeval.core.sync.gather import collect
from mmeval.core.sync.ordering import round_robin_order


def reference_accuracy(scores, labels, k, thr):
    """Plain numpy: stable descending order (ties -> lower class index), hit if label in top-k and score > thr."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    hit = (order == labels[:, None]).any(axis=1)
    if thr is not None:
        hit &= scores[np.arange(len(labels)), labels] > thr
    return hit.mean()


def test_public_paths():
    assert mmeval.metrics.Accuracy is Accuracy
    assert mmeval.core.BaseMetric is BaseMetric
    from mmeval.core.dist import list_all_backends  # noqa: F401
    from mmeval.core.dist_backends import BaseDistBackend, TensorBaseDistBackend  # noqa: F401


@pytest.mark.parametrize("seed", range(5))
def test_accuracy_matches_numpy_reference_with_ties_and_thresholds(seed):
    rng = np.random.default_rng(seed)
    n, c = 500, 6
    scores = rng.integers(0, 4, (n, c)).astype(np.float64) / 4  # many ties, many zeros
    labels = rng.integers(0, c, n)
    acc = Accuracy(topk=(1, 2, 5), thrs=(None, 0.0, 0.5))
    got = acc(scores, labels)
    for k in (1, 2, 5):
        for thr, suffix in ((None, "_no-thr"), (0.0, "_thr-0.00"), (0.5, "_thr-0.50")):
            assert got[f"top{k}{suffix}"] == pytest.approx(reference_accuracy(scores, labels, k, thr))


def test_accuracy_result_keys_like_mmeval():
    preds = np.asarray([[0.1, 0.9, 0, 0], [0.5, 0.2, 0.3, 0], [0.3, 0.3, 0.2, 0.2], [0, 0, 0.6, 0.4]])
    labels = np.asarray([1, 2, 0, 3])
    assert Accuracy()(np.asarray([0, 2, 1, 3]), np.asarray([0, 1, 2, 3])) == {"top1": 0.5}
    assert Accuracy(topk=(1, 2, 3))(preds, labels) == {"top1": 0.5, "top2": 1.0, "top3": 1.0}
    out = Accuracy(topk=2, thrs=(0.1, 0.5))(preds, labels)
    assert out == {"top2_thr-0.10": 1.0, "top2_thr-0.50": 0.25}
    assert set(Accuracy(topk=(1, 3), thrs=(None, 0.5))(preds, labels)) == {
        "top1_no-thr",
        "top1_thr-0.50",
        "top3_no-thr",
        "top3_thr-0.50",
    }


def test_accuracy_accepts_lists_and_array_likes():
    class FakeTorch:  # duck-typed like a CUDA tensor: no __array__, has detach().cpu().numpy()
        def __init__(self, a):
            self.a = a

        def detach(self):
            return self

        def cpu(self):
            return self

        def numpy(self):
            return self.a

    class FakeTF:  # like an EagerTensor
        def __init__(self, a):
            self.a = a

        def numpy(self):
            return self.a

    scores = np.eye(3)[[0, 1, 2, 0]]
    labels = np.array([0, 1, 1, 0])
    expected = Accuracy()(scores, labels)
    assert Accuracy()(FakeTorch(scores), FakeTorch(labels)) == expected
    assert Accuracy()(FakeTF(scores), FakeTF(labels)) == expected
    assert Accuracy()(scores.tolist(), labels.tolist()) == expected
    assert Accuracy()([FakeTorch(s) for s in scores], [FakeTorch(x) for x in labels]) == expected


@pytest.mark.parametrize(
    "preds,labels,word",
    [
        (np.zeros((4, 3, 2)), np.zeros(4, int), "predictions"),
        (np.zeros((4, 3)), np.zeros((4, 1), int), "labels"),
        (np.zeros((4, 3)), np.zeros(5, int), "lengths"),
        (np.full((2, 3), np.nan), np.zeros(2, int), "NaN"),
        (np.zeros((0, 3)), np.zeros(0, int), "empty"),
        (np.zeros((2, 3)), np.array([0, 3]), "labels out of range"),
        (np.zeros((2, 3)), np.array([0, -1]), "labels out of range"),
        (np.zeros((2, 3)), np.array([0.5, 1.0]), "labels"),
        (np.zeros((2, 2)), np.array([0, 1]), "topk"),
    ],
)
def test_bad_input_is_a_value_error_and_leaves_state_alone(preds, labels, word):
    acc = Accuracy(topk=(1, 3))
    acc.add(np.eye(3)[[0, 1]], np.array([0, 1]))
    before = acc.compute()
    with pytest.raises(ValueError, match=word):
        acc.add(preds, labels)
    assert acc.num_results == 2
    with pytest.raises(ValueError, match="refused since reset"):  # remembered, not answered without it (item 2)
        acc.compute()
    acc.reset()
    acc.add(np.eye(3)[[0, 1]], np.array([0, 1]))
    assert acc.compute() == before


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="topk"):
        Accuracy(topk=0)
    with pytest.raises(ValueError, match="topk"):
        Accuracy(topk=())
    with pytest.raises(ValueError, match="thrs"):
        Accuracy(thrs=float("nan"))
    with pytest.raises(ValueError, match="dist_collect_mode"):
        Accuracy(dist_collect_mode="zip")
    from mmeval.core import dist

    missing = [n for n in dist.KNOWN_DISTRIBUTIONS if n not in dist.list_all_backends()]
    if missing:  # the core env: a well-known backend that is not installed names its distribution
        with pytest.raises(LookupError, match=re.escape(f"pip install {dist.KNOWN_DISTRIBUTIONS[missing[0]]}")):
            Accuracy(dist_backend=missing[0])
    with pytest.raises(LookupError, match="no_such_backend"):
        Accuracy(dist_backend="no_such_backend")
    with pytest.raises(ValueError, match="size"):
        Accuracy().compute(size=-1)


def test_changing_class_count_between_batches_is_refused():
    acc = Accuracy()
    acc.add(np.eye(3)[[0]], [0])
    with pytest.raises(ValueError, match="earlier batches"):
        acc.add(np.eye(4)[[0]], [0])
    with pytest.raises(ValueError, match="earlier batches"):
        acc.add(np.array([0]), [0])


def test_stateless_call_and_reset():
    acc = Accuracy()
    acc.add(np.eye(2)[[0, 0]], [0, 1])
    assert acc(np.eye(2)[[1]], [1]) == {"top1": 1.0}
    assert acc.compute() == {"top1": 0.5}
    acc.reset()
    assert acc.num_results == 0
    with pytest.raises(ValueError, match="no results"):
        acc.compute()


def test_compute_size_drops_padding_single_process():
    acc = Accuracy()
    acc.add(np.eye(2)[[0, 0, 1]], [0, 1, 1])
    assert acc.compute(size=3) == {"top1": 2 / 3}
    with pytest.raises(ValueError, match="3 samples were added"):  # more than size explains (issue 32, item 9)
        acc.compute(size=2)
    with pytest.warns(RuntimeWarning, match="only 3 results"):
        acc.compute(size=10)


def test_compute_metric_accepts_mmeval_style_list():
    acc = Accuracy(topk=(1, 2))
    results = [(np.array([0.2, 0.8]), 1), (np.array([0.9, 0.1]), 1)]
    assert acc.compute_metric(results) == {"top1": 0.5, "top2": 1.0}


def test_unzip_uneven_ranks_keep_every_result():
    parts = [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert collect(parts, "unzip", "m") == list(range(10))
    assert collect(parts, "cat", "m") == [0, 3, 6, 9, 1, 4, 7, 2, 5, 8]
    assert collect([[0, 2], [], [1]], "unzip", "m") == [0, 1, 2]
    arrays = [ArrayResults({"x": np.array(p, dtype=float)}) for p in parts]
    np.testing.assert_array_equal(collect(arrays, "unzip", "m")["x"], np.arange(10))
    mixed = [ArrayResults({"x": np.array([0.0, 2.0])}), [], ArrayResults({"x": np.array([1.0])})]
    np.testing.assert_array_equal(collect(mixed, "unzip", "m")["x"], [0, 1, 2])


@pytest.mark.parametrize("counts", [[5, 5, 5], [6, 5, 5], [1, 0, 0], [100, 1], [0, 3], [7, 7, 6, 6]])
def test_unzip_permutation_is_round_robin(counts):
    perm = round_robin_order(counts)
    offsets = np.cumsum([0] + counts[:-1])
    expected = [offsets[r] + j for j in range(max(counts)) for r in range(len(counts)) if j < counts[r]]
    np.testing.assert_array_equal(perm, expected)


class ListMetric(BaseMetric):
    """An object-results metric, MMEval style."""

    def add(self, items):
        for item in items:
            self._results.append(item)

    def compute_metric(self, results):
        return {"items": list(results)}


def test_object_results_metric():
    m = ListMetric()
    m.add([("a", 1), ("b", 2)])
    assert m.compute() == {"items": [("a", 1), ("b", 2)]}
    with pytest.raises(ValueError, match="2 samples were added"):  # more than size explains (issue 32, item 9)
        m.compute(size=1)
