"""End-point error of keypoints: the mean Euclidean distance of the visible ones (MMEval 0.2.1's ``KeypointEndPointError``).

A state metric: the sum of the distances (float64) and their count (int64).
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

from ..core.state import MetricState
from .utils.keypoint import KeypointInstances, KeypointMetric, calc_distances

__all__ = ["KeypointEndPointError", "keypoint_epe_accuracy"]


def distance_sums(distances: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Per instance, the float64 sum of its counted distances and their number, from (N, K) distances (-1: not counted).

    The distances are float32, so their float64 sums are exact whenever the
    values span less than about 2**(29 - log2 n) (n the number summed): then
    the sum does not depend on the order, nor on how ranks split it.
    """
    counted = distances != -1
    return np.where(counted, distances, 0).astype(np.float64).sum(axis=1), counted.sum(axis=1)


def keypoint_epe_accuracy(pred: np.ndarray, gt: np.ndarray, mask: np.ndarray) -> float:
    """The mean end-point error of the visible keypoints (MMEval 0.2.1's function); 0 when none is visible."""
    sums, counts = distance_sums(calc_distances(pred, gt, mask, np.ones((gt.shape[0], 1), np.float32)).T)
    return float(sums.sum()) / max(1, int(counts.sum()))


class KeypointEndPointError(KeypointMetric):
    """EPE: the mean Euclidean distance between predicted and ground-truth keypoints, over the visible ones.

    The names, ``add()`` inputs and result key are MMEval 0.2.1's ``KeypointEndPointError``.

    ``add(predictions, groundtruths)``: one dict per sample each,
    ``{'coords': (n, K, D)}`` and ``{'coords': (n, K, D), 'mask': (n, K)}``.
    Result: ``{'EPE': mean distance}`` (pixels; 0 when nothing is visible).

    A state metric: :meth:`compute` moves one float64 sum and one int64 count,
    whatever the number of samples. Each distance is a float32 (as MMEval's);
    MMEval sums them in float32, here in float64, so the result is the exact
    mean of those float32 distances where MMEval's carries float32 rounding
    (about 1e-7 relative).

    Units: ``EPE`` in pixels (the keypoints' coordinates), as MMEval 0.2.1's.
    """

    _needs_k = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._declare()

    def _state_shapes(self, k: int) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        return {"error_sum": ((), "float64"), "count": ((), "int64")}

    def _instance_rows(self, inst: KeypointInstances) -> Dict[str, np.ndarray]:
        ones = np.ones((inst.gt.shape[0], 1), np.float32)
        sums, counts = distance_sums(calc_distances(inst.pred, inst.gt, inst.mask, ones).T)
        return {"error_sum": sums, "count": counts}

    def _result(self, state: MetricState) -> Dict[str, Any]:
        return {"EPE": float(state["error_sum"]) / max(1, int(state["count"]))}
