"""PASCAL VOC mean average precision for object detection."""

from __future__ import annotations

import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError, MetricArgumentMissingError
from ..core.packed import pack_arrays, summary_digests, trits_to_words, unpack_arrays, words_to_trits
from .curves import CurveMixin, PRCurves
from .detection_ap import class_average_precisions, mean_ap_results
from .detection_inputs import ScaleRange, check_flags, detection_fields, scale_range_pairs, thresholds
from .detection_matching import FP, NEITHER, TP, match_detections

__all__ = ["VOCMeanAP"]

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
        # 1 is refused as MMEval 0.2.1 refused it: an IoU of 1 matches only bit-identical boxes
        self.iou_thrs: Tuple[float, ...] = thresholds(iou_thrs, "iou_thrs", one_allowed=False)
        self.scale_ranges: Tuple[ScaleRange, ...] = scale_range_pairs(scale_ranges)
        if num_classes is not None and not (_is_int(num_classes) and int(num_classes) >= 1):
            raise MetricArgumentError(
                f"num_classes must be a positive int or None (from dataset_meta), got {num_classes!r}"
            )
        if eval_mode not in _EVAL_MODES:
            raise MetricArgumentError(f"eval_mode must be one of {list(_EVAL_MODES)}, got {eval_mode!r}")
        if not _is_int(nproc):
            raise MetricArgumentError(f"VOCMeanAP: nproc must be an int (<= 1 or -1: no worker pool), got {nproc!r}")
        check_flags(use_legacy_coordinate=use_legacy_coordinate, drop_class_ap=drop_class_ap, classwise=classwise)
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
            p = detection_fields(pred, f"predictions[{i}]", ("bboxes", "scores", "labels"), (), c)
            g = detection_fields(gt, f"groundtruths[{i}]", ("bboxes", "labels"), ("bboxes_ignore", "labels_ignore"), c)
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
                state[pk] = np.where(tp, TP, np.where(fp, FP, NEITHER)).transpose(2, 1, 0)
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
        full = self.scale_ranges.index((None, None))
        per_class, kept = class_average_precisions(
            states, scores, labels, keys, num_gts_all, self.eval_mode, full if self.keep_curves else None
        )
        if self.keep_curves:  # each class's curve at the first IoU threshold
            names = [str(c) for c in (self.dataset_meta or {}).get("classes", range(self.num_classes))]
            title = f"{type(self).__name__}, IoU {self.iou_thrs[0]:g}"
            aps = [float(ap[0, full]) for _, _, ap in per_class]
            self._keep(PRCurves(title, names, [r for r, _ in kept], [p for _, p in kept], list(aps)))
        return mean_ap_results(per_class, self.iou_thrs, self.scale_ranges, self.drop_class_ap, self.classwise)

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
        """True / false positive flags, (thrs, ranges, K), of one image's detections of one class.

        ``ignored``: the image's ignored objects of the class (VOC's *difficult* ones); ``areas``: the
        scale ranges as area bounds. The rule: :func:`~mmeval.metrics.detection_matching.match_detections`.
        """
        all_gts = np.concatenate([gts, ignored])
        iou = self._iou(boxes, all_gts) if all_gts.shape[0] else np.zeros((boxes.shape[0], 0))
        is_ignored = np.arange(all_gts.shape[0]) >= gts.shape[0]
        pred_in = [self._in_range(boxes, lo, hi) for lo, hi in areas]
        gt_out = [~self._in_range(all_gts, lo, hi) | is_ignored for lo, hi in areas]
        return match_detections(iou, scores, pred_in, gt_out, self.iou_thrs)

    def _iou(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        e = 1.0 if self.use_legacy_coordinate else 0.0
        w = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]) + e
        h = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]) + e
        inter = np.maximum(w, 0) * np.maximum(h, 0)
        union = self._area(a)[:, None] + self._area(b)[None, :] - inter
        return inter / np.maximum(union, 1e-6)  # type: ignore[no-any-return]


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
