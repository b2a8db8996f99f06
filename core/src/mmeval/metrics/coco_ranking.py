"""COCODetection's ranking of the detections it accumulates: by category, then score, then place.

pycocotools ranks a category's detections by score with stable sorts over
images in sorted image-id order, each image's detections in their list order;
:func:`ranked` gives that order for every category at once (the C kernels'
radix and counting sorts when installed, numpy's stable sorts else: the same
order), and each detection's place in its (image, category) run, which the
``maxDets`` cut reads.
"""

from __future__ import annotations

from typing import Tuple

import numpy as np

from .coco_native import kernels

__all__ = ["RANK_CHUNK", "ranked"]

#: detections :func:`ranked` sorts at a time: its working memory beyond its results, ~40 bytes each
RANK_CHUNK = 1 << 12


def ranked(
    scores: np.ndarray, cat: np.ndarray, det_lens: np.ndarray, k_all: int
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ranking order, each detection's place in its (image, category), and the categories' bounds in the order.

    Ranked by category, then score (highest first), ties by place in the
    input (images in sorted image-id order, then place in the image's list):
    pycocotools' stable sorts. The input lists each image's detections grouped
    by category, by score. A stable counting sort by category, then a stable
    sort by score within each category; both int32 and done
    :data:`RANK_CHUNK` detections at a time, so the working memory beyond the
    8 bytes a detection of the two results follows the chunk.
    """
    n = scores.shape[0]
    bounds = np.r_[0, np.cumsum(np.bincount(cat, minlength=k_all))].astype(np.int64)
    order = np.empty(n, dtype=np.int32)
    native = kernels()
    if native is not None:  # the same order: by category, then -score (NaN last), then place
        within = np.empty(n, dtype=np.int32)
        contig = np.ascontiguousarray
        if scores.dtype != np.float32:
            scores = contig(scores, dtype=np.float64)
        if cat.dtype not in (np.uint8, np.uint16, np.int32, np.int64):
            cat = cat.astype(np.int64)
        cat = contig(cat)
        native.ranked(
            contig(scores), scores.itemsize, cat, cat.itemsize, contig(det_lens, dtype=np.int64), bounds, order, within
        )
        return order, within, bounds
    fill = bounds[:-1].copy()  # each category's next free place in the order
    for lo in range(0, n, RANK_CHUNK):
        c = cat[lo : lo + RANK_CHUNK]
        o = np.argsort(c, kind="stable")
        cs = c[o]
        order[fill[cs] + np.arange(cs.shape[0]) - np.searchsorted(cs, cs, side="left")] = o + lo
        fill += np.bincount(c, minlength=k_all)[:k_all]
        del o, cs
    for k in np.flatnonzero(np.diff(bounds) > 1):
        run = order[bounds[k] : bounds[k + 1]]
        run[:] = run[np.argsort(-scores[run], kind="stable")]
    # each detection's place in its (image, category) run: its distance from the run's first detection
    within = np.empty(n, dtype=np.int32)
    img_start = (np.cumsum(det_lens) - det_lens)[det_lens > 0]
    carry = 0
    for lo in range(0, n, RANK_CHUNK):
        hi = min(lo + RANK_CHUNK, n)
        first = np.zeros(hi - lo, dtype=bool)
        first[1:] = cat[lo + 1 : hi] != cat[lo : hi - 1]
        first[0] = lo == 0 or cat[lo] != cat[lo - 1]
        first[img_start[np.searchsorted(img_start, lo) : np.searchsorted(img_start, hi)] - lo] = True
        idx = np.arange(lo, hi, dtype=np.int64)
        last = np.maximum.accumulate(np.where(first, idx, carry))
        within[lo:hi] = idx - last
        carry = int(last[-1])
    return order, within, bounds
