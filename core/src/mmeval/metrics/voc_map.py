"""PASCAL VOC mean average precision for object detection."""

from __future__ import annotations

import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError, MetricArgumentKeyError, MetricArgumentMissingError
from ..core.inputs import to_numpy
from ..core.packed import pack_arrays, summary_digests, trits_to_words, unpack_arrays, words_to_trits
from .curves import CurveMixin, PRCurves, thin

__all__ = ["VOCMeanAP"]

_Range = Tuple[Optional[float], Optional[float]]
_EVAL_MODES = ("area", "11points")


class VOCMeanAP(CurveMixin, BaseMetric):
    """PASCAL VOC mAP at one or more IoU thresholds and box scale ranges.

    The names, arguments and result keys are MMEval 0.2.1's ``VOCMeanAP``.

    Args:
        iou_thrs: an IoU threshold in (0, 1] or a sequence of them (default 0.5).
        scale_ranges: ``(min_scale, max_scale)`` pairs (``None``: unbounded);
            a box belongs to a range when ``min_scale**2 <= area < max_scale**2``.
            ``(None, None)`` (every box) is always evaluated (appended when absent).
        num_classes: the number of classes ``C``; ``None`` takes
            ``len(dataset_meta['classes'])`` at the first :meth:`add`.
        eval_mode: ``'area'`` (area under the interpolated precision-recall
            curve, VOC2010+) or ``'11points'`` (mean of the interpolated
            precision at recall 0, 0.1, ..., 1, VOC2007).
        use_legacy_coordinate: widths and heights are ``x2 - x1 + 1`` and
            ``y2 - y1 + 1`` (the VOC devkit's pixel convention).
        nproc: accepted for MMEval compatibility (an int; ``<= 1`` and ``-1``
            mean no worker pool, as in MMEval); the matching runs on the rank that
            holds each image, vectorised, never in a pool.
        drop_class_ap: leave classes without ground truth (in a scale range)
            out of the means; otherwise they count as AP 0.
        classwise: also return ``classwise_result``: per class a dict with
            ``num_gts`` and ``ap`` (lists indexed ``[iou_thr][scale_range]``) and
            ``num_dets``.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths)`` takes one dict per image. A prediction:
    ``bboxes`` (K, 4) ``x1, y1, x2, y2``, ``scores`` (K,), ``labels`` (K,). A
    ground truth: ``bboxes`` (M, 4), ``labels`` (M,), and optionally
    ``bboxes_ignore`` (G, 4) with ``labels_ignore`` (G,) (VOC's *difficult*
    objects: a detection matched to one is neither a true nor a false
    positive). Arrays, lists and framework tensors are accepted (converted
    like :class:`~mmeval.metrics.Accuracy` converts them); K, M or G may be
    0. Bad keys, shapes, non-finite values or labels outside ``[0, C - 1]``
    raise a ``ValueError`` naming the image and the field, and keep nothing
    of the batch.

    Where the work runs: each image is matched on the rank that added it
    (:meth:`_image_tpfp` per class, in bulk before ``compute()`` moves
    anything); what moves is a packed summary per image: per detection its
    score (4 bytes for float32 values, else 8), class (2 bytes) and one uint64
    of true / false positive / neither per 40 (threshold, scale range) pairs;
    per class present its ground-truth count per scale range. The per-image
    hooks :meth:`_iou` and :meth:`_image_tpfp` keep their meaning: a
    subclass overriding them changes the matching.

    Matching (the VOC rule): within a class and an image, detections are
    taken by descending score (ties: the earlier first); each is matched to
    the ground truth (ignored ones included) it overlaps most; with IoU >=
    the threshold it is a true positive if that object is counted and not yet
    matched, a false positive if already matched, and nothing if the object is
    ignored or outside the scale range; below the threshold it is a false
    positive when its own box lies in the scale range. Detections of a class
    are then ranked across images by score; equal scores by what the image is
    (:func:`~mmeval.core.packed.summary_digests`: its summary's digest), then by place in the
    image -- never by the order the images came in, so a shuffled sampler, any
    world size and one process in any order give the same bits. (MMEval 0.2.1
    ranks equal scores of different images in arrival order: on data with such
    ties the AP may differ from it.)

    Result keys (fractions, Python floats): ``AP{round(100 * thr)}`` per IoU
    threshold (the full scale range), ``mAP`` (their mean), and
    ``mAP@{scale_range}`` (e.g. ``mAP@(0, 32)``) per other scale range. A
    mean over no class is NaN. APs are computed in float64 (MMEval keeps them
    in float32 and its IoUs in float32, so its values may differ in the last
    digits).

    Units: ``AP..`` and ``mAP..`` are fractions in [0, 1]. These are MMEval's scales, kept as they are for
    compatibility with MMEval: one result dict may mix fractions and percentages.
    """

    def __init__(
        self,
        iou_thrs: Union[float, Sequence[float]] = 0.5,
        scale_ranges: Optional[Sequence[Tuple[Optional[float], Optional[float]]]] = None,
        num_classes: Optional[int] = None,
        eval_mode: str = "area",
        use_legacy_coordinate: bool = False,
        nproc: int = 4,
        drop_class_ap: bool = True,
        classwise: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        thrs: Tuple[Any, ...] = (iou_thrs,) if isinstance(iou_thrs, numbers.Real) else tuple(iou_thrs)  # type: ignore[arg-type]
        if not thrs or not all(
            isinstance(t, numbers.Real) and not isinstance(t, bool) and 0 < float(t) < 1 for t in thrs
        ):
            # 1 is refused as MMEval 0.2.1 refused it: an IoU of 1 matches only bit-identical boxes
            raise MetricArgumentError(
                f"iou_thrs must be a number in (0, 1) or a non-empty sequence of them, got {iou_thrs!r}"
            )
        ranges: List[_Range] = []
        for r in scale_ranges if scale_ranges is not None else []:
            if not (
                isinstance(r, (tuple, list))
                and len(r) == 2
                and all(v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool) and v >= 0) for v in r)
            ):
                raise MetricArgumentError(
                    f"scale_ranges must be (min_scale, max_scale) pairs of non-negative numbers or None, got {r!r}"
                )
            ranges.append((r[0], r[1]))
        if (None, None) not in ranges:
            ranges.append((None, None))
        if num_classes is not None and not (_is_int(num_classes) and int(num_classes) >= 1):
            raise MetricArgumentError(
                f"num_classes must be a positive int or None (from dataset_meta), got {num_classes!r}"
            )
        if eval_mode not in _EVAL_MODES:
            raise MetricArgumentError(f"eval_mode must be one of {list(_EVAL_MODES)}, got {eval_mode!r}")
        if not _is_int(nproc):
            raise MetricArgumentError(f"VOCMeanAP: nproc must be an int (<= 1 or -1: no worker pool), got {nproc!r}")
        for name, flag in (
            ("use_legacy_coordinate", use_legacy_coordinate),
            ("drop_class_ap", drop_class_ap),
            ("classwise", classwise),
        ):
            if not isinstance(flag, (bool, np.bool_)):
                raise MetricArgumentError(f"{name} must be True or False, got {flag!r}")
        self.iou_thrs: Tuple[float, ...] = tuple(float(t) for t in thrs)
        self.scale_ranges: Tuple[_Range, ...] = tuple(ranges)
        self._num_classes: Optional[int] = None if num_classes is None else int(num_classes)
        self.eval_mode: str = eval_mode
        self.use_legacy_coordinate: bool = bool(use_legacy_coordinate)
        self.nproc: int = int(nproc)
        self.drop_class_ap: bool = bool(drop_class_ap)
        self.classwise: bool = bool(classwise)

    @property
    def num_classes(self) -> int:
        """The class count: the argument, else ``len(dataset_meta['classes'])``."""
        if self._num_classes is None:
            meta = self.dataset_meta or {}
            if "classes" not in meta:
                raise MetricArgumentMissingError(
                    f"VOCMeanAP: num_classes is not set and dataset_meta ({self.dataset_meta!r}) has no 'classes': "
                    f"pass VOCMeanAP(num_classes=C)"
                )
            self._num_classes = len(meta["classes"])
        return self._num_classes

    def _question(self, size: Optional[int]) -> Dict[str, Any]:
        question = super()._question(size)
        question["num_classes"] = self._num_classes
        return question

    # -- accumulate ----------------------------------------------------------

    def add(self, predictions: Sequence[Dict[str, Any]], groundtruths: Sequence[Dict[str, Any]]) -> None:
        """Add one dict of predictions and one of ground truths per image (see the class docstring)."""
        if len(predictions) != len(groundtruths):
            raise MetricArgumentError(
                f"predictions and groundtruths have different lengths: {len(predictions)} and {len(groundtruths)}"
            )
        c = self.num_classes
        checked = []
        for i, (pred, gt) in enumerate(zip(predictions, groundtruths)):
            p = _fields(pred, f"predictions[{i}]", ("bboxes", "scores", "labels"), (), c)
            g = _fields(gt, f"groundtruths[{i}]", ("bboxes", "labels"), ("bboxes_ignore", "labels_ignore"), c)
            checked.append((p, g))
        self._keep_to_summarize(checked)

    # -- compute -------------------------------------------------------------

    def _summarize(self, samples: List[Any]) -> List[Any]:
        """Each image matched here, on the rank that holds it: one packed summary per image (see the class doc).

        Per image: the detections (in their order) with their score, class and
        true / false positive / neither state per (threshold, scale range) in
        base-3 words; the classes with ground truths and their counts per scale range.
        """
        n_thr = len(self.iou_thrs)
        areas = self._area_bounds()
        n_rng = len(areas)
        out = []
        for pred, gt in samples:
            labels = pred["labels"]
            k = labels.shape[0]
            state = np.zeros((k, n_rng, n_thr), dtype=np.uint8)
            gt_cls, gt_counts = [], []
            for cls in np.unique(np.concatenate([labels, gt["labels"], gt["labels_ignore"]])):
                pk = np.flatnonzero(labels == cls)
                gts = gt["bboxes"][gt["labels"] == cls]
                ign = gt["bboxes_ignore"][gt["labels_ignore"] == cls]
                counts = [int(np.count_nonzero(self._in_range(gts, lo, hi))) for lo, hi in areas]
                if any(counts):
                    gt_cls.append(int(cls))
                    gt_counts.append(counts)
                if not pk.size:
                    continue
                tp, fp = self._image_tpfp(pred["bboxes"][pk], pred["scores"][pk], gts, ign, areas)
                tp, fp = np.asarray(tp) != 0, np.asarray(fp) != 0  # (thrs, ranges, K): 0 / 1 flags
                state[pk] = np.where(tp, _TP, np.where(fp, _FP, _NEITHER)).transpose(2, 1, 0)
            scores = pred["scores"]
            if np.array_equal(scores.astype(np.float32).astype(np.float64), scores):
                scores = scores.astype(np.float32)  # exact: 4 bytes a detection
            out.append(
                pack_arrays(
                    scores,
                    labels.astype(np.uint16),
                    trits_to_words(state.reshape(k, n_rng * n_thr)),
                    np.array(gt_cls, dtype=np.uint16),
                    np.array(gt_counts, dtype=np.int32).reshape(-1),
                )
            )
        return out

    def _area_bounds(self) -> List[Tuple[Optional[float], Optional[float]]]:
        return [(None if lo is None else lo * lo, None if hi is None else hi * hi) for lo, hi in self.scale_ranges]

    def compute_metric(self, results: Sequence[Any]) -> Dict[str, Any]:
        """The mAP of every image's summary (:meth:`_summarize`), in dataset order.

        ``(prediction, groundtruth)`` pairs of dicts (kept by a subclass's own
        ``add()``) are summarized here first.
        """
        if not len(results):
            raise ValueError("VOCMeanAP.compute_metric: no results to compute on (nothing was added)")
        blobs = [r if isinstance(r, bytes) else self._summarize([r])[0] for r in results]
        n_thr, n_rng = len(self.iou_thrs), len(self.scale_ranges)
        lengths, (scores, labels, words, gt_cls, gt_counts) = unpack_arrays(blobs, 5)
        scores = scores.astype(np.float64)
        labels = labels.astype(np.int64)
        n = scores.shape[0]
        states = words_to_trits(words, n, n_rng * n_thr).reshape(n, n_rng, n_thr)
        num_gts_all = np.zeros((self.num_classes, n_rng), dtype=np.int64)
        np.add.at(num_gts_all, gt_cls.astype(np.int64), gt_counts.astype(np.int64).reshape(-1, n_rng))
        # per class, detections ranked by score, ties by what the image is (its summary's digest), then by
        # place in the image: the same order whichever rank held an image and in whatever order it came
        keys = np.repeat(summary_digests(blobs), lengths[:, 0])
        order = np.lexsort((np.arange(n), keys, -scores, labels))
        bounds = np.searchsorted(labels[order], np.arange(self.num_classes + 1))
        per_class = []
        eps = float(np.finfo(np.float32).eps)
        full = self.scale_ranges.index((None, None))
        kept: List[Tuple[np.ndarray, np.ndarray]] = []  # keep_curves: each class's curve at the first IoU threshold
        for cls in range(self.num_classes):
            num_gts = np.broadcast_to(num_gts_all[cls], (n_thr, n_rng))
            seg = order[bounds[cls] : bounds[cls + 1]]
            ap = np.zeros((n_thr, n_rng))
            if seg.size:
                st = states[seg].transpose(2, 1, 0)  # (thrs, ranges, K)
                tp_c = np.cumsum(st == _TP, axis=2).astype(np.float64)
                fp_c = np.cumsum(st == _FP, axis=2).astype(np.float64)
                precision = tp_c / np.maximum(tp_c + fp_c, eps)
                recall = tp_c / np.maximum(num_gts[..., None], eps)
                for i in range(n_thr):
                    for j in range(n_rng):
                        ap[i, j] = _average_precision(recall[i, j], precision[i, j], self.eval_mode)
                if self.keep_curves:
                    kept.append(thin(recall[0, full], precision[0, full]))
            elif self.keep_curves:
                kept.append((np.zeros(0), np.zeros(0)))
            per_class.append((np.array(num_gts), int(seg.size), ap))
        if self.keep_curves:
            names = [str(c) for c in (self.dataset_meta or {}).get("classes", range(self.num_classes))]
            title = f"{type(self).__name__}, IoU {self.iou_thrs[0]:g}"
            aps = [float(ap[0, full]) for _, _, ap in per_class]
            self._keep(PRCurves(title, names, [r for r, _ in kept], [p for _, p in kept], list(aps)))
        out: Dict[str, Any] = {}
        means = np.full((n_thr, n_rng), np.nan)
        for i in range(n_thr):
            for j in range(n_rng):
                aps = [ap[i, j] for g, _, ap in per_class if g[i, j] > 0 or not self.drop_class_ap]
                means[i, j] = float(np.mean(aps)) if aps else float("nan")
        for i, thr in enumerate(self.iou_thrs):
            out[f"AP{round(thr * 100)}"] = float(means[i, full])
        for j, rng in enumerate(self.scale_ranges):
            out["mAP" if rng == (None, None) else f"mAP@{rng}"] = float(np.mean(means[:, j]))
        if self.classwise:
            out["classwise_result"] = [
                {"num_gts": g.tolist(), "num_dets": d, "ap": ap.tolist()} for g, d, ap in per_class
            ]
        return out

    def _area(self, boxes: np.ndarray) -> np.ndarray:
        e = 1.0 if self.use_legacy_coordinate else 0.0
        return (boxes[:, 2] - boxes[:, 0] + e) * (boxes[:, 3] - boxes[:, 1] + e)  # type: ignore[no-any-return]

    def _in_range(self, boxes: np.ndarray, lo: Optional[float], hi: Optional[float]) -> np.ndarray:
        area = self._area(boxes)
        keep = np.ones(area.shape, dtype=bool)
        if lo is not None:
            keep &= area >= lo
        if hi is not None:
            keep &= area < hi
        return keep

    def _image_tpfp(
        self,
        boxes: np.ndarray,
        scores: np.ndarray,
        gts: np.ndarray,
        ignored: np.ndarray,
        areas: Sequence[Tuple[Optional[float], Optional[float]]],
    ) -> Tuple[np.ndarray, np.ndarray]:
        """True / false positive flags, (thrs, ranges, K), of one image's detections of one class."""
        k = boxes.shape[0]
        shape = (len(self.iou_thrs), len(areas), k)
        tp, fp = np.zeros(shape), np.zeros(shape)
        all_gts = np.concatenate([gts, ignored])
        is_ignored = np.arange(all_gts.shape[0]) >= gts.shape[0]
        if all_gts.shape[0]:
            iou = self._iou(boxes, all_gts)
            best, best_iou = iou.argmax(axis=1), iou.max(axis=1)
        else:
            best, best_iou = np.zeros(k, dtype=np.int64), np.zeros(k)
        order = np.argsort(-scores, kind="stable")
        for j, (lo, hi) in enumerate(areas):
            pred_in = self._in_range(boxes, lo, hi)
            gt_out = ~self._in_range(all_gts, lo, hi) | is_ignored
            for i, thr in enumerate(self.iou_thrs):
                covered = np.zeros(all_gts.shape[0], dtype=bool)
                for d in order:
                    if best_iou[d] >= thr:
                        g = best[d]
                        if gt_out[g]:
                            continue
                        if covered[g]:
                            fp[i, j, d] = 1
                        else:
                            tp[i, j, d] = 1
                            covered[g] = True
                    elif pred_in[d]:
                        fp[i, j, d] = 1
        return tp, fp

    def _iou(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        e = 1.0 if self.use_legacy_coordinate else 0.0
        w = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]) + e
        h = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]) + e
        inter = np.maximum(w, 0) * np.maximum(h, 0)
        union = self._area(a)[:, None] + self._area(b)[None, :] - inter
        return inter / np.maximum(union, 1e-6)  # type: ignore[no-any-return]


def _average_precision(recall: np.ndarray, precision: np.ndarray, mode: str) -> float:
    """AP of one ranked list: the area under the interpolated curve, or the VOC2007 11-point mean."""
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


_NEITHER, _TP, _FP = 0, 1, 2


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _fields(
    item: Any, what: str, required: Tuple[str, ...], optional: Tuple[str, ...], num_classes: int
) -> Dict[str, np.ndarray]:
    """One image's dict checked and converted: boxes float64 (n, 4), scores float64 (n,), labels int64 (n,)."""
    if not isinstance(item, dict):
        raise MetricArgumentError(
            f"{what} must be a dict with keys {list(required + optional)}, got {type(item).__name__}"
        )
    missing = [k for k in required if k not in item]
    if missing:
        raise MetricArgumentKeyError(
            f"{what} has no {missing}: it needs {list(required)}"
            + (f" (and optionally {list(optional)})" if optional else "")
        )
    out: Dict[str, np.ndarray] = {}
    for key in required + optional:
        if key not in item:  # an optional field: no ignored objects
            out[key] = np.zeros(
                (0, 4) if key.startswith("bboxes") else (0,), dtype=np.float64 if key.startswith("bboxes") else np.int64
            )
            continue
        arr = to_numpy(item[key], f"{what}[{key!r}]")
        if key.startswith("bboxes"):
            arr = arr.reshape(0, 4) if arr.size == 0 else arr
            if arr.ndim != 2 or arr.shape[1] != 4:
                raise MetricArgumentError(f"{what}[{key!r}] must have shape (n, 4) (x1, y1, x2, y2), got {arr.shape}")
        elif arr.ndim != 1:
            raise MetricArgumentError(f"{what}[{key!r}] must have shape (n,), got {arr.shape}")
        if arr.dtype.kind not in "iuf" and not (arr.size == 0):
            raise MetricArgumentError(f"{what}[{key!r}] must hold numbers, got dtype {arr.dtype}")
        values = arr.astype(np.float64)
        if not np.isfinite(values).all():
            raise MetricArgumentError(f"{what}[{key!r}] holds NaN or infinite values")
        if key.startswith("labels"):
            if ((values != np.floor(values)) | (values < 0) | (values >= num_classes)).any():
                bad = values[(values != np.floor(values)) | (values < 0) | (values >= num_classes)][0]
                raise MetricArgumentError(
                    f"{what}[{key!r}]: got label {bad:g}; labels must be integers in [0, {num_classes - 1}]"
                )
            out[key] = values.astype(np.int64)
        else:
            out[key] = values
    for boxes, labels in (("bboxes", "labels"), ("bboxes_ignore", "labels_ignore"), ("bboxes", "scores")):
        if boxes in out and labels in out and out[boxes].shape[0] != out[labels].shape[0]:
            raise MetricArgumentError(f"{what}: {out[boxes].shape[0]} {boxes} but {out[labels].shape[0]} {labels}")
    return out
