"""MMEngine's Evaluator, built from an mmdet-style config, evaluating COCODetection and Accuracy on 2 torchrun ranks.

The real MMEngine and a real ``torchrun`` (gloo): the samples dealt by MMEngine's ``DefaultSampler``
(padded: 23 images on 2 ranks, 24 seen), each rank's ``Evaluator.evaluate(size)`` must equal the two
metrics computed in one process over the dataset, without MMEngine, epoch after epoch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest
from adapter_launch import torchrun

pytest.importorskip("mmengine", reason="the adapters env installs MMEngine")

WS = 2


@pytest.fixture(scope="module")
def reports(tmp_path_factory: Any) -> List[Dict[str, Any]]:
    return torchrun("mmengine_program.py", Path(tmp_path_factory.mktemp("mmengine")), WS)


def test_mmengine_runs_two_ranks_and_pads(reports: List[Dict[str, Any]]) -> None:
    assert [r["mmengine_world"] for r in reports] == [[0, WS], [1, WS]]
    assert sum(r["seen"] for r in reports) == 24  # DefaultSampler pads 23 to 24
    assert reports[0]["backends"] == ["Accuracy:torch_cpu", "COCODetection:torch_cpu"]


def test_the_evaluator_equals_each_metric_in_one_process(reports: List[Dict[str, Any]]) -> None:
    for r in reports:
        first, second = r["epochs"]
        assert first == r["expected"], (first, r["expected"])
        assert second == first  # evaluate() resets: the second epoch counts its own samples only
        assert {"coco/bbox_mAP", "coco/bbox_mAP_50", "acc/top1", "acc/top3"} <= set(first)
        assert 0 < first["coco/bbox_mAP"] < 1
