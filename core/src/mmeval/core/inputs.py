"""What every metric does with its callers' inputs: convert array-likes to numpy, check labels and indices, warn.

Frameworks are never imported: tensors are recognised by their methods. The
errors name the argument (``what``) and say what to pass; warnings point at the
caller's line, outside mmeval (:func:`warn_user`).
"""

from __future__ import annotations

import numbers
import os
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional, Tuple, Type

import numpy as np

__all__ = [
    "INT64_MAX",
    "FINITE",
    "SCORES",
    "FloatInput",
    "as_indices",
    "check_batch_shapes",
    "check_float_inputs",
    "declared_specs",
    "class_indices",
    "to_numpy",
    "warn_user",
]

#: The largest class or dataset index: indices are stored as int64.
INT64_MAX = 2**63 - 1

#: Floating-point formats numpy has no native dtype for (torch / paddle dtype
#: names, and ml_dtypes' numpy dtypes as JAX and TensorFlow return them).
#: Every one of them converts to float32 exactly.
_NARROW_FLOAT_PREFIXES = ("bfloat16", "float8_", "float6_", "float4_")

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn_user(message: str, category: Type[Warning]) -> None:
    """``warnings.warn`` attributed to the first frame outside the mmeval package: the caller's own line."""
    level = 2  # 1 is this function, 2 its caller
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    warnings.warn(message, category, stacklevel=level)


def _dtype_name(dtype: Any) -> str:
    """``'bfloat16'`` for ``torch.bfloat16``, ``paddle.bfloat16``, ``np.dtype(ml_dtypes.bfloat16)``."""
    return str(dtype).rsplit(".", 1)[-1]


def _is_narrow_float(name: str) -> bool:
    return name.startswith(_NARROW_FLOAT_PREFIXES)


def _tensor_to_numpy(value: Any, what: str) -> np.ndarray:
    """A torch-like tensor (``detach``/``cpu``; any device, requiring grad or not) as numpy.

    bfloat16 and float8 tensors (which ``Tensor.numpy()`` refuses) are widened
    to float32 on the host, which is exact. A tensor on the ``meta`` device
    (shapes without data) is refused naming ``what``.
    """
    if getattr(value, "is_meta", False) or str(getattr(value, "device", "")) == "meta":
        raise TypeError(
            f"{what}: a tensor on the 'meta' device has a shape but no values ({tuple(value.shape)}); "
            f"pass the tensor the model computed (on the CPU or an accelerator)"
        )
    t = value.detach().cpu()  # drops autograd; moves a CUDA tensor to the host
    dtype = getattr(t, "dtype", None)
    if dtype is not None and _is_narrow_float(_dtype_name(dtype)):
        t = t.float() if hasattr(t, "float") else t.astype("float32")  # torch / paddle
    try:
        return np.asarray(t.numpy())
    except (TypeError, RuntimeError) as exc:
        raise TypeError(
            f"{what}: cannot convert a {type(value).__name__} of dtype {dtype} to numpy ({exc}); "
            f"convert it to a float or integer dtype first"
        ) from None


def _widen(arr: np.ndarray) -> np.ndarray:
    """Exact numpy dtypes for ml_dtypes' arrays (JAX / TensorFlow bfloat16, float8, int4, ...)."""
    if np.issubdtype(arr.dtype, np.number) or arr.dtype.names is not None:
        return arr
    name = arr.dtype.name
    if _is_narrow_float(name):
        return arr.astype(np.float32)
    if re.fullmatch(r"u?int[0-9]+", name):
        return arr.astype(np.int64)
    return arr


def to_numpy(value: Any, what: str) -> np.ndarray:
    """Convert an array-like to numpy: numpy, lists, torch / paddle tensors (any device, bfloat16
    and float8 included), TensorFlow tensors, JAX arrays and anything with ``__array__``.

    Frameworks are never imported: torch-like objects are recognised by
    ``detach``/``cpu``, eager TensorFlow tensors by ``numpy()``, the rest go
    through ``np.asarray``. Formats numpy lacks (bfloat16, float8) come back as
    float32, which holds every one of their values exactly.
    """
    if isinstance(value, np.ndarray):
        return _widen(value)
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor, paddle.Tensor, any device
        return _widen(_tensor_to_numpy(value, what))
    if hasattr(value, "numpy") and callable(value.numpy) and not isinstance(value, (list, tuple)):
        return _widen(np.asarray(value.numpy()))
    if isinstance(value, (list, tuple)):
        if len(value) and not isinstance(value[0], numbers.Number):
            try:
                return np.stack([to_numpy(v, what) for v in value])
            except ValueError as exc:
                raise ValueError(f"{what}: items have different shapes ({exc})") from None
    try:
        return _widen(np.asarray(value))
    except Exception as exc:
        raise TypeError(f"{what}: cannot convert {type(value).__name__} to an array ({exc})") from None


def as_indices(value: Any, what: str = "indices") -> np.ndarray:
    """Dataset indices as a 1-D int64 array: a list, a numpy array, a tensor or an array-like.

    Raises ``ValueError`` naming ``what`` for anything but integers in
    ``[0, 2**63 - 1]`` in one dimension (a uint64 index past int64 is refused,
    never wrapped to a negative one).
    """
    arr = to_numpy(value, what)
    if arr.size == 0:
        arr = arr.astype(np.int64)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one dataset index per sample, shape (N,); got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{what} must be integer dataset indices, got dtype {arr.dtype}")
    if arr.size and arr.dtype.kind == "u" and arr.max() > INT64_MAX:
        raise ValueError(
            f"{what} must be dataset indices in [0, 2**63 - 1], got {int(arr.max())} "
            f"(dtype {arr.dtype}): pass the dataset's own indices"
        )
    if arr.size and arr.dtype.kind == "i" and arr.min() < 0:
        raise ValueError(f"{what} must be non-negative dataset indices, got {int(arr.min())}")
    return arr.astype(np.int64, copy=False)


def check_batch_shapes(preds: np.ndarray, labs: np.ndarray) -> None:
    """A single-label batch's shapes: predictions (N,) labels or (N, C) scores, labels (N,), N >= 1."""
    if preds.ndim not in (1, 2):
        raise ValueError(f"predictions must have shape (N,) (labels) or (N, C) (scores), got {preds.shape}")
    if labs.ndim != 1:
        hint = ""
        if labs.ndim == 2 and labs.shape[1] > 1:  # one-hot (or multi-hot) rows: the class index is the argmax
            hint = (
                "; one-hot labels? pass the class indices, labels.argmax(1) (numpy: axis=1, torch: dim=1); "
                "several classes per sample are MultiLabelMetric's input"
            )
        raise ValueError(f"labels must have shape (N,) (class indices), got {labs.shape}{hint}")
    if preds.shape[0] != labs.shape[0]:
        raise ValueError(
            f"predictions and labels have different lengths: {preds.shape[0]} predictions, {labs.shape[0]} labels"
        )
    if preds.shape[0] == 0:
        raise ValueError("predictions is empty: add() needs at least one sample")


def class_indices(arr: np.ndarray, what: str, num_classes: Optional[int] = None) -> np.ndarray:
    """``arr`` as int64 class indices, refusing any value that is not an integer in ``[0, hi]``.

    ``hi`` is ``num_classes - 1`` when the class count is known (score
    predictions), else :data:`INT64_MAX`. The error names ``what``, the first
    bad value, its index and the valid range.
    """
    hi = INT64_MAX if num_classes is None else num_classes - 1
    valid = f"class indices must be integers in [0, {hi}]"
    if num_classes is not None:
        valid += f" ({num_classes} classes in predictions)"
    kind = arr.dtype.kind
    if kind == "i":
        bad = (arr < 0) | (arr > hi)
    elif kind == "u":
        bad = arr > hi
    elif kind == "f":
        a = arr.astype(np.float64, copy=False)
        finite = np.isfinite(a)
        with np.errstate(invalid="ignore"):
            integral = finite & (np.floor(a) == a)
            bad = ~integral | (a < 0) | (a >= float(hi + 1))
    else:
        raise ValueError(f"{what} must be integer class indices, got dtype {arr.dtype}; {valid}")
    if bad.any():
        idx = int(np.flatnonzero(bad)[0])
        val = arr[idx]
        shown = repr(float(val)) if kind == "f" else str(int(val))
        if kind == "f" and not np.isfinite(val):
            raise ValueError(f"{what} must be integer class indices: got {shown} at index {idx}; {valid}")
        if kind == "f" and np.floor(val) != val:
            raise ValueError(
                f"{what} must be integer class indices: got the non-integral value {shown} at index {idx}; {valid}"
            )
        raise ValueError(f"{what} out of range: got {shown} at index {idx}; {valid}")
    return arr.astype(np.int64, copy=False)


@dataclass(frozen=True)
class FloatInput:
    """What one float argument of a metric's ``add()`` accepts, declared once on the metric class.

    A metric lists them in its class attribute ``float_inputs`` (argument name
    -> ``FloatInput``); the ``add()`` wrapper every metric gets checks each
    declared argument before the metric's own ``add()`` runs
    (:func:`check_float_inputs`), so a NaN pixel, keypoint or logit is refused
    naming the argument and the place, for every metric alike. The argument
    may be an array, a tensor, or sequences / dicts of them (every numeric
    array found inside is checked; ``keys``: only those dict keys).

    Attributes:
        finite: NaN and +-inf are refused.
        low, high: the closed range of accepted values (``None``: unbounded).
        keys: in dicts, the keys this applies to (``None``: every key).
        skip_keys: in dicts, keys this does not apply to (the metric checks them itself).
        min_ndim: only arrays of at least this many dimensions (``2``: scores ``(N, C)``, not
            predicted labels ``(N,)``, which the metric checks as class indices).
        nan_where: where NaN *has* a meaning, in words (then ``finite`` is
            ``False`` and the metric itself checks and documents it, e.g. an
            invalid keypoint); shown in the docs and the shared test suite.
    """

    finite: bool = True
    low: Optional[float] = None
    high: Optional[float] = None
    keys: Optional[Tuple[str, ...]] = None
    skip_keys: Tuple[str, ...] = ()
    nan_where: Optional[str] = None
    min_ndim: int = 0

    def describe(self) -> str:
        """The declaration in words (for errors and the docs)."""
        parts = ["finite" if self.finite else f"NaN allowed where {self.nan_where or 'the metric says'}"]
        if self.low is not None or self.high is not None:
            lo = "-inf" if self.low is None else f"{self.low:g}"
            hi = "inf" if self.high is None else f"{self.high:g}"
            parts.append(f"in [{lo}, {hi}]")
        if self.keys is not None:
            parts.append(f"keys {list(self.keys)}")
        if self.skip_keys:
            parts.append(f"but keys {list(self.skip_keys)}")
        return ", ".join(parts)


#: the usual declaration: NaN and +-inf refused, any range
FINITE = FloatInput()
#: classification scores (N, C): finite (predicted labels (N,) are checked as class indices by the metric)
SCORES = FloatInput(min_ndim=2)


def _arrays_in(value: Any, path: str, spec: "FloatInput") -> Iterator[Tuple[str, np.ndarray]]:
    """Every numeric array inside ``value`` (sequences and dicts walked) with its path, per ``spec``'s keys."""
    keys = spec.keys
    if value is None or isinstance(value, (str, bytes)):
        return
    if isinstance(value, Mapping):
        inner = FloatInput(spec.finite, spec.low, spec.high, None, (), spec.nan_where, spec.min_ndim)
        for k, v in value.items():
            if (keys is None or k in keys) and k not in spec.skip_keys:
                yield from _arrays_in(v, f"{path}[{k!r}]", inner)
        return
    if isinstance(value, (list, tuple)) and (not value or not isinstance(value[0], numbers.Number)):
        for i, v in enumerate(value):
            yield from _arrays_in(v, f"{path}[{i}]", spec)
        return
    if keys is not None:  # a bare array where dicts are expected: the metric refuses it itself
        return
    try:
        arr = to_numpy(value, path)
    except (TypeError, ValueError):  # not an array: the metric's own checks name it
        return
    if arr.dtype.kind in "iufb" and arr.size and arr.ndim >= spec.min_ndim:
        yield path, arr


def declared_specs(declared: Any) -> Tuple[FloatInput, ...]:
    """A ``float_inputs`` value as a tuple: one :class:`FloatInput`, or several for the keys of a dict argument."""
    return (declared,) if isinstance(declared, FloatInput) else tuple(declared)


def check_float_inputs(name: str, declared: Mapping[str, Any], bound: Mapping[str, Any]) -> None:
    """Refuse (:class:`~mmeval.core.errors.MetricArgumentError`) a value a declared argument does not accept.

    ``declared``: argument name -> a :class:`FloatInput`, or a tuple of them (e.g. one for
    some keys of a dict argument, another for the others). ``bound``: the ``add()`` call's arguments by name. The error names the
    metric, the argument and the place (``predictions[3]``, ``groundtruths[0]['coords']``),
    the first bad value and what the argument accepts.
    """
    from .errors import MetricArgumentError

    for arg, specs in declared.items():
        if arg not in bound:
            continue
        for spec, path, arr in (
            (one, *found) for one in declared_specs(specs) for found in _arrays_in(bound[arg], arg, one)
        ):
            bad: Optional[np.ndarray] = None
            if arr.dtype.kind in "fc" and spec.finite:
                bad = ~np.isfinite(arr)
            if spec.low is not None or spec.high is not None:
                with np.errstate(invalid="ignore"):
                    out = np.zeros(arr.shape, dtype=bool)
                    if spec.low is not None:
                        out |= arr < spec.low
                    if spec.high is not None:
                        out |= arr > spec.high
                bad = out if bad is None else bad | out
            if bad is not None and bad.any():
                where = np.unravel_index(int(np.flatnonzero(bad)[0]), arr.shape)
                value = arr[where].item()
                shown = "NaN" if value != value else repr(value)
                raise MetricArgumentError(
                    f"{name}.add(): {path} holds {shown} at {tuple(int(i) for i in where)}; "
                    f"{arg} must be {spec.describe()}"
                )
