"""Average precision from ranked matches: what VOC-style detection metrics compute from their images' summaries.

:func:`average_precision` is the AP of one ranked list (also ``AVAMeanAP``'s); :func:`class_average_precisions`
ranks every class's detections across images and takes their AP per (threshold, scale range);
:func:`mean_ap_results` turns those into ``VOCMeanAP``'s result keys.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .curves import thin
from .detection_matching import FP, TP

__all__ = ["ClassAP", "average_precision", "class_average_precisions", "mean_ap_results"]

#: one class's ground-truth counts (thrs, ranges), its number of detections and its APs (thrs, ranges)
ClassAP = Tuple[np.ndarray, int, np.ndarray]


def average_precision(recall: np.ndarray, precision: np.ndarray, mode: str) -> float:
    """AP of one ranked list: the area under the interpolated curve (``'area'``), or the VOC2007 11-point mean."""
    if mode == "area":
        rec = np.concatenate([[0.0], recall, [1.0]])
        pre = np.concatenate([[0.0], precision, [0.0]])
        pre = np.maximum.accumulate(pre[::-1])[::-1]  # the precision envelope: best precision at recall >= r
        step = np.flatnonzero(rec[1:] != rec[:-1])
        return float(np.sum((rec[step + 1] - rec[step]) * pre[step + 1]))
    total = 0.0
    for r in np.arange(0, 1 + 1e-3, 0.1):
        reached = precision[recall >= r]
        total += float(reached.max()) if reached.size else 0.0
    return total / 11.0


def class_average_precisions(
    states: np.ndarray,
    scores: np.ndarray,
    labels: np.ndarray,
    keys: np.ndarray,
    num_gts: np.ndarray,
    eval_mode: str,
    curve_range: Optional[int] = None,
) -> Tuple[List[ClassAP], List[Tuple[np.ndarray, np.ndarray]]]:
    """Per class, its APs from every image's detections, and (with ``curve_range``) its thinned PR curve.

    ``states``: ``(n, ranges, thrs)`` match states (:mod:`~mmeval.metrics.detection_matching`) of all
    ``n`` detections; ``scores``, ``labels``, ``keys`` ``(n,)``: a detection's score, class and its
    image's digest; ``num_gts``: ``(C, ranges)`` ground-truth counts. Per class, detections are ranked by
    descending score, equal scores by ``keys``, then by their place in the list -- never by which rank
    held an image. ``curve_range``: the scale range whose curve at the first threshold is kept (``None``:
    no curves).
    """
    n, n_rng, n_thr = states.shape
    num_classes = num_gts.shape[0]
    order = np.lexsort((np.arange(n), keys, -scores, labels))
    bounds = np.searchsorted(labels[order], np.arange(num_classes + 1))
    eps = float(np.finfo(np.float32).eps)
    per_class: List[ClassAP] = []
    curves: List[Tuple[np.ndarray, np.ndarray]] = []
    for cls in range(num_classes):
        gts = np.broadcast_to(num_gts[cls], (n_thr, n_rng))
        seg = order[bounds[cls] : bounds[cls + 1]]
        ap = np.zeros((n_thr, n_rng))
        if seg.size:
            st = states[seg].transpose(2, 1, 0)  # (thrs, ranges, K)
            tp_c = np.cumsum(st == TP, axis=2).astype(np.float64)
            fp_c = np.cumsum(st == FP, axis=2).astype(np.float64)
            precision = tp_c / np.maximum(tp_c + fp_c, eps)
            recall = tp_c / np.maximum(gts[..., None], eps)
            for i in range(n_thr):
                for j in range(n_rng):
                    ap[i, j] = average_precision(recall[i, j], precision[i, j], eval_mode)
            if curve_range is not None:
                curves.append(thin(recall[0, curve_range], precision[0, curve_range]))
        elif curve_range is not None:
            curves.append((np.zeros(0), np.zeros(0)))
        per_class.append((np.array(gts), int(seg.size), ap))
    return per_class, curves


def mean_ap_results(
    per_class: Sequence[ClassAP],
    iou_thrs: Sequence[float],
    scale_ranges: Sequence[Tuple[Optional[float], Optional[float]]],
    drop_class_ap: bool,
    classwise: bool,
) -> Dict[str, Any]:
    """``AP{thr}`` per threshold, ``mAP`` / ``mAP@{range}`` per scale range and, with ``classwise``, the per-class rows.

    ``drop_class_ap``: a class without ground truth in a (threshold, range) is left out of its mean
    (else it counts as AP 0); a mean over no class is NaN.
    """
    n_thr, n_rng = len(iou_thrs), len(scale_ranges)
    full = list(scale_ranges).index((None, None))
    means = np.full((n_thr, n_rng), np.nan)
    for i in range(n_thr):
        for j in range(n_rng):
            aps = [ap[i, j] for g, _, ap in per_class if g[i, j] > 0 or not drop_class_ap]
            means[i, j] = float(np.mean(aps)) if aps else float("nan")
    out: Dict[str, Any] = {}
    for i, thr in enumerate(iou_thrs):
        out[f"AP{round(thr * 100)}"] = float(means[i, full])
    for j, rng in enumerate(scale_ranges):
        out["mAP" if rng == (None, None) else f"mAP@{rng}"] = float(np.mean(means[:, j]))
    if classwise:
        out["classwise_result"] = [{"num_gts": g.tolist(), "num_dets": d, "ap": ap.tolist()} for g, d, ap in per_class]
    return out
