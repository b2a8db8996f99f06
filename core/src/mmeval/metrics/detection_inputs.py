"""The input checks of VOC-style box detection metrics: their arguments, and one image's dict of boxes, scores, labels.

``VOCMeanAP`` and ``OIDMeanAP`` check their thresholds with :func:`thresholds`, scale ranges with
:func:`scale_range_pairs`, flags with :func:`check_flags`. ``VOCMeanAP`` checks its predictions and ground
truths with :func:`detection_fields`, ``OIDMeanAP`` its predictions, ``DOTAMeanAP`` the fields other than
its rotated boxes.
"""

from __future__ import annotations

import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.errors import MetricArgumentError, MetricArgumentKeyError
from ..core.inputs import to_numpy

__all__ = ["check_flags", "detection_fields", "scale_range_pairs", "thresholds"]

#: a scale range: ``(min_scale, max_scale)``, ``None`` unbounded
ScaleRange = Tuple[Optional[float], Optional[float]]


def thresholds(value: Any, name: str, one_allowed: bool) -> Tuple[float, ...]:
    """``value`` (a number or a non-empty sequence of them, each in (0, 1), or (0, 1] with ``one_allowed``) as floats."""
    thrs: Tuple[Any, ...] = (value,) if isinstance(value, numbers.Real) else tuple(value)
    if not thrs or not all(
        isinstance(t, numbers.Real) and not isinstance(t, bool) and (0 < float(t) < 1 or (one_allowed and t == 1))
        for t in thrs
    ):
        raise MetricArgumentError(
            f"{name} must be a number in (0, 1{']' if one_allowed else ')'} or a non-empty sequence of them, got {value!r}"
        )
    return tuple(float(t) for t in thrs)


def scale_range_pairs(scale_ranges: Optional[Sequence[ScaleRange]]) -> Tuple[ScaleRange, ...]:
    """The ``(min_scale, max_scale)`` pairs (non-negative numbers or ``None``), ``(None, None)`` appended when absent."""
    ranges: List[ScaleRange] = []
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
    return tuple(ranges)


def check_flags(**flags: Any) -> None:
    """Each argument is ``True`` or ``False`` (a NumPy bool too); the first that is not raises, naming it."""
    for name, flag in flags.items():
        if not isinstance(flag, (bool, np.bool_)):
            raise MetricArgumentError(f"{name} must be True or False, got {flag!r}")


def detection_fields(
    item: Any, what: str, required: Tuple[str, ...], optional: Tuple[str, ...], num_classes: int
) -> Dict[str, np.ndarray]:
    """One image's dict checked and converted: boxes float64 (n, 4), scores float64 (n,), labels int64 (n,).

    ``required`` keys must be there; an ``optional`` one absent is empty (no ignored objects). Bad keys,
    shapes, non-finite values or labels outside ``[0, num_classes - 1]`` raise
    :class:`~mmeval.core.errors.MetricArgumentError` (or its ``KeyError`` kind) naming ``what`` and the field.
    """
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
