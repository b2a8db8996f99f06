"""H-mean of text-detection polygons matched by IoU (MMEval 0.2.1's ``HmeanIoU``), a state metric.

Each image's polygons are matched on the rank that holds it, at ``add()``; what the image leaves
behind is three counts per score threshold, so ``compute()`` moves the same few bytes for any
number of images. shapely (the ``shapely`` extra) does the polygon geometry.
"""

from __future__ import annotations

import numbers
from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError
from ..core.inputs import to_numpy
from ..core.state import MetricState
from .extras import import_extra
from .utils.polygon import poly_intersection, poly_iou, polys2shapely

__all__ = ["HmeanIoU", "compute_hmean"]

_STRATEGIES = ("max_matching", "vanilla")


def compute_hmean(
    accum_hit_recall: Union[int, float], accum_hit_prec: Union[int, float], gt_num: int, pred_num: int
) -> Tuple[float, float, float]:
    """``(recall, precision, hmean)`` of ``accum_hit_recall`` hits over ``gt_num`` ground truths and
    ``accum_hit_prec`` hits over ``pred_num`` predictions.

    No ground truth: recall 1, precision 1 without predictions and 0 with some. No prediction:
    precision 0. hmean is the harmonic mean of the two (0 when both are 0). Hits must be
    non-negative numbers and the counts non-negative ints, else
    :class:`~mmeval.core.errors.MetricArgumentError` (an ``AssertionError`` too, as MMEval's).
    """
    for name, value, kinds in (
        ("accum_hit_recall", accum_hit_recall, numbers.Real),
        ("accum_hit_prec", accum_hit_prec, numbers.Real),
        ("gt_num", gt_num, numbers.Integral),
        ("pred_num", pred_num, numbers.Integral),
    ):
        if not isinstance(value, kinds) or value < 0:
            kind = "int" if kinds is numbers.Integral else "number"
            raise MetricArgumentError(f"compute_hmean: {name} must be a non-negative {kind}, got {value!r}")
    if gt_num == 0:
        recall = 1.0
        precision = 0.0 if pred_num > 0 else 1.0
    else:
        recall = float(accum_hit_recall) / int(gt_num)
        precision = 0.0 if pred_num == 0 else float(accum_hit_prec) / int(pred_num)
    denom = recall + precision
    hmean = 0.0 if denom == 0 else 2.0 * precision * recall / denom
    return recall, precision, hmean


class HmeanIoU(BaseMetric):
    """Precision, recall and their harmonic mean of text-detection polygons, per prediction score threshold.

    The names, arguments, ``add()`` inputs and result keys are MMEval 0.2.1's ``HmeanIoU``.

    Args:
        match_iou_thr: a prediction and a ground truth match when their IoU is greater than this.
        ignore_precision_thr: a prediction that covers more than this fraction of its own area
            with one ignored ground truth is left out (neither hit nor miss).
        pred_score_thrs: ``dict(start=, stop=, step=)`` of ``numpy.arange``: the score thresholds
            tried; must give at least one. The default gives seven, as for MMEval: 0.3, 0.4, ...,
            0.8 and 0.9000000000000001 (``arange``'s floating-point steps reach past 0.9).
        strategy: ``'vanilla'`` (ground truths and predictions taken greedily in index order, each
            matched once) or ``'max_matching'`` (the largest one-to-one matching).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(batch_pred_polygons, batch_pred_scores, batch_gt_polygons, batch_gt_ignore_flags)``
    takes, per image, its predicted polygons (each a flat ``[x1, y1, x2, y2, ...]``), their
    scores, its ground-truth polygons and one ignore flag per ground truth. Points and scores are
    read as float32, as MMEval reads them.

    Per image (the rank holding it does this at ``add()``): predictions scoring below the lowest
    threshold are dropped, and so is every prediction whose intersection with an ignored ground
    truth, over its own area + 1e-5, exceeds ``ignore_precision_thr``; the IoUs of the kept
    predictions with the ground truths not ignored are computed (invalid polygons repaired with
    ``buffer(0)``); then for each threshold the predictions scoring at least that much are matched
    to the ground truths (IoU > ``match_iou_thr``) by ``strategy``. The image keeps its hits and
    its counted predictions per threshold and its counted ground truths: a state metric, whose
    ``compute()`` moves these ``2 T + 1`` int64 sums, whatever the number of images.

    Result: ``{thr: {'precision', 'recall', 'hmean'}, ..., 'best': ...}``, one entry per
    threshold (a float key, equal to MMEval's numpy key) and ``'best'`` the entry of the highest
    hmean (the lowest such threshold on ties); fractions as Python floats (see
    :func:`compute_hmean`).

    Units: ``precision``, ``recall``, ``hmean`` are fractions in [0, 1], as MMEval 0.2.1's.
    """

    def __init__(
        self,
        match_iou_thr: float = 0.5,
        ignore_precision_thr: float = 0.5,
        pred_score_thrs: Dict[str, float] = dict(start=0.3, stop=0.9, step=0.1),  # noqa: B006 (MMEval's)
        strategy: str = "vanilla",
        **kwargs: Any,
    ) -> None:
        import_extra("shapely.geometry", "HmeanIoU")
        super().__init__(**kwargs)
        for name, value in (("match_iou_thr", match_iou_thr), ("ignore_precision_thr", ignore_precision_thr)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
                raise MetricArgumentError(f"HmeanIoU: {name} must be a number, got {value!r}")
        if not isinstance(pred_score_thrs, dict) or not set(pred_score_thrs) <= {"start", "stop", "step"}:
            raise MetricArgumentError(
                f"HmeanIoU: pred_score_thrs must be a dict of numpy.arange's start, stop and "
                f"step, got {pred_score_thrs!r}"
            )
        try:
            thrs = np.arange(**pred_score_thrs)  # type: ignore[call-overload]
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            raise MetricArgumentError(
                f"HmeanIoU: pred_score_thrs={pred_score_thrs!r} is not numpy.arange's arguments ({exc})"
            ) from None
        if thrs.ndim != 1 or not thrs.size or thrs.dtype.kind not in "iuf" or not np.isfinite(thrs).all():
            raise MetricArgumentError(
                f"HmeanIoU: pred_score_thrs={pred_score_thrs!r} gives no score threshold "
                f"(numpy.arange -> {thrs!r}); give start < stop and a positive step"
            )
        if strategy not in _STRATEGIES:
            raise MetricArgumentError(f"HmeanIoU: strategy must be one of {list(_STRATEGIES)}, got {strategy!r}")
        self.match_iou_thr = float(match_iou_thr)
        self.ignore_precision_thr = float(ignore_precision_thr)
        self.pred_score_thrs: np.ndarray = thrs.astype(np.float64)
        self.strategy = strategy
        t = thrs.size
        self._declare_state("hits", (t,), "int64", "sum")
        self._declare_state("preds", (t,), "int64", "sum")
        self._declare_state("gts", (), "int64", "sum")

    def add(
        self,
        batch_pred_polygons: Sequence[Sequence[Any]],
        batch_pred_scores: Sequence[Any],
        batch_gt_polygons: Sequence[Sequence[Any]],
        batch_gt_ignore_flags: Sequence[Any],
    ) -> None:
        """Match each image's polygons here and keep its counts (see the class docstring)."""
        lengths = [len(batch_pred_polygons), len(batch_pred_scores), len(batch_gt_polygons), len(batch_gt_ignore_flags)]
        if len(set(lengths)) != 1:
            raise ValueError(
                f"HmeanIoU.add: the four batch arguments must hold one entry per image, got lengths "
                f"{lengths} (pred polygons, pred scores, gt polygons, gt ignore flags)"
            )
        rows: Dict[str, List[Any]] = {"hits": [], "preds": [], "gts": []}
        for i, image in enumerate(
            zip(batch_pred_polygons, batch_pred_scores, batch_gt_polygons, batch_gt_ignore_flags)
        ):
            hits, preds, gts = self._image_counts(i, *image)
            rows["hits"].append(hits)
            rows["preds"].append(preds)
            rows["gts"].append(gts)
        if lengths[0]:
            self._add_rows(
                hits=np.stack(rows["hits"]), preds=np.stack(rows["preds"]), gts=np.asarray(rows["gts"], dtype=np.int64)
            )

    def _image_counts(
        self, i: int, pred_polygons: Sequence[Any], pred_scores: Any, gt_polygons: Sequence[Any], gt_ignore_flags: Any
    ) -> Tuple[np.ndarray, np.ndarray, int]:
        """One image's hits and counted predictions per threshold, and its counted ground truths."""
        preds = polys2shapely(pred_polygons, what=f"HmeanIoU.add: batch_pred_polygons[{i}]")
        gts = polys2shapely(gt_polygons, what=f"HmeanIoU.add: batch_gt_polygons[{i}]")
        scores = to_numpy(pred_scores, f"batch_pred_scores[{i}]").astype(np.float32).reshape(-1)
        ignored_gt = to_numpy(gt_ignore_flags, f"batch_gt_ignore_flags[{i}]").astype(np.bool_).reshape(-1)
        if scores.size != len(preds) or ignored_gt.size != len(gts):
            raise ValueError(
                f"HmeanIoU.add: image {i} has {len(preds)} predicted polygons and {scores.size} scores, "
                f"{len(gts)} ground-truth polygons and {ignored_gt.size} ignore flags: give one "
                f"score per prediction and one flag per ground truth"
            )
        if not np.isfinite(scores).all():
            raise ValueError(f"HmeanIoU.add: batch_pred_scores[{i}] holds NaN or infinite scores")
        kept = scores >= self.pred_score_thrs.min()
        for p in np.flatnonzero(kept):
            area = preds[p].area + 1e-5
            if any(
                poly_intersection(gts[g], preds[p]) / area > self.ignore_precision_thr
                for g in np.flatnonzero(ignored_gt)
            ):
                kept[p] = False
        counted_gt = np.flatnonzero(~ignored_gt)
        kept_pred = np.flatnonzero(kept)
        iou = np.zeros((counted_gt.size, kept_pred.size))
        for a, g in enumerate(counted_gt):
            for b, p in enumerate(kept_pred):
                iou[a, b] = poly_iou(gts[g], preds[p])
        kept_scores = scores[kept_pred]
        hits = np.zeros(self.pred_score_thrs.size, dtype=np.int64)
        counted = np.zeros(self.pred_score_thrs.size, dtype=np.int64)
        match = self._max_matching if self.strategy == "max_matching" else self._vanilla_matching
        for t, thr in enumerate(self.pred_score_thrs):
            scored = kept_scores >= thr
            hits[t] = match(iou[:, scored] > self.match_iou_thr)
            counted[t] = int(np.count_nonzero(scored))
        return hits, counted, int(counted_gt.size)

    @staticmethod
    def _vanilla_matching(matched: np.ndarray) -> int:
        """Hits of greedy matching: the (gt, pred) pairs of ``matched`` in row-major order, each side used once."""
        used_gt, used_pred = set(), set()
        for g, p in zip(*np.nonzero(matched)):
            if g not in used_gt and p not in used_pred:
                used_gt.add(g)
                used_pred.add(p)
        return len(used_gt)

    @staticmethod
    def _max_matching(matched: np.ndarray) -> int:
        """Size of a maximum one-to-one matching of rows (gts) to columns (predictions) along ``matched``.

        Augmenting paths (Kuhn's algorithm, an explicit stack: no recursion limit): each row in turn
        looks for a free column, or a column whose row can move on to another one.
        """
        adjacency = [np.flatnonzero(row).tolist() for row in np.atleast_2d(np.asarray(matched, dtype=bool))]
        owner: Dict[int, int] = {}  # column -> its row
        column_of: Dict[int, int] = {}  # row -> its column
        for root in range(len(adjacency)):
            came_from: Dict[int, int] = {}  # column -> the row that reached it
            branches = {root: iter(adjacency[root])}
            path, free = [root], -1
            while path and free < 0:
                col = next((c for c in branches[path[-1]] if c not in came_from), None)
                if col is None:
                    path.pop()
                    continue
                came_from[col] = path[-1]
                if col not in owner:
                    free = col
                else:
                    branches[owner[col]] = iter(adjacency[owner[col]])
                    path.append(owner[col])
            while free >= 0:  # flip the path: each row on it takes the column that reached it
                row = came_from[free]
                previous = column_of.get(row, -1)  # the root has none: the flip ends there
                owner[free], column_of[row] = row, free
                free = previous
        return len(column_of)

    def compute_metric(self, state: MetricState) -> Dict[Any, Dict[str, float]]:
        """Precision, recall and hmean per threshold from the summed counts, and the best of them."""
        out: Dict[Any, Dict[str, float]] = {}
        best: Dict[str, float] = {"hmean": -1.0}
        gts = int(state["gts"])
        for t, thr in enumerate(self.pred_score_thrs.tolist()):
            hits = int(state["hits"][t])
            recall, precision, hmean = compute_hmean(hits, hits, gts, int(state["preds"][t]))
            out[thr] = {"precision": precision, "recall": recall, "hmean": hmean}
            if hmean > best["hmean"]:
                best = out[thr]
        out["best"] = dict(best)
        return out
