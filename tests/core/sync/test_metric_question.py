"""Ranks whose metrics are configured differently raise on every rank, whatever the type or size of the setting.

Two real hub ranks (processes over TCP) compute a metric whose configuration differs in one setting only:
a numpy scalar, a 65-item threshold list, a ``topk`` tuple differing past its 140th character. Before the
question covered every public attribute, these ranks answered their own (different) questions.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np
import pytest
from hub_backend import run_ranks

from mmeval import Accuracy, MeanIoU


def _mean_iou(backend: Any, settings: Dict[int, Any]) -> Any:
    metric = MeanIoU(num_classes=3, dist_backend=backend, **settings[backend.rank])
    pred = np.array([[0, 1, 2], [0, 0, 1]])
    label = np.array([[0, 1, 1], [2, 0, 1]])
    metric.add([pred], [label])
    return metric.compute(size=2)


def _accuracy(backend: Any, settings: Dict[int, Any]) -> Any:
    metric = Accuracy(dist_backend=backend, **settings[backend.rank])
    scores = np.random.default_rng(backend.rank).random((8, 60))
    metric.add(scores, np.arange(8) % 60)
    return metric.compute(size=16)


CASES = {
    "numpy scalar": (_mean_iou, {0: {"nan_to_num": np.float32(0.5)}, 1: {"nan_to_num": np.float32(0.7)}}, "nan_to_num"),
    "numpy beta": (_mean_iou, {0: {"beta": np.float64(1.0)}, 1: {"beta": np.float64(2.0)}}, "beta"),
    "65 thresholds": (
        _accuracy,
        {
            0: {"thrs": tuple(np.linspace(0, 0.64, 65).tolist())},
            1: {"thrs": tuple(np.linspace(0, 0.64, 65).tolist()[:-1] + [0.99])},
        },
        "thrs",
    ),
    "topk past 140 chars": (
        _accuracy,
        {0: {"topk": tuple(range(1, 50))}, 1: {"topk": tuple(range(1, 49)) + (50,)}},
        "topk",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_setting_differing_in_any_value_raises_on_every_rank(case):
    worker, settings, field = CASES[case]
    out = run_ranks(worker, 2, settings, timeout=120)
    for rank in (0, 1):
        status, value = out[rank]
        assert status == "error", f"rank {rank} answered {value!r} to a question its peer did not ask"
        name, message = value[0], value[1]
        assert name == "CollectiveMismatchError", (rank, name, message)
        assert field in message, (rank, message)


def test_the_same_numpy_scalar_setting_on_every_rank_agrees():
    settings = {0: {"nan_to_num": np.float32(0.5)}, 1: {"nan_to_num": np.float32(0.5)}}
    out = run_ranks(_mean_iou, 2, settings, timeout=120)
    assert out[0] == out[1] and out[0][0] == "ok", out
