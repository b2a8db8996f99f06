"""Top-k classification accuracy."""

from __future__ import annotations

import numbers
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Set, Tuple, Type, Union

import numpy as np

from ..core.base_metric import ArrayResults, BaseMetric
from ..core.errors import AccuracyWarning, DefaultThresholdWarning, MetricArgumentError, TopkWithLabelsWarning
from ..core.inputs import (
    INT64_MAX as INT64_MAX,
)
from ..core.inputs import (
    SCORES,
    FloatInput,
    check_batch_shapes,
    class_indices,
    to_numpy,
    warn_user,
)  # moved to mmeval.core.inputs; importable from here too
from ..core.state import MetricState

__all__ = ["Accuracy", "AccuracyWarning", "DefaultThresholdWarning", "TopkWithLabelsWarning"]

#: moved to :mod:`mmeval.core.inputs` (:func:`~mmeval.core.inputs.class_indices`); importable from here too
_class_indices = class_indices


class _DefaultThr(float):
    """``0.0``, marking a threshold the caller left at its default."""

    def __repr__(self) -> str:
        return "0.0"


_DEFAULT_THRS: float = _DefaultThr(0.0)


class Accuracy(BaseMetric):
    """Top-k accuracy, optionally counting a hit only when its score exceeds a threshold.

    Args:
        topk: the k (an int or a tuple of ints) to report.
        thrs: score threshold(s): a hit at top-k counts only when the true
            class's score is strictly greater than ``thr`` (``None``: no
            threshold). Thresholds apply to score predictions only. The
            default ``0.0`` is MMEval's and suits probabilities; **on raw
            logits it counts a true class in the top k whose score is <= 0 as
            a miss**, so top-k comes out lower than the plain top-k accuracy.
            Pass ``thrs=None`` for plain top-k on logits. While ``thrs`` is
            left at its default and it turns a top-k hit into a miss,
            :meth:`compute` warns once (:class:`DefaultThresholdWarning`);
            passing ``thrs=0.0`` explicitly keeps the threshold without the
            warning.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments (``dist_backend``,
            ``dist_collect_mode``, ``dataset_meta``).

    ``add(predictions, labels)`` takes labels of shape (N,) and predictions as
    labels (N,) or scores (N, C); numpy arrays, lists, or array-likes: torch
    and paddle tensors (CPU or CUDA, requiring grad or not, bfloat16 and
    float8 included: they are widened to float32, which is exact), TensorFlow
    tensors, JAX arrays and any object with ``__array__`` (bfloat16 / float8
    ml_dtypes arrays included).

    Class indices (``labels``, and label ``predictions``) must be integers (of
    an integer or floating dtype) in ``[0, C - 1]`` with scores, ``[0, 2**63 -
    1]`` otherwise: NaN, infinite, non-integral, negative or larger values
    raise a ``ValueError`` naming the argument, the value and the range, and
    leave the metric unchanged. A refused ``topk`` / ``thrs``, or scores that
    cannot be used (NaN, fewer classes than ``topk``, mixed with labels),
    raise :class:`~mmeval.core.errors.MetricArgumentError` (a ``ValueError``,
    and an ``AssertionError`` as MMEval's users catch).

    Result keys: ``top{k}``, with ``_thr-{thr:.2f}`` / ``_no-thr`` appended
    when several thresholds are given. Values are fractions in [0, 1]. Ties
    between scores are broken toward the lower class index (like a stable
    sort of the negated scores). Label predictions report ``top1`` only (as
    MMEval 0.2.1 does); with a k > 1 in ``topk`` the first such ``add()``
    warns (:class:`TopkWithLabelsWarning`): top-k for k > 1 needs scores.

    A state metric: ``add()`` keeps, per sample, whether it is a hit for each
    (k, thr) (a few bytes), and :meth:`compute` moves only the counts (one
    int64 ``all_reduce`` of ``len(topk) * len(thrs) + 4`` values, whatever the
    number of samples): exact. ``add(..., indices=...)`` takes the samples'
    dataset indices (see :class:`~mmeval.core.BaseMetric`).

    Units: the ``top{k}`` values are fractions in [0, 1] (0.9079 is 90.79 %). These are MMEval's scales, kept
    as they are for compatibility with MMEval: one result dict may mix fractions and percentages.
    """

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs):
    #: scores are finite (a NaN or infinite score has no rank); labels are checked as class indices
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"predictions": SCORES}

    def __init__(
        self,
        topk: Union[int, Sequence[int]] = (1,),
        thrs: Union[float, Sequence[Optional[float]], None] = _DEFAULT_THRS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        topk_t: Tuple[Any, ...] = (topk,) if isinstance(topk, numbers.Integral) else tuple(topk)  # type: ignore[arg-type]
        if not topk_t or not all(
            isinstance(k, numbers.Integral) and not isinstance(k, bool) and int(k) >= 1 for k in topk_t
        ):
            raise MetricArgumentError(f"topk must be a positive int or a non-empty tuple of them, got {topk!r}")
        self.topk: Tuple[int, ...] = tuple(int(k) for k in topk_t)
        thrs_t: Tuple[Any, ...] = (
            (thrs,) if thrs is None or isinstance(thrs, numbers.Real) else tuple(thrs)  # type: ignore[arg-type]
        )
        if not thrs_t or not all(t is None or (isinstance(t, numbers.Real) and np.isfinite(float(t))) for t in thrs_t):
            raise MetricArgumentError(f"thrs must be a finite number, None, or a tuple of them, got {thrs!r}")
        self.thrs: Tuple[Optional[float], ...] = tuple(None if t is None else float(t) for t in thrs_t)
        #: True while ``thrs`` is MMEval's default (not chosen by the caller): see DefaultThresholdWarning.
        self._default_thrs = thrs is _DEFAULT_THRS
        self._warned: Set[Type[Warning]] = set()
        #: per-sample shape of the predictions kept (labels and scores cannot be mixed)
        self._pred_shape: Optional[Tuple[int, ...]] = None
        # hits per (k, thr); samples given scores (not labels); hits at the largest k without the
        # threshold, and those of them the default thrs=0.0 turned into misses (DefaultThresholdWarning)
        self._declare_state("correct", (len(self.topk), len(self.thrs)))
        self._declare_state("scored")
        self._declare_state("hit_max_k")
        self._declare_state("lost_to_default_thr")

    def _warn_once(self, category: Type[AccuracyWarning], message: str) -> None:
        if category not in self._warned:
            self._warned.add(category)
            warn_user(message, category)

    # -- accumulate ----------------------------------------------------------

    def add(self, predictions: Any, labels: Any) -> None:
        """Add a batch: ``predictions`` (N,) labels or (N, C) scores, ``labels`` (N,).

        Raises ``ValueError`` / ``MetricArgumentError`` (and keeps nothing of the batch) on bad shapes,
        NaN scores, or class indices that are not integers in range.
        """
        preds, labs = self._checked(to_numpy(predictions, "predictions"), to_numpy(labels, "labels"))
        if self._batches and self._pred_shape != preds.shape[1:]:
            raise MetricArgumentError(
                f"predictions of shape {preds.shape} do not match earlier batches' per-sample shape "
                f"{self._pred_shape} (labels and scores cannot be mixed; the class count must not change)"
            )
        if preds.ndim == 1 and max(self.topk) > 1:
            self._warn_once(
                TopkWithLabelsWarning,
                f"Accuracy(topk={self.topk}) got label predictions of shape {preds.shape}: only top1 is "
                f"reported (as in MMEval 0.2.1); top-k for k > 1 needs scores of shape (N, num_classes)",
            )
        rows = self._rows(preds, labs)
        self._add_rows(**rows)
        self._pred_shape = preds.shape[1:]

    def _rows(self, preds: np.ndarray, labs: np.ndarray) -> Dict[str, np.ndarray]:
        """The per-sample rows of every state for one checked batch (booleans: one byte per count)."""
        n = labs.shape[0]
        shape = (n, len(self.topk), len(self.thrs))
        if preds.ndim == 1:
            hit = preds == labs
            return {
                "correct": np.broadcast_to(hit[:, None, None], shape).copy(),
                "scored": np.zeros(n, bool),
                "hit_max_k": hit,
                "lost_to_default_thr": np.zeros(n, bool),
            }
        rank = _label_rank(preds, labs)
        true_score = preds[np.arange(n), labs]
        correct = np.empty(shape, dtype=bool)
        for i, k in enumerate(self.topk):
            for j, thr in enumerate(self.thrs):
                correct[:, i, j] = rank < k if thr is None else (rank < k) & (true_score > thr)
        hit_max = rank < max(self.topk)
        return {
            "correct": correct,
            "scored": np.ones(n, bool),
            "hit_max_k": hit_max,
            "lost_to_default_thr": hit_max & ~(true_score > 0),
        }

    def _checked(self, preds: np.ndarray, labs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Validate one batch; return it with class indices as int64 (label predictions included)."""
        check_batch_shapes(preds, labs)
        if preds.ndim == 1:
            return class_indices(preds, "predictions (labels)"), class_indices(labs, "labels")
        if not np.issubdtype(preds.dtype, np.number) or np.issubdtype(preds.dtype, np.complexfloating):
            raise MetricArgumentError(f"predictions (scores) must be real numbers, got dtype {preds.dtype}")
        num_classes = preds.shape[1]
        if np.issubdtype(preds.dtype, np.floating) and np.isnan(preds).any():
            raise MetricArgumentError("predictions contain NaN scores")
        labs = class_indices(labs, "labels", num_classes)
        if max(self.topk) > num_classes:
            raise MetricArgumentError(f"topk={self.topk} asks for more than the {num_classes} classes in predictions")
        return preds, labs

    # -- compute -------------------------------------------------------------

    def compute_metric(self, results: Union[MetricState, ArrayResults, List[Tuple[Any, Any]]]) -> Dict[str, float]:
        """Accuracy from the reduced counts (a :class:`~mmeval.core.state.MetricState`).

        Also takes MMEval's per-sample results: a list of ``(prediction,
        label)`` or an :class:`ArrayResults` with ``predictions`` and ``labels``.
        """
        if not isinstance(results, MetricState):
            results = self._state_of(results)
        n = results.num_samples
        if n == 0:
            raise ValueError("Accuracy.compute_metric: no results to compute on (nothing was added)")
        scored = int(results["scored"])
        correct = results["correct"]
        if scored == 0:
            return {"top1": float(correct[0, 0]) / n}
        if scored != n:
            raise ValueError(
                f"Accuracy: {scored} of {n} samples had score predictions and the others label predictions "
                f"(across ranks): pass the same kind of predictions everywhere"
            )
        out: Dict[str, float] = {}
        for i, k in enumerate(self.topk):
            for j, thr in enumerate(self.thrs):
                name = f"top{k}"
                if len(self.thrs) > 1:
                    name += "_no-thr" if thr is None else f"_thr-{thr:.2f}"
                out[name] = float(correct[i, j]) / n
        lost = int(results["lost_to_default_thr"])
        if self._default_thrs and lost:
            k = max(self.topk)
            self._warn_once(
                DefaultThresholdWarning,
                f"Accuracy: the default thrs=0.0 counted {lost} of {n} samples whose true class is in the top "
                f"{k} as misses, because its score was <= 0 (raw logits?): top{k} is {out[f'top{k}']:.4f}, "
                f"{int(results['hit_max_k']) / n:.4f} without the threshold. Pass thrs=None for plain top-k "
                f"accuracy on logits, or thrs=0.0 explicitly to keep MMEval's threshold without this warning",
            )
        return out

    def _state_of(self, results: Union[ArrayResults, List[Tuple[Any, Any]]]) -> MetricState:
        """The local state of per-sample ``(prediction, label)`` results."""
        if isinstance(results, ArrayResults):
            preds, labels = results["predictions"], results["labels"]
        else:
            if not results:
                raise ValueError("Accuracy.compute_metric: no results to compute on (nothing was added)")
            p, lab = zip(*results)
            preds, labels = to_numpy(list(p), "predictions"), to_numpy(list(lab), "labels")
        preds, labels = self._checked(preds, labels)
        state = MetricState({k: v.sum(axis=0, dtype=np.int64) for k, v in self._rows(preds, labels).items()})
        state.num_samples = int(labels.shape[0])
        return state


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
