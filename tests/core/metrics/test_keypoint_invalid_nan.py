"""Where NaN has a meaning (issue 32, item 3): a pose metric's invalid keypoint (ground-truth mask False) may hold
NaN coordinates, ignored as any coordinates there are; a NaN or infinity in a visible keypoint is refused naming it."""

from __future__ import annotations

import numpy as np
import pytest

from mmeval import KeypointAUC, KeypointEndPointError, PCKAccuracy
from mmeval.core.errors import MetricArgumentError

METRICS = [KeypointEndPointError, PCKAccuracy, lambda: KeypointAUC(norm_factor=30)]


def _batch(seed: int):
    rng = np.random.default_rng(seed)
    gt = rng.random((2, 5, 2)) * 20
    pred = gt + rng.normal(0, 1.0, gt.shape)
    mask = rng.random((2, 5)) < 0.7
    mask[0, 0] = False  # an invalid keypoint
    mask[1, 1] = True
    sizes = {"bboxes": np.full((2, 2), 30.0), "bbox_size": np.full((2, 2), 30.0)}
    return pred, gt, mask, sizes


def _answer(make, pred, gt, mask, sizes):
    metric = make()
    metric.add([{"coords": pred}], [{"coords": gt, "mask": mask, **sizes}])
    return metric.compute()


@pytest.mark.parametrize("make", METRICS)
def test_nan_in_an_invalid_keypoint_is_ignored(make):
    pred, gt, mask, sizes = _batch(1)
    want = _answer(make, pred, gt, mask, sizes)
    pred2, gt2 = pred.copy(), gt.copy()
    pred2[0, 0] = np.nan
    gt2[0, 0] = [np.nan, np.inf]
    assert _answer(make, pred2, gt2, mask, sizes) == want


@pytest.mark.parametrize("make", METRICS)
@pytest.mark.parametrize("arg", ["predictions", "groundtruths"])
def test_nan_in_a_visible_keypoint_is_refused_naming_it(make, arg):
    pred, gt, mask, sizes = _batch(2)
    (pred if arg == "predictions" else gt)[1, 1, 0] = np.nan
    metric = make()
    with pytest.raises(MetricArgumentError, match=rf"{arg}\[0\]\['coords'\] holds a NaN .* \(1, 1\)"):
        metric.add([{"coords": pred}], [{"coords": gt, "mask": mask, **sizes}])
