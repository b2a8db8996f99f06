"""Open Images detection mAP (class hierarchy, group-of boxes, image-level labels), MMEval 0.2.1's ``OIDMeanAP``.

Also :func:`get_relation_matrix`, the class hierarchy of Open Images' JSON file as a matrix, where
MMEval 0.2.1 has it.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import warnings
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

import numpy as np

from ..core.errors import MetricArgumentError, MetricArgumentMissingError
from ..core.inputs import to_numpy
from .detection_inputs import check_flags, detection_fields, thresholds
from .detection_matching import match_group_of
from .dota_map import check_image_lists
from .voc_map import VOCMeanAP

__all__ = ["OIDMeanAP", "get_relation_matrix"]


def get_relation_matrix(hierarchy_file: str, label_file: str) -> np.ndarray:
    """The class hierarchy as a float matrix ``R`` (C, C): ``R[c, a] = 1`` when ``a`` is ``c`` or an ancestor of it.

    ``label_file``: Open Images' class descriptions CSV (``label name, description`` per row; the row
    is the class index). ``hierarchy_file``: its hierarchy JSON (nested ``LabelName`` /
    ``Subcategory``; the root, "Entity", is nobody's ancestor). A class listed under several parents
    has all of them. A name of the hierarchy missing from the label file raises
    :class:`MetricArgumentError`.
    """
    with open(label_file, newline="") as f:
        names = [row[0] for row in csv.reader(f) if row]
    index = {name: i for i, name in enumerate(names)}
    with open(hierarchy_file) as f:
        root = json.load(f)
    matrix = np.eye(len(names))
    pending: List[Tuple[Dict[str, Any], Tuple[int, ...]]] = [(root, ())]  # (node, its ancestors' indices)
    while pending:
        node, ancestors = pending.pop()
        for child in node.get("Subcategory", []):
            if "LabelName" not in child:
                continue
            name = child["LabelName"]
            if name not in index:
                raise MetricArgumentError(
                    f"get_relation_matrix: class {name!r} of {hierarchy_file!r} is not in "
                    f"{label_file!r}; pass the label file of the same release"
                )
            c = index[name]
            matrix[c, list(ancestors)] = 1
            pending.append((child, ancestors + (c,)))
    return matrix


class OIDMeanAP(VOCMeanAP):
    """The Open Images detection mAP: :class:`VOCMeanAP` with a class hierarchy and group-of boxes.

    The names, arguments, defaults and result keys are MMEval 0.2.1's ``OIDMeanAP``
    (https://storage.googleapis.com/openimages/web/evaluation.html).

    Args:
        iof_thrs: the intersection-over-detection-area threshold of a group-of match, one per
            ``iou_thrs`` (a number in (0, 1] or a sequence as long as ``iou_thrs``; default 0.5).
        use_group_of: match detections to group-of boxes as below; ``False``: group-of boxes are
            ordinary ground truths.
        get_supercategory: each ground truth and detection also counts for every ancestor class.
        filter_labels: drop detections of classes the image is not annotated with.
        class_relation_matrix: ``R`` (C, C), ``R[c, a]`` nonzero when ``a`` is an ancestor of ``c``
            (:func:`get_relation_matrix`); ``None`` takes ``dataset_meta['relation_matrix']`` (or the
            deprecated ``'RELATION_MATRIX'``).
        hierarchy_file: instead of ``class_relation_matrix``, Open Images' hierarchy JSON, with
            ``label_file`` (both, read here by :func:`get_relation_matrix`; not MMEval 0.2.1
            arguments). Every rank's ``compute()`` compares the two files' content (SHA-256), so ranks
            reading other files under the same paths raise
            :class:`~mmeval.core.errors.CollectiveMismatchError` naming them, never a mix.
        label_file: Open Images' class descriptions CSV, with ``hierarchy_file``.
        **kwargs: :class:`VOCMeanAP`'s arguments (``iou_thrs``, ``scale_ranges``, ``num_classes``,
            ``eval_mode``, ``use_legacy_coordinate``, ``nproc``, ``drop_class_ap``, ``classwise``) and
            :class:`~mmeval.core.BaseMetric`'s.

    ``add(predictions, groundtruths)``, one dict per image. A prediction: ``bboxes`` (K, 4)
    ``x1, y1, x2, y2``, ``scores`` (K,), ``labels`` (K,). A ground truth: ``instances``, a list of
    dicts with ``bbox`` (4 numbers), ``bbox_label`` and ``is_group_of`` (absent: False); and
    optionally ``image_level_labels``, the classes verified present or absent in the image.

    What :meth:`add` does (MMEval's and the challenge's rules): with ``get_supercategory`` every
    ground truth is repeated for each ancestor class of its class. The image's annotated classes are
    those of its (expanded) ground truths and its image-level labels (not expanded); with
    ``filter_labels`` a detection whose class, or an ancestor of whose class, is not annotated is
    dropped where the class is that one; with ``get_supercategory`` every detection is also repeated
    for each annotated ancestor class. What is kept: the image as :class:`VOCMeanAP` keeps it, the
    group-of boxes among the ground truths (they count in the number of objects, as in MMEval) and
    again as the ``bboxes_ignore`` of the image, where :meth:`_image_tpfp` finds them.

    Matching, per class and image (:meth:`_image_tpfp`): the detections are first matched to the
    ordinary boxes by :class:`VOCMeanAP`'s rule. Then, by descending score, each detection that is not
    a true positive and whose largest intersection over its own area with a group-of box is at least
    the IoF threshold is taken by that box (if in the scale range): the highest-scored detection a
    group-of box takes is one true positive, the others count for nothing. A group-of box no
    detection takes is one missed object. (MMEval also lists such a box as a false positive of score
    0, after every detection: no AP changes, but its ``classwise_result`` ``num_dets`` counts them.)

    Result keys (fractions): ``AP{round(100 * thr)}`` per IoU threshold, ``mAP``, and
    ``mAP@{scale_range}`` per other scale range.

    Units: ``AP..`` and ``mAP..`` are fractions in [0, 1], MMEval 0.2.1's scale (as :class:`VOCMeanAP`).
    """

    #: attributes naming files whose content shapes the answer: the question carries their digest (mmeval.core.identity)
    question_files = ("hierarchy_file", "label_file")

    def __init__(
        self,
        iof_thrs: Union[float, Sequence[float]] = 0.5,
        use_group_of: bool = True,
        get_supercategory: bool = True,
        filter_labels: bool = True,
        class_relation_matrix: Optional[np.ndarray] = None,
        hierarchy_file: Optional[str] = None,
        label_file: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (hierarchy_file is None) != (label_file is None) or (
            hierarchy_file is not None and class_relation_matrix is not None
        ):
            raise MetricArgumentError(
                f"OIDMeanAP: pass hierarchy_file= and label_file= together, or class_relation_matrix= alone "
                f"(got hierarchy_file={hierarchy_file!r}, label_file={label_file!r}, class_relation_matrix "
                f"{'given' if class_relation_matrix is not None else 'None'})"
            )
        if hierarchy_file is not None:
            for name, path in (("hierarchy_file", hierarchy_file), ("label_file", label_file)):
                if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
                    raise MetricArgumentError(f"OIDMeanAP: {name}={path!r} is not a readable file")
            class_relation_matrix = get_relation_matrix(str(hierarchy_file), str(label_file))
        #: the files the hierarchy was read from (None: not from files); the question carries their content
        self.hierarchy_file = hierarchy_file
        self.label_file = label_file
        thrs = thresholds(iof_thrs, "iof_thrs", one_allowed=True)
        if len(thrs) != len(self.iou_thrs):
            raise MetricArgumentError(
                f"iof_thrs must give one threshold per IoU threshold: iou_thrs has "
                f"{len(self.iou_thrs)} ({list(self.iou_thrs)}), iof_thrs {len(thrs)} ({iof_thrs!r})"
            )
        check_flags(use_group_of=use_group_of, get_supercategory=get_supercategory, filter_labels=filter_labels)
        self.iof_thrs: Tuple[float, ...] = thrs
        self.use_group_of = bool(use_group_of)
        self.get_supercategory = bool(get_supercategory)
        self.filter_labels = bool(filter_labels)
        self._class_relation_matrix: Optional[np.ndarray] = (
            None if class_relation_matrix is None else np.asarray(class_relation_matrix)
        )

    @property
    def class_relation_matrix(self) -> np.ndarray:
        """``R`` (C, C): the argument, else ``dataset_meta['relation_matrix']`` (or ``'RELATION_MATRIX'``).

        Raises ``RuntimeError`` (as MMEval 0.2.1) when neither gives one.
        """
        if self._class_relation_matrix is None:
            meta = self.dataset_meta or {}
            if "relation_matrix" in meta:
                self._class_relation_matrix = np.asarray(meta["relation_matrix"])
            elif "RELATION_MATRIX" in meta:
                warnings.warn(
                    "dataset_meta['RELATION_MATRIX'] is deprecated: use 'relation_matrix'",
                    DeprecationWarning,
                    stacklevel=2,
                )
                self._class_relation_matrix = np.asarray(meta["RELATION_MATRIX"])
            else:
                raise MetricArgumentMissingError(
                    f"OIDMeanAP needs the class hierarchy: pass class_relation_matrix= (e.g. from "
                    f"mmeval.metrics.oid_map.get_relation_matrix) or set dataset_meta['relation_matrix'] "
                    f"(dataset_meta is {self.dataset_meta!r})"
                )
        return self._class_relation_matrix

    def _question(self, size: Optional[int]) -> Dict[str, Any]:
        question = super()._question(size)
        try:  # resolved here too, so that a rank that added nothing asks the same question
            matrix: Optional[np.ndarray] = self.class_relation_matrix
        except RuntimeError:
            matrix = None
        question["class_relation_matrix"] = (
            None
            if matrix is None
            else (
                f"{matrix.shape} sha256:{hashlib.sha256(np.ascontiguousarray(matrix != 0).tobytes()).hexdigest()[:16]}"
            )
        )
        return question

    # -- accumulate ----------------------------------------------------------------------------------

    def add(self, predictions: Sequence[Dict[str, Any]], groundtruths: Sequence[Dict[str, Any]]) -> None:
        """Add one dict of predictions and one of Open Images ground truths per image (see the class docstring)."""
        check_image_lists(predictions, groundtruths, "OIDMeanAP")
        c = self.num_classes
        ancestors = self._ancestors(c)
        preds, gts = [], []
        for i, (pred, gt) in enumerate(zip(predictions, groundtruths)):
            p = detection_fields(pred, f"predictions[{i}]", ("bboxes", "scores", "labels"), (), c)
            boxes, labels, group, image_labels = _instances(gt, f"groundtruths[{i}]", c)
            if self.get_supercategory:
                extra = [(k, a) for k, lab in enumerate(labels) for a in ancestors[lab]]
                take = np.array([k for k, _ in extra], dtype=np.int64)
                boxes = np.concatenate([boxes, boxes[take]])
                labels = np.concatenate([labels, np.array([a for _, a in extra], dtype=np.int64)])
                group = np.concatenate([group, group[take]])
            annotated = set(labels.tolist()) | set(image_labels.tolist())
            preds.append(self._expand_predictions(p, annotated, ancestors))
            grouped = group if self.use_group_of else np.zeros_like(group)
            order = np.concatenate([np.flatnonzero(~grouped), np.flatnonzero(grouped)])  # group-of boxes last
            gts.append(
                {
                    "bboxes": boxes[order],
                    "labels": labels[order],
                    "bboxes_ignore": boxes[grouped],
                    "labels_ignore": labels[grouped],
                }
            )
        super().add(preds, gts)

    def _ancestors(self, num_classes: int) -> List[List[int]]:
        """Per class, its ancestor classes in index order (itself left out)."""
        matrix = self.class_relation_matrix
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < num_classes:
            raise MetricArgumentError(
                f"OIDMeanAP: class_relation_matrix must be square with at least num_classes = "
                f"{num_classes} rows (shape {(num_classes, num_classes)} or larger), got "
                f"{matrix.shape}"
            )
        # a larger hierarchy (all 601 Open Images classes for a subset of num_classes) is accepted as MMEval 0.2.1
        # accepts it: ancestors past num_classes are never evaluated there, so they are left out here
        return [[int(a) for a in np.flatnonzero(matrix[c, :num_classes]) if a != c] for c in range(num_classes)]

    def _expand_predictions(
        self, pred: Dict[str, np.ndarray], annotated: Set[int], ancestors: List[List[int]]
    ) -> Dict[str, np.ndarray]:
        """The image's detections filtered by its annotated classes and repeated for their ancestors (MMEval's order)."""
        labels = pred["labels"]
        present = np.unique(labels).tolist()
        keep = np.ones(labels.shape[0], dtype=bool)
        if self.filter_labels:
            matrix = self.class_relation_matrix
            dropped = {int(a) for lab in present for a in np.flatnonzero(matrix[lab]) if int(a) not in annotated}
            keep = ~np.isin(labels, list(dropped))
        parts = [np.flatnonzero(keep)]
        new_labels = [labels[keep]]
        if self.get_supercategory:
            for lab in present:
                rows = np.flatnonzero(labels == lab)
                for a in ancestors[lab]:
                    if a in annotated:
                        parts.append(rows)
                        new_labels.append(np.full(rows.shape[0], a, dtype=np.int64))
        take = np.concatenate(parts)
        return {"bboxes": pred["bboxes"][take], "scores": pred["scores"][take], "labels": np.concatenate(new_labels)}

    # -- the per-image hook of VOCMeanAP ---------------------------------------------------------------

    def _image_tpfp(
        self,
        boxes: np.ndarray,
        scores: np.ndarray,
        gts: np.ndarray,
        ignored: np.ndarray,
        areas: Sequence[Tuple[Optional[float], Optional[float]]],
    ) -> Tuple[np.ndarray, np.ndarray]:
        """True / false positive flags (thrs, ranges, K) of one image's detections of one class.

        ``gts`` ends with the group-of boxes, which ``ignored`` holds again (see :meth:`add`). The rule:
        :func:`~mmeval.metrics.detection_matching.match_group_of` over ``VOCMeanAP``'s matching of the others.
        """
        group = ignored
        ordinary = gts[: gts.shape[0] - group.shape[0]]
        tp, fp = super()._image_tpfp(boxes, scores, ordinary, np.zeros((0, 4)), areas)
        if not group.shape[0]:
            return tp, fp
        group_out = [~self._in_range(group, lo, hi) for lo, hi in areas]
        return match_group_of(tp, fp, self._iof(boxes, group), scores, group_out, self.iof_thrs)

    def _iof(self, boxes: np.ndarray, group: np.ndarray) -> np.ndarray:
        """Intersection over the detection's own area (K, G)."""
        e = 1.0 if self.use_legacy_coordinate else 0.0
        w = np.minimum(boxes[:, None, 2], group[None, :, 2]) - np.maximum(boxes[:, None, 0], group[None, :, 0]) + e
        h = np.minimum(boxes[:, None, 3], group[None, :, 3]) - np.maximum(boxes[:, None, 1], group[None, :, 1]) + e
        inter = np.maximum(w, 0) * np.maximum(h, 0)
        iof: np.ndarray = inter / np.maximum(self._area(boxes), 1e-6)[:, None]
        return iof


def _instances(gt: Any, what: str, num_classes: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One Open Images ground truth: boxes (M, 4), labels (M,), group-of flags (M,), image-level labels."""
    if not isinstance(gt, dict):
        raise MetricArgumentError(
            f"{what} must be a dict with 'instances' (and optionally 'image_level_labels'), got {type(gt).__name__}"
        )
    if "instances" not in gt:
        raise MetricArgumentError(
            f"{what} has no 'instances': it needs a list of dicts with 'bbox', 'bbox_label' and 'is_group_of'"
        )
    boxes, labels, group = [], [], []
    for k, ins in enumerate(gt["instances"]):
        where = f"{what}['instances'][{k}]"
        if not isinstance(ins, dict) or "bbox" not in ins or "bbox_label" not in ins:
            raise MetricArgumentError(
                f"{where} must be a dict with 'bbox', 'bbox_label' (and 'is_group_of'), got {ins!r}"
            )
        box = to_numpy(ins["bbox"], f"{where}['bbox']").astype(np.float64).reshape(-1)
        if box.shape != (4,) or not np.isfinite(box).all():
            raise MetricArgumentError(f"{where}['bbox'] must be 4 finite numbers x1, y1, x2, y2, got {ins['bbox']!r}")
        boxes.append(box)
        labels.append(ins["bbox_label"])
        group.append(bool(ins.get("is_group_of", False)))
    lab = _labels(labels, f"{what}['instances'][*]['bbox_label']", num_classes)
    image = _labels(gt.get("image_level_labels", []), f"{what}['image_level_labels']", num_classes)
    return (np.array(boxes, dtype=np.float64).reshape(-1, 4), lab, np.array(group, dtype=bool), image)


def _labels(values: Any, what: str, num_classes: int) -> np.ndarray:
    arr = to_numpy(values, what).reshape(-1)
    if arr.size and arr.dtype.kind not in "iuf":
        raise MetricArgumentError(f"{what} must hold class indices, got dtype {arr.dtype}")
    num = arr.astype(np.float64)
    bad = ~np.isfinite(num) | (num != np.floor(num)) | (num < 0) | (num >= num_classes)
    if bad.any():
        raise MetricArgumentError(
            f"{what}: got label {num[bad][0]:g}; labels must be integers in [0, {num_classes - 1}]"
        )
    return num.astype(np.int64)
