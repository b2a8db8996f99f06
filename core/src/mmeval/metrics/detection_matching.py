"""The per-image matching of VOC-style detection metrics: each detection a true positive, a false positive or neither.

The match states (:data:`NEITHER`, :data:`TP`, :data:`FP`) are what a VOC-style summary carries per detection
and (threshold, scale range) pair; :func:`match_detections` is the VOC rule (``VOCMeanAP``, ``DOTAMeanAP``),
:func:`match_group_of` Open Images' group-of rule laid over it (``OIDMeanAP``). Both take what the metric
measured (overlaps, scale-range masks) and hold no geometry, so a metric's ``_iou`` / ``_area`` hooks keep
their meaning.
"""

from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

__all__ = ["FP", "NEITHER", "TP", "match_detections", "match_group_of"]

#: a detection's state at one (threshold, scale range): counted for nothing, a true positive, a false positive
NEITHER, TP, FP = 0, 1, 2


def match_detections(
    iou: np.ndarray,
    scores: np.ndarray,
    pred_in: Sequence[np.ndarray],
    gt_out: Sequence[np.ndarray],
    thrs: Sequence[float],
) -> Tuple[np.ndarray, np.ndarray]:
    """True / false positive flags, ``(thrs, ranges, K)``, of one image's detections of one class (the VOC rule).

    ``iou``: ``(K, G)``, the detections' overlaps with the image's objects of the class (ignored ones
    included). ``pred_in``: per scale range, ``(K,)``: a detection's own box in the range. ``gt_out``:
    per scale range, ``(G,)``: an object not counted there (ignored, or outside the range). Detections are taken by
    descending score (ties: the earlier first); each is matched to the object it overlaps most; with IoU
    >= the threshold it is a true positive if that object is counted and not yet matched, a false positive
    if already matched, and neither if the object is not counted; below the threshold it is a false
    positive when its own box lies in the scale range.
    """
    k, g = iou.shape
    shape = (len(thrs), len(pred_in), k)
    tp, fp = np.zeros(shape), np.zeros(shape)
    if g:
        best, best_iou = iou.argmax(axis=1), iou.max(axis=1)
    else:
        best, best_iou = np.zeros(k, dtype=np.int64), np.zeros(k)
    order = np.argsort(-scores, kind="stable")
    for j, (own_in, out) in enumerate(zip(pred_in, gt_out)):
        for i, thr in enumerate(thrs):
            covered = np.zeros(g, dtype=bool)
            for d in order:
                if best_iou[d] >= thr:
                    m = best[d]
                    if out[m]:
                        continue
                    if covered[m]:
                        fp[i, j, d] = 1
                    else:
                        tp[i, j, d] = 1
                        covered[m] = True
                elif own_in[d]:
                    fp[i, j, d] = 1
    return tp, fp


def match_group_of(
    tp: np.ndarray,
    fp: np.ndarray,
    iof: np.ndarray,
    scores: np.ndarray,
    group_out: Sequence[np.ndarray],
    iof_thrs: Sequence[float],
) -> Tuple[np.ndarray, np.ndarray]:
    """``tp`` / ``fp`` (``(thrs, ranges, K)``, changed in place and returned) with Open Images' group-of boxes taken in.

    ``iof``: ``(K, G)``, a detection's intersection with each group-of box over its own area;
    ``group_out``: per scale range, ``(G,)``: a group-of box outside the range. By descending score, each
    detection that is not a true positive and whose largest IoF is at least the threshold is taken by
    that box (if in the range): the highest-scored detection a box takes is one true positive, the
    others count for nothing.
    """
    best, best_iof = iof.argmax(axis=1), iof.max(axis=1)
    order = np.argsort(-scores, kind="stable")
    for i, thr in enumerate(iof_thrs):
        for j, out in enumerate(group_out):
            taken = np.zeros(iof.shape[1], dtype=bool)
            for d in order:
                if tp[i, j, d] or best_iof[d] < thr or out[best[d]]:
                    continue
                fp[i, j, d] = 0
                if not taken[best[d]]:  # the group's highest-scored detection: its one true positive
                    tp[i, j, d] = 1
                    taken[best[d]] = True
    return tp, fp
