"""COCODetection's matching, on the rank that holds the images: pycocotools' ``evaluateImg`` for many
images at once, each image's detections turned into scores, categories and packed state words."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..core.packed import TRITS_PER_WORD, trits_to_words
from .coco_accumulate import AREA_RANGES, FP, IGNORED, TP
from .coco_inputs import Categories, ImageInputs, ignore_bits, outside_area_range
from .coco_mask_runs import BatchRuns
from .coco_native import kernels
from .extras import import_extra


def _box_iou_pairs(d: np.ndarray, g: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    """pycocotools' ``bbIou`` for pairs of xywh boxes, operation for operation (the same float64 results)."""
    da = d[:, 2] * d[:, 3]
    ga = g[:, 2] * g[:, 3]
    w = np.minimum(d[:, 2] + d[:, 0], g[:, 2] + g[:, 0]) - np.maximum(d[:, 0], g[:, 0])
    h = np.minimum(d[:, 3] + d[:, 1], g[:, 3] + g[:, 1]) - np.maximum(d[:, 1], g[:, 1])
    i = w * h
    u = np.where(crowd, da, da + ga - i)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = i / u
    return np.where((w > 0) & (h > 0), o, 0.0)


def match_images(
    images: List[ImageInputs], metric: str, cats: Categories, thrs: np.ndarray, max_det: int
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Match ``images`` for one metric: the kept detections' scores, categories and state words (each
    detection's words one after another), image after image in summary order, and each image's count.

    Detections are kept per (image, category) -- per image for ``'proposal'`` --
    sorted by score (stable), the first ``max_det`` of each; ground truths in
    their given order. The greedy matching is pycocotools' ``evaluateImg``,
    run for every (IoU threshold, area range) at once over many groups.
    """
    use_cats = metric != "proposal"
    segm = metric == "segm"
    n_img = len(images)
    n_det = np.array([im.det_labels.shape[0] for im in images], dtype=np.int64)
    n_gt = np.array([im.gts.labels.shape[0] for im in images], dtype=np.int64)
    d_img = np.repeat(np.arange(n_img), n_det)
    g_img = np.repeat(np.arange(n_img), n_gt)
    d_lab = np.concatenate([im.det_labels for im in images]) if n_img else np.zeros(0, np.int64)
    g_lab = np.concatenate([im.gts.labels for im in images]) if n_img else np.zeros(0, np.int64)
    d_score = np.concatenate([im.seg_scores if segm and im.seg_scores is not None else im.scores for im in images])
    d_box = np.concatenate([im.xywh for im in images]).reshape(-1, 4)
    g_box = np.concatenate([im.gts.xywh for im in images]).reshape(-1, 4)
    g_area = np.concatenate([im.gts.area for im in images])
    g_crowd = np.concatenate([im.gts.crowd for im in images])
    g_idnz = np.concatenate([im.gts.idnz for im in images])
    k_total = len(cats.ids)
    # groups: (image, category) with use_cats, else the image; pycocotools' orders within them
    native = kernels()
    if use_cats:
        d_key = d_img * k_total + cats.kpos[d_lab]
        g_key = g_img * k_total + cats.kpos[g_lab]
        d_order = None if native is not None else np.lexsort((_local(n_det), -d_score, d_key))
        g_order = np.argsort(g_key, kind="stable")
    else:
        d_key, g_key = d_img, g_img
        d_order = np.lexsort((_local(n_det), d_lab, -d_score, d_key))
        g_order = np.lexsort((np.arange(g_key.shape[0]), g_lab, g_key))
    if d_order is None and native is not None:  # the same order and cut by mmeval-coco-native, in one pass
        kept = np.empty(d_key.shape[0], dtype=np.int64)
        c = np.ascontiguousarray
        kept = kept[: native.kept(c(d_key, dtype=np.int64), c(d_score, dtype=np.float64), max_det, kept)]
    else:
        assert d_order is not None
        d_key_s = d_key[d_order]
        starts = np.flatnonzero(np.r_[True, d_key_s[1:] != d_key_s[:-1]]) if d_key_s.size else np.zeros(0, np.int64)
        run = np.repeat(starts, np.diff(np.r_[starts, d_key_s.size]))
        rank = np.arange(d_key_s.size) - run
        kept = d_order[rank < max_det]  # detections kept, in (group, score) order
    d_key_k = d_key[kept]
    g_sorted = g_order
    g_key_s = g_key[g_sorted]
    # detection areas and outside flags
    masks = _native_masks(native, images) if native is not None and segm else None
    if masks is not None:
        d_area = masks[4][kept]
    elif segm:
        mask = import_extra("pycocotools.mask", "COCODetection")
        all_rles = [r for im in images for r in (im.det_rles or [])]
        # one call per mask: pycocotools' area() of a list of masks overflows (a uint8 result) past 255 pixels
        d_area = np.array([float(mask.area(all_rles[i])) for i in kept], dtype=np.float64)
    else:
        d_area = d_box[kept, 2] * d_box[kept, 3]
    d_out = outside_area_range(d_area)  # (n, A)
    n_thr, n_rng = thrs.shape[0], len(AREA_RANGES)
    # pairs (detection, ground truth) of the same group
    lo = np.searchsorted(g_key_s, d_key_k, "left")
    cnt = np.searchsorted(g_key_s, d_key_k, "right") - lo
    iou = None
    n_pairs = int(cnt.sum())
    if native is not None and segm and n_pairs:  # the mask IoU (pycocotools' where sizes differ), then the matching
        p_det = np.repeat(np.arange(kept.shape[0]), cnt)
        p_gt = g_sorted[np.repeat(lo - (np.cumsum(cnt) - cnt), cnt) + np.arange(n_pairs)]
        a, b = kept[p_det], d_img.shape[0] + p_gt
        if masks is not None and np.array_equal(masks[5][a], masks[5][b]):
            iou = np.empty(a.shape[0])
            parts, part, start, end, area, _ = masks
            native.rle_iou_parts(parts, part, start, end, area, a, b, g_crowd[p_gt].astype(np.uint8), iou)
        else:
            iou = _mask_iou_pairs(images, kept, p_det, p_gt, n_det, n_gt)
    if native is not None:
        words = _native_words(
            native, d_key_k, d_box[kept], g_key_s, g_sorted, g_box, g_area, g_crowd, g_idnz, d_out, thrs, iou
        )
    else:
        matched = np.zeros((kept.shape[0], n_thr, n_rng), dtype=bool)
        to_ignored = np.zeros_like(matched)
        to_zero_id = np.zeros_like(matched)
        if n_pairs:
            p_det = np.repeat(np.arange(kept.shape[0]), cnt)
            p_slot = np.arange(p_det.shape[0]) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            p_gt = g_sorted[np.repeat(lo, cnt) + p_slot]
            if segm:
                iou = _mask_iou_pairs(images, kept, p_det, p_gt, n_det, n_gt)
            else:
                iou = _box_iou_pairs(d_box[kept[p_det]], g_box[p_gt], g_crowd[p_gt])
            _greedy(
                iou, p_det, p_slot, p_gt, cnt, d_key_k, g_area, g_crowd, g_idnz, thrs, matched, to_ignored, to_zero_id
            )
        words = _states(matched, to_ignored, to_zero_id, d_out)
    small = len(cats.ids) <= 255
    d_cat = (cats.kpos[d_lab[kept]] if use_cats else np.zeros(kept.shape[0], np.int64)).astype(
        np.uint8 if small else np.uint16
    )
    scores = d_score[kept]
    if scores.size and np.array_equal(scores.astype(np.float32).astype(np.float64), scores):
        scores = scores.astype(np.float32)  # exact: 4 bytes a detection instead of 8
    # kept detections are in image order already (the group key starts with the image)
    return scores, d_cat, words, np.bincount(d_img[kept], minlength=n_img)


def _local(n_det: np.ndarray) -> np.ndarray:
    """Each detection's index within its image, the images' ``n_det`` detections one after another."""
    local: np.ndarray = np.arange(int(n_det.sum())) - np.repeat(np.cumsum(n_det) - n_det, n_det)
    return local


def _states(matched: np.ndarray, to_ignored: np.ndarray, to_zero_id: np.ndarray, d_out: np.ndarray) -> np.ndarray:
    """Each detection's packed (area range, threshold) states (trit ``a * T + t``) from the (n, T, A) flags."""
    matched, to_ignored, to_zero_id = (x.transpose(0, 2, 1) for x in (matched, to_ignored, to_zero_id))
    effective = matched & ~to_zero_id
    ignored = (matched & to_ignored) | (~effective & d_out[:, :, None])
    state = np.full(matched.shape, FP, dtype=np.uint8)
    state[effective] = TP
    state[ignored] = IGNORED
    # the width written out: reshape(0, -1) of no detection has no size to infer -1 from
    return trits_to_words(state.reshape(matched.shape[0], matched.shape[1] * matched.shape[2]))


def _native_words(
    native: Any,
    d_key: np.ndarray,
    d_box: np.ndarray,
    g_key_s: np.ndarray,
    g_sorted: np.ndarray,
    g_box: np.ndarray,
    g_area: np.ndarray,
    g_crowd: np.ndarray,
    g_idnz: np.ndarray,
    d_out: np.ndarray,
    thrs: np.ndarray,
    iou: Optional[np.ndarray] = None,
) -> np.ndarray:
    """:func:`_states`' words from mmeval-coco-native's matching: the box IoU computed there, or ``iou`` given
    per (detection, ground truth of its group) pair in the pure path's pair order."""
    n, n_rng = d_out.shape[0], len(AREA_RANGES)
    words = np.zeros(n * -(-n_rng * thrs.shape[0] // TRITS_PER_WORD), dtype=np.uint64)
    c = np.ascontiguousarray
    native.match(
        c(d_key, dtype=np.int64),
        c(d_box, dtype=np.float64),
        c(g_key_s, dtype=np.int64),
        c(g_box[g_sorted], dtype=np.float64),
        c(g_crowd[g_sorted], dtype=np.uint8),
        c(ignore_bits(g_area, g_crowd)[g_sorted], dtype=np.uint8),
        c(g_idnz[g_sorted], dtype=np.uint8),
        c(d_out, dtype=np.uint8),
        c(np.minimum(thrs, 1 - 1e-10), dtype=np.float64),
        n_rng,
        None if iou is None else c(iou, dtype=np.float64),
        words,
    )
    return words


#: masks of many lists, their runs left in the lists' buffers: (those buffers (uint32 runs), each mask's buffer,
#: first run and end there (int64), areas as pycocotools' ``area`` (float64), height * 2**32 + width (int64))
PartsRuns = Tuple[List[np.ndarray], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _native_masks(native: Any, images: List[ImageInputs]) -> Optional[PartsRuns]:
    """Every detection's then every ground truth's mask of ``images`` decoded by mmeval-coco-native
    (:data:`PartsRuns`); None unless every mask is a compressed RLE (then pycocotools' own calls do it).

    The images' lists decoded at ``add()`` lie one after another in their batch's :class:`.BatchRuns`: they are
    joined as ranges of those (a few per batch), not list by list."""
    pieces = [(im.det_rles, im.det_runs) for im in images] + [(im.gts.rles, im.gts.runs) for im in images]
    batches: List[BatchRuns] = []
    index: Dict[int, int] = {}  # id of a batch -> its place in batches
    ranges: List[List[int]] = []  # [batch's place, first mask, end]: runs of consecutive masks of one batch
    for rles, runs in pieces:
        if runs is None:
            if not rles:
                continue
            # (polygons, arrays or list-of-counts RLEs given: pycocotools made these dicts at add())
            decoded = native.rle_decode_masks(list(rles))
            if decoded is None:  # not every mask a compressed RLE
                return None
            r, starts, area, hw = decoded
            runs = BatchRuns.one_list(r, starts, area, hw, len(rles))
        if runs.m1 == runs.m0:
            continue
        b = runs.batch
        if ranges and batches[ranges[-1][0]] is b and ranges[-1][2] == runs.m0:
            ranges[-1][2] = runs.m1  # the next list of the same batch
            continue
        if id(b) not in index:
            index[id(b)] = len(batches)
            batches.append(b)
        ranges.append([index[id(b)], runs.m0, runs.m1])
    if not ranges:
        return (
            [],
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0),
            np.zeros(0, np.int64),
        )
    part = np.repeat(np.array([r[0] for r in ranges], dtype=np.int64), [r[2] - r[1] for r in ranges])
    start, end, area, hw = (
        np.concatenate([getattr(batches[k], name)[m0:m1] for k, m0, m1 in ranges])
        for name in ("start", "end", "area", "hw")
    )
    return [np.ascontiguousarray(b.runs, dtype=np.uint32) for b in batches], part, start, end, area, hw


def _mask_iou_pairs(
    images: List[ImageInputs],
    kept: np.ndarray,
    p_det: np.ndarray,
    p_gt: np.ndarray,
    n_det: np.ndarray,
    n_gt: np.ndarray,
) -> np.ndarray:
    """pycocotools' mask IoU (crowd rule included) of each (detection, ground truth) pair, one call per image."""
    mask = import_extra("pycocotools.mask", "COCODetection")
    det_start = np.cumsum(n_det) - n_det
    gt_start = np.cumsum(n_gt) - n_gt
    d_glob = kept[p_det]
    img = np.searchsorted(det_start, d_glob, "right") - 1
    out = np.zeros(p_det.shape[0], dtype=np.float64)
    order = np.argsort(img, kind="stable")
    bounds = np.flatnonzero(np.r_[True, img[order][1:] != img[order][:-1], True])
    for s, e in zip(bounds[:-1], bounds[1:]):
        sel = order[s:e]
        i = int(img[sel[0]])
        im = images[i]
        assert im.det_rles is not None and im.gts.rles is not None
        dl = d_glob[sel] - det_start[i]
        gl = p_gt[sel] - gt_start[i]
        ud, dinv = np.unique(dl, return_inverse=True)
        ug, ginv = np.unique(gl, return_inverse=True)
        m = mask.iou([im.det_rles[j] for j in ud], [im.gts.rles[j] for j in ug], [int(im.gts.crowd[j]) for j in ug])
        out[sel] = np.asarray(m, dtype=np.float64).reshape(len(ud), len(ug))[dinv, ginv]
    return out


def _greedy(
    iou: np.ndarray,
    p_det: np.ndarray,
    p_slot: np.ndarray,
    p_gt: np.ndarray,
    cnt: np.ndarray,
    d_key: np.ndarray,
    g_area: np.ndarray,
    g_crowd: np.ndarray,
    g_idnz: np.ndarray,
    thrs: np.ndarray,
    matched: np.ndarray,
    to_ignored: np.ndarray,
    to_zero_id: np.ndarray,
) -> None:
    """pycocotools' greedy matching, every (threshold, area range) at once, over groups bucketed by size.

    A detection (by score) takes, among the ground truths of its group not yet
    taken (crowd ones stay available) with IoU >= min(t, 1 - 1e-10): the
    non-ignored one of largest IoU (the last on ties), else the ignored one of
    largest IoU (the last on ties).
    """
    n_thr, n_rng = thrs.shape[0], len(AREA_RANGES)
    thr = np.minimum(thrs, 1 - 1e-10)
    # only the detections with some candidate matter; groups = runs of equal d_key among them
    has = np.zeros(cnt.shape[0], dtype=bool)
    np.logical_or.at(has, p_det, iou >= thr.min())
    dets = np.flatnonzero(has)
    if not dets.size:
        return
    gkey = d_key[dets]
    gstart = np.flatnonzero(np.r_[True, gkey[1:] != gkey[:-1]])
    gsize = np.diff(np.r_[gstart, dets.size])
    group_of = np.repeat(np.arange(gstart.size), gsize)
    step_of = np.arange(dets.size) - np.repeat(gstart, gsize)
    n_g = cnt[dets[gstart]]  # ground truths per group
    # ground-truth attributes per group slot
    first_pair = np.cumsum(cnt) - cnt
    ig_all = ignore_bits(g_area, g_crowd)
    pad = 1
    while pad < int(n_g.max()):
        pad *= 2
    buckets = np.minimum(np.ceil(np.log2(np.maximum(n_g, 1))).astype(np.int64), int(np.log2(pad)))
    for bk in np.unique(buckets):
        gsel = np.flatnonzero(buckets == bk)
        width = 1 << int(bk)
        order = gsel[np.argsort(-gsize[gsel], kind="stable")]  # most steps first: active groups are a prefix
        nb = order.shape[0]
        slot = np.empty(gstart.size, dtype=np.int64)
        slot[order] = np.arange(nb)
        steps = int(gsize[order[0]])
        table = np.full((nb, steps, width), -1.0)
        sel = np.isin(group_of, order)
        dsel = dets[sel]
        for_pairs = np.repeat(first_pair[dsel], cnt[dsel]) + (
            np.arange(cnt[dsel].sum()) - np.repeat(np.cumsum(cnt[dsel]) - cnt[dsel], cnt[dsel])
        )
        rows = slot[group_of[sel]]
        table[np.repeat(rows, cnt[dsel]), np.repeat(step_of[sel], cnt[dsel]), p_slot[for_pairs]] = iou[for_pairs]
        # ground truths of each group (the first detection's pairs list them all, in order)
        first = dets[gstart[order]]
        gt_ids = np.full((nb, width), -1, dtype=np.int64)
        rr = np.repeat(np.arange(nb), cnt[first])
        ss = np.arange(rr.shape[0]) - np.repeat(np.cumsum(cnt[first]) - cnt[first], cnt[first])
        gt_ids[rr, ss] = p_gt[np.repeat(first_pair[first], cnt[first]) + ss]
        real = gt_ids >= 0
        safe = np.where(real, gt_ids, 0)
        crowd = g_crowd[safe] & real  # (nb, W)
        ig = ((ig_all[safe][:, None, :] >> np.arange(n_rng)[None, :, None]) & 1).astype(bool)  # (nb, A, W)
        taken = np.zeros((nb, n_thr, n_rng, width), dtype=bool)
        sizes = gsize[order]
        for s in range(steps):
            n = int(np.count_nonzero(sizes > s))
            v = table[:n, s, :]  # (n, W)
            ok = (v[:, None, :] >= thr[None, :, None])[:, :, None, :]  # (n, T, 1, W)
            cand = ok & (~taken[:n] | crowd[:n, None, None, :])  # (n, T, A, W)
            igs = ig[:n, None, :, :]
            vv = v[:, None, None, :]
            reg = cand & ~igs
            score_reg = np.where(reg, vv, -1.0)[..., ::-1]
            m_reg = width - 1 - score_reg.argmax(axis=-1)
            has_reg = reg.any(axis=-1)
            ign = cand & igs
            score_ig = np.where(ign, vv, -1.0)[..., ::-1]
            m_ig = width - 1 - score_ig.argmax(axis=-1)
            has_ig = ign.any(axis=-1)
            m = np.where(has_reg, m_reg, m_ig)  # (n, T, A)
            got = has_reg | has_ig
            bi, ti, ai = np.nonzero(got)
            taken[bi, ti, ai, m[bi, ti, ai]] = True
            det_rows = dets[gstart[order[:n]] + s]
            matched[det_rows] = got
            to_ignored[det_rows] = got & ~has_reg
            gid = gt_ids[np.arange(n)[:, None, None], m]
            to_zero_id[det_rows] = got & ~g_idnz[np.where(gid >= 0, gid, 0)]


# -- accumulate and summarize on the computing rank ---------------------------------------------
