"""MMEngineMetric in one process, as MMEngine's Evaluator drives it: configs, indices, multi-label samples, refusals.

The multi-process run (torchrun, an mmdet-style config) is test_mmengine_evaluator.py.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mmengine", reason="the adapters env installs MMEngine")

from mmengine.evaluator import Evaluator
from mmengine.structures import BaseDataElement

from mmeval import Accuracy, MultiLabelMetric
from mmeval.integrations.mmengine import MMEngineMetric

RNG = np.random.default_rng(3)
SCORES = RNG.random((12, 4)).astype(np.float32)
LABELS = RNG.integers(0, 4, 12)


def samples(rows, **extra):
    return [
        BaseDataElement(metainfo={"sample_idx": int(i), **extra}, pred_score=SCORES[i], gt_label=np.array([LABELS[i]]))
        for i in rows
    ]


def test_indices_key_counts_each_sample_once():
    evaluator = Evaluator(
        [dict(type="MMEvalMetric", metric=dict(type="Accuracy", thrs=None), indices_key="sample_idx")]
    )
    evaluator.process(samples(range(12)))
    evaluator.process(samples([0, 1, 2]))  # a sampler's wrap-around: counted once by index
    assert evaluator.evaluate(12) == {"top1": Accuracy(thrs=None)(SCORES, LABELS)["top1"]}


def test_multi_label_samples_become_one_hot_rows():
    gts = [np.flatnonzero(RNG.random(4) < 0.5) for _ in range(12)]
    onehot = np.zeros((12, 4), dtype=np.int64)
    for i, g in enumerate(gts):
        onehot[i, g] = 1
    metric = MMEngineMetric(MultiLabelMetric(num_classes=4), prefix="ml")
    metric.dataset_meta = {"classes": ("a", "b", "c", "d")}
    metric.process(None, [{"pred_score": SCORES[i], "gt_label": gts[i]} for i in range(12)])
    want = {f"ml/{k}": v for k, v in MultiLabelMetric(num_classes=4)(SCORES, onehot).items()}
    assert metric.evaluate(12) == want
    assert metric.metric.dataset_meta == {"classes": ("a", "b", "c", "d")}


def test_refusals_name_what_to_do():
    with pytest.raises(TypeError, match="no built-in process_fn for MeanIoU; pass process_fn"):
        MMEngineMetric(dict(type="MeanIoU"))
    with pytest.raises(TypeError, match=r"'NoSuchMetric' is not a metric of mmeval\.metrics"):
        MMEngineMetric(dict(type="NoSuchMetric"))
