"""Shared-table cases of MMEval 0.2.1's compatibility surface (issue 22 item 4): two-class one-hot rows read with
``pred_is_onehot`` / ``label_is_onehot``, and a metric built by the ``PrecisionRecallF1score`` factory.

The data come from tests/core/metrics/test_metric_multi_label.py (checked there against scikit-learn).
"""

from __future__ import annotations

from typing import Any, Dict

CASE_NAMES = ("MultiLabelMetric-2class-onehot", "PrecisionRecallF1score-multilabel")


def build_cases() -> Dict[str, Dict[str, Any]]:
    """The cases (parent side: needs the core tests' data functions)."""
    from test_metric_multi_label import ITEMS, index_lists, onehot_data

    n = 121  # no world size of 2 or 3 divides it
    pred2, label2, _ = onehot_data(2)
    _, label5, scores5 = onehot_data(5)
    return {
        "MultiLabelMetric-2class-onehot": {
            "metric": "mmeval.metrics.multi_label:MultiLabelMetric",
            "kwargs": {
                "num_classes": 2,
                "items": ITEMS,
                "average": None,
                "pred_is_onehot": True,
                "label_is_onehot": True,
            },
            "inputs": [pred2[:n], label2[:n]],
            "n": n,
        },
        "PrecisionRecallF1score-multilabel": {
            "metric": "mmeval.metrics.precision_recall_f1score:PrecisionRecallF1score",
            "kwargs": {"task": "multilabel", "num_classes": 5, "thrs": 0.4, "items": ITEMS, "average": "micro"},
            "inputs": [scores5[:n], index_lists(label5[:n])],
            "n": n,
        },
    }
