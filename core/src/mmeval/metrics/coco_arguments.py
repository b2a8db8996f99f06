"""COCODetection's arguments checked: the metrics, IoU thresholds, ``maxDets``, flags, result items and the
annotation file.

Each check raises :class:`~mmeval.core.errors.MetricArgumentError` (or its
``KeyError`` / ``TypeError`` twins, which MMEval's callers catch) naming the
argument and the value given; what passes comes back in the form the metric
keeps.
"""

from __future__ import annotations

import json
import numbers
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, cast

import numpy as np

from ..core.errors import MetricArgumentError, MetricArgumentKeyError, MetricArgumentTypeError
from .coco_inputs import Annotations

__all__ = ["METRICS", "check_arguments", "check_items", "default_iou_thrs", "item_names", "read_ann_file"]

#: the metrics COCODetection computes
METRICS = ("bbox", "segm", "proposal")


def default_iou_thrs() -> np.ndarray:
    """pycocotools' IoU thresholds, 0.5:0.05:0.95 (its expression, for the same floats)."""
    return np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)


def check_arguments(
    metric: Union[str, Sequence[str]],
    iou_thrs: Union[float, Sequence[float], None],
    proposal_nums: Sequence[int],
    classwise: Any,
    format_only: Any,
    outfile_prefix: Optional[str],
    gt_mask_area: Any,
    print_results: Any,
) -> Tuple[List[str], np.ndarray, List[int]]:
    """The metrics (a list), the IoU thresholds (float64) and the three ``maxDets`` (ints), the flags checked
    to be bools and ``format_only`` to come with an ``outfile_prefix``."""
    metrics = cast(List[str], list(metric) if isinstance(metric, (list, tuple)) else [metric])
    for m in metrics:
        if m not in METRICS:
            raise MetricArgumentKeyError(
                f"COCODetection: metric should be one of {list(METRICS)} or a list of them, got {m!r}"
            )
    if not metrics:
        raise MetricArgumentError("COCODetection: metric is an empty list; give 'bbox', 'segm' or 'proposal'")
    if iou_thrs is None:
        thrs = default_iou_thrs()
    elif isinstance(iou_thrs, float):
        thrs = np.array([iou_thrs])
    elif (
        isinstance(iou_thrs, (list, tuple, np.ndarray))
        and len(iou_thrs)
        and all(isinstance(t, (float, np.floating)) for t in iou_thrs)
    ):
        thrs = np.array(iou_thrs, dtype=np.float64)
    else:
        raise MetricArgumentTypeError(
            f"COCODetection: iou_thrs should be None, a float or a non-empty list of floats, got {iou_thrs!r}"
        )
    if not np.all((thrs >= 0) & (thrs <= 1)):
        raise MetricArgumentError(f"COCODetection: iou_thrs must lie in [0, 1], got {thrs.tolist()}")
    nums = list(proposal_nums) if isinstance(proposal_nums, (list, tuple, np.ndarray)) else None
    if (
        nums is None
        or len(nums) != 3
        or not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and int(n) >= 1 for n in nums)
    ):
        raise MetricArgumentError(
            f"COCODetection: proposal_nums must be three positive ints (the maxDets), got {proposal_nums!r}"
        )
    for flag_name, flag in (
        ("classwise", classwise),
        ("format_only", format_only),
        ("gt_mask_area", gt_mask_area),
        ("print_results", print_results),
    ):
        if not isinstance(flag, (bool, np.bool_)):
            raise MetricArgumentError(f"COCODetection: {flag_name} must be True or False, got {flag!r}")
    if format_only and outfile_prefix is None:
        raise MetricArgumentError(
            "COCODetection: format_only=True needs outfile_prefix (where the result files go); got outfile_prefix=None"
        )
    return metrics, thrs, [int(n) for n in nums]


def item_names(proposal_nums: Sequence[int]) -> Dict[str, int]:
    """MMEval's item name -> index into pycocotools' 12 stats (AR names from ``proposal_nums`` as given)."""
    n = proposal_nums
    return {
        "mAP": 0,
        "mAP_50": 1,
        "mAP_75": 2,
        "mAP_s": 3,
        "mAP_m": 4,
        "mAP_l": 5,
        f"AR@{n[0]}": 6,
        f"AR@{n[1]}": 7,
        f"AR@{n[2]}": 8,
        f"AR_s@{n[2]}": 9,
        f"AR_m@{n[2]}": 10,
        f"AR_l@{n[2]}": 11,
    }


def check_items(metric_items: Optional[Sequence[str]], proposal_nums: Sequence[int]) -> Optional[List[str]]:
    """``metric_items`` as a list, each one of :func:`item_names`; None stays None (every item)."""
    items = None if metric_items is None else list(metric_items)
    if items is not None:
        known = item_names(proposal_nums)
        bad = [i for i in items if i not in known]
        if bad:
            raise MetricArgumentKeyError(
                f"COCODetection: metric item(s) {bad} are not supported; use some of {list(known)}"
            )
    return items


def read_ann_file(ann_file: Any) -> Optional[Annotations]:
    """The ground truths of a COCO-format json file (a local path); None without one."""
    if ann_file is None:
        return None
    if not isinstance(ann_file, (str, os.PathLike)) or not os.path.isfile(ann_file):
        raise MetricArgumentError(f"COCODetection: ann_file={ann_file!r} is not a readable file")
    with open(ann_file) as f:
        return Annotations(json.load(f))
