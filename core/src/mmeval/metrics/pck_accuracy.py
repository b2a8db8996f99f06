"""PCK accuracy of keypoints (PCK, PCKh, tPCK), and MPII's and JHMDB's per-joint-group reports of it.

A state metric: per keypoint, how many visible keypoints were counted and how many fell within the
threshold (int64 sums); every value MMEval 0.2.1 reports is a function of those counts.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.errors import MetricArgumentError
from ..core.state import MetricState
from .utils.keypoint import (
    KeypointInstances,
    KeypointMetric,
    MetricArgumentKeyError,
    calc_distances,
    check_real,
    pck_from_counts,
    pck_hits,
)

__all__ = ["JhmdbPCKAccuracy", "MpiiPCKAccuracy", "PCKAccuracy", "keypoint_pck_accuracy"]

#: the normalisation items, in the order results are reported, and the name of each one's PCK
_ITEMS = ("bbox", "head", "torso")
_PREFIX = {"bbox": "PCK", "head": "PCKh", "torso": "tPCK"}


def keypoint_pck_accuracy(
    pred: np.ndarray, gt: np.ndarray, mask: np.ndarray, thr: float, norm_factor: np.ndarray
) -> Tuple[np.ndarray, float, int]:
    """PCK of each keypoint and their mean (MMEval 0.2.1's function): ``(acc (K,), avg_acc, cnt)``.

    ``pred``, ``gt`` (N, K, D), ``mask`` (N, K) visibility, ``norm_factor`` (N, D)
    sizes (see :func:`~mmeval.metrics.utils.keypoint.calc_distances`). ``acc[k]`` is the
    fraction of instances whose keypoint ``k`` is visible and within ``thr`` (the
    normalised distance strictly below it), -1 where no instance counts;
    ``avg_acc`` is the mean of the defined ``acc`` values, ``cnt`` their number.
    """
    hit, counted = pck_hits(calc_distances(pred, gt, mask, norm_factor), thr)
    return pck_from_counts(hit.sum(axis=1), counted.sum(axis=1))


def _norm_items(norm_item: Any, metric: str) -> List[str]:
    """``norm_item`` as a list of items, each one of :data:`_ITEMS` (MMEval's KeyError otherwise)."""
    items = (
        [norm_item] if isinstance(norm_item, str) else list(norm_item) if isinstance(norm_item, (list, tuple)) else None
    )
    if not items:
        raise MetricArgumentError(
            f"{metric}: norm_item must be 'bbox', 'head', 'torso' or a non-empty list of them, got {norm_item!r}"
        )
    for item in items:
        if item not in _ITEMS:
            raise MetricArgumentKeyError(
                f"{metric}: norm_item {item!r} is not supported; it should be one of 'bbox', 'head', 'torso' "
                f"(or a list of them), got {norm_item!r}"
            )
    return items


class PCKAccuracy(KeypointMetric):
    """Percentage of Correct Keypoints: a visible keypoint is correct when its distance, normalised by the
    instance's size, is below ``thr``.

    The names, arguments, ``add()`` inputs and result keys are MMEval 0.2.1's ``PCKAccuracy``.

    Args:
        thr: the threshold of the normalised distance (default 0.2). Compared
            as given: a Python float against float32 distances, as MMEval does.
        norm_item: ``'bbox'``, ``'head'``, ``'torso'`` or a list of them: which
            size normalises the distances (``PCK``, ``PCKh``, ``tPCK``).
        num_keypoints: ``K``, when known (not an MMEval argument). Default: from
            the first :meth:`add`. Give it when a rank may compute without having
            added a sample: its state could not be declared otherwise.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths)``: one dict per sample each,
    ``{'coords': (n, K, D)}`` and ``{'coords': (n, K, D), 'mask': (n, K),
    'bbox_size' / 'head_size' / 'torso_size': (n, D) or (n, 1)}`` (the sizes the
    ``norm_item`` needs). A distance counts where the mask is True and the
    instance's size has no zero (a negative size counts as 1e6).

    Result keys: ``PCK@{thr}``, ``PCKh@{thr}``, ``tPCK@{thr}`` (those of
    ``norm_item``): the mean over keypoints (those with at least one counted
    instance) of each keypoint's fraction of correct instances; 0 when nothing
    is counted. Fractions in [0, 1], Python floats.

    A state metric: per keypoint and ``norm_item``, the counted and correct
    instances (int64); :meth:`compute` moves ``2 K`` int64 sums per item, whatever
    the number of samples, and the result is exact (MMEval's divisions and mean
    on the same counts).

    Units: ``PCK@{thr}`` / ``PCKh@{thr}`` / ``tPCK@{thr}`` are fractions in [0, 1], as MMEval 0.2.1's.
    """

    def __init__(
        self,
        thr: float = 0.2,
        norm_item: Union[str, Sequence[str]] = "bbox",
        num_keypoints: Optional[int] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(num_keypoints=num_keypoints, **kwargs)
        self.thr = check_real(thr, "thr", self.name)
        self.norm_item: List[str] = _norm_items(norm_item, self.name)
        self._declare()

    def _items(self) -> List[str]:
        return [item for item in _ITEMS if item in self.norm_item]

    def _state_shapes(self, k: int) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        out: Dict[str, Tuple[Tuple[int, ...], str]] = {}
        for item in self._items():
            out[f"hit_{item}"] = ((k,), "int64")
            out[f"valid_{item}"] = ((k,), "int64")
        return out

    def _size_keys(self) -> Dict[str, str]:
        return {f"{item}_size": "per_dim" for item in self._items()}

    def _distances(self, inst: KeypointInstances, item: str) -> np.ndarray:
        """The (N, K) normalised distances of ``item``'s PCK."""
        return np.transpose(calc_distances(inst.pred, inst.gt, inst.mask, inst.sizes[f"{item}_size"]))

    def _instance_rows(self, inst: KeypointInstances) -> Dict[str, np.ndarray]:
        rows: Dict[str, np.ndarray] = {}
        for item in self._items():
            rows[f"hit_{item}"], rows[f"valid_{item}"] = pck_hits(self._distances(inst, item), self.thr)
        return rows

    def _pck(self, state: MetricState, item: str) -> Tuple[np.ndarray, float, int]:
        return pck_from_counts(state[f"hit_{item}"], state[f"valid_{item}"])

    def _result(self, state: MetricState) -> Dict[str, Any]:
        return {f"{_PREFIX[item]}@{self.thr}": self._pck(state, item)[1] for item in self._items()}


class MpiiPCKAccuracy(PCKAccuracy):
    """PCKh on MPII's 16 joints: MMEval 0.2.1's ``MpiiPCKAccuracy`` (names, arguments, keys, values).

    Args:
        thr: the threshold (default 0.5). norm_item: as :class:`PCKAccuracy`
            (default ``'head'``). ``num_keypoints`` is 16 with ``'head'``.

    With ``'head'`` the predictions are moved by +1 pixel first (MPII's
    1-based annotations) and the result has, in percent: ``Head`` (joint 9),
    ``Shoulder`` (12, 13), ``Elbow`` (11, 14), ``Wrist`` (10, 15), ``Hip`` (2,
    3), ``Knee`` (1, 4), ``Ankle`` (0, 5) -- each the mean of the two joints'
    PCKh (-100 for a joint no instance counts) --, ``PCKh``: the joints' PCKh
    weighted by how many instances have each joint visible, pelvis and thorax
    (6, 7) left out, and ``PCKh@0.1``: the same at threshold 0.1 (its per-joint
    values rounded to float32, as MMEval keeps them); NaN where no joint but 6
    and 7 is visible (MMEval returns ``numpy.ma.masked``). ``'bbox'`` and
    ``'torso'`` add ``PCK@{thr}`` / ``tPCK@{thr}`` as :class:`PCKAccuracy`.

    A state metric: with ``'head'``, per joint the counted instances, the
    correct ones at ``thr`` and at 0.1, and the visible ones (int64).

    Units: percentages in [0, 100] (``Head``, ..., ``PCKh``, ``PCKh@0.1``), as MMEval 0.2.1's.
    """

    #: the threshold of ``PCKh@0.1``: a numpy float64, as in MMEval's table of thresholds, so that it compares
    #: with the float32 distances exactly as MMEval's does under every numpy version
    _THR_01 = np.float64(0.1)

    def __init__(
        self,
        thr: float = 0.5,
        norm_item: Union[str, Sequence[str]] = "head",
        num_keypoints: Optional[int] = None,
        **kwargs: Any,
    ) -> None:
        if "head" in _norm_items(norm_item, "MpiiPCKAccuracy"):
            if num_keypoints is not None and num_keypoints != 16:
                raise MetricArgumentError(
                    f"MpiiPCKAccuracy: norm_item 'head' reports MPII's 16 joints; num_keypoints must be 16 or None, "
                    f"got {num_keypoints!r}"
                )
            num_keypoints = 16
        super().__init__(thr=thr, norm_item=norm_item, num_keypoints=num_keypoints, **kwargs)

    def _state_shapes(self, k: int) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        out = super()._state_shapes(k)
        if "head" in self.norm_item:
            out["hit_head_01"] = ((k,), "int64")
            out["visible"] = ((k,), "int64")
        return out

    def _check_instances(self, inst: KeypointInstances) -> None:
        if "head" in self.norm_item and inst.num_keypoints != 16:
            raise MetricArgumentError(
                f"MpiiPCKAccuracy: norm_item 'head' reports MPII's 16 joints, but the ground truths have "
                f"{inst.num_keypoints} keypoints"
            )

    def _distances(self, inst: KeypointInstances, item: str) -> np.ndarray:
        if item != "head":
            return super()._distances(inst, item)
        # MPII's annotations are 1-based: the (0-based) predictions move by one pixel
        return np.transpose(calc_distances(inst.pred + 1.0, inst.gt, inst.mask, inst.sizes["head_size"]))

    def _instance_rows(self, inst: KeypointInstances) -> Dict[str, np.ndarray]:
        rows = super()._instance_rows(inst)
        if "head" in self.norm_item:
            rows["hit_head_01"], _ = pck_hits(self._distances(inst, "head"), self._THR_01)
            rows["visible"] = inst.mask
        return rows

    def _result(self, state: MetricState) -> Dict[str, Any]:
        out = super()._result(state)
        if "head" not in self.norm_item:
            return out
        del out[f"PCKh@{self.thr}"]
        pckh = 100.0 * self._pck(state, "head")[0]
        at_01 = (100.0 * pck_from_counts(state["hit_head_01"], state["valid_head"])[0]).astype(np.float32)
        joints = np.ones(16, dtype=bool)
        joints[6:8] = False  # pelvis and thorax are not reported
        visible = np.asarray(state["visible"], dtype=np.int64)
        total = int(visible[joints].sum())
        if total:
            ratio = visible.astype(np.float64) / np.float64(total)
            weighted = float(np.where(joints, pckh * ratio, 0.0).sum())
            weighted_01 = float(np.where(joints, at_01.astype(np.float64) * ratio, 0.0).sum())
        else:
            weighted = weighted_01 = float("nan")
        pairs = {
            "Shoulder": (13, 12),
            "Elbow": (14, 11),
            "Wrist": (15, 10),
            "Hip": (3, 2),
            "Knee": (4, 1),
            "Ankle": (5, 0),
        }
        out["Head"] = float(pckh[9])
        for name, (a, b) in pairs.items():
            out[name] = float(0.5 * (pckh[a] + pckh[b]))
        out["PCKh"] = weighted
        out["PCKh@0.1"] = weighted_01
        return out


class JhmdbPCKAccuracy(PCKAccuracy):
    """PCK on JHMDB's 15 joints: MMEval 0.2.1's ``JhmdbPCKAccuracy`` (names, arguments, keys, values).

    Args:
        thr: the threshold (default 0.5). norm_item: as :class:`PCKAccuracy`
            (default ``'bbox'``); ``'bbox'`` and ``'torso'`` need at least 15 keypoints.

    With ``'bbox'`` the result has ``PCK@{thr}`` and ``Head PCK`` (joint 2),
    ``Sho PCK`` (3, 4), ``Elb PCK`` (7, 8), ``Wri PCK`` (11, 12), ``Hip PCK``
    (5, 6), ``Knee PCK`` (9, 10), ``Ank PCK`` (13, 14) -- the mean of the two
    joints' PCK, -1 for a joint no instance counts -- and ``Mean PCK`` (the
    PCK); with ``'torso'`` the same keys ending in ``tPCK`` (``tPCK@{thr}``
    itself is not reported); with ``'head'`` ``PCKh@{thr}``. Fractions.

    Units: fractions in [0, 1], as MMEval 0.2.1's.
    """

    def __init__(
        self,
        thr: float = 0.5,
        norm_item: Union[str, Sequence[str]] = "bbox",
        num_keypoints: Optional[int] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(thr=thr, norm_item=norm_item, num_keypoints=num_keypoints, **kwargs)
        if self.num_keypoints is not None:
            self._check_count(self.num_keypoints)

    def _check_count(self, k: int) -> None:
        if k < 15 and ("bbox" in self.norm_item or "torso" in self.norm_item):
            raise MetricArgumentError(
                f"JhmdbPCKAccuracy: norm_item 'bbox' / 'torso' report JHMDB's 15 joints, but there are {k} keypoints"
            )

    def _check_instances(self, inst: KeypointInstances) -> None:
        self._check_count(inst.num_keypoints)

    def _result(self, state: MetricState) -> Dict[str, Any]:
        out = super()._result(state)
        for item, suffix in (("bbox", "PCK"), ("torso", "tPCK")):
            if item not in self.norm_item:
                continue
            acc, mean, _ = self._pck(state, item)
            if item == "torso":
                del out[f"tPCK@{self.thr}"]
            out[f"Head {suffix}"] = float(acc[2])
            for name, (a, b) in {
                "Sho": (3, 4),
                "Elb": (7, 8),
                "Wri": (11, 12),
                "Hip": (5, 6),
                "Knee": (9, 10),
                "Ank": (13, 14),
            }.items():
                out[f"{name} {suffix}"] = float(0.5 * acc[a] + 0.5 * acc[b])
            out[f"Mean {suffix}"] = mean
        return out
