"""MultiLabelMetric against scikit-learn's precision_recall_fscore_support, single-process and over 2 and 3 ranks."""

from __future__ import annotations

import functools
import warnings
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
        (scores[:, None, :] == scores[:, :, None]) & (cols[None, None, :] < cols[None, :, None])
    )
    return beats.sum(axis=2) < k


def reference(positive: np.ndarray, onehot: np.ndarray, average: Optional[str]):
    p, r, f, _ = precision_recall_fscore_support(onehot, positive.astype(int), average=average, zero_division=0)
    support = onehot.sum(axis=0)
    return {
        "precision": p,
        "recall": r,
        "f1-score": f,
        "support": support.tolist() if average is None else int(support.sum()),
    }


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
        metric.add(scores[s : s + 50], onehot[s : s + 50] if s % 100 else index_lists[s : s + 50])
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
        "precision_top2_micro": 37.5,
        "recall_top2_micro": 75.0,
        "f1-score_top2_micro": 50.0,
    }


def test_both_thr_and_topk_warn_and_use_thr():
    with pytest.warns(UserWarning, match="thr is used"):
        m = MultiLabelMetric(4, thr=0.3, topk=2)
    assert list(m(np.full((1, 4), 0.4), [[0]])) == ["precision_thr-0.30", "recall_thr-0.30", "f1-score_thr-0.30"]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_classes": None}, "num_classes must be a positive int"),
        ({"num_classes": 3, "thr": "x"}, "thr must be a finite number"),
        ({"num_classes": 3, "topk": 4}, r"topk must be None or an int in \[1, num_classes=3\]"),
        ({"num_classes": 3, "items": ["recall", "mAP"]}, "items must be a non-empty sequence"),
        ({"num_classes": 3, "average": "samples"}, "average must be one of"),
    ],
)
def test_bad_arguments_raise_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiLabelMetric(**kwargs)


def test_bad_inputs_raise_naming_them_and_keep_nothing():
    m = MultiLabelMetric(3)
    cases = [
        ((np.full((2, 3), 0.2), [[0]]), "different lengths: 2 predictions, 1 labels"),
        ((np.full((1, 3), 0.2), [[0, 3]]), r"labels\[0\] out of range: got 3 .*label format.*0 or 1"),
        ((np.full((1, 3), 2.5), [[0]]), r"predictions\[0\] must be integer class indices.*score rows must be C"),
        ((np.asarray([[np.nan, 0, 0]]), [[0]]), r"predictions holds NaN at \(0, 0\)"),
        ((np.zeros((1, 3, 1)), [[0]]), r"predictions must be an \(N,\) or \(N, C\) array"),
        (([], []), "predictions is empty"),
    ]
    assert_all_rejected(m, cases)


def shard_worker(
    backend: Any, n: int, average: Optional[str], thr: Optional[float], topk: Optional[int]
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
            metric.add(scores[idx[s : s + batch]], [labels[i] for i in idx[s : s + batch]])

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


# --- MMEval 0.2.1's pred_is_onehot / label_is_onehot, and its reading of 2-class rows (issue 22 item 4) ------------

ITEMS = ("precision", "recall", "f1-score", "support")


def onehot_data(c: int, n: int = 150, seed: int = 5):
    """Random one-hot predictions and labels (rows of all zeros and all ones included) and scores in (0, 1)."""
    rng = np.random.default_rng(seed + c)
    return rng.integers(0, 2, (n, c)), rng.integers(0, 2, (n, c)), rng.uniform(0.01, 0.99, (n, c))


def index_lists(onehot: np.ndarray) -> List[List[int]]:
    return [[int(i) for i in np.flatnonzero(row)] for row in onehot]


def assert_matches(
    got: Dict[str, Any], positive: np.ndarray, onehot: np.ndarray, average: Optional[str], suffix: str = ""
) -> None:
    ref = reference(positive.astype(bool), onehot, average)
    end = {"macro": "", "micro": "_micro", None: "_classwise"}[average]
    assert list(got) == [item + suffix + end for item in ITEMS]
    for item in ITEMS:
        key = item + suffix + end
        assert (got[key] == ref[item]) if item == "support" else close(got[key], ref[item]), (key, got[key])


@pytest.mark.parametrize("c", [2, 5])
@pytest.mark.parametrize("average", ["macro", "micro", None])
def test_onehot_flags_match_sklearn(c, average):
    pred_onehot, onehot, _ = onehot_data(c)
    kw = {"items": ITEMS, "average": average}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an explicit flag leaves nothing ambiguous
        as_onehot = MultiLabelMetric(c, pred_is_onehot=True, label_is_onehot=True, **kw)(pred_onehot, onehot)
        as_lists = MultiLabelMetric(c, pred_is_onehot=False, label_is_onehot=False, **kw)(
            index_lists(pred_onehot), index_lists(onehot)
        )
        set_later = MultiLabelMetric(c, **kw)  # MMEval's way: attributes set after construction
        set_later.pred_is_onehot, set_later.label_is_onehot = True, True
        assert (set_later.pred_is_onehot, set_later.label_is_onehot) == (True, True)
        from_pairs = set_later.compute_metric(list(zip(pred_onehot, onehot)))  # MMEval's per-sample form
        for s in range(0, len(onehot), 40):
            set_later.add(pred_onehot[s : s + 40], onehot[s : s + 40])
        later = set_later.compute()
    for got in (as_onehot, as_lists, later, from_pairs):
        assert_matches(got, pred_onehot, onehot, average)


def test_pred_is_onehot_true_takes_any_real_scores():
    _, onehot, _ = onehot_data(2)
    logits = np.random.default_rng(8).normal(scale=3.0, size=onehot.shape)
    got = MultiLabelMetric(2, thr=0.0, items=ITEMS, pred_is_onehot=True, label_is_onehot=True)(logits, onehot)
    assert_matches(got, logits >= 0.0, onehot, "macro", "_thr-0.00")
    with pytest.raises(ValueError, match=r"predictions\[0\] must be integer class indices"):
        MultiLabelMetric(2, thr=0.0)(logits, onehot)  # without the flag such a row is not scores


def test_two_class_rows_of_zeros_and_ones_are_class_indices_as_in_mmeval():
    """MMEval 0.2.1 reads a 2-class 0/1 input as class indices unless told it is one-hot: [0, 1] is classes 0 and 1
    (the old docstring said so, while the old code read it as class 1)."""
    rows = [[0, 1], [1, 0], [0, 0], [1, 1]]
    scores = np.asarray([[0.2, 0.9], [0.7, 0.1], [0.6, 0.3], [0.4, 0.8]])  # strictly inside (0, 1): scores
    positive = scores >= 0.5
    as_indices = np.asarray([[1, 1], [1, 1], [1, 0], [0, 1]])
    with pytest.warns(
        UserWarning,
        match=r"labels: with 2 classes, a row of two 0/1 values is ambiguous.*"
        r"Set label_is_onehot=True",
    ) as rec:
        got = MultiLabelMetric(2, items=ITEMS, average=None)(scores, rows)
    assert len(rec) == 1 and rec[0].filename == __file__
    assert_matches(got, positive, as_indices, None)
    assert MultiLabelMetric(2, items=("support",), average=None, label_is_onehot=False)(scores[:1], [[0, 1]]) == {
        "support_classwise": [1, 1]
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert MultiLabelMetric(2, items=ITEMS, average=None, label_is_onehot=False)(scores, rows) == got
        assert_matches(
            MultiLabelMetric(2, items=ITEMS, average=None, label_is_onehot=True)(scores, rows),
            positive,
            np.asarray(rows),
            None,
        )
    # predictions too: a one-hot prediction row needs pred_is_onehot=True
    with pytest.warns(UserWarning, match="predictions: with 2 classes.*pred_is_onehot=True"):
        got = MultiLabelMetric(2, items=ITEMS, average=None, label_is_onehot=True)(rows, rows)
    assert_matches(got, as_indices, np.asarray(rows), None)
    got = MultiLabelMetric(2, items=ITEMS, average=None, pred_is_onehot=True, label_is_onehot=True)(rows, rows)
    assert_matches(got, np.asarray(rows), np.asarray(rows), None)


def test_more_than_two_classes_read_each_row_on_its_own():
    """With C > 2 a row of C values in [0, 1] is scores / one-hot, anything else class indices, whatever the other
    rows of the input are (MMEval decides for the whole input)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = MultiLabelMetric(3, items=("support",), average=None)(np.full((3, 3), 0.2), [[0, 1, 0], [0, 1, 2], [2]])
    assert got == {"support_classwise": [1, 2, 2]}


def test_a_flag_changed_while_samples_are_held_is_refused_until_reset():
    from mmeval.core.errors import MetricArgumentError

    m = MultiLabelMetric(2)
    m.add(np.asarray([[0.2, 0.9]]), [[1]])
    with pytest.raises(
        MetricArgumentError,
        match=r"1 samples were read with label_is_onehot=None: set "
        r"label_is_onehot=True before adding \(call reset\(\) first\)",
    ):
        m.label_is_onehot = True
    m.label_is_onehot = None  # the same value: nothing to refuse
    assert m.label_is_onehot is None and m.num_results == 1
    m.reset()
    m.label_is_onehot = True
    assert m.label_is_onehot is True


def two_class_worker(backend: Any, n: int) -> Dict[str, Any]:
    """One-hot 2-class predictions and labels (pred_is_onehot / label_is_onehot), on this rank's shard."""
    pred_onehot, onehot, _ = onehot_data(2)
    make = functools.partial(MultiLabelMetric, 2, items=ITEMS, average=None, pred_is_onehot=True, label_is_onehot=True)
    return run_sharded(backend, n, make, pred_onehot, list(onehot))


def test_two_class_onehot_distributed_equals_single_process():
    n = 121
    want = two_class_worker(None, n)
    pred_onehot, onehot, _ = onehot_data(2)
    assert_matches(want, pred_onehot[:n], onehot[:n], None)
    assert_ranks_match(two_class_worker, 2, n, want)
