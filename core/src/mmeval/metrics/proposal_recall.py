"""Average recall of region proposals over IoU thresholds (MMEval 0.2.1's ``ProposalRecall``), a state metric.

Each image's proposals are matched to its ground truths on the rank that holds it, at ``add()``;
the image leaves one count per (proposal number, IoU threshold), so ``compute()`` moves the same
few bytes for any number of images.
"""

from __future__ import annotations

import logging
import numbers
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError, MetricArgumentTypeError
from ..core.inputs import to_numpy
from ..core.state import MetricState

__all__ = ["ProposalRecall", "box_iou"]

_log = logging.getLogger(__name__)


def box_iou(a: np.ndarray, b: np.ndarray, legacy: bool = False, eps: Optional[float] = 1e-6) -> np.ndarray:
    """IoU, in float64, of every box of ``a`` (N, 4) with every box of ``b`` (M, 4), boxes ``x1, y1, x2, y2``.

    ``legacy``: widths and heights are ``x2 - x1 + 1`` and ``y2 - y1 + 1`` (mmdet v1's pixel
    convention). Unions below ``eps`` count as ``eps`` (``None``: the union as it is). Shape (N, M).
    """
    e = 1.0 if legacy else 0.0
    w = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]) + e
    h = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]) + e
    inter = np.maximum(w, 0.0) * np.maximum(h, 0.0)
    area_a = (a[:, 2] - a[:, 0] + e) * (a[:, 3] - a[:, 1] + e)
    area_b = (b[:, 2] - b[:, 0] + e) * (b[:, 3] - b[:, 1] + e)
    union = area_a[:, None] + area_b[None, :] - inter
    return inter / (union if eps is None else np.maximum(union, eps))  # type: ignore[no-any-return]


def _greedy_best_ious(iou: np.ndarray) -> np.ndarray:
    """One value per ground truth (row): the IoUs of the greedy matching, largest pair first.

    Repeatedly the largest remaining IoU (the lowest row, then the lowest column, among equal
    ones) is taken and its row and column leave; once the proposals run out the remaining
    ground truths get -1 (matched to nothing). With no proposal at all every value is 0.
    """
    m, k = iou.shape
    if k == 0:
        return np.zeros(m)
    work = iou.astype(np.float64).copy()
    out = np.empty(m)
    for j in range(m):
        flat = int(np.argmax(work))  # row-major: the first row holding the maximum, then its first column
        r, c = divmod(flat, k)
        out[j] = work[r, c]
        work[r, :] = -1.0
        work[:, c] = -1.0
    return out


class ProposalRecall(BaseMetric):
    """Recall of the first proposals of each image, averaged over IoU thresholds (AR@N).

    The names, arguments, ``add()`` inputs and result keys are MMEval 0.2.1's ``ProposalRecall``.

    Args:
        iou_thrs: ``None`` (0.5, 0.55, ..., 0.95), a float or a list of floats: the IoU
            thresholds. Anything else raises :class:`~mmeval.core.errors.MetricArgumentError`,
            also a ``TypeError`` as MMEval's.
        proposal_nums: an int or a sequence of positive ints: how many of each image's
            highest-scoring proposals count (default ``(1, 10, 100, 1000)``).
        use_legacy_coordinate: widths and heights are ``x2 - x1 + 1`` and ``y2 - y1 + 1``.
        nproc: accepted for MMEval compatibility (an int); the matching runs at ``add()``.
        print_results: log a table of the recalls at each threshold (info level).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths)`` takes one dict per image: a prediction ``bboxes``
    (K, 4) ``x1, y1, x2, y2`` and optionally ``scores`` (K,); a ground truth ``bboxes`` (M, 4)
    (missing: none).

    Per image (on the rank that holds it, at ``add()``): the proposals are ranked by descending
    score (equal scores: the later one first, MMEval's order) and cut to the largest proposal
    number; for each proposal number ``N`` the first ``N`` are matched to the ground truths
    greedily, largest IoU first, each proposal and each ground truth once; a ground truth is
    recalled at threshold ``t`` when its match has IoU >= ``t``. The image keeps one count of
    recalled ground truths per (``N``, ``t``) and its number of ground truths: a state metric,
    whose ``compute()`` moves these ``len(proposal_nums) x len(iou_thrs) + 1`` int64 sums,
    whatever the number of images.

    Result: ``AR@N`` per proposal number, the mean over thresholds of the recall (recalled /
    ground truths; NaN with no ground truth), a Python float. IoUs are float64 (MMEval's are
    float32: a pair whose IoU lies within float32 rounding of a threshold may count differently).

    Units: ``AR@{N}`` are fractions in [0, 1], as MMEval 0.2.1's.
    """

    def __init__(
        self,
        iou_thrs: Union[float, Sequence[float], None] = None,
        proposal_nums: Union[int, Sequence[int]] = (1, 10, 100, 1000),
        use_legacy_coordinate: bool = False,
        nproc: int = 4,
        print_results: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if iou_thrs is None:
            thrs = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)
        elif isinstance(iou_thrs, (float, np.floating)):
            thrs = np.array([float(iou_thrs)])
        elif (
            isinstance(iou_thrs, (list, tuple, np.ndarray))
            and len(iou_thrs)
            and all(isinstance(t, (float, np.floating)) for t in iou_thrs)
        ):
            thrs = np.asarray(iou_thrs, dtype=np.float64).reshape(-1)
        else:
            raise MetricArgumentTypeError(
                f"ProposalRecall: iou_thrs must be None, a float or a non-empty list of floats, got {iou_thrs!r}"
            )
        if not ((thrs >= 0) & (thrs <= 1)).all():
            raise MetricArgumentError(f"ProposalRecall: iou_thrs must lie in [0, 1], got {iou_thrs!r}")
        if isinstance(proposal_nums, numbers.Integral) and not isinstance(proposal_nums, bool):
            nums = [int(proposal_nums)]
        elif (
            isinstance(proposal_nums, (list, tuple, np.ndarray))
            and len(proposal_nums)
            and all(isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in proposal_nums)
        ):
            nums = [int(n) for n in proposal_nums]
        else:
            raise MetricArgumentTypeError(
                f"ProposalRecall: proposal_nums must be an int or a non-empty sequence of ints, got {proposal_nums!r}"
            )
        if min(nums) < 1:
            raise MetricArgumentError(f"ProposalRecall: proposal_nums must be positive, got {proposal_nums!r}")
        if not isinstance(nproc, numbers.Integral) or isinstance(nproc, bool):
            raise MetricArgumentError(f"ProposalRecall: nproc must be an int, got {nproc!r}")
        for name, flag in (("use_legacy_coordinate", use_legacy_coordinate), ("print_results", print_results)):
            if not isinstance(flag, (bool, np.bool_)):
                raise MetricArgumentError(f"ProposalRecall: {name} must be True or False, got {flag!r}")
        self.iou_thrs: np.ndarray = thrs
        self.proposal_nums: np.ndarray = np.asarray(nums, dtype=np.int64)
        self.use_legacy_coordinate: bool = bool(use_legacy_coordinate)
        self.nproc = int(nproc)
        self.print_results: bool = bool(print_results)
        self._declare_state("recalled", (len(nums), thrs.size), "int64", "sum")
        self._declare_state("num_gts", (), "int64", "sum")

    def add(self, predictions: Sequence[Dict[str, Any]], groundtruths: Sequence[Dict[str, Any]]) -> None:
        """Match each image's proposals here and keep its counts (see the class docstring)."""
        if len(predictions) != len(groundtruths):
            raise ValueError(
                f"ProposalRecall.add: {len(predictions)} predictions but {len(groundtruths)} "
                f"groundtruths: give one dict of each per image"
            )
        recalled, num_gts = [], []
        for i, (pred, gt) in enumerate(zip(predictions, groundtruths)):
            boxes, gt_boxes = self._image(i, pred, gt)
            iou = box_iou(gt_boxes, boxes, self.use_legacy_coordinate)
            counts = np.zeros((self.proposal_nums.size, self.iou_thrs.size), dtype=np.int64)
            for p, n in enumerate(self.proposal_nums):
                best = _greedy_best_ious(iou[:, :n])
                counts[p] = (best[:, None] >= self.iou_thrs[None, :]).sum(axis=0)
            recalled.append(counts)
            num_gts.append(gt_boxes.shape[0])
        if recalled:
            self._add_rows(recalled=np.stack(recalled), num_gts=np.asarray(num_gts, dtype=np.int64))

    def _image(self, i: int, pred: Any, gt: Any) -> Any:
        """One image's proposals, ranked and cut to the largest proposal number, and its ground-truth boxes."""
        for what, item in (("predictions", pred), ("groundtruths", gt)):
            if not isinstance(item, dict):
                raise ValueError(f"ProposalRecall.add: {what}[{i}] must be a dict, got {type(item).__name__}")
        if "bboxes" not in pred:
            raise ValueError(f"ProposalRecall.add: predictions[{i}] has no 'bboxes'")
        boxes = _boxes(pred["bboxes"], f"predictions[{i}]['bboxes']")
        if pred.get("scores") is not None:
            scores = to_numpy(pred["scores"], f"predictions[{i}]['scores']").astype(np.float64).reshape(-1)
            if scores.size != boxes.shape[0] or not np.isfinite(scores).all():
                raise ValueError(
                    f"ProposalRecall.add: predictions[{i}]['scores'] must hold one finite score per box "
                    f"({boxes.shape[0]}), got {scores.size} value(s)"
                )
            boxes = boxes[np.argsort(scores, kind="stable")[::-1]]
        boxes = boxes[: int(self.proposal_nums.max())]
        gt_boxes = (
            _boxes(gt["bboxes"], f"groundtruths[{i}]['bboxes']") if gt.get("bboxes") is not None else np.zeros((0, 4))
        )
        return boxes, gt_boxes

    def compute_metric(self, state: MetricState) -> Dict[str, float]:
        """``AR@N`` per proposal number from the summed counts."""
        num_gts = int(state["num_gts"])
        with np.errstate(invalid="ignore", divide="ignore"):
            recalls = np.asarray(state["recalled"], dtype=np.float64) / float(num_gts)
        ar = recalls.mean(axis=1)
        if self.print_results:
            self._log_table(recalls, ar)
        return {f"AR@{n}": float(ar[p]) for p, n in enumerate(self.proposal_nums.tolist())}

    def _log_table(self, recalls: np.ndarray, ar: np.ndarray) -> None:
        heads = [f"AR_{round(float(t) * 100):d}" for t in self.iou_thrs] + ["AR"]
        lines = ["Recall Results (%)", "\t".join(["proposals"] + heads)]
        for p, n in enumerate(self.proposal_nums.tolist()):
            lines.append("\t".join([str(n)] + [f"{100 * v:.2f}" for v in [*recalls[p], ar[p]]]))
        (self.logger or _log).info("\n".join(lines))


def _boxes(value: Any, what: str) -> np.ndarray:
    """``value`` as finite float64 boxes (n, 4); an empty value is no box."""
    arr = to_numpy(value, f"ProposalRecall.add: {what}")
    if arr.size == 0:
        return np.zeros((0, 4))
    if arr.ndim != 2 or arr.shape[1] != 4 or arr.dtype.kind not in "iuf":
        raise ValueError(
            f"ProposalRecall.add: {what} must be numbers of shape (n, 4) (x1, y1, x2, y2), got "
            f"shape {arr.shape}, dtype {arr.dtype}"
        )
    boxes = arr.astype(np.float64)
    if not np.isfinite(boxes).all():
        raise ValueError(f"ProposalRecall.add: {what} holds NaN or infinite values")
    return boxes
