"""COCODetection's per-image summaries: packed on the rank that matched the image, read back at ``compute()``.

:func:`summarize_images` matches images in slices (:mod:`.coco_matching`) and
packs each one's summary (:mod:`mmeval.core.packed`): its meta (``img_id``,
whether it has one), per metric the detections' scores, categories and
state words, and the ground truths' categories and area-range ignore bits.
:func:`partition_summaries` reads those columns back, one at a time, and
splits them by category owner (:func:`.coco_parts.split_summaries`).
"""

from __future__ import annotations

from functools import partial
from typing import Any, List, Optional, Sequence

import numpy as np

from ..core.packed import TRITS_PER_WORD, PackedColumns, pack_many, summary_digests
from .coco_accumulate import AREA_RANGES, runs
from .coco_inputs import Categories, ImageInputs, ignore_bits, image_records
from .coco_matching import match_images
from .coco_native import kernels
from .coco_parts import split_summaries

__all__ = ["partition_summaries", "summarize_images"]


def summarize_images(
    images: List[ImageInputs],
    metrics: Sequence[str],
    cats: Categories,
    with_ann: bool,
    iou_thrs: np.ndarray,
    max_det: int,
    format_only: bool,
    match_slice: int,
) -> List[Any]:
    """Match every image of ``images`` and pack each one's summary (``(summary, records)`` where the image
    keeps its records for the result files); ``match_slice`` detections are matched at once.

    ``with_ann``: the ground truths come from an annotation file (their counts too: none are packed)."""
    if format_only:
        return [(None, image_records(im)) for im in images]
    small = len(cats.ids) <= 255
    meta = np.array([[im.img_id or 0, im.img_id is not None] for im in images], dtype=np.int64).reshape(-1, 2)
    n_gt = np.array([im.gts.labels.shape[0] if not with_ann else 0 for im in images], dtype=np.int64)
    gt_at = np.r_[0, np.cumsum(n_gt)]
    if not with_ann and images:  # every image's ground-truth categories and ignore bits at once
        all_cat = cats.kpos[np.concatenate([im.gts.labels for im in images])].astype(np.uint8 if small else np.uint16)
        all_ig = ignore_bits(
            np.concatenate([im.gts.area for im in images]), np.concatenate([im.gts.crowd for im in images])
        )
    else:
        all_cat, all_ig = np.zeros(0, np.uint8), np.zeros(0, np.uint8)
    words_per_det = -(-len(AREA_RANGES) * iou_thrs.shape[0] // TRITS_PER_WORD)
    out: List[Any] = []
    native = kernels()
    for lo, hi in runs([im.det_labels.shape[0] for im in images], match_slice):
        columns, lengths = [meta[lo:hi]], [np.full(hi - lo, 2, dtype=np.int64)]
        for metric in metrics:
            scores, d_cat, words, per_img = match_images(images[lo:hi], metric, cats, iou_thrs, max_det)
            columns += [scores, d_cat, words]
            lengths += [per_img, per_img, per_img * words_per_det]
        columns += [all_cat[gt_at[lo] : gt_at[hi]], all_ig[gt_at[lo] : gt_at[hi]]]
        lengths += [n_gt[lo:hi], n_gt[lo:hi]]
        # pack_arrays of each image, at once (the rows' bytes joined in C where the kernels are installed)
        blobs = pack_many(columns, np.stack(lengths, axis=1), None if native is None else native.pack_rows)
        out.extend(b if im.records is None else (b, image_records(im)) for b, im in zip(blobs, images[lo:hi]))
    return out


def _typed_column(packed: PackedColumns, blobs: List[Any], j: int, empty_dtype: Any) -> np.ndarray:
    """Column ``j`` of the summaries ``blobs``; without any (a rank that added no image), empty of ``empty_dtype``.

    ``empty_dtype`` is the narrowest the column holds, so that joined with the
    other ranks' parts it promotes to theirs (the one-process dtypes). With
    the C kernels the blobs' bytes are copied in one call (the same array)."""
    native = kernels()
    if native is not None and blobs:
        dtype, offsets, nbytes = packed.spans(j)
        if dtype is not None:
            out = np.empty(int(nbytes.sum()) // dtype.itemsize, dtype=dtype)
            native.gather(blobs, offsets, nbytes, out)
            return out if out.size else out.astype(empty_dtype)
    col = packed.column(j)
    return col if col.size else col.astype(empty_dtype)


def _digests(blobs: List[Any], meta: np.ndarray, positions: np.ndarray, world_size: int) -> np.ndarray:
    """The summaries' digests that rank images sharing an ``img_id`` by what they are, never by arrival.

    Across ranks every image's (an image on another rank may share its id);
    on one process only those of images whose id (or, without one, dataset
    position) another image has -- the others' digests are never compared: 0."""
    if world_size > 1:
        return summary_digests(blobs)
    eff = np.where(meta[:, 1] != 0, meta[:, 0], np.asarray(positions, dtype=np.int64))
    _, inverse, counts = np.unique(eff, return_inverse=True, return_counts=True)
    shared = np.flatnonzero(counts[inverse] > 1)
    out = np.zeros(len(blobs), dtype=np.uint64)
    if shared.size:
        out[shared] = summary_digests([blobs[i] for i in shared.tolist()])
    return out


def partition_summaries(
    blobs: List[Any],
    packed: PackedColumns,
    metrics: Sequence[str],
    with_ann: bool,
    k_all: int,
    positions: np.ndarray,
    world_size: int,
    owners: Optional[np.ndarray] = None,
) -> List[Any]:
    """This rank's image summaries (``blobs``, their columns ``packed``) split by category owner
    (:func:`.coco_parts.split_summaries`): one part per rank. The columns are read one at a time
    (each detection column split, then dropped)."""
    column = partial(_typed_column, packed, blobs)  # a rank that added no image: empty columns of the dtypes
    meta = column(0, np.int64).reshape(-1, 2)

    def proposal_cats(j: int) -> np.ndarray:
        return np.zeros(int(packed.lengths[:, 2 + 3 * j].sum()), dtype=np.uint8)

    det_cols = [
        (
            packed.lengths[:, 1 + 3 * j],
            partial(column, 1 + 3 * j, np.float32),
            column(2 + 3 * j, np.uint8) if metric != "proposal" else proposal_cats(j),
            partial(column, 3 + 3 * j, np.uint64),
        )
        for j, metric in enumerate(metrics)
    ]
    if not with_ann:
        width = packed.lengths.shape[1]
        gt_cat, gt_ig = column(width - 2, np.uint8), column(width - 1, np.uint8)
    else:
        gt_cat, gt_ig = np.zeros(0, np.uint8), np.zeros(0, np.uint8)
    return split_summaries(
        np.asarray(positions, dtype=np.int64),
        meta[:, 0],
        meta[:, 1] != 0,
        det_cols,
        gt_cat,
        gt_ig,
        k_all,
        world_size,
        owners,
        [metric == "proposal" for metric in metrics],
        _digests(blobs, meta, positions, world_size),
    )
