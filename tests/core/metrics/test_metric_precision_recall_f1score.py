"""PrecisionRecallF1score: MMEval 0.2.1's dispatcher to SingleLabelMetric / MultiLabelMetric, checked against
scikit-learn; its bad arguments are in test_mmeval_compat.py's table."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import precision_recall_fscore_support

from mmeval.core import BaseMetric
from mmeval.metrics import MultiLabelMetric, PrecisionRecallF1score, SingleLabelMetric
from mmeval.metrics.precision_recall_f1score import (
    MultiLabelPrecisionRecallF1score,
    SingleLabelPrecisionRecallF1score,
)


def test_mmeval_docstring_examples():
    preds, labels = np.asarray([2, 0, 1, 1]), np.asarray([2, 1, 2, 0])
    assert PrecisionRecallF1score(num_classes=3)(preds, labels) == {
        "precision": 33.3333,
        "recall": 16.6667,
        "f1-score": 22.2222,
    }
    assert PrecisionRecallF1score(task="multilabel", average="micro", num_classes=3)(preds, labels) == {
        "precision_micro": 25.0,
        "recall_micro": 25.0,
        "f1-score_micro": 25.0,
    }


def test_singlelabel_builds_single_label_metric_with_its_arguments():
    backend = "non_dist"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = PrecisionRecallF1score(
            num_classes=4, thrs=(None, 0.3), items=("recall", "support"), average=None, dist_backend=backend
        )
    assert type(m) is SingleLabelMetric is SingleLabelPrecisionRecallF1score and isinstance(m, BaseMetric)
    assert not isinstance(m, PrecisionRecallF1score)  # a factory, as in MMEval
    assert (m.num_classes, m.thrs, m.items, m.average, m.dist_backend) == (
        4,
        (None, 0.3),
        ("recall", "support"),
        None,
        backend,
    )
    rng = np.random.default_rng(2)
    scores, labels = rng.random((80, 4)), rng.integers(0, 4, 80)
    _, recall, _, support = precision_recall_fscore_support(
        labels, scores.argmax(1), labels=range(4), average=None, zero_division=0
    )
    got = m(scores, labels)
    assert got["recall_no-thr_classwise"] == [round(float(r) * 100, 4) for r in recall]
    assert got["support_no-thr_classwise"] == support.tolist()


def test_singlelabel_warns_that_topk_does_not_apply():
    with pytest.warns(UserWarning, match="topk=2 is ignored"):
        m = PrecisionRecallF1score(task="singlelabel", num_classes=3, topk=2)
    assert type(m) is SingleLabelMetric


def test_multilabel_builds_multi_label_metric_with_its_arguments():
    with pytest.warns(UserWarning, match="thr is used"):  # thrs becomes thr, and thr wins over topk
        m = PrecisionRecallF1score(
            task="multilabel",
            num_classes=3,
            thrs=0.25,
            topk=2,
            items=("precision",),
            average="micro",
            label_is_onehot=True,
        )
    assert type(m) is MultiLabelMetric is MultiLabelPrecisionRecallF1score
    assert (m.num_classes, m.thr, m.topk, m.items, m.average, m.label_is_onehot) == (
        3,
        0.25,
        2,
        ("precision",),
        "micro",
        True,
    )
    m = PrecisionRecallF1score(task="multilabel", num_classes=3, topk=1)
    assert (m.thr, m.topk) == (None, 1)
    rng = np.random.default_rng(4)
    scores, onehot = rng.random((60, 3)), rng.integers(0, 2, (60, 3))
    p, r, f, _ = precision_recall_fscore_support(onehot, scores >= 0.4, average="macro", zero_division=0)
    got = PrecisionRecallF1score(task="multilabel", num_classes=3, thrs=0.4)(scores, onehot)
    assert got == {
        "precision_thr-0.40": round(p * 100, 4),
        "recall_thr-0.40": round(r * 100, 4),
        "f1-score_thr-0.40": pytest.approx(round(f * 100, 4), abs=1e-4),
    }
