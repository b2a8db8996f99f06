"""SingleLabelMetric against scikit-learn's precision_recall_fscore_support, single-process and over 2 and 3 ranks."""

from __future__ import annotations

import functools
import types
from typing import Any, Dict, List, Optional

import numpy as np
import pytest
from metric_helpers import assert_all_rejected, assert_ranks_match, compute_sharded
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import precision_recall_fscore_support

from mmeval.metrics.single_label import SingleLabelMetric, SingleLabelPrecisionRecallF1score


@functools.cache
def digit_scores(n: int = 400):
    """Class probabilities of a logistic regression on scikit-learn's digits (trained on other images), noised."""
    digits = load_digits()
    x, y = digits.data, digits.target
    clf = LogisticRegression(max_iter=300).fit(x[n:], y[n:])
    scores = clf.predict_proba(x[:n]) + np.random.default_rng(0).normal(0, 0.2, (n, 10))
    return scores, y[:n].astype(np.int64)


def reference(scores, labels, average: Optional[str], thr: Optional[float]) -> Dict[str, Any]:
    """sklearn on the arg-max; a sample whose top score is <= thr predicts class C (outside labels=0..C-1)."""
    c = scores.shape[1]
    pred = scores.argmax(axis=1)
    if thr is not None:
        pred = np.where(scores.max(axis=1) > thr, pred, c)
    p, r, f, _ = precision_recall_fscore_support(labels, pred, labels=list(range(c)), average=average, zero_division=0)
    support = precision_recall_fscore_support(labels, pred, labels=list(range(c)), average=None)[3]
    return {"precision": p, "recall": r, "f1-score": f, "support": support if average is None else support.sum()}


def close(got: Any, want: Any) -> bool:
    """Equal to the reference percentage up to the 4-decimal rounding."""
    return bool(np.all(np.abs(np.asarray(got, dtype=np.float64) - np.asarray(want) * 100) <= 5e-5 + 1e-9))


@pytest.mark.parametrize("average", ["macro", "micro", None])
@pytest.mark.parametrize("thrs", [None, 0.5, (None, 0.3, 0.6)])
def test_matches_sklearn_on_digit_scores(average, thrs):
    scores, labels = digit_scores()
    items = ("precision", "recall", "f1-score", "support")
    metric = SingleLabelMetric(thrs=thrs, items=items, average=average)
    for s in range(0, len(labels), 64):
        metric.add(scores[s : s + 64], labels[s : s + 64])
    got = metric.compute()
    thr_list = thrs if isinstance(thrs, tuple) else (thrs,)
    end = {"macro": "", "micro": "_micro", None: "_classwise"}[average]
    expected_keys = []
    for thr in thr_list:
        suffix = "" if len(thr_list) == 1 else ("_no-thr" if thr is None else f"_thr-{thr:.2f}")
        ref = reference(scores, labels, average, thr)
        for item in items:
            key = item + suffix + end
            expected_keys.append(key)
            if item == "support":
                assert got[key] == (ref[item].tolist() if average is None else int(ref[item])), key
            else:
                assert close(got[key], ref[item]), (key, got[key], ref[item])
    assert list(got) == expected_keys
    assert all(isinstance(v, float) for k, v in got.items() if average is not None and "support" not in k)


def test_label_predictions_need_num_classes_and_ignore_thrs():
    scores, labels = digit_scores()
    pred = scores.argmax(axis=1)
    got = SingleLabelMetric(num_classes=10, thrs=(0.1, 0.9))(pred, labels)
    ref = reference(scores, labels, "macro", None)
    assert list(got) == ["precision", "recall", "f1-score"]
    assert all(close(got[k], ref[k]) for k in got)
    assert SingleLabelMetric(num_classes=10)(pred.tolist(), labels.tolist()) == got
    with pytest.raises(ValueError, match=r"pass num_classes=C, or give scores"):
        SingleLabelMetric().add(pred, labels)


def test_mmeval_docstring_examples_and_alias():
    assert SingleLabelPrecisionRecallF1score is SingleLabelMetric
    metric = SingleLabelMetric(num_classes=4)
    assert metric(np.asarray([0, 2, 1, 3]), np.asarray([0, 1, 2, 3])) == {
        "precision": 50.0,
        "recall": 50.0,
        "f1-score": 50.0,
    }
    preds = np.asarray([[0.7, 0.1, 0.1, 0.1], [0.1, 0.3, 0.4, 0.2], [0.3, 0.4, 0.2, 0.1], [0.0, 0.0, 0.1, 0.9]])
    assert SingleLabelMetric(average="micro")(preds, [0, 1, 2, 3]) == {
        "precision_micro": 50.0,
        "recall_micro": 50.0,
        "f1-score_micro": 50.0,
    }


def fake_tensor(a):
    """Duck-typed like a CUDA torch tensor: detach().cpu().numpy(), no __array__."""
    t = types.SimpleNamespace(numpy=lambda: a)
    t.detach = t.cpu = lambda: t
    return t


def test_framework_like_tensors_convert_like_accuracy():
    scores, labels = digit_scores(100)
    metric = SingleLabelMetric(thrs=(None, 0.4), average=None)
    assert metric(fake_tensor(scores.astype(np.float32)), fake_tensor(labels)) == metric(
        scores.astype(np.float32), labels
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_classes": 0}, "num_classes must be a positive int"),
        ({"thrs": "high"}, "thrs must be a finite number"),
        ({"thrs": (0.5, float("nan"))}, "thrs must be a finite number"),
        ({"items": ("precision", "accuracy")}, "items must be a non-empty sequence of"),
        ({"items": "precision"}, "items must be a non-empty sequence of"),
        ({"average": "weighted"}, "average must be one of"),
    ],
)
def test_bad_arguments_raise_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SingleLabelMetric(**kwargs)


def test_bad_inputs_raise_naming_them_and_keep_nothing():
    m = SingleLabelMetric(num_classes=3)
    scores = np.full((2, 3), 0.3)
    cases = [
        ((scores, [0]), "different lengths: 2 predictions, 1 labels"),
        ((np.zeros((2, 3, 1)), [0, 1]), r"predictions must have shape \(N,\) \(labels\) or \(N, C\)"),
        ((scores, [[0], [1]]), r"labels must have shape \(N,\)"),
        ((np.full((2, 4), 0.2), [0, 1]), "have 4 classes .* but num_classes=3"),
        ((np.asarray([[np.nan, 0, 0], [0, 0, 1]]), [0, 1]), r"predictions holds NaN at \(0, 0\)"),
        ((scores, [0, 3]), r"labels out of range: got 3 at index 1"),
        (([0, 5], [0, 1]), r"predictions \(labels\) out of range: got 5"),
        ((scores, [0.5, 1]), "non-integral value 0.5"),
        ((np.zeros((0, 3)), []), "needs at least one sample"),
    ]
    assert_all_rejected(m, cases)
    m.add(scores, [0, 1])
    with pytest.raises(ValueError, match="cannot be mixed"):
        m.add([0, 1], [0, 1])


def test_mmeval_list_of_pairs_form():
    scores, labels = digit_scores(50)
    m = SingleLabelMetric(thrs=(None, 0.5), average="micro")
    assert m.compute_metric(list(zip(scores, labels))) == m(scores, labels)


def feed(metric: Any, preds: np.ndarray, labels: np.ndarray, idx: List[int], batch: int = 7) -> None:
    for s in range(0, len(idx), batch):
        metric.add(preds[idx[s : s + batch]], labels[idx[s : s + batch]])


def shard_worker(
    backend: Any, n: int, average: Optional[str], thrs: Any, label_preds: bool, scores: np.ndarray, labels: np.ndarray
) -> Dict[str, Any]:
    """Score (or label) predictions of the first n digits, on this rank's shard (three shardings).

    The digits' scores come from the parent: fitting the regression in every spawned rank cost ~5 s each."""
    preds = scores[:n].argmax(axis=1) if label_preds else scores[:n]
    items = ("precision", "recall", "f1-score", "support")
    make = functools.partial(SingleLabelMetric, num_classes=10, thrs=thrs, average=average, items=items)
    if backend is None:
        single = make()
        feed(single, preds, labels, list(range(n)))
        return single.compute()  # type: ignore[no-any-return]
    return compute_sharded(backend, n, make, lambda m, idx: feed(m, preds, labels, idx))


@pytest.mark.parametrize("ws", [2, 3])
@pytest.mark.parametrize(
    "average, thrs, label_preds", [("macro", (None, 0.4), False), (None, 0.3, False), ("micro", None, True)]
)
def test_distributed_equals_single_process_exactly(ws, average, thrs, label_preds):
    n = 121  # not a multiple of 2 or 3: padding and uneven shards both happen
    scores, labels = digit_scores()
    worker = functools.partial(
        shard_worker, average=average, thrs=thrs, label_preds=label_preds, scores=scores, labels=labels
    )
    want = worker(None, n)
    ref = reference(scores[:n], labels[:n], average, None if label_preds or isinstance(thrs, tuple) else thrs)
    assert close(next(iter(want.values())), ref["precision"])  # the single-process result is sklearn's
    assert_ranks_match(worker, ws, n, want)
