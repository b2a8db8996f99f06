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
Detections are ranked once (by category, score, then image and place, as
pycocotools' stable sorts rank them) and their states decoded one category at
a time, so the working memory follows the largest category, not the world.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.packed import TRITS_PER_WORD, words_to_trits

__all__ = ["AREA_LABELS", "AREA_RANGES", "REC_THRS", "JoinedPart", "accumulate", "combine_partials", "join_parts",
           "precision_columns", "runs", "split_summaries", "summarize_sums"]

#: pycocotools' area ranges (all, small, medium, large): an object is outside when area < lo or area > hi
AREA_RANGES = ((0 ** 2, 1e5 ** 2), (0 ** 2, 32 ** 2), (32 ** 2, 96 ** 2), (96 ** 2, 1e5 ** 2))
AREA_LABELS = ("all", "small", "medium", "large")
#: the 101 recall points of the interpolated precision (pycocotools' expression, for the same floats)
REC_THRS = np.linspace(.0, 1.00, int(np.round((1.00 - .0) / .01)) + 1, endpoint=True)
#: (row, detection) flags one :func:`_interpolated` call takes at most: its working memory, ~16 bytes each
INTERPOLATE_CELLS = 1 << 16
#: detections, and categories, of consecutive categories accumulated together (a larger category alone):
#: a group's working memory is ~100 bytes per detection plus ~3 KB per (category, area, threshold)
GROUP_DETECTIONS = 4096
GROUP_CATEGORIES = 16
#: the three states of a detection at one (area range, IoU threshold)
IGNORED, TP, FP = 0, 1, 2


def precision_columns(max_dets: Sequence[int]) -> List[int]:
    """The ``maxDets`` positions whose precision :func:`summarize_stats` and the classwise rows read."""
    n = len(max_dets)
    wanted = {n - 1} | {i for i, m in enumerate(max_dets) if m == 100} | ({2} if n > 2 else set())
    return sorted(wanted)


def _ranked(scores: np.ndarray, cat: np.ndarray, img_rank: np.ndarray, det_lens: np.ndarray,
            k_all: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ranking order, each detection's place in its (image, category), and the categories' bounds in the order.

    Ranked by category, then score (highest first), ties by image (in sorted
    image-id order) and then place in the image's list: pycocotools' stable
    sorts. The input lists each image's detections grouped by category, by score.
    """
    n = scores.shape[0]
    bounds = np.r_[0, np.cumsum(np.bincount(cat, minlength=k_all))].astype(np.int64)
    if img_rank.size < 2 or bool(np.all(img_rank[1:] > img_rank[:-1])):
        # the usual case: images come in image-id order, so the input order already breaks ties:
        # a stable sort by category (a radix sort on small ints), then by score within each category,
        # in place (int32: the working memory follows the detections, 8 bytes each with ``within``)
        order = np.argsort(cat if cat.dtype.itemsize <= 2 else cat.astype(np.int64), kind="stable"
                           ).astype(np.int32)
        for k in np.flatnonzero(np.diff(bounds) > 1):
            run = order[bounds[k]:bounds[k + 1]]
            run[:] = run[np.argsort(-scores[run], kind="stable")]
    else:
        img_seq = np.repeat(np.arange(det_lens.shape[0], dtype=np.int64), det_lens)
        pos = np.arange(n, dtype=np.int64) - np.repeat(np.cumsum(det_lens) - det_lens, det_lens)
        order = np.lexsort((pos, img_rank[img_seq], -scores, cat)).astype(np.int32)
        del pos, img_seq
    # each detection's place in its (image, category) run
    new_run = np.ones(n, dtype=bool)
    if n:
        new_run[1:] = cat[1:] != cat[:-1]
        new_run[(np.cumsum(det_lens) - det_lens)[det_lens > 0]] = True
    starts = np.flatnonzero(new_run).astype(np.int32)
    del new_run
    within = np.arange(n, dtype=np.int32) - np.repeat(starts, np.diff(np.r_[starts, n]).astype(np.int64))
    del starts
    return order, within, bounds


def _fewest_tps(npig: np.ndarray) -> np.ndarray:
    """(K, A, R): the fewest true positives ``c`` with ``c / npig >= r`` per category, area range and recall point."""
    c_min = np.zeros((npig.shape[0], npig.shape[1], REC_THRS.shape[0]), dtype=np.int64)
    for k, a in zip(*np.nonzero(npig > 0)):
        n = int(npig[k, a])
        c_min[k, a] = np.searchsorted(np.arange(n + 1) / n, REC_THRS, side="left")
    return c_min


def _interpolated(tp: np.ndarray, fp: np.ndarray, col_start: np.ndarray, c_min: np.ndarray) -> np.ndarray:
    """(rows * C, R): pycocotools' interpolated precision ``q`` of each (row, category) run of ranked flags.

    ``tp``, ``fp`` (rows, columns): true / false positive flags; the columns
    are the ranked detections of C categories one after another, category c
    at ``col_start[c]:col_start[c + 1]``. ``c_min`` (rows * C, R): the true
    positives each recall point needs (see the module docstring). Runs are
    taken row-major (row, then category).
    """
    rows, nd = tp.shape
    n_rec = c_min.shape[1]
    tp_at = np.flatnonzero(tp)  # row * nd + place, sorted: runs in (row, category) order
    fp_at = np.flatnonzero(fp)
    run_lo = (np.arange(rows, dtype=np.int64)[:, None] * nd + col_start[None, :-1]).ravel()
    tp_first = np.searchsorted(tp_at, np.append(run_lo, rows * nd))  # each run's first true positive, and the end
    n_tp = np.diff(tp_first)
    k = np.arange(1, tp_at.shape[0] + 1, dtype=np.int64) - np.repeat(tp_first[:-1], n_tp)  # 1-based, per run
    fp_before = np.searchsorted(fp_at, tp_at) - np.repeat(np.searchsorted(fp_at, run_lo), n_tp)
    tp_sum = k.astype(float)
    # the same expression as pycocotools' tp_sum / (fp_sum + tp_sum + eps), element for element
    pr = tp_sum / (fp_before.astype(float) + tp_sum + np.spacing(1))
    valid = (c_min <= n_tp[:, None]) & (n_tp[:, None] > 0)
    # where each recall point's suffix starts in pr; past the run's end where not reached
    first = tp_first[:-1, None] + np.where(valid, np.maximum(c_min - 1, 0), n_tp[:, None])
    pr_end = np.append(pr, -1.0)  # a segment that starts at the very end reads -1: masked below
    seg = np.maximum.reduceat(pr_end, first.ravel()).reshape(-1, n_rec)
    seg = np.where(valid, seg, -1.0)
    # segment r covers [first_r, first_r+1) (the last one up to the run's end): the envelope is the
    # running maximum of the segments from the end
    q = np.maximum.accumulate(seg[:, ::-1], axis=1)[:, ::-1]
    return np.where(valid, q, 0.0)


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


def accumulate(scores: np.ndarray, cat: np.ndarray, states: np.ndarray, img_rank: np.ndarray,
               det_lens: np.ndarray, npig: np.ndarray, thrs: np.ndarray, max_dets: Sequence[int],
               classwise: bool = False) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pycocotools' ``accumulate``, reduced to what ``summarize`` reads: precision sums, true positives, classwise AP.

    * the interpolated precision summed over the 101 recall points, (T, K, A,
      len(precision_columns)), 0 where a category has no ground truth in an
      area range (pycocotools' -1 cells, never counted);
    * the true positives (T, K, A, M), -1 there; the recall is the count over
      ``npig`` (pycocotools' ``tp_sum[-1] / npig``: an integer over an
      integer, the same floats; :func:`combine_partials`);
    * with ``classwise``, each category's AP (the mean of its precision at
      area 'all' and the largest ``maxDets``, as pycocotools' arrays give it),
      NaN without ground truth; else an empty array.

    Categories are taken a group at a time (consecutive categories of about
    :data:`GROUP_DETECTIONS` detections and at most :data:`GROUP_CATEGORIES` categories
    together, all vectorised), so the
    working memory follows the group, and many small categories cost a few
    large operations, not many small ones. ``scores``, ``cat`` and ``states``
    (each detection's packed (area range, threshold) states,
    :func:`~mmeval.core.packed.trits_to_words`) follow the images' summaries
    in order; ``img_rank`` is each image's place in sorted image-id order,
    ``det_lens`` its detection count, ``npig`` (K, A) the ground truths that
    count. Each category's numbers do not depend on the group it is in.
    """
    n_thr, n_rec = thrs.shape[0], REC_THRS.shape[0]
    k_all, n_rng, n_m = npig.shape[0], npig.shape[1], len(max_dets)
    cols = precision_columns(max_dets)
    n = scores.shape[0]
    order, within, bounds = _ranked(scores, cat, img_rank, det_lens, k_all)
    psum = np.zeros((n_thr, k_all, n_rng, len(cols)))
    tps = np.full((n_thr, k_all, n_rng, n_m), -1, dtype=np.int32)
    ap = np.full(k_all if classwise else 0, np.nan)
    words = -(-n_rng * n_thr // TRITS_PER_WORD)
    states = states.reshape(n, words)
    live_all = npig > 0
    rows = n_rng * n_thr
    for k0, k1 in runs(np.diff(bounds).tolist(), GROUP_DETECTIONS, GROUP_CATEGORIES):
        live = live_all[k0:k1]  # (C, A)
        if not live.any():
            continue
        nc = k1 - k0
        ranked = order[bounds[k0]:bounds[k1]]
        col_start = bounds[k0:k1 + 1] - bounds[k0]
        st = words_to_trits(states[ranked].reshape(-1), ranked.shape[0], rows, flag_major=True)
        tp_g, fp_g = st == TP, st == FP  # (A * T, detections of the group), ranked, category after category
        del st
        rk = within[ranked]
        c_min = None
        for m, max_det in enumerate(max_dets):
            cut = bool(rk.size) and int(rk.max()) >= max_det
            keep = np.flatnonzero(rk < max_det) if cut else None
            tp = tp_g[:, keep] if keep is not None else tp_g
            starts = np.searchsorted(keep, col_start) if keep is not None else col_start
            # true positives per (area, threshold, category): one count per run
            at = np.flatnonzero(tp)
            lo = (np.arange(rows, dtype=np.int64)[:, None] * tp.shape[1] + starts[None, :]).ravel()
            # (each row's last difference spans the row's end to the next row's start: always 0)
            counts = np.diff(np.searchsorted(at, np.append(lo, rows * tp.shape[1]))).reshape(rows, nc + 1)[:, :nc]
            del at
            counts = counts.reshape(n_rng, n_thr, nc).transpose(1, 2, 0)  # (T, C, A)
            tps[:, k0:k1, :, m] = np.where(live[None], counts, -1)
            if m not in cols:
                continue
            if c_min is None:
                c_min = _fewest_tps(npig[k0:k1])  # (C, A, R)
            need = np.broadcast_to(c_min.transpose(1, 0, 2)[:, None], (n_rng, n_thr, nc, n_rec)).reshape(-1, n_rec)
            fp = fp_g[:, keep] if keep is not None else fp_g
            # a few rows at a time for a large group: the positions found take 8 bytes per flag
            step = max(1, INTERPOLATE_CELLS // max(tp.shape[1], nc * n_rec, 1))
            q = np.concatenate([_interpolated(tp[i:i + step], fp[i:i + step], starts, need[i * nc:(i + step) * nc])
                                for i in range(0, rows, step)]).reshape(n_rng, n_thr, nc, n_rec)
            psum[:, k0:k1, :, cols.index(m)] = np.where(live[None], q.sum(axis=3).transpose(1, 2, 0), 0.0)
            if classwise and m == n_m - 1:
                # per category its (T, R) cells at area 'all', every one counted: pycocotools' mean of them
                per = q[0].transpose(1, 0, 2).reshape(nc, n_thr * n_rec).mean(axis=1)
                ap[k0:k1] = np.where(live[:, 0], per, np.nan)
    return psum, tps, ap


class JoinedPart:
    """The parts every rank sent to one rank (:func:`join_parts`), ready to accumulate its categories.

    ``dets_of``: per metric, each image's detection count and the detections'
    scores, categories and state words, the images already in ranking order.
    """

    def __init__(self, rank: int, world_size: int, dets_of: List[Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
                 npig_own: np.ndarray, npig_all: np.ndarray, dets: np.ndarray, duplicate_ids: bool) -> None:
        self.rank, self.world_size = rank, world_size
        self.dets_of = dets_of
        self.npig_own, self.npig_all, self.dets, self.duplicate_ids = npig_own, npig_all, dets, duplicate_ids

    def accumulate(self, metrics: Sequence[str], npig_file: Optional[np.ndarray], thrs: np.ndarray,
                   max_dets: Sequence[int], classwise: bool) -> Dict[str, Any]:
        """Per metric, this rank's categories' precision summed over recall points, recall and classwise AP.

        A metric's categories here are ``k`` with ``k % world_size == rank``
        (``'proposal'`` has one, on rank 0); ``npig_file``: the ground-truth
        counts of an annotation file, else the parts' counts. Runs once: the
        detections are dropped as each metric is done.
        """
        r, ws = self.rank, self.world_size
        out: List[Dict[str, np.ndarray]] = []
        for metric in metrics:
            lens, scores, cats, states = self.dets_of.pop(0)  # their memory goes with this metric's work
            if metric == "proposal":
                total = npig_file.sum(axis=0) if npig_file is not None else self.npig_all
                npig = total[None, :] if r == 0 else np.zeros((0, total.shape[0]), dtype=np.int64)
            elif npig_file is not None:
                npig = npig_file[r::ws]
            else:
                npig = self.npig_own
            local = cats // ws if ws > 1 else cats
            del cats
            psum, tps, cw = accumulate(scores, local, states, np.arange(lens.shape[0]), lens, npig, thrs,
                                       max_dets, classwise)
            del scores, local, states
            # only the cells with ground truth (the others are -1 by definition): what LVIS's many
            # categories without objects in an area range would otherwise send
            live = npig > 0
            count_type = np.uint16 if not tps.size or int(tps.max()) < 65535 else np.int32
            out.append({"npig": npig.astype(np.int64), "psum": psum[:, live],
                        "tp": tps[:, live].astype(count_type), "classwise": cw})
        return {"rank": r, "world_size": ws, "dets": [int(d) for d in self.dets], "metrics": out}


def split_summaries(positions: np.ndarray, img_ids: np.ndarray, has_id: np.ndarray,
                    dets: Sequence[Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], gt_cat: np.ndarray,
                    gt_ig: np.ndarray, k_all: int, world_size: int) -> List[List[np.ndarray]]:
    """One part (a list of arrays) per rank of this rank's image summaries: rank ``r`` gets the categories ``k % ws == r``.

    ``dets``: per metric, each image's detection count, then every
    detection's score, category (``0`` for every one of ``'proposal'``) and
    state words. A part holds the images with a detection there (dataset
    position, image id), their detections of those categories, the
    non-ignored ground-truth counts of those categories (and of all, for
    ``'proposal'``), this rank's detection totals, and for rank 0 every image's
    effective id (to warn of duplicates once).
    """
    n_img, n_rng = positions.shape[0], len(AREA_RANGES)
    npig = np.zeros((k_all, n_rng), dtype=np.int64)
    for a in range(n_rng):
        counted = gt_cat[(gt_ig >> a) & 1 == 0]
        npig[:, a] = np.bincount(counted, minlength=k_all)[:k_all]
    totals = np.array([int(d[0].sum()) for d in dets], dtype=np.int64)
    eff = np.where(has_id, img_ids, positions).astype(np.int64)
    ends = [np.cumsum(d[0], dtype=np.int64) for d in dets]  # each image's end in the detection columns
    parts: List[List[np.ndarray]] = []
    for r in range(world_size):
        chosen = []
        inc = np.zeros(n_img, dtype=bool)
        for (lens, _, cats, _), end in zip(dets, ends):
            mask = None if world_size == 1 else (cats % world_size == r)
            if mask is None:
                counts = lens
            else:  # per image, its detections of rank r's categories (a running count: 4 bytes a detection)
                running = np.concatenate([np.zeros(1, np.int32), np.cumsum(mask, dtype=np.int32)])
                counts = running[end] - running[end - lens]
                del running
            inc |= counts > 0
            chosen.append((mask, counts))
        arrays: List[np.ndarray] = [np.array([r, world_size], dtype=np.int64)]
        arrays += [positions[inc], img_ids[inc].astype(np.int64), has_id[inc].astype(np.uint8)]
        for (_, scores, cats, states), (mask, counts) in zip(dets, chosen):
            n = scores.shape[0]
            words = states.size // n if n else 1
            if mask is None:
                arrays += [counts[inc].astype(np.uint32), scores, cats, states]
            else:
                arrays += [counts[inc].astype(np.uint32), scores[mask], cats[mask],
                           states.reshape(n, words)[mask].reshape(-1)]
        arrays += [npig[r::world_size].reshape(-1), npig.sum(axis=0), totals,
                   eff if r == 0 else np.zeros(0, dtype=np.int64)]
        parts.append(arrays)
    return parts


def join_parts(parts: Sequence[List[Any]], n_metrics: int) -> JoinedPart:
    """The parts every rank sent to this one (:func:`split_summaries`), joined, the images in ranking order.

    Each detection column is written once, straight into its ranked place;
    a part's arrays are dropped from it as soon as they are copied.
    """
    count = 1 + 3 + 4 * n_metrics + 4
    if any(len(p) != count for p in parts):
        raise ValueError(f"COCODetection: a part holds {[len(p) for p in parts]} arrays, not {count} "
                         "(ranks running different versions of mmeval?)")

    def joined(i: int) -> np.ndarray:
        return np.concatenate([np.asarray(p[i]) for p in parts]) if len(parts) > 1 else np.asarray(parts[0][i])

    head = joined(0).reshape(-1, 2)
    pos, ids, has_id = joined(1), joined(2), joined(3).astype(bool)
    # images in sorted image-id order, ties in dataset order: what pycocotools' stable sorts rank by
    order: Optional[np.ndarray] = np.lexsort((pos, np.where(has_id, ids, pos)))
    assert order is not None
    if bool(np.all(order == np.arange(order.shape[0]))):
        order = None  # already so (one process, ids rising with the dataset)
    n_imgs = [len(p[1]) for p in parts]
    dets_of = []
    for j in range(n_metrics):
        c = 4 + 4 * j
        lens = joined(c).astype(np.int64)
        if order is None and len(parts) == 1:
            scores, cats, states = (np.asarray(parts[0][c + i]) for i in (1, 2, 3))
        else:
            ranked = lens if order is None else lens[order]
            start = np.empty_like(lens)  # each image's first place in the ranked columns
            start[order if order is not None else slice(None)] = np.cumsum(ranked) - ranked
            total = int(lens.sum())
            words = max((np.asarray(p[c + 3]).size // len(p[c + 1]) for p in parts if len(p[c + 1])), default=1)
            scores = np.empty(total, dtype=np.result_type(*[np.asarray(p[c + 1]).dtype for p in parts]))
            cats = np.empty(total, dtype=np.result_type(*[np.asarray(p[c + 2]).dtype for p in parts]))
            states = np.empty((total, words), dtype=np.uint64)
            first = 0
            for p, n_img in zip(parts, n_imgs):
                own = lens[first:first + n_img]
                dest = np.repeat(start[first:first + n_img] - (np.cumsum(own) - own), own) + np.arange(
                    int(own.sum()), dtype=np.int64)
                scores[dest] = p[c + 1]
                cats[dest] = p[c + 2]
                states[dest] = np.asarray(p[c + 3]).reshape(-1, words)
                if isinstance(p, list):
                    p[c + 1] = p[c + 2] = p[c + 3] = None  # copied: its memory goes
                first += n_img
            lens = ranked
        dets_of.append((lens, scores, cats, states.reshape(-1)))
    base = 4 + 4 * n_metrics
    n_rng = len(AREA_RANGES)
    npig_own = joined(base).reshape(len(parts), -1, n_rng).sum(axis=0)
    npig_all = joined(base + 1).reshape(len(parts), n_rng).sum(axis=0)
    dets = joined(base + 2).reshape(len(parts), n_metrics).sum(axis=0)  # every rank puts its totals in every part
    world_ids = joined(base + 3)
    duplicate = bool(world_ids.size) and np.unique(world_ids).size != world_ids.size
    return JoinedPart(int(head[0, 0]), int(head[0, 1]), dets_of, npig_own, npig_all, dets, duplicate)


def combine_partials(partials: Sequence[Dict[str, Any]], j: int, k_eff: int
                     ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Metric ``j``'s precision sums (T, K, A, M'), recall (T, K, A, M) and classwise AP (K,) over every rank."""
    first = partials[0]["metrics"][j]
    n_thr, _, n_p = np.shape(first["psum"])
    n_m = np.shape(first["tp"])[2]
    n_rng = len(AREA_RANGES)
    psum = np.zeros((n_thr, k_eff, n_rng, n_p))
    recall = -np.ones((n_thr, k_eff, n_rng, n_m))
    classwise = np.full(k_eff, np.nan)
    for part in partials:
        own = np.arange(int(part["rank"]), k_eff, int(part["world_size"]))
        m = part["metrics"][j]
        npig = np.asarray(m["npig"], dtype=np.int64).reshape(own.shape[0], n_rng)
        kk, aa = np.nonzero(npig > 0)
        psum[:, own[kk], aa, :] = np.asarray(m["psum"]).reshape(n_thr, kk.shape[0], n_p)
        tps = np.asarray(m["tp"]).astype(np.int64).reshape(n_thr, kk.shape[0], n_m)
        recall[:, own[kk], aa, :] = tps / npig[kk, aa][None, :, None]
        if np.size(m["classwise"]):
            classwise[own] = m["classwise"]
    return psum, recall, classwise


def summarize_sums(psum: np.ndarray, recall: np.ndarray, thrs: np.ndarray, max_dets: Sequence[int]) -> np.ndarray:
    """pycocotools' ``summarize`` for detections: the 12 stats (maxDets sorted, as ``evaluate`` sorts them).

    ``psum``: the precision summed over the recall points (T, K, A, M' of
    :func:`precision_columns`); a cell counts where its recall is not -1 (a
    category with ground truth in the area range), as in pycocotools. AP is
    the sum of the counted cells over their number times the recall points
    (pycocotools' mean of the same numbers, to a few ulps); AR is
    pycocotools' own expression.
    """
    cols = precision_columns(max_dets)
    n_rec = REC_THRS.shape[0]

    def one(ap: bool, iou_thr: Optional[float] = None, area: str = "all", max_det: int = 100) -> float:
        aind = [i for i, lbl in enumerate(AREA_LABELS) if lbl == area]
        mind = [i for i, m in enumerate(max_dets) if m == max_det]
        t_sel = np.where(iou_thr == thrs)[0] if iou_thr is not None else np.arange(thrs.shape[0])
        r = recall[t_sel][:, :, aind][:, :, :, mind]
        if not ap:
            return -1.0 if len(r[r > -1]) == 0 else float(np.mean(r[r > -1]))
        s = psum[t_sel][:, :, aind][:, :, :, [cols.index(i) for i in mind]]
        counted = r > -1
        n = int(counted.sum()) * n_rec
        return -1.0 if n == 0 else float(s[counted].sum() / n)

    m = max_dets
    return np.array([
        one(True), one(True, .5, max_det=m[2]), one(True, .75, max_det=m[2]),
        one(True, area="small", max_det=m[2]), one(True, area="medium", max_det=m[2]),
        one(True, area="large", max_det=m[2]),
        one(False, max_det=m[0]), one(False, max_det=m[1]), one(False, max_det=m[2]),
        one(False, area="small", max_det=m[2]), one(False, area="medium", max_det=m[2]),
        one(False, area="large", max_det=m[2]),
    ])
