"""COCODetection's batched input reading: a whole ``add()`` of plain numpy arrays checked and converted at once.

:func:`read_images` gives what :func:`.coco_inputs.read_image` gives image by
image (the same records, the same errors): where every image of the batch is
dicts of plain numpy arrays of the expected shapes and int (or None) ids, and
no annotation file is given, their numbers are checked and converted in one
pass over the batch (:func:`_read_plain`); any other batch, or one where a
check fails, is read image by image, which names the first bad image and field. With mmeval-coco-native
that pass is one C call (``read_plain``), and the batch's compressed RLE masks are checked and decoded in one
call (:func:`_decoded_masks`), kept as runs.
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..core.errors import MetricArgumentError
from .coco_inputs import (
    Annotations,
    Categories,
    GroundTruths,
    ImageInputs,
    read_image,
    read_masks,
    read_masks_and_areas,
    rle_mask_areas,
    to_xywh,
)
from .coco_mask_runs import BatchRuns, DecodedMasks, MaskRuns
from .coco_native import kernels
from .extras import import_extra

__all__ = ["read_images"]


#: numpy dtypes the batched reading takes as they are (native byte order); anything else goes image by image
_PLAIN = frozenset(np.dtype(d) for d in ("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"))


def _plain(value: Any, ndim: int) -> bool:
    return type(value) is np.ndarray and value.ndim == ndim and value.dtype in _PLAIN


def _plain_id(value: Any) -> bool:
    return value is None or type(value) is int or isinstance(value, np.integer)


def read_images(
    preds: Sequence[Any],
    gts: Sequence[Any],
    cats: Categories,
    metrics: Sequence[str],
    ann: Optional[Annotations],
    ann_file: Any,
    gt_mask_area: bool,
    keep_records: bool,
) -> List[ImageInputs]:
    """Every image of an ``add()`` as :func:`read_image` reads it (the same records, the same errors).

    Images of plain numpy arrays without ``ann``: their numbers checked and converted all at once
    (:func:`_read_plain`); any other batch, or one that fails a check, image by image with
    :func:`read_image`, which names the first bad image and field."""
    images = _read_plain(preds, gts, cats, metrics, gt_mask_area, keep_records) if ann is None else None
    if images is not None:
        return images
    return [
        read_image(p, g, i, cats, metrics, ann, ann_file, gt_mask_area, keep_records)
        for i, (p, g) in enumerate(zip(preds, gts))
    ]


def _read_plain(
    preds: Sequence[Any],
    gts: Sequence[Any],
    cats: Categories,
    metrics: Sequence[str],
    gt_mask_area: bool,
    keep_records: bool,
) -> Optional[List[ImageInputs]]:
    """:func:`read_image` of every image at once, where each image is dicts of plain numpy arrays of the
    expected shapes and int (or None) ids; None for any other batch, or where a check fails. The fields are
    joined by mmeval-coco-native's ``read_plain`` in one call where it is installed, else by :func:`_joined`
    (the same arrays, bit for bit: test_coco_native.py); where the kernel says None, :func:`_joined` decides."""
    segm = "segm" in metrics
    native = kernels()
    plain = (
        native.read_plain(preds, gts, np.ndarray, np.integer, len(cats.ids), segm)
        if native is not None and hasattr(native, "read_plain")
        else None
    )
    joined = _joined(preds, gts, cats, segm) if plain is None else _native_joined(plain)
    if joined is None:
        return None
    xywh, scores, labels_i, mscores, gxywh, glabels_i, crowd, garea, d_at, g_at, ids, has_ms, masks = joined
    idnz = np.ones(g_at[-1], dtype=bool)
    decoded = _decoded_masks(masks, d_at, g_at, segm) if not keep_records else None
    out: List[ImageInputs] = []
    for i, (p, g) in enumerate(zip(preds, gts)):
        d0, d1, g0, g1 = d_at[i], d_at[i + 1], g_at[i], g_at[i + 1]
        det_rles: Optional[Sequence[Any]] = None
        det_runs: Optional[MaskRuns] = None
        rles: Optional[Sequence[Any]] = None
        runs, area = None, garea[g0:g1]
        try:
            if decoded is not None:  # every mask of the batch decoded at once
                det_runs, runs = decoded[i], decoded[len(preds) + i]
                det_rles = DecodedMasks(det_runs) if det_runs is not None else None
                rles = DecodedMasks(runs) if runs is not None else None
                if gt_mask_area and runs is not None and g1 > g0:
                    area = runs.area
            else:
                if segm:
                    det_rles, det_runs = read_masks(p["masks"], f"predictions[{i}]['masks']", d1 - d0, None)
                if "masks" in g and g["masks"] is not None:
                    hw = (g.get("height"), g.get("width"))
                    rles, areas, runs = read_masks_and_areas(g["masks"], f"groundtruths[{i}]['masks']", g1 - g0, hw)
                    if gt_mask_area and g1 > g0:
                        area = areas if areas is not None else rle_mask_areas(rles)
                elif segm and g1 > g0:
                    return None
        except MetricArgumentError:
            return None  # named by read_image, in its order of the checks
        seg_scores = mscores[d0:d1] if mscores is not None and has_ms[i] else None
        x, sc, lb = xywh[d0:d1], scores[d0:d1], labels_i[d0:d1]
        gt = GroundTruths(gxywh[g0:g1], glabels_i[g0:g1], area, crowd[g0:g1], idnz[g0:g1], rles, runs)
        records = (x, sc, lb, seg_scores, det_rles) if keep_records else None
        out.append(ImageInputs(ids[i], x, sc, lb, seg_scores, det_rles, gt, records, det_runs))
    return out


#: a batch's fields joined (see :func:`_joined`)
Joined = Tuple[
    np.ndarray,
    np.ndarray,
    np.ndarray,
    Optional[np.ndarray],
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    List[int],
    List[int],
    List[Optional[int]],
    Sequence[int],
    Tuple[List[Any], List[Any]],
]


def _joined(preds: Sequence[Any], gts: Sequence[Any], cats: Categories, segm: bool) -> Optional[Joined]:
    """The batch's fields joined where every image is plain (see :func:`_read_plain`), else None: the detections'
    xywh boxes, scores, labels (int64), mask scores (the scores where not given; None without segm), the ground
    truths' xywh boxes, labels, crowd flags (ignore flag != 0), box areas; each image's first detection and
    ground truth (and the totals), its id, whether it gave mask scores, and its detections' masks (None without
    segm) and its ground truths' (``g.get('masks')``). mmeval-coco-native's ``read_plain`` gives the same
    (:func:`_native_joined`)."""
    # the detections' boxes, scores, labels, mask scores; the ground truths' boxes, labels, ignore flags
    fields: List[List[np.ndarray]] = [[] for _ in range(7)]
    d_box, d_score, d_label, d_mscore, g_box, g_label, g_flag = fields
    ids: List[Optional[int]] = []
    b: Any
    s: Any
    lab: Any
    gb: Any
    gl: Any
    flags: Any
    ms: Any
    for p, g in zip(preds, gts):
        if type(p) is not dict or type(g) is not dict:
            return None
        b, s, lab, gb, gl = p.get("bboxes"), p.get("scores"), p.get("labels"), g.get("bboxes"), g.get("labels")
        if not (_plain(b, 2) and _plain(s, 1) and _plain(lab, 1) and _plain(gb, 2) and _plain(gl, 1)):
            return None
        k, m = b.shape[0], gb.shape[0]
        if b.shape[1] != 4 or s.shape[0] != k or lab.shape[0] != k or gb.shape[1] != 4 or gl.shape[0] != m:
            return None
        flags = g.get("ignore_flags", None) if "ignore_flags" in g else np.zeros(m, dtype=np.int8)
        if not _plain(flags, 1) or flags.shape[0] != m:
            return None
        pid, gid = p.get("img_id"), g.get("img_id")
        if not (_plain_id(pid) and _plain_id(gid)) or (pid is not None and gid is not None and pid != gid):
            return None
        if segm:
            ms = p.get("mask_scores", s)
            if "masks" not in p or not _plain(ms, 1) or ms.shape[0] != k:
                return None
            d_mscore.append(ms)
        ids.append(int(gid) if gid is not None else None if pid is None else int(pid))
        d_box.append(b)
        d_score.append(s)
        d_label.append(lab)
        g_box.append(gb)
        g_label.append(gl)
        g_flag.append(flags)
    n_cls = len(cats.ids)
    joined = [np.concatenate(f, dtype=np.float64) if f else np.zeros(0) for f in fields]
    boxes, scores, labels, mscores, gboxes, glabels, gflags = joined
    if not all(np.isfinite(a).all() for a in joined):
        return None
    for lab in (labels, glabels):
        if ((lab != np.floor(lab)) | (lab < 0) | (lab >= n_cls)).any():
            return None
    d_at = list(accumulate([a.shape[0] for a in d_score], initial=0))
    g_at = list(accumulate([a.shape[0] for a in g_label], initial=0))
    xywh, gxywh = to_xywh(boxes.reshape(-1, 4)), to_xywh(gboxes.reshape(-1, 4))
    has_ms = [int(segm and "mask_scores" in p) for p in preds]
    masks = ([p["masks"] if segm else None for p in preds], [g.get("masks") for g in gts])
    return (
        xywh,
        scores,
        labels.astype(np.int64),
        mscores if segm else None,
        gxywh,
        glabels.astype(np.int64),
        gflags != 0,
        gxywh[:, 2] * gxywh[:, 3],
        d_at,
        g_at,
        ids,
        has_ms,
        masks,
    )


def _native_joined(got: Tuple[Any, ...]) -> Joined:
    """:func:`_joined` of mmeval-coco-native's ``read_plain`` (its bytearrays read in place: writable)."""
    xywh, scores, labels, mscores, gxywh, glabels, crowd, garea, d_at, g_at, ids, has_ms, dmasks, gmasks = got
    f8 = np.float64
    return (
        np.frombuffer(xywh, f8).reshape(-1, 4),
        np.frombuffer(scores, f8),
        np.frombuffer(labels, np.int64),
        None if mscores is None else np.frombuffer(mscores, f8),
        np.frombuffer(gxywh, f8).reshape(-1, 4),
        np.frombuffer(glabels, np.int64),
        np.frombuffer(crowd, np.bool_),
        np.frombuffer(garea, f8),
        d_at,
        g_at,
        ids,
        has_ms,
        (dmasks, gmasks),
    )


def _decoded_masks(
    masks: Tuple[List[Any], List[Any]], d_at: List[int], g_at: List[int], segm: bool
) -> Optional[List[Optional[MaskRuns]]]:
    """Every image's detection masks, then every image's ground-truth masks, decoded by mmeval-coco-native in
    one call (:data:`MaskRuns` each; None for an image's ground truths without masks), where each is a list of
    compressed RLE dicts of the right length that the kernels' check of :func:`.coco_inputs.read_masks` surely
    passes; None otherwise (the batch's masks are then read list by list, which names a bad one)."""
    native = kernels()
    if native is None or not hasattr(native, "rle_lists_runs"):
        return None
    # (masks, their number, whether they are needed): each image's detections', then its ground truths'
    dets, gts = masks
    sides = [(m, d_at[i + 1] - d_at[i], segm) for i, m in enumerate(dets)]
    sides += [(m, g_at[i + 1] - g_at[i], segm and g_at[i + 1] > g_at[i]) for i, m in enumerate(gts)]
    lists: List[Any] = []
    where: List[int] = []  # the list of each (image, side) in lists, or -1: no masks
    for masks, n, needed in sides:
        if masks is None:
            if needed:
                return None
            where.append(-1)
        elif type(masks) not in (list, tuple) or len(masks) != n:
            return None
        else:
            where.append(len(lists))
            lists.append(masks)
    if not lists:
        return [None] * len(where)
    import_extra("pycocotools.mask", "COCODetection")  # masks need the coco extra, whoever decodes them
    got = native.rle_lists_runs(lists)
    if got is None:
        return None
    runs, offsets, areas, hw, starts = got
    sizes = [len(x) for x in lists]
    m_at = list(accumulate(sizes, initial=0))
    n = m_at[-1]
    # each list's offsets count from its first run (n_l + 1 of them, list l's from index m_at[l] + l): as bounds
    # into the batch's one buffer of runs
    of_list = np.repeat(np.arange(len(lists)), sizes)
    off, first = np.frombuffer(offsets, np.int64), np.frombuffer(starts, dtype=np.int64)[of_list]
    at = np.arange(n) + of_list
    start, end = first + off[at], first + off[at + 1]
    batch = BatchRuns(
        np.frombuffer(runs, dtype=np.uint32), start, end, np.frombuffer(areas)[:n], np.frombuffer(hw, np.int64)[:n]
    )
    return [MaskRuns(batch, m_at[w], m_at[w + 1]) if w >= 0 else None for w in where]
