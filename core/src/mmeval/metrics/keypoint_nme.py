"""Normalised mean error of keypoints (MMEval 0.2.1's ``KeypointNME``): distances divided by a per-instance size.

A state metric: the sum of the normalised distances (float64) and their count (int64).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.errors import MetricArgumentError
from ..core.state import MetricState
from .keypoint_epe import distance_sums
from .utils.keypoint import KeypointInstances, KeypointMetric, MetricArgumentKeyError, calc_distances

__all__ = ["KeypointNME", "keypoint_nme_accuracy"]


def keypoint_nme_accuracy(
    prediction: np.ndarray, groundtruth: np.ndarray, mask: np.ndarray, norm_factor: np.ndarray
) -> float:
    """The normalised mean error (MMEval 0.2.1's function): the mean over visible keypoints of the distance
    divided by its instance's ``norm_factor`` ((N, 2) or (N, 1)); instances with a zero factor are left out."""
    sums, counts = distance_sums(calc_distances(prediction, groundtruth, mask, norm_factor).T)
    return float(sums.sum()) / max(1, int(counts.sum()))


class KeypointNME(KeypointMetric):
    """NME: the mean distance between predicted and ground-truth keypoints, each divided by its instance's size.

    The names, arguments, ``add()`` inputs and result key are MMEval 0.2.1's ``KeypointNME``.

    Args:
        norm_mode: ``'use_norm_item'`` (each ground truth carries its size under
            ``norm_item``) or ``'keypoint_distance'`` (the size is the distance
            between two ground-truth keypoints, e.g. the outer eye corners).
        norm_item: the ground-truth key of the size (``'use_norm_item'``), e.g. ``'box_size'``.
        keypoint_indices: the pair of keypoints whose distance is the size
            (``'keypoint_distance'``); ``None`` takes the pair of
            :attr:`DEFAULT_KEYPOINT_INDICES` for ``dataset_meta['dataset_name']``.
            Either way ``dataset_meta`` is needed (with ``'keypoint_id2name'``
            when the pair is given), read at each :meth:`add`.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths)``: one dict per sample each,
    ``{'coords': (n, K, D)}`` and ``{'coords': (n, K, D), 'mask': (n, K)}``,
    plus ``norm_item``: (n, 1) or (n,) with ``'use_norm_item'``.
    Result: ``{'NME': mean normalised distance}``; an instance whose size is 0
    is left out, 0 when nothing counts.

    A state metric: :meth:`compute` moves one float64 sum and one int64 count,
    whatever the number of samples (see :class:`~mmeval.metrics.KeypointEndPointError`
    on the float32 distances: the same holds here).

    Units: ``NME`` is a distance divided by the instance's size (unitless), as MMEval 0.2.1's.
    """

    #: the keypoint pair per dataset for ``norm_mode='keypoint_distance'`` (the outer eye corners of the face
    #: datasets, nose and eye of horse10), as MMEval 0.2.1 defines them
    DEFAULT_KEYPOINT_INDICES: Dict[str, List[int]] = {
        "horse10": [0, 1],
        "300w": [36, 45],
        "coco_wholebody_face": [36, 45],
        "cofw": [8, 9],
        "wflw": [60, 72],
    }

    _needs_k = False

    def __init__(
        self,
        norm_mode: str,
        norm_item: Optional[str] = None,
        keypoint_indices: Optional[Sequence[int]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if norm_mode not in ("use_norm_item", "keypoint_distance"):
            raise MetricArgumentKeyError(
                f"KeypointNME: `norm_mode` should be 'use_norm_item' or 'keypoint_distance', but got {norm_mode!r}."
            )
        self.norm_mode = norm_mode
        if norm_mode == "use_norm_item" and not norm_item:
            raise MetricArgumentKeyError(
                f'KeypointNME: `norm_mode` is set to `"use_norm_item"`, please specify the `norm_item` (the ground '
                f"truth key of each instance's size, e.g. 'box_size'), got {norm_item!r}."
            )
        if norm_item is not None and not isinstance(norm_item, str):
            raise MetricArgumentError(
                f"KeypointNME: norm_item must be a ground-truth key (str) or None, got {norm_item!r}"
            )
        self.norm_item = norm_item
        if keypoint_indices is not None:
            pair = list(keypoint_indices) if isinstance(keypoint_indices, (list, tuple)) else None
            if (
                pair is None
                or len(pair) != 2
                or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) and int(i) >= 0 for i in pair)
            ):
                raise MetricArgumentError(
                    f"KeypointNME: The keypoint indices used for normalization should be a pair (two non-negative "
                    f"keypoint indices), got {keypoint_indices!r}."
                )
            keypoint_indices = [int(i) for i in pair]
        self.keypoint_indices = keypoint_indices
        self._declare()

    def _state_shapes(self, k: int) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        return {"error_sum": ((), "float64"), "count": ((), "int64")}

    def _size_keys(self) -> Dict[str, str]:
        return {self.norm_item: "one"} if self.norm_mode == "use_norm_item" and self.norm_item else {}

    def _pair(self) -> Tuple[int, int]:
        """The keypoint pair of ``'keypoint_distance'``, checked against ``dataset_meta``."""
        meta = self.dataset_meta
        if meta is None:
            raise MetricArgumentError(
                "KeypointNME: When `norm_mode` is `keypoint_distance`, `dataset_meta` cannot be None. Pass "
                "dataset_meta={'dataset_name': ..., 'keypoint_id2name': {...}} (or set metric.dataset_meta)."
            )
        dataset = meta.get("dataset_name")
        if self.keypoint_indices is None:
            if dataset not in self.DEFAULT_KEYPOINT_INDICES:
                raise MetricArgumentKeyError(
                    f"KeypointNME: `norm_mode` is set to `keypoint_distance` and keypoint_indices is None, but can "
                    f"not find the keypoint_indices in `DEFAULT_KEYPOINT_INDICES` for dataset_name {dataset!r} (known: "
                    f"{sorted(self.DEFAULT_KEYPOINT_INDICES)}): please specify `keypoint_indices` appropriately."
                )
            a, b = self.DEFAULT_KEYPOINT_INDICES[dataset]
            return a, b
        names = meta.get("keypoint_id2name")
        if names is None:
            raise MetricArgumentError(
                "KeypointNME: keypoint_indices are given, so dataset_meta needs 'keypoint_id2name' to check them"
            )
        for idx in self.keypoint_indices:
            if idx not in names:
                raise MetricArgumentError(
                    f"KeypointNME: The {dataset} dataset does not contain the required {idx}-th keypoint "
                    f"(keypoint_indices={self.keypoint_indices})."
                )
        a, b = self.keypoint_indices
        return a, b

    def _norm(self, inst: KeypointInstances) -> np.ndarray:
        """(N, 1) sizes: the norm item, or the distance between the pair of ground-truth keypoints."""
        if self.norm_mode == "use_norm_item":
            return inst.sizes[str(self.norm_item)]
        a, b = self._pair()
        if max(a, b) >= inst.num_keypoints:
            raise MetricArgumentError(
                f"KeypointNME: keypoints {a} and {b} normalise the distances, but the ground truths have "
                f"{inst.num_keypoints} keypoints"
            )
        norm: np.ndarray = np.linalg.norm(inst.gt[:, a, :] - inst.gt[:, b, :], axis=1, keepdims=True)
        return norm

    def _check_instances(self, inst: KeypointInstances) -> None:
        self._norm(inst)

    def _instance_rows(self, inst: KeypointInstances) -> Dict[str, np.ndarray]:
        sums, counts = distance_sums(calc_distances(inst.pred, inst.gt, inst.mask, self._norm(inst)).T)
        return {"error_sum": sums, "count": counts}

    def _result(self, state: MetricState) -> Dict[str, Any]:
        return {"NME": float(state["error_sum"]) / max(1, int(state["count"]))}
