"""DOTA mean average precision: VOC-style mAP of rotated boxes (aerial images), MMEval 0.2.1's ``DOTAMeanAP``."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.errors import MetricArgumentError
from ..core.inputs import to_numpy
from .detection_inputs import detection_fields
from .utils.bbox_overlaps_rotated import calculate_bboxes_area_rotated, calculate_overlaps_rotated, qbox_to_rbox
from .voc_map import VOCMeanAP

__all__ = ["DOTAMeanAP"]


class DOTAMeanAP(VOCMeanAP):
    """DOTA mAP: :class:`VOCMeanAP`'s matching and AP on rotated boxes, at IoU thresholds and scale ranges.

    The names, arguments, defaults and result keys are MMEval 0.2.1's ``DOTAMeanAP``.

    Args:
        iou_thrs: an IoU threshold in (0, 1] or a sequence of them (default 0.5).
        scale_ranges: ``(min_scale, max_scale)`` pairs; a box belongs to a range when
            ``min_scale**2 <= w * h < max_scale**2``. ``(None, None)`` is always evaluated.
        num_classes: the class count ``C``; ``None`` takes ``len(dataset_meta['classes'])``.
        eval_mode: ``'11points'`` (the default, DOTA's devkit) or ``'area'``.
        nproc: accepted for MMEval compatibility; the computation runs in the computing process.
        drop_class_ap: leave classes without ground truth out of the means.
        classwise: also return ``classwise_result`` (as :class:`VOCMeanAP`).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths)`` takes one dict per image, with :class:`VOCMeanAP`'s keys, but
    boxes are rotated: ``(n, 5)`` ``(cx, cy, w, h, angle)`` (angle in radians; any angle convention --
    the IoU is that of the rectangles), or ``(n, 8)`` quadrilaterals ``(x1, y1, ..., x4, y4)``, which
    are turned into their minimum-area rectangles at :meth:`add` as MMEval does (this needs the
    ``opencv`` extra). ``bboxes_ignore`` / ``labels_ignore`` (optional): objects whose detections count
    for nothing. Bad shapes, non-finite values or labels outside ``[0, C - 1]`` raise a ``ValueError``
    naming the image and the field, and keep nothing of the batch.

    The IoU of two rotated boxes is exact (their rectangles' intersection clipped as polygons, float64:
    :func:`~mmeval.metrics.utils.bbox_overlaps_rotated.calculate_overlaps_rotated`); MMEval 0.2.1
    takes it from mmcv or OpenCV in float32 with ``1e-5`` added to the union, so an IoU within about
    ``1e-5`` of a threshold may be matched differently there. A box's area is ``w * h``.

    Result keys (fractions): ``AP{round(100 * thr)}`` per IoU threshold, ``mAP``, and
    ``mAP@{scale_range}`` per other scale range.

    Units: ``AP..`` and ``mAP..`` are fractions in [0, 1], MMEval 0.2.1's scale (as :class:`VOCMeanAP`).
    """

    def __init__(
        self,
        iou_thrs: Union[float, Sequence[float]] = 0.5,
        scale_ranges: Optional[Sequence[Tuple[Optional[float], Optional[float]]]] = None,
        num_classes: Optional[int] = None,
        eval_mode: str = "11points",
        nproc: int = 4,
        drop_class_ap: bool = True,
        classwise: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            iou_thrs=iou_thrs,
            scale_ranges=scale_ranges,
            num_classes=num_classes,
            eval_mode=eval_mode,
            use_legacy_coordinate=False,
            nproc=nproc,
            drop_class_ap=drop_class_ap,
            classwise=classwise,
            **kwargs,
        )

    def add(self, predictions: Sequence[Dict[str, Any]], groundtruths: Sequence[Dict[str, Any]]) -> None:
        """Add one dict of rotated-box predictions and one of ground truths per image (see the class docstring)."""
        check_image_lists(predictions, groundtruths, "DOTAMeanAP")
        c = self.num_classes
        checked = []
        for i, (pred, gt) in enumerate(zip(predictions, groundtruths)):
            p = _rotated_fields(pred, f"predictions[{i}]", ("bboxes", "scores", "labels"), (), c)
            g = _rotated_fields(gt, f"groundtruths[{i}]", ("bboxes", "labels"), ("bboxes_ignore", "labels_ignore"), c)
            checked.append((p, g))
        self._keep_to_summarize(checked)  # matched on this rank, as VOCMeanAP keeps its images

    # -- the per-image hooks of VOCMeanAP, on rotated boxes ---------------------------------------------

    def _iou(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return calculate_overlaps_rotated(a, b)

    def _area(self, boxes: np.ndarray) -> np.ndarray:
        return calculate_bboxes_area_rotated(boxes)


def check_image_lists(predictions: Any, groundtruths: Any, who: str) -> None:
    """``add()``'s two arguments are lists of as many per-image dicts (MMEval: an ``AssertionError`` otherwise)."""
    if isinstance(predictions, dict) or isinstance(groundtruths, dict):
        raise MetricArgumentError(
            f"{who}.add: predictions and groundtruths must be sequences of dicts "
            f"(one per image), got a dict; wrap one image's dicts in lists"
        )
    if len(predictions) != len(groundtruths):
        raise MetricArgumentError(
            f"predictions and groundtruths have different lengths: {len(predictions)} and {len(groundtruths)}"
        )


def _rotated_fields(
    item: Any, what: str, required: Tuple[str, ...], optional: Tuple[str, ...], num_classes: int
) -> Dict[str, np.ndarray]:
    """One image's dict checked like :class:`VOCMeanAP`'s, its boxes rotated: float64 ``(n, 5)``."""
    if not isinstance(item, dict):
        return detection_fields(item, what, required, optional, num_classes)  # refuses it, naming the keys
    boxes: Dict[str, np.ndarray] = {}
    stand_in = dict(item)
    for key in ("bboxes", "bboxes_ignore"):
        if key not in item:
            continue
        arr = to_numpy(item[key], f"{what}[{key!r}]")
        arr = arr.reshape(0, 5) if arr.size == 0 else arr
        if arr.ndim != 2 or arr.shape[1] not in (5, 8):
            raise MetricArgumentError(
                f"{what}[{key!r}] must have shape (n, 5) (cx, cy, w, h, angle) or (n, 8) "
                f"(x1, y1, ..., x4, y4), got {arr.shape}"
            )
        if arr.dtype.kind not in "iuf" and arr.size:
            raise MetricArgumentError(f"{what}[{key!r}] must hold numbers, got dtype {arr.dtype}")
        values = arr.astype(np.float64)
        if not np.isfinite(values).all():
            raise MetricArgumentError(f"{what}[{key!r}] holds NaN or infinite values")
        boxes[key] = qbox_to_rbox(values) if values.shape[1] == 8 else values
        stand_in[key] = np.zeros((values.shape[0], 4))  # the other fields are checked as VOCMeanAP checks them
    out = detection_fields(stand_in, what, required, optional, num_classes)
    for key, value in boxes.items():
        out[key] = value
    if "bboxes_ignore" not in boxes:
        out["bboxes_ignore"] = np.zeros((0, 5))
    return out
