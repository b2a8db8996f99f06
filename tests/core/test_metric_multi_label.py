"""MultiLabelMetric against scikit-learn's precision_recall_fscore_support, single-process and over 2 and 3 ranks."""

from __future__ import annotations

import functools
from typing import Any, Dict, List, Optional

import numpy as np
import pytest
from metric_helpers import assert_all_rejected, assert_ranks_match, compute_sharded
from sklearn.datasets import make_multilabel_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import precision_recall_fscore_support
from sklearn.multiclass import OneVsRestClassifier

from mmeval.metrics.multi_label import MultiLabelMetric, MultiLabelPrecisionRecallF1score

C = 6


@functools.cache
def multilabel_scores(n: int = 300):
    """One-vs-rest logistic-regression probabilities on make_multilabel_classification (trained on other samples)."""
    x, y = make_multilabel_classification(n_samples=n + 300, n_classes=C, n_labels=2, random_state=0)
    clf = OneVsRestClassifier(LogisticRegression(max_iter=500)).fit(x[n:], y[n:])
    return clf.predict_proba(x[:n]), y[:n].astype(np.int64)


def topk_mask(scores: np.ndarray, k: int) -> np.ndarray:
    """Positive where fewer than k classes beat the class (higher score, or equal score and lower index)."""
    cols = np.arange(scores.shape[1])
    beats = (scores[:, None, :] > scores[:, :, None]) | (
        (scores[:, None, :] == scores[:, :, None]) & (cols[None, None, :] < cols[None, :, None]))
    return beats.sum(axis=2) < k


def reference(positive: np.ndarray, onehot: np.ndarray, average: Optional[str]):
    p, r, f, _ = precision_recall_fscore_support(onehot, positive.astype(int), average=average, zero_division=0)
    support = onehot.sum(axis=0)
    return {"precision": p, "recall": r, "f1-score": f, "support": support.tolist() if average is None
            else int(support.sum())}


def close(got: Any, want: Any) -> bool:
    return bool(np.all(np.abs(np.asarray(got, dtype=np.float64) - np.asarray(want) * 100) <= 5e-5 + 1e-9))


@pytest.mark.parametrize("average", ["macro", "micro", None])
@pytest.mark.parametrize("thr, topk, suffix", [(None, None, ""), (0.3, None, "_thr-0.30"), (None, 2, "_top2")])
def test_matches_sklearn(average, thr, topk, suffix):
    scores, onehot = multilabel_scores()
    positive = scores >= (0.5 if thr is None else thr) if topk is None else topk_mask(scores, topk)
    ref = reference(positive, onehot, average)
    items = ("precision", "recall", "f1-score", "support")
    metric = MultiLabelMetric(C, thr=thr, topk=topk, items=items, average=average)
    index_lists = [list(np.flatnonzero(row)) for row in onehot]
    for s in range(0, len(onehot), 50):  # one-hot arrays and index lists alike
        metric.add(scores[s:s + 50], onehot[s:s + 50] if s % 100 else index_lists[s:s + 50])
    got = metric.compute()
    end = {"macro": "", "micro": "_micro", None: "_classwise"}[average]
    assert list(got) == [item + suffix + end for item in items]
    for item in items:
        key = item + suffix + end
        if item == "support":
            assert got[key] == ref[item]
        else:
            assert close(got[key], ref[item]), (key, got[key], ref[item])


def test_mmeval_docstring_examples_and_alias():
    assert MultiLabelPrecisionRecallF1score is MultiLabelMetric
    want = {"precision": 87.5, "recall": 87.5, "f1-score": 83.3333}
    m = MultiLabelMetric(num_classes=4)
    assert m([[0], [1], [2], [0, 3]], [[0], [1, 2], [2], [3]]) == want
    onehot = [[1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    assert m([[0.9, 0.1, 0.2, 0.3], [0.1, 0.8, 0.1, 0.1], [0.4, 0.3, 0.7, 0.1], [0.8, 0.1, 0.1, 0.9]], onehot) == want
    assert m([np.array([0]), np.array([1]), np.array([2]), np.array([0, 3])], np.asarray(onehot)) == want
    preds = np.asarray([[0.7, 0.1, 0.1, 0.1], [0.1, 0.3, 0.4, 0.2], [0.3, 0.4, 0.2, 0.1], [0.0, 0.0, 0.1, 0.9]])
    assert MultiLabelMetric(4, topk=2, average="micro")(preds, np.asarray([0, 1, 2, 3])) == {
        "precision_top2_micro": 37.5, "recall_top2_micro": 75.0, "f1-score_top2_micro": 50.0}


def test_both_thr_and_topk_warn_and_use_thr():
    with pytest.warns(UserWarning, match="thr is used"):
        m = MultiLabelMetric(4, thr=0.3, topk=2)
    assert list(m(np.full((1, 4), 0.4), [[0]])) == ["precision_thr-0.30", "recall_thr-0.30", "f1-score_thr-0.30"]


@pytest.mark.parametrize("kwargs, match", [
    ({"num_classes": None}, "num_classes must be a positive int"),
    ({"num_classes": 3, "thr": "x"}, "thr must be a finite number"),
    ({"num_classes": 3, "topk": 4}, r"topk must be None or an int in \[1, num_classes=3\]"),
    ({"num_classes": 3, "items": ["recall", "mAP"]}, "items must be a non-empty sequence"),
    ({"num_classes": 3, "average": "samples"}, "average must be one of"),
])
def test_bad_arguments_raise_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiLabelMetric(**kwargs)


def test_bad_inputs_raise_naming_them_and_keep_nothing():
    m = MultiLabelMetric(3)
    cases = [
        ((np.full((2, 3), 0.2), [[0]]), "different lengths: 2 predictions, 1 labels"),
        ((np.full((1, 3), 0.2), [[0, 3]]), r"labels\[0\] out of range: got 3 .*label format.*0 or 1"),
        ((np.full((1, 3), 2.5), [[0]]), r"predictions\[0\] must be integer class indices.*score rows must be C"),
        ((np.asarray([[np.nan, 0, 0]]), [[0]]), r"predictions\[0\] contains NaN"),
        ((np.zeros((1, 3, 1)), [[0]]), r"predictions must be an \(N,\) or \(N, C\) array"),
        (([], []), "predictions is empty"),
    ]
    assert_all_rejected(m, cases)


def shard_worker(backend: Any, n: int, average: Optional[str], thr: Optional[float], topk: Optional[int]
                 ) -> Dict[str, Any]:
    """Scores and ragged index-list labels of the first n samples, on this rank's shard (three shardings)."""
    scores, onehot = multilabel_scores()
    labels = [list(np.flatnonzero(row)) for row in onehot[:n]]
    items = ("precision", "recall", "f1-score", "support")
    make = functools.partial(MultiLabelMetric, C, thr=thr, topk=topk, average=average, items=items)
    return run_sharded(backend, n, make, scores, labels)


def run_sharded(backend: Any, n: int, make: Any, scores: np.ndarray, labels: List[Any]) -> Dict[str, Any]:
    """``make()``'s result on the first n samples added 7 at a time: single-process when ``backend`` is None,
    else on this rank's shard under each sharding (:func:`compute_sharded`)."""
    def feed(metric: Any, idx: List[int], batch: int = 7) -> None:
        for s in range(0, len(idx), batch):
            metric.add(scores[idx[s:s + batch]], [labels[i] for i in idx[s:s + batch]])

    if backend is None:
        single = make()
        feed(single, list(range(n)))
        return single.compute()  # type: ignore[no-any-return]
    return compute_sharded(backend, n, make, feed)


@pytest.mark.parametrize("ws", [2, 3])
@pytest.mark.parametrize("average, thr, topk", [("macro", None, None), (None, None, 2), ("micro", 0.3, None)])
def test_distributed_equals_single_process_exactly(ws, average, thr, topk):
    n = 121  # not a multiple of 2 or 3: padding and uneven shards both happen
    worker = functools.partial(shard_worker, average=average, thr=thr, topk=topk)
    want = worker(None, n)
    scores, onehot = multilabel_scores()
    positive = scores[:n] >= (thr or 0.5) if topk is None else topk_mask(scores[:n], topk)
    assert close(next(iter(want.values())), reference(positive, onehot[:n], average)["precision"])
    assert_ranks_match(worker, ws, n, want)
