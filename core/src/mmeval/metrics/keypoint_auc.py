"""Area under the PCK curve of keypoints (MMEval 0.2.1's ``KeypointAUC``).

A state metric: per threshold and keypoint, the correct instances, and per keypoint the counted ones
(int64 sums); the AUC is the mean over the thresholds of the PCK those counts give.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..core.errors import MetricArgumentError
from ..core.state import MetricState
from .utils.keypoint import (
    KeypointInstances,
    KeypointMetric,
    calc_distances,
    check_count,
    check_real,
    pck_from_counts,
    pck_hits,
)

__all__ = ["KeypointAUC", "keypoint_auc_accuracy"]


def _thresholds(num_thrs: int) -> List[float]:
    """The PCK thresholds the AUC averages over: ``i / num_thrs`` for ``i`` in ``0 .. num_thrs - 1`` (Python floats)."""
    return [i / num_thrs for i in range(num_thrs)]


def _distances(pred: np.ndarray, gt: np.ndarray, mask: np.ndarray, norm_factor: float) -> np.ndarray:
    """(N, K) distances normalised by the one ``norm_factor`` (of its own type, as MMEval's array of it)."""
    return np.transpose(calc_distances(pred, gt, mask, np.full((gt.shape[0], 1), norm_factor)))


def _auc(hits: np.ndarray, valid: np.ndarray, num_thrs: int) -> float:
    """The mean over the thresholds of the PCK of per-threshold ``hits`` (T, K) and per-keypoint ``valid`` (K,)."""
    auc = 0.0
    for i in range(num_thrs):
        auc += 1.0 / num_thrs * pck_from_counts(hits[i], valid)[1]
    return auc


def keypoint_auc_accuracy(
    prediction: np.ndarray, groundtruth: np.ndarray, mask: np.ndarray, norm_factor: float, num_thrs: int = 20
) -> float:
    """The area under the PCK curve (MMEval 0.2.1's function): the mean of the PCK at thresholds ``i / num_thrs``.

    ``prediction``, ``groundtruth`` (N, K, D), ``mask`` (N, K); every distance
    is normalised by ``norm_factor`` (pixels).
    """
    d = _distances(prediction, groundtruth, mask, norm_factor)
    hits = np.stack([pck_hits(d, t)[0].sum(axis=0) for t in _thresholds(num_thrs)]) if num_thrs else np.zeros((0,))
    return _auc(hits, (d != -1).sum(axis=0), num_thrs)


class KeypointAUC(KeypointMetric):
    """The area under the curve of PCK against its threshold: MMEval 0.2.1's ``KeypointAUC``.

    Args:
        norm_factor: the size (pixels) every distance is normalised by (default 30), a positive number.
        num_thrs: how many thresholds, ``0, 1 / num_thrs, ..., (num_thrs - 1) / num_thrs`` (default 20).
        num_keypoints: ``K`` when known (not an MMEval argument; see :class:`~mmeval.metrics.PCKAccuracy`).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths)``: one dict per sample each,
    ``{'coords': (n, K, D)}`` and ``{'coords': (n, K, D), 'mask': (n, K)}``.

    Result key ``AUC@{num_thrs}``: the mean over the thresholds of the PCK
    (the mean over keypoints of each keypoint's fraction of visible instances
    within the threshold), a fraction in [0, 1].

    A state metric: per threshold and keypoint the correct instances, and per
    keypoint the counted ones: :meth:`compute` moves ``(num_thrs + 1) K``
    int64 sums, whatever the number of samples; exact.

    Units: ``AUC@{num_thrs}`` is a fraction in [0, 1], as MMEval 0.2.1's.
    """

    def __init__(
        self, norm_factor: float = 30, num_thrs: int = 20, num_keypoints: Optional[int] = None, **kwargs: Any
    ) -> None:
        super().__init__(num_keypoints=num_keypoints, **kwargs)
        self.norm_factor = check_real(norm_factor, "norm_factor", self.name, "a positive number (pixels)")
        if not float(norm_factor) > 0:
            # MMEval 0.2.1 gave meaningless numbers here: a size <= 0 becomes 1e6 in place after the first threshold
            raise MetricArgumentError(
                f"{self.name}: norm_factor must be a positive number (pixels), got {norm_factor!r}"
            )
        self.num_thrs = int(check_count(num_thrs, "num_thrs", self.name) or 0)
        self._declare()

    def _state_shapes(self, k: int) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        return {"hit": ((self.num_thrs, k), "int64"), "valid": ((k,), "int64")}

    def _instance_rows(self, inst: KeypointInstances) -> Dict[str, np.ndarray]:
        d = _distances(inst.pred, inst.gt, inst.mask, self.norm_factor)
        hit = np.stack([pck_hits(d, t)[0] for t in _thresholds(self.num_thrs)], axis=1)
        return {"hit": hit, "valid": d != -1}

    def _result(self, state: MetricState) -> Dict[str, Any]:
        return {f"AUC@{self.num_thrs}": _auc(state["hit"], state["valid"], self.num_thrs)}
