"""COCODetection's precision-recall curves: pycocotools' ``eval['precision']`` at area 'all', and their ``plot()``.

With ``metric.keep_curves = True`` (on every rank: it is part of the
question) before ``compute()``, the rank that accumulates each category keeps,
from the very accumulation that gives the stats (not a second pass), its
interpolated precision at the 101 recall points of every IoU threshold, at
area 'all' and the largest ``maxDets`` (100 by default): T * R * 8 bytes a
category (8 KB at COCO's 10 thresholds x 101 points; 80 categories 646 KB,
LVIS's 1203 9.7 MB). Those cells travel to rank 0 with the partial results
only when asked for (without ``keep_curves`` nothing more is computed or
sent); rank 0 (every process alone) then holds :class:`COCOCurves` per metric
in :attr:`COCODetection.pr_curves <mmeval.metrics.COCODetection.pr_curves>`.
``plot()`` draws the curves per IoU threshold (0.5, 0.75 and the mean over
thresholds) averaged over the categories, as pycocotools' AP averages them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..core.errors import MetricArgumentError
from .coco_accumulate import AREA_RANGES, REC_THRS
from .curves import PRCurves, plot_pr_curves

__all__ = ["COCOCurves", "combine_curves", "plot_coco_curves"]


@dataclass(frozen=True)
class COCOCurves:
    """One metric's (``'bbox'``, ``'segm'``, ``'proposal'``) interpolated precision, pycocotools' layout.

    ``precision`` (T, R, K): pycocotools' ``eval['precision'][:, :, :, 0, -1]``
    (IoU threshold, recall point, category; area 'all', the largest
    ``maxDets``), -1 for a category without ground truth there;
    ``recall`` (R,): the 101 recall points; ``iou_thrs`` (T,);
    ``category_ids`` and ``names`` (K,): the categories in the metric's order
    (``'proposal'``: one, every category).
    """

    metric: str
    precision: np.ndarray
    recall: np.ndarray
    iou_thrs: np.ndarray
    category_ids: List[int]
    names: List[str]

    def curve(self, iou_thr: Optional[float] = None, categories: Optional[Sequence[int]] = None) -> np.ndarray:
        """(R,) the precision at each recall point averaged over the categories with ground truth
        (``categories``: their positions; default all) and the IoU threshold ``iou_thr`` (None: the
        mean over every threshold); -1 where no category counts. Its mean is pycocotools' AP of the same
        selection."""
        t_sel = np.arange(self.iou_thrs.shape[0]) if iou_thr is None else np.flatnonzero(self.iou_thrs == iou_thr)
        if t_sel.size == 0:
            raise MetricArgumentError(
                f"COCODetection: iou_thr={iou_thr!r} is not one of iou_thrs={self.iou_thrs.tolist()}"
            )
        k_sel = np.arange(self.precision.shape[2]) if categories is None else np.asarray(categories, dtype=np.int64)
        cells = self.precision[np.ix_(t_sel, np.arange(self.recall.shape[0]), k_sel)]  # (T', R, K')
        counted = cells[0, 0] > -1  # a category counts at every threshold and recall point, or at none
        if not counted.any():
            return np.full(self.recall.shape[0], -1.0)
        return np.asarray(cells[:, :, counted].mean(axis=(0, 2)), dtype=np.float64)

    def for_plot(self, categories: Optional[Sequence[int]] = None) -> PRCurves:
        """The curves ``plot()`` draws: IoU 0.5 and 0.75 (those of ``iou_thrs``) and the mean over thresholds."""
        picks: List[Optional[float]] = [t for t in (0.5, 0.75) if np.any(self.iou_thrs == t)]
        if self.iou_thrs.shape[0] > 1 or not picks:
            picks.append(None)
        lo, hi = float(self.iou_thrs.min()), float(self.iou_thrs.max())
        names: List[str] = []
        precision: List[np.ndarray] = []
        ap: List[Optional[float]] = []
        for t in picks:
            p = self.curve(t, categories)
            names.append(f"IoU={t:.2f}" if t is not None else f"IoU={lo:.2f}:{hi:.2f}")
            precision.append(p)
            ap.append(float(p.mean()) if p[0] > -1 else None)
        which = "" if categories is None else f", {len(categories)} of {len(self.names)} categories"
        title = f"COCODetection {self.metric}: precision-recall (area all{which})"
        return PRCurves(title, names, [self.recall.copy() for _ in picks], precision, ap)


def combine_curves(
    partials: Sequence[Dict[str, Any]], j: int, metric: str, thrs: np.ndarray, ids: List[int], names: List[str]
) -> COCOCurves:
    """Metric ``j``'s :class:`COCOCurves` from every rank's accumulated categories (the ``"curves"`` of
    :meth:`~mmeval.metrics.coco_parts.JoinedPart.accumulate`); ``ids`` / ``names`` its categories."""
    n_thr, n_rec, k_eff = thrs.shape[0], REC_THRS.shape[0], len(ids)
    precision = np.full((n_thr, n_rec, k_eff), -1.0)
    for part in partials:
        m = part["metrics"][j]
        npig = np.asarray(m["npig"], dtype=np.int64).reshape(-1, len(AREA_RANGES))
        own = np.arange(npig.shape[0]) if metric == "proposal" else np.asarray(part["cats"], dtype=np.int64)
        live = own[npig[:, 0] > 0]
        precision[:, :, live] = np.asarray(m["curves"], dtype=np.float64).reshape(-1, n_thr, n_rec).transpose(1, 2, 0)
    return COCOCurves(metric, precision, REC_THRS.copy(), np.asarray(thrs, dtype=np.float64).copy(), ids, names)


def plot_coco_curves(
    curves: Dict[str, COCOCurves],
    metric: Optional[str] = None,
    ax: Any = None,
    classes: Optional[Sequence[int]] = None,
) -> Any:
    """Draw ``curves[metric]`` (default the first) per IoU threshold; returns matplotlib's ``(fig, ax)``.

    matplotlib is imported here; without it the error names the ``plot`` extra.
    """
    if metric is None:
        metric = next(iter(curves))
    if metric not in curves:
        raise MetricArgumentError(
            f"COCODetection.plot(): metric={metric!r} was not computed; use one of {list(curves)}"
        )
    return plot_pr_curves(curves[metric].for_plot(classes), ax, user="COCODetection.plot()")
