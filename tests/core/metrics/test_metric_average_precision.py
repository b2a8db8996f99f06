"""AveragePrecision against scikit-learn's average_precision_score, single-process and over 2 and 3 ranks."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Dict, Optional

import numpy as np
import pytest
from metric_helpers import assert_all_rejected, assert_ranks_match
from sklearn.datasets import make_multilabel_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score
from sklearn.multiclass import OneVsRestClassifier
from test_metric_multi_label import run_sharded

from mmeval.metrics.average_precision import AveragePrecision

C = 7


@functools.cache
def multilabel_scores(n: int = 300, decimals: Optional[int] = None):
    """One-vs-rest logistic-regression probabilities on make_multilabel_classification (trained on other samples).

    ``decimals`` rounds the scores, which makes many ties.
    """
    x, y = make_multilabel_classification(n_samples=n + 300, n_classes=C, n_labels=2, random_state=0)
    clf = OneVsRestClassifier(LogisticRegression(max_iter=500)).fit(x[n:], y[n:])
    scores = clf.predict_proba(x[:n])
    return (scores if decimals is None else np.round(scores, decimals)), y[:n].astype(np.int64)


def close(got: Any, want: Any) -> bool:
    """Equal to the reference percentage up to the 4-decimal rounding."""
    return bool(np.all(np.abs(np.asarray(got, dtype=np.float64) - np.asarray(want) * 100) <= 5e-5 + 1e-9))


@pytest.mark.parametrize("decimals", [None, 1])  # 1 decimal: tied scores, grouped like sklearn groups them
def test_matches_sklearn(decimals):
    scores, onehot = multilabel_scores(decimals=decimals)
    per_class = average_precision_score(onehot, scores, average=None)
    macro, classwise = AveragePrecision(), AveragePrecision(average=None)
    index_lists = [list(np.flatnonzero(row)) for row in onehot]
    for s in range(0, len(onehot), 40):  # one-hot arrays and index lists alike
        for m in (macro, classwise):
            m.add(scores[s : s + 40], onehot[s : s + 40] if s % 80 else index_lists[s : s + 40])
    got = macro.compute()
    assert list(got) == ["mAP"] and close(got["mAP"], per_class.mean())
    assert close(got["mAP"], average_precision_score(onehot, scores, average="macro"))
    got_c = classwise.compute()
    assert list(got_c) == ["AP_classwise"] and len(got_c["AP_classwise"]) == C
    assert close(got_c["AP_classwise"], per_class)
    # the result does not depend on the order of the samples, ties included
    perm = np.random.default_rng(0).permutation(len(onehot))
    assert AveragePrecision(average=None)(scores[perm], onehot[perm]) == got_c


def test_mmeval_docstring_example_and_class_without_positives():
    preds = [[0.9, 0.8, 0.3, 0.2], [0.1, 0.2, 0.2, 0.1], [0.7, 0.5, 0.9, 0.3], [0.8, 0.1, 0.1, 0.2]]
    assert AveragePrecision()(preds, [[0, 1], [1], [2], [0]]) == {"mAP": 70.8333}
    onehot = np.asarray([[1, 1, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0]])
    assert AveragePrecision(average=None)(np.asarray(preds), onehot) == {
        "AP_classwise": [100.0, 83.3333, 100.0, 0.0]
    }  # class 3 has no positive label: 0, as in MMEval
    assert average_precision_score(onehot[:, 1], np.asarray(preds)[:, 1]) == pytest.approx(0.833333333)


def test_bad_arguments_and_inputs_raise_naming_them():
    with pytest.raises(ValueError, match="average must be 'macro' or None, got 'micro'"):
        AveragePrecision(average="micro")
    m = AveragePrecision()
    scores = np.full((2, 3), 0.5)
    m.add(scores, [[0], [1, 2]])
    m.reset()
    assert_all_rejected(
        m,
        [
            ((np.asarray([0.5, 0.2]), [0, 1]), r"predictions must be scores of shape \(N, C\), got shape \(2,\)"),
            ((scores, [[0]]), "different lengths: 2 predictions, 1 labels"),
            ((np.asarray([[np.nan, 0, 0], [0, 0, 1]]), [0, 1]), r"predictions holds NaN at \(0, 0\)"),
            ((scores, [[0], [3]]), r"labels\[1\] out of range: got 3"),
            ((scores.astype(str), [0, 1]), "must be real numbers"),
        ],
    )
    m.add(scores, [0, 1])
    with pytest.raises(ValueError, match="predictions have 4 classes but earlier batches had 3"):
        m.add(np.full((1, 4), 0.1), [0])


def test_mmeval_list_of_pairs_form():
    scores, onehot = multilabel_scores(decimals=2)
    m = AveragePrecision(average=None)
    assert m.compute_metric(list(zip(scores[:60], onehot[:60]))) == m(scores[:60], onehot[:60])


def shard_worker(backend: Any, n: int, average: Optional[str], decimals: Optional[int]) -> Dict[str, Any]:
    """Scores and ragged index-list labels of the first n samples, on this rank's shard (three shardings)."""
    scores, onehot = multilabel_scores(decimals=decimals)
    labels = [list(np.flatnonzero(row)) for row in onehot[:n]]
    return run_sharded(backend, n, functools.partial(AveragePrecision, average=average), scores, labels)


@pytest.mark.parametrize("ws", [2, 3])
@pytest.mark.parametrize("average, decimals", [("macro", None), (None, 1)])
def test_distributed_equals_single_process_exactly(ws, average, decimals):
    n = 121  # not a multiple of 2 or 3: padding and uneven shards both happen
    worker = functools.partial(shard_worker, average=average, decimals=decimals)
    want = worker(None, n)
    scores, onehot = multilabel_scores(decimals=decimals)
    ref = average_precision_score(onehot[:n], scores[:n], average=None)
    assert close(want["mAP"] if average else want["AP_classwise"], ref.mean() if average else ref)
    assert_ranks_match(worker, ws, n, want)


# --- MMEval 0.2.1's label_is_onehot / pred_is_onehot (issue 22 item 4) ---------------------------------------------


@pytest.mark.parametrize("c", [2, 4])
def test_label_is_onehot_matches_sklearn(c):
    rng = np.random.default_rng(11 + c)
    onehot = rng.integers(0, 2, (120, c))
    onehot[0] = 1  # every class has a positive
    scores = rng.random((120, c))
    want = average_precision_score(onehot, scores, average=None)
    lists = [[int(i) for i in np.flatnonzero(row)] for row in onehot]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an explicit flag leaves nothing ambiguous
        got = AveragePrecision(average=None, label_is_onehot=True)(scores, onehot)
        assert close(got["AP_classwise"], want)
        assert AveragePrecision(average=None, label_is_onehot=False)(scores, lists) == got
        later = AveragePrecision(average=None)
        later.label_is_onehot = True  # MMEval's way
        assert later(scores, onehot) == got
        assert later.compute_metric(list(zip(scores, onehot))) == got  # MMEval's per-sample form
    if c == 2:  # MMEval's reading of 2-class 0/1 rows without the flag: class indices, with a warning
        with pytest.warns(UserWarning, match="label_is_onehot=True"):
            as_indices = AveragePrecision(average=None)(scores, onehot)
        read = np.asarray([[1, 1] if row.any() else [1, 0] for row in onehot])  # [0,1]/[1,0]: both; [0,0]: 0
        read[onehot.all(axis=1)] = [0, 1]  # [1, 1]: class 1
        assert close(as_indices["AP_classwise"], average_precision_score(read, scores, average=None))


def test_pred_is_onehot_is_false_and_stays_so():
    from mmeval.core.errors import MetricArgumentError

    m = AveragePrecision()
    assert m.pred_is_onehot is False and m.label_is_onehot is None
    m.pred_is_onehot = False
    for bad in (True, None):
        with pytest.raises(MetricArgumentError, match="pred_is_onehot must stay False"):
            m.pred_is_onehot = bad
