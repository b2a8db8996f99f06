"""Top-k classification accuracy."""

from __future__ import annotations

import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import ArrayResults, BaseMetric

__all__ = ["Accuracy"]


def to_numpy(value: Any, what: str) -> np.ndarray:
    """Convert an array-like (numpy, list, torch tensor on any device, TF tensor, ...) to numpy.

    Frameworks are never imported: torch-like objects are recognised by
    ``detach``/``cpu``, eager TensorFlow / Paddle tensors by ``numpy()``.
    """
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor, any device
        return np.asarray(value.detach().cpu().numpy())
    if hasattr(value, "numpy") and callable(value.numpy) and not isinstance(value, (list, tuple)):
        return np.asarray(value.numpy())
    if isinstance(value, (list, tuple)):
        if len(value) and not isinstance(value[0], numbers.Number):
            try:
                return np.stack([to_numpy(v, what) for v in value])
            except ValueError as exc:
                raise ValueError(f"{what}: items have different shapes ({exc})") from None
        return np.asarray(value)
    try:
        return np.asarray(value)
    except Exception as exc:
        raise TypeError(f"{what}: cannot convert {type(value).__name__} to an array ({exc})") from None


class Accuracy(BaseMetric):
    """Top-k accuracy, optionally counting a hit only when its score exceeds a threshold.

    Args:
        topk: the k (an int or a tuple of ints) to report.
        thrs: score threshold(s): a hit at top-k counts only when the true
            class's score is strictly greater than ``thr`` (``None``: no
            threshold). Thresholds apply to score predictions only.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments (``dist_backend``,
            ``dist_collect_mode``, ``dataset_meta``).

    ``add(predictions, labels)`` takes labels of shape (N,) and predictions as
    labels (N,) or scores (N, C); numpy arrays, lists, or array-likes such as
    torch tensors (CPU or CUDA) and TensorFlow tensors.

    Result keys: ``top{k}``, with ``_thr-{thr:.2f}`` / ``_no-thr`` appended
    when several thresholds are given. Values are fractions in [0, 1]. Ties
    between scores are broken toward the lower class index (like a stable
    sort of the negated scores). Label predictions report ``top1`` only.
    """

    def __init__(
        self,
        topk: Union[int, Sequence[int]] = (1,),
        thrs: Union[float, Sequence[Optional[float]], None] = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        topk_t: Tuple[Any, ...] = (topk,) if isinstance(topk, numbers.Integral) else tuple(topk)  # type: ignore[arg-type]
        if not topk_t or not all(isinstance(k, numbers.Integral) and not isinstance(k, bool) and int(k) >= 1
                                 for k in topk_t):
            raise ValueError(f"topk must be a positive int or a non-empty tuple of them, got {topk!r}")
        self.topk: Tuple[int, ...] = tuple(int(k) for k in topk_t)
        thrs_t: Tuple[Any, ...] = (
            (thrs,) if thrs is None or isinstance(thrs, numbers.Real) else tuple(thrs)  # type: ignore[arg-type]
        )
        if not thrs_t or not all(t is None or (isinstance(t, numbers.Real) and np.isfinite(float(t))) for t in thrs_t):
            raise ValueError(f"thrs must be a finite number, None, or a tuple of them, got {thrs!r}")
        self.thrs: Tuple[Optional[float], ...] = tuple(None if t is None else float(t) for t in thrs_t)

    # -- accumulate ----------------------------------------------------------

    def add(self, predictions: Any, labels: Any) -> None:
        """Add a batch: ``predictions`` (N,) labels or (N, C) scores, ``labels`` (N,)."""
        preds = to_numpy(predictions, "predictions")
        labs = to_numpy(labels, "labels")
        self._validate(preds, labs)
        self._add_batch(predictions=preds, labels=labs.astype(np.int64, copy=False))

    def _validate(self, preds: np.ndarray, labs: np.ndarray) -> None:
        if preds.ndim not in (1, 2):
            raise ValueError(f"predictions must have shape (N,) (labels) or (N, C) (scores), got {preds.shape}")
        if labs.ndim != 1:
            raise ValueError(f"labels must have shape (N,), got {labs.shape}")
        if preds.shape[0] != labs.shape[0]:
            raise ValueError(
                f"predictions and labels have different lengths: {preds.shape[0]} predictions, {labs.shape[0]} labels"
            )
        if preds.shape[0] == 0:
            raise ValueError("predictions is empty: add() needs at least one sample")
        if not (np.issubdtype(labs.dtype, np.integer) or np.issubdtype(labs.dtype, np.floating)):
            raise ValueError(f"labels must be integer class indices, got dtype {labs.dtype}")
        if np.issubdtype(labs.dtype, np.floating) and not np.all(np.mod(labs, 1) == 0):
            raise ValueError("labels must be integer class indices, got non-integral values")
        if labs.min() < 0:
            raise ValueError(f"labels out of range: got {int(labs.min())}; class indices start at 0")
        if preds.ndim == 2:
            if not np.issubdtype(preds.dtype, np.number) or np.issubdtype(preds.dtype, np.complexfloating):
                raise ValueError(f"predictions (scores) must be real numbers, got dtype {preds.dtype}")
            num_classes = preds.shape[1]
            if np.issubdtype(preds.dtype, np.floating) and np.isnan(preds).any():
                raise ValueError("predictions contain NaN scores")
            if labs.max() >= num_classes:
                raise ValueError(
                    f"labels out of range: got {int(labs.max())} with {num_classes} classes in predictions"
                )
            if max(self.topk) > num_classes:
                raise ValueError(f"topk={self.topk} asks for more than the {num_classes} classes in predictions")
        elif not (np.issubdtype(preds.dtype, np.integer) or np.issubdtype(preds.dtype, np.floating)):
            raise ValueError(f"predictions (labels) must be integer class indices, got dtype {preds.dtype}")
        if self._batches:
            earlier = self._batches[0]["predictions"]
            if earlier.ndim != preds.ndim or earlier.shape[1:] != preds.shape[1:]:
                raise ValueError(
                    f"predictions of shape {preds.shape} do not match earlier batches' per-sample shape "
                    f"{earlier.shape[1:]} (labels and scores cannot be mixed; the class count must not change)"
                )

    # -- compute -------------------------------------------------------------

    def compute_metric(self, results: Union[ArrayResults, List[Tuple[Any, Any]]]) -> Dict[str, float]:
        """Accuracy of ``results`` (an :class:`ArrayResults` or a list of ``(prediction, label)``)."""
        if isinstance(results, ArrayResults):
            preds, labels = results["predictions"], results["labels"]
        else:
            if not results:
                raise ValueError("Accuracy.compute_metric: no results to compute on (nothing was added)")
            p, lab = zip(*results)
            preds, labels = to_numpy(list(p), "predictions"), to_numpy(list(lab), "labels")
        n = int(labels.shape[0])
        if n == 0:
            raise ValueError("Accuracy.compute_metric: no results to compute on (nothing was added)")
        if preds.ndim == 1:
            return {"top1": float(np.count_nonzero(preds == labels)) / n}
        return self._topk_accuracy(preds, labels.astype(np.int64, copy=False))

    def _topk_accuracy(self, scores: np.ndarray, labels: np.ndarray) -> Dict[str, float]:
        n = scores.shape[0]
        rank = _label_rank(scores, labels)
        true_score = scores[np.arange(n), labels]
        out: Dict[str, float] = {}
        for k in self.topk:
            hit = rank < k
            for thr in self.thrs:
                name = f"top{k}"
                if len(self.thrs) > 1:
                    name += "_no-thr" if thr is None else f"_thr-{thr:.2f}"
                ok = hit if thr is None else hit & (true_score > thr)
                out[name] = float(np.count_nonzero(ok)) / n
        return out


def _label_rank(scores: np.ndarray, labels: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """Position of each true label in its row's descending order (ties: lower index first).

    Counts the classes that beat the label, without sorting: O(N * C).
    """
    n, c = scores.shape
    out = np.empty(n, dtype=np.int64)
    cols = np.arange(c)
    for start in range(0, n, chunk):
        s = scores[start : start + chunk]
        lab = labels[start : start + chunk]
        true = s[np.arange(s.shape[0]), lab][:, None]
        beats = (s > true) | ((s == true) & (cols[None, :] < lab[:, None]))
        out[start : start + chunk] = beats.sum(axis=1)
    return out
