"""pycocotools' ``COCOeval.accumulate`` and ``summarize``, over the per-detection summaries of
:mod:`mmeval.metrics.coco_detection` (one category, one score, one packed word of true / false
positive / ignored states per detection), with the same floats.

How it stays equal to pycocotools while doing less
---------------------------------------------------
pycocotools builds, per category, area range and ``maxDet``, the running
true- and false-positive counts of every ranked detection, the precision at
each, its upper envelope (a running maximum from the end), and reads it at the
first detection reaching each of the 101 recall points. Two facts make most of
that unnecessary, without changing a single float:

* the envelope at any position is reached at a true positive: a false
  positive or an ignored detection never raises the precision above the one
  before it, and before the first true positive it is 0. So only the
  precision ``k / (k + fp_k + eps)`` of the ``k``-th true positive is needed
  (``fp_k`` the false positives ranked before it), and the first detection
  reaching recall point ``r`` is the ``c_r``-th true positive, where ``c_r``
  is the fewest true positives with ``c / npig >= r`` (the same division as
  pycocotools' ``tp_sum / npig``);
* ``summarize`` and the classwise rows read the precision at the largest
  ``maxDet`` only (and at ``maxDets[2]``, or 100): recall at the others is a
  count.

``fp_k`` comes from the positions of the false positives (one binary search
per true positive), the envelope from one segment maximum per recall point.
Detections are ranked once (:mod:`.coco_ranking`: by category, score, then image and place, as
pycocotools' stable sorts rank them: 8 bytes a detection) and their states
decoded a group of categories and a few (area range, threshold) rows at a
time, so beyond the ranking the working memory follows the group, not the world.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.packed import TRITS_PER_WORD, trit_rows
from .coco_native import kernels
from .coco_ranking import ranked

__all__ = [
    "AREA_LABELS",
    "AREA_RANGES",
    "REC_THRS",
    "accumulate",
    "combine_partials",
    "precision_columns",
    "ranked",
    "runs",
    "summarize_sums",
]

#: pycocotools' area ranges (all, small, medium, large): an object is outside when area < lo or area > hi
AREA_RANGES = ((0**2, 1e5**2), (0**2, 32**2), (32**2, 96**2), (96**2, 1e5**2))
AREA_LABELS = ("all", "small", "medium", "large")
#: the 101 recall points of the interpolated precision (pycocotools' expression, for the same floats)
REC_THRS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
#: (row, detection) flags one :func:`_interpolated` call takes at most: ~10 bytes each of working memory
#: (8 per true or false positive, a few times), and a call costs ~30 numpy operations
INTERPOLATE_CELLS = 1 << 15
#: (row, category, recall point) cells one :func:`_interpolated` call takes at most: ~25 bytes each
RECALL_CELLS = 1 << 14
#: detections, and categories, of consecutive categories accumulated together (a larger category alone):
#: a group holds ~20 bytes per detection (its state words, places, kept positions) beside the rows
#: being decoded (:data:`INTERPOLATE_CELLS`) and ~1 KB per (category, area, threshold)
GROUP_DETECTIONS = 4096
GROUP_CATEGORIES = 16
#: the three states of a detection at one (area range, IoU threshold)
IGNORED, TP, FP = 0, 1, 2


def precision_columns(max_dets: Sequence[int]) -> List[int]:
    """The ``maxDets`` positions whose precision :func:`summarize_stats` and the classwise rows read."""
    n = len(max_dets)
    wanted = {n - 1} | {i for i, m in enumerate(max_dets) if m == 100} | ({2} if n > 2 else set())
    return sorted(wanted)


def _fewest_tps(npig: np.ndarray) -> np.ndarray:
    """(K, A, R): the fewest true positives ``c`` with ``c / npig >= r`` per category, area range and recall point.

    The very ``c`` of a search of ``r`` in pycocotools' ``arange(n + 1) / n``: ``ceil(r * n)``, moved by
    one where rounding put it on the wrong side of ``r`` (``c / n`` is monotone in ``c``, so the
    smallest ``c`` with ``c / n >= r`` is the one whose predecessor falls short); 0 where ``npig`` is 0.
    """
    c_min = np.zeros((npig.shape[0], npig.shape[1], REC_THRS.shape[0]), dtype=np.int64)
    live = npig > 0
    n = npig[live].astype(np.int64)[:, None]
    c = np.ceil(REC_THRS[None, :] * n).astype(np.int64)
    c += c / n < REC_THRS
    c -= (c > 0) & ((c - 1) / n >= REC_THRS)
    c_min[live] = c
    return c_min


def _tp_runs(tp: np.ndarray, col_start: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The true positives' flat places, each (row, category) run's first place and each run's first true
    positive (and the end) among them, of ranked flags (see :func:`_interpolated`)."""
    rows, nd = tp.shape
    tp_at = np.flatnonzero(tp)  # row * nd + place, sorted: runs in (row, category) order
    run_lo = (np.arange(rows, dtype=np.int64)[:, None] * nd + col_start[None, :-1]).ravel()
    return tp_at, run_lo, np.searchsorted(tp_at, np.append(run_lo, rows * nd))


def _tp_counts(tp: np.ndarray, col_start: np.ndarray) -> np.ndarray:
    """(rows * C,): the true positives of each (row, category) run of ranked flags."""
    return np.diff(_tp_runs(tp, col_start)[2])


def _interpolated(
    tp: np.ndarray, fp: np.ndarray, col_start: np.ndarray, c_min: np.ndarray
) -> Tuple[np.ndarray, np.ndarray]:
    """(rows * C, R): pycocotools' interpolated precision ``q`` of each (row, category) run of ranked flags,
    and (rows * C,) each run's true positives.

    ``tp``, ``fp`` (rows, columns): true / false positive flags; the columns
    are the ranked detections of C categories one after another, category c
    at ``col_start[c]:col_start[c + 1]``. ``c_min`` (rows * C, R): the true
    positives each recall point needs (see the module docstring). Runs are
    taken row-major (row, then category).
    """
    n_rec = c_min.shape[1]
    tp_at, run_lo, tp_first = _tp_runs(tp, col_start)
    fp_at = np.flatnonzero(fp)
    n_tp = np.diff(tp_first)
    fp_before = np.searchsorted(fp_at, tp_at)
    del tp_at
    fp_before -= np.repeat(np.searchsorted(fp_at, run_lo), n_tp)
    del fp_at
    # k, 1-based per run, as a float (exact: an integer below 2**53)
    tp_sum = np.arange(1, fp_before.shape[0] + 1, dtype=float)
    tp_sum -= np.repeat(tp_first[:-1], n_tp)
    # the same expression as pycocotools' tp_sum / (fp_sum + tp_sum + eps), element for element
    pr = fp_before.astype(float)
    del fp_before
    pr += tp_sum
    pr += np.spacing(1)
    np.divide(tp_sum, pr, out=pr)
    del tp_sum
    # in place from here (~25 bytes a (run, recall point) cell with c_min): a recall point is reached when the
    # run has c_min true positives; where each one's suffix starts in pr, past the run's end where not reached
    unreached = (c_min > n_tp[:, None]) | (n_tp[:, None] == 0)
    first = c_min - 1
    np.maximum(first, 0, out=first)
    np.copyto(first, np.broadcast_to(n_tp[:, None], first.shape), where=unreached)
    first += tp_first[:-1, None]
    pr_end = np.append(pr, -1.0)  # a segment that starts at the very end reads -1: masked below
    del pr
    seg = np.maximum.reduceat(pr_end, first.ravel()).reshape(-1, n_rec)
    del first, pr_end
    seg[unreached] = -1.0
    # segment r covers [first_r, first_r+1) (the last one up to the run's end): the envelope is the
    # running maximum of the segments from the end
    backwards = seg[:, ::-1]
    np.maximum.accumulate(backwards, axis=1, out=backwards)
    seg[unreached] = 0.0
    return seg, n_tp


def runs(counts: Sequence[int], most: int, items: Optional[int] = None) -> List[Tuple[int, int]]:
    """Consecutive ``[lo, hi)`` runs of ``counts`` summing to at most ``most`` (one item alone may exceed it),
    of at most ``items`` items each."""
    out: List[Tuple[int, int]] = []
    lo, total = 0, 0
    for i, c in enumerate(counts):
        if i > lo and (total + c > most or (items is not None and i - lo >= items)):
            out.append((lo, i))
            lo, total = i, 0
        total += int(c)
    if lo < len(counts):
        out.append((lo, len(counts)))
    return out


def accumulate(
    ranking: Tuple[np.ndarray, np.ndarray, np.ndarray],
    states: np.ndarray,
    npig: np.ndarray,
    thrs: np.ndarray,
    max_dets: Sequence[int],
    classwise: bool = False,
    curves: Optional[np.ndarray] = None,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pycocotools' ``accumulate``, reduced to what ``summarize`` reads: precision sums, true positives, classwise AP.

    * the interpolated precision summed over the 101 recall points, (T, K, A,
      len(precision_columns)), 0 where a category has no ground truth in an
      area range (pycocotools' -1 cells, never counted);
    * the true positives (T, K, A, M), -1 there; the recall is the count over
      ``npig`` (pycocotools' ``tp_sum[-1] / npig``: an integer over an
      integer, the same floats; :func:`summarize_sums`);
    * with ``classwise``, each category's AP (the mean of its precision at
      area 'all' and the largest ``maxDets``, as pycocotools' arrays give it),
      NaN without ground truth; else an empty array.

    ``curves``, when given, a float64 (K, T, R) C-contiguous array: each
    category's interpolated precision at area 'all' and the largest
    ``maxDets`` (pycocotools' ``eval['precision'][t, :, k, 0, -1]``) is
    written into its (T, R) cells, from the same pass (the classwise AP's
    cells); a category without ground truth there is left as it was given.

    Categories are taken a group at a time (consecutive categories of about
    :data:`GROUP_DETECTIONS` detections and at most :data:`GROUP_CATEGORIES` categories
    together, all vectorised), so the
    working memory follows the group, and many small categories cost a few
    large operations, not many small ones. ``ranking``: :func:`ranked` of the
    detections (the scores and categories are not needed after it);
    ``states``: each detection's packed (area range, threshold) states
    (:func:`~mmeval.core.packed.trits_to_words`) in the same input order;
    ``npig`` (K, A) the ground truths that count. Each category's numbers do
    not depend on the group it is in.
    """
    if curves is not None and (
        curves.shape != (npig.shape[0], thrs.shape[0], REC_THRS.shape[0])
        or curves.dtype != np.float64
        or not curves.flags.c_contiguous
    ):
        raise ValueError(f"accumulate: curves must be a C-contiguous float64 (K, T, R) array, got {curves.shape}")
    native = kernels()
    if native is not None:
        return _accumulate_native(native, ranking, states, npig, thrs, max_dets, classwise, curves)
    n_thr, n_rec = thrs.shape[0], REC_THRS.shape[0]
    k_all, n_rng, n_m = npig.shape[0], npig.shape[1], len(max_dets)
    cols = precision_columns(max_dets)
    order, within, bounds = ranking
    n = order.shape[0]
    psum = np.zeros((n_thr, k_all, n_rng, len(cols)))
    tps = np.full((n_thr, k_all, n_rng, n_m), -1, dtype=np.int32)
    ap = np.full(k_all if classwise else 0, np.nan)
    states = states.reshape(n, -(-n_rng * n_thr // TRITS_PER_WORD))
    live_all = npig > 0
    rows = n_rng * n_thr
    for k0, k1 in runs(np.diff(bounds).tolist(), GROUP_DETECTIONS, GROUP_CATEGORIES):
        live = live_all[k0:k1]  # (C, A)
        if not live.any():
            continue
        nc = k1 - k0
        ranked = order[bounds[k0] : bounds[k1]]
        col_start = bounds[k0 : k1 + 1] - bounds[k0]
        group_words = states[ranked]  # (detections of the group, words): ranked, category after category
        rk = within[ranked]
        kept = []  # per maxDet: the ranked detections it keeps (None: all) and where each category starts then
        for max_det in max_dets:
            keep = np.flatnonzero(rk < max_det) if rk.size and int(rk.max()) >= max_det else None
            kept.append((keep, np.searchsorted(keep, col_start) if keep is not None else col_start))
        del rk
        c_min = _fewest_tps(npig[k0:k1])  # (C, A, R)
        counts = np.empty((n_m, rows, nc), dtype=np.int64)
        sums = np.empty((len(cols), rows, nc))
        q_all = np.empty((n_thr, nc, n_rec)) if classwise or curves is not None else None
        # a few (area, threshold) rows at a time: their flags are decoded, the true positives counted and
        # the precision summed (and, for the classwise AP, kept at area 'all') before the next rows;
        # the positions found take 8 bytes per flag
        step = max(1, min(INTERPOLATE_CELLS // max(ranked.shape[0], 1), RECALL_CELLS // (nc * n_rec)))
        flags = trit_rows(group_words, rows)
        for i in range(0, rows, step):
            j = min(i + step, rows)
            st = np.empty((j - i, ranked.shape[0]), dtype=np.uint8)
            for f in range(j - i):
                st[f] = next(flags)
            tp_rows, fp_rows = st == TP, st == FP
            del st
            need = c_min[:, np.arange(i, j) // n_thr].transpose(1, 0, 2).reshape(-1, n_rec)  # rows are (A, T)
            for m, (keep, starts) in enumerate(kept):
                tp = tp_rows[:, keep] if keep is not None else tp_rows
                if m not in cols:
                    counts[m, i:j] = _tp_counts(tp, starts).reshape(j - i, nc)
                    continue
                q, n_tp = _interpolated(tp, fp_rows[:, keep] if keep is not None else fp_rows, starts, need)
                counts[m, i:j] = n_tp.reshape(j - i, nc)
                q = q.reshape(j - i, nc, n_rec)
                sums[cols.index(m), i:j] = q.sum(axis=2)
                if q_all is not None and m == n_m - 1 and i < n_thr:
                    q_all[i : min(j, n_thr)] = q[: min(j, n_thr) - i]
                del q, tp
        # (T, C, A) per maxDet: true positives, and the precision summed over the recall points
        for m in range(n_m):
            tps[:, k0:k1, :, m] = np.where(live[None], counts[m].reshape(n_rng, n_thr, nc).transpose(1, 2, 0), -1)
        for c in range(len(cols)):
            psum[:, k0:k1, :, c] = np.where(live[None], sums[c].reshape(n_rng, n_thr, nc).transpose(1, 2, 0), 0.0)
        if curves is not None and q_all is not None:
            curves[k0:k1][live[:, 0]] = q_all.transpose(1, 0, 2)[live[:, 0]]
        if q_all is not None and classwise:
            # per category its (T, R) cells at area 'all', every one counted: pycocotools' mean of them
            per = q_all.transpose(1, 0, 2).reshape(nc, n_thr * n_rec).mean(axis=1)
            ap[k0:k1] = np.where(live[:, 0], per, np.nan)
    return psum, tps, ap


def _accumulate_native(
    native: Any,
    ranking: Tuple[np.ndarray, np.ndarray, np.ndarray],
    states: np.ndarray,
    npig: np.ndarray,
    thrs: np.ndarray,
    max_dets: Sequence[int],
    classwise: bool,
    curves: Optional[np.ndarray] = None,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`accumulate` by mmeval-coco-native: one pass per (category, area range, threshold) in C, the
    same floats (the precision sums are numpy's pairwise sums; the classwise AP numpy's mean of the cells).
    The kernel writes the (K, T, R) cells of ``curves`` itself (only where a category has ground truth)."""
    n_thr, n_rec = thrs.shape[0], REC_THRS.shape[0]
    k_all, n_rng, n_m = npig.shape[0], npig.shape[1], len(max_dets)
    cols = precision_columns(max_dets)
    order, within, bounds = ranking
    psum = np.empty((n_thr, k_all, n_rng, len(cols)))
    tps = np.empty((n_thr, k_all, n_rng, n_m), dtype=np.int32)
    q_all = curves if curves is not None else (np.empty((k_all, n_thr, n_rec)) if classwise else None)
    live = npig > 0
    c = np.ascontiguousarray
    native.accumulate(
        c(order, dtype=np.int32),
        c(within, dtype=np.int32),
        c(bounds, dtype=np.int64),
        c(states, dtype=np.uint64),
        c(npig, dtype=np.int64),
        REC_THRS,
        n_thr,
        np.array(max_dets, dtype=np.int64),
        np.array(cols, dtype=np.int64),
        psum,
        tps,
        q_all,
    )
    ap = np.full(k_all if classwise else 0, np.nan)
    if q_all is not None and classwise and k_all:
        ap = np.where(live[:, 0], q_all.reshape(k_all, n_thr * n_rec).mean(axis=1), np.nan)
    return psum, tps, ap


def combine_partials(
    partials: Sequence[Dict[str, Any]], j: int, k_eff: int, proposal: bool = False
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Metric ``j``'s precision sums (T, K, A, M'), true positives (T, K, A, M; -1 without ground truth), the
    ground truths that count (K, A) and the classwise AP (K,), over every rank.

    A partial's ``"cats"`` are the categories it accumulated; ``proposal``'s one category is rank 0's (the
    partial whose ground-truth counts have a row)."""
    first = partials[0]["metrics"][j]
    n_thr, _, n_p = np.shape(first["psum"])
    n_m = np.shape(first["tp"])[2]
    n_rng = len(AREA_RANGES)
    psum = np.zeros((n_thr, k_eff, n_rng, n_p))
    tps = np.full((n_thr, k_eff, n_rng, n_m), -1, dtype=np.int32)
    npig_all = np.zeros((k_eff, n_rng), dtype=np.int64)
    classwise = np.full(k_eff, np.nan)
    for part in partials:
        m = part["metrics"][j]
        npig = np.asarray(m["npig"], dtype=np.int64).reshape(-1, n_rng)
        own = np.arange(npig.shape[0]) if proposal else np.asarray(part["cats"], dtype=np.int64)
        npig_all[own] = npig
        kk, aa = np.nonzero(npig > 0)
        psum[:, own[kk], aa, :] = np.asarray(m["psum"]).reshape(n_thr, kk.shape[0], n_p)
        tps[:, own[kk], aa, :] = np.asarray(m["tp"]).reshape(n_thr, kk.shape[0], n_m)
        if np.size(m["classwise"]):
            classwise[own] = m["classwise"]
    return psum, tps, npig_all, classwise


def summarize_sums(
    psum: np.ndarray, tps: np.ndarray, npig: np.ndarray, thrs: np.ndarray, max_dets: Sequence[int]
) -> np.ndarray:
    """pycocotools' ``summarize`` for detections: the 12 stats (maxDets sorted, as ``evaluate`` sorts them).

    ``psum``: the precision summed over the recall points (T, K, A, M' of
    :func:`precision_columns`); ``tps`` (T, K, A, M) the true positives, -1
    for a category without ground truth in the area range, whose cells do not
    count (pycocotools' -1); ``npig`` (K, A) the ground truths that count. The
    recall of a selection is its true positives over ``npig`` (pycocotools'
    ``tp_sum[-1] / npig``: an integer over an integer, the same floats). AP is
    the sum of the counted cells over their number times the recall points
    (pycocotools' mean of the same numbers, to a few ulps); AR is
    pycocotools' own expression.
    """
    cols = precision_columns(max_dets)
    n_rec = REC_THRS.shape[0]

    def one(ap: bool, iou_thr: Optional[float] = None, area: str = "all", max_det: int = 100) -> float:
        aind = np.array([i for i, lbl in enumerate(AREA_LABELS) if lbl == area], dtype=np.int64)
        mind = np.array([i for i, m in enumerate(max_dets) if m == max_det], dtype=np.int64)
        t_sel = np.where(iou_thr == thrs)[0] if iou_thr is not None else np.arange(thrs.shape[0])
        every_k = np.arange(tps.shape[1])
        # pycocotools' selection (thresholds, every category, the area, the maxDet), copied alone
        t = tps[np.ix_(t_sel, every_k, aind, mind)]
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(t >= 0, t / npig[np.ix_(every_k, aind)][None, :, :, None], -1.0)
        if not ap:
            return -1.0 if len(r[r > -1]) == 0 else float(np.mean(r[r > -1]))
        s = psum[np.ix_(t_sel, every_k, aind, np.array([cols.index(int(i)) for i in mind], dtype=np.int64))]
        counted = r > -1
        n = int(counted.sum()) * n_rec
        return -1.0 if n == 0 else float(s[counted].sum() / n)

    m = max_dets
    return np.array(
        [
            one(True),
            one(True, 0.5, max_det=m[2]),
            one(True, 0.75, max_det=m[2]),
            one(True, area="small", max_det=m[2]),
            one(True, area="medium", max_det=m[2]),
            one(True, area="large", max_det=m[2]),
            one(False, max_det=m[0]),
            one(False, max_det=m[1]),
            one(False, max_det=m[2]),
            one(False, area="small", max_det=m[2]),
            one(False, area="medium", max_det=m[2]),
            one(False, area="large", max_det=m[2]),
        ]
    )
