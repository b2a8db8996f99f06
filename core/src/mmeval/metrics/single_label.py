"""Precision, recall, F1-score and support for single-label classification (MMEval's ``SingleLabelMetric``)."""

from __future__ import annotations

import numbers
from typing import Any, ClassVar, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import ArrayResults, BaseMetric
from ..core.errors import MetricArgumentError
from ..core.inputs import SCORES, FloatInput, check_batch_shapes, class_indices, to_numpy
from ..core.state import MetricState

__all__ = ["SingleLabelMetric", "SingleLabelPrecisionRecallF1score"]

#: The items a precision / recall / F1 metric can report, in the order they are reported.
ITEMS = ("precision", "recall", "f1-score", "support")
#: The averages a precision / recall / F1 metric accepts.
AVERAGES = ("macro", "micro", None)


def check_items_and_average(items: Any, average: Any, metric: str) -> Tuple[str, ...]:
    """``items`` as a tuple after checking it and ``average``.

    A :class:`~mmeval.core.errors.MetricArgumentError` (also MMEval's ``AssertionError``) names the bad
    argument; its message starts as MMEval 0.2.1's did (``The metric <item> is not supported``,
    ``Invalid `average` argument``), so code matching those messages keeps working.
    """
    if (
        isinstance(items, str)
        or not isinstance(items, (list, tuple))
        or not items
        or not all(isinstance(i, str) and i in ITEMS for i in items)
    ):
        bad = [i for i in items if i not in ITEMS] if isinstance(items, (list, tuple)) else [items]
        shown = bad[0] if bad else items
        raise MetricArgumentError(
            f"{metric}: The metric {shown} is not supported: items must be a non-empty sequence of "
            f"{list(ITEMS)}, got {items!r}"
        )
    if average not in AVERAGES:
        raise MetricArgumentError(
            f"{metric}: Invalid `average` argument {average!r}: average must be one of {list(AVERAGES)}"
        )
    return tuple(items)


def prf_support(tp: np.ndarray, pred: np.ndarray, gt: np.ndarray, average: Optional[str]) -> Tuple[Any, Any, Any, Any]:
    """Precision, recall, F1 (percentages) and support from per-class counts, as MMEval 0.2.1 computes them.

    ``tp``, ``pred``, ``gt``: per-class true positives, predicted positives and
    ground-truth positives (int arrays of length C). A class with no predicted
    (ground-truth) positive has precision (recall) 0, and F1 is 0 where
    precision + recall is 0. ``'macro'`` averages the per-class values over
    all C classes (support: the total); ``'micro'`` computes them from the
    summed counts; ``None`` returns the per-class arrays.
    """
    if average == "micro":
        tp, pred, gt = tp.sum(), pred.sum(), gt.sum()
    precision = tp / np.clip(pred, 1, np.inf) * 100
    recall = tp / np.clip(gt, 1, np.inf) * 100
    f1 = 2 * precision * recall / np.clip(precision + recall, np.finfo(np.float32).eps, np.inf)
    if average == "macro":
        return precision.mean(0), recall.mean(0), f1.mean(0), gt.sum(0)
    return precision, recall, f1, gt


def format_prf(
    values: Tuple[Any, Any, Any, Any], items: Sequence[str], average: Optional[str], suffix: str = ""
) -> Dict[str, Any]:
    """MMEval's result keys: ``{item}{suffix}``, then ``_micro`` or ``_classwise`` (a list); rounded to 4 decimals.

    Support is an int (a list of ints per class).
    """
    out: Dict[str, Any] = {}
    for item, value in zip(ITEMS, values):
        if item not in items:
            continue
        key = item + suffix
        if average is None:
            out[key + "_classwise"] = [_rounded(v, item) for v in np.asarray(value).tolist()]
        else:
            out[key + ("_micro" if average == "micro" else "")] = _rounded(np.asarray(value).item(), item)
    return out


def _rounded(value: Any, item: str) -> Union[int, float]:
    return int(value) if item == "support" else round(float(value), 4)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class SingleLabelMetric(BaseMetric):
    """Precision, recall, F1-score and support of single-label multi-class classification.

    The names, arguments and result keys are MMEval 0.2.1's
    ``SingleLabelMetric`` (also exported as ``SingleLabelPrecisionRecallF1score``).

    Args:
        num_classes: the number of classes ``C``. Needed when predictions are
            labels (N,); with scores (N, C) it is taken from the scores and,
            when given, must equal ``C``.
        thrs: score threshold(s), for score predictions only: a sample whose
            top score is ``<= thr`` predicts no class (a false negative of its
            true class). A number, ``None`` (no threshold, the default) or a
            sequence of them; several thresholds report each one with a suffix
            ``_thr-{thr:.2f}`` / ``_no-thr``.
        items: which of ``'precision'``, ``'recall'``, ``'f1-score'`` and
            ``'support'`` to report (always reported in that order).
        average: ``'macro'`` (the mean of the per-class values over all C
            classes; support is the sample count), ``'micro'`` (from the
            counts summed over classes; keys end in ``_micro``) or ``None``
            (per class: keys end in ``_classwise`` and hold lists of C values).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments (``dist_backend``,
            ``dist_collect_mode``, ``dataset_meta``).

    ``add(predictions, labels)``: ``predictions`` are labels (N,) or scores
    (N, C), ``labels`` (N,); numpy arrays, lists, or torch / paddle /
    TensorFlow / JAX tensors (converted like :class:`~mmeval.metrics.Accuracy`
    converts them). The predicted class of a score row is its arg-max (ties:
    the lower class index). Class indices must be integers in ``[0, C - 1]``.
    Bad input raises a ``ValueError`` naming the argument and keeps nothing
    of the batch; label and score predictions cannot be mixed. A refused
    argument -- a bad constructor argument, ``num_classes`` missing for label
    predictions or other than the scores' class count -- is a
    :class:`~mmeval.core.errors.MetricArgumentError`: also an
    ``AssertionError``, as MMEval asserted.

    Each sample is kept as its predicted class, top score, label and class
    count (four numbers), so the result is the same however the samples are
    sharded across ranks. With ``num_classes`` given it is a state metric:
    :meth:`compute` turns the samples this rank counts into per-threshold,
    per-class true-positive and predicted counts and per-class label counts,
    and moves only those (``(2 * len(thrs) + 1) * C + 2`` int64 values per
    rank), exactly; without it (the class count comes from the scores) the
    samples are gathered to rank 0.

    Result keys: ``precision``, ``recall``, ``f1-score`` (percentages in
    [0, 100], rounded to 4 decimals) and ``support`` (an int), as selected by
    ``items``; the threshold suffix (several ``thrs`` and score predictions
    only) comes before the ``_micro`` / ``_classwise`` suffix.

    Units: ``precision``, ``recall`` and ``f1-score`` are percentages in [0, 100]; ``support`` is a count of
    samples. These are MMEval's scales, kept as they are for compatibility with MMEval: one result dict may
    mix fractions and percentages.
    """

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs):
    #: scores are finite (a NaN or infinite score has no rank); labels are checked as class indices
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"predictions": SCORES}

    def __init__(
        self,
        num_classes: Optional[int] = None,
        thrs: Union[float, Sequence[Optional[float]], None] = None,
        items: Sequence[str] = ("precision", "recall", "f1-score"),
        average: Optional[str] = "macro",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if num_classes is not None and not (_is_int(num_classes) and int(num_classes) >= 1):
            raise MetricArgumentError(
                f"{type(self).__name__}: num_classes must be a positive int or None, got {num_classes!r}"
            )
        thrs_t: Tuple[Any, ...] = (
            (thrs,) if thrs is None or isinstance(thrs, numbers.Real) else tuple(thrs)  # type: ignore[arg-type]
        )
        if not thrs_t or not all(
            t is None or (isinstance(t, numbers.Real) and not isinstance(t, bool) and np.isfinite(float(t)))
            for t in thrs_t
        ):
            raise MetricArgumentError(
                f"{type(self).__name__}: thrs must be a finite number, None, or a non-empty sequence of them, "
                f"got {thrs!r}"
            )
        self.num_classes: Optional[int] = None if num_classes is None else int(num_classes)
        self.thrs: Tuple[Optional[float], ...] = tuple(None if t is None else float(t) for t in thrs_t)
        self.items: Tuple[str, ...] = check_items_and_average(items, average, type(self).__name__)
        self.average: Optional[str] = average
        if self.num_classes is not None:
            self._declare_state("tp", (len(self.thrs), self.num_classes))
            self._declare_state("predicted", (len(self.thrs), self.num_classes))
            self._declare_state("gt", (self.num_classes,))
            self._declare_state("scored")

    # -- accumulate ----------------------------------------------------------

    def add(self, predictions: Any, labels: Any) -> None:
        """Add a batch: ``predictions`` (N,) labels or (N, C) scores, ``labels`` (N,).

        Raises ``ValueError`` (and keeps nothing of the batch) on bad shapes,
        NaN scores, a class count other than ``num_classes``, or class indices
        that are not integers in range.
        """
        columns = self._columns(to_numpy(predictions, "predictions"), to_numpy(labels, "labels"))
        if self._batches and bool(np.isnan(self._batches[0]["score"][0])) != bool(np.isnan(columns["score"][0])):
            raise MetricArgumentError(
                "predictions: label predictions (N,) and score predictions (N, C) cannot be mixed in one metric"
            )
        self._add_batch(**columns)

    def _columns(self, preds: np.ndarray, labs: np.ndarray) -> Dict[str, np.ndarray]:
        """One batch checked and reduced to per-sample ``pred`` (class), ``score`` (NaN for labels), ``label``, ``C``."""
        check_batch_shapes(preds, labs)
        n = preds.shape[0]
        if preds.ndim == 1:
            if self.num_classes is None:
                raise MetricArgumentError(
                    f"{type(self).__name__}: Please specify `num_classes`: predictions are labels of shape "
                    f"{preds.shape}, so the class count is unknown: pass num_classes=C, or give scores of shape (N, C)"
                )
            c = self.num_classes
            pred = class_indices(preds, "predictions (labels)", c)
            score = np.full(n, np.nan)
        else:
            if not np.issubdtype(preds.dtype, np.number) or np.issubdtype(preds.dtype, np.complexfloating):
                raise MetricArgumentError(f"predictions (scores) must be real numbers, got dtype {preds.dtype}")
            c = preds.shape[1]
            if c == 0:
                raise MetricArgumentError(
                    f"{type(self).__name__}: predictions (scores) of shape {preds.shape} have no class column: "
                    f"pass scores of shape (N, C) with C >= 1"
                )
            if self.num_classes is not None and c != self.num_classes:
                raise MetricArgumentError(
                    f"{type(self).__name__}: Number of classes does not match: predictions (scores) have {c} classes "
                    f"(shape {preds.shape}) but num_classes={self.num_classes}: pass scores of shape (N, num_classes)"
                )
            scores = preds.astype(np.float64)
            if np.isnan(scores).any():
                raise MetricArgumentError("predictions contain NaN scores")
            pred = scores.argmax(axis=1).astype(np.int64)
            score = scores[np.arange(n), pred]
        label = class_indices(labs, "labels", c)
        return {"pred": pred, "score": score, "label": label, "num_classes": np.full(n, c, dtype=np.int64)}

    # -- compute -------------------------------------------------------------

    def _state_of_rows(self, rows: ArrayResults) -> Dict[str, np.ndarray]:
        """Per-threshold, per-class true-positive and predicted counts, label counts, score-predicted samples."""
        c = int(self.num_classes or 0)
        pred, label, score = rows["pred"], rows["label"], rows["score"]
        scored = ~np.isnan(score)
        hit = pred == label
        keeps = [np.ones_like(hit) if thr is None or not scored.any() else score > thr for thr in self.thrs]
        return {
            "tp": np.stack([np.bincount(pred[k & hit], minlength=c) for k in keeps]),
            "predicted": np.stack([np.bincount(pred[k], minlength=c) for k in keeps]),
            "gt": np.bincount(label, minlength=c),
            "scored": np.asarray(np.count_nonzero(scored)),
        }

    def compute_metric(self, results: Union[MetricState, ArrayResults, Sequence[Tuple[Any, Any]]]) -> Dict[str, Any]:
        """The metric of ``results``: the reduced :class:`~mmeval.core.state.MetricState` (with
        ``num_classes``), an :class:`ArrayResults` with the columns :meth:`add` keeps, or a sequence of
        per-sample ``(prediction, label)`` pairs (MMEval's form)."""
        if not len(results):
            raise ValueError(f"{type(self).__name__}.compute_metric: no results to compute on (nothing was added)")
        if isinstance(results, MetricState):
            return self._from_state(results)
        if isinstance(results, ArrayResults):
            cols: Dict[str, np.ndarray] = dict(results)
        else:
            p, lab = zip(*results)
            cols = self._columns(to_numpy(list(p), "predictions"), to_numpy(list(lab), "labels"))
        counts = np.unique(cols["num_classes"])
        if counts.size != 1:
            raise ValueError(
                f"{type(self).__name__}: the results hold different class counts {counts.tolist()}: every "
                f"prediction must have the same number of classes"
            )
        c = int(counts[0])
        label_preds = np.isnan(cols["score"])
        if label_preds.any() and not label_preds.all():
            raise ValueError(
                f"{type(self).__name__}: the results mix label predictions (N,) and score predictions (N, C); "
                f"give every rank the same kind"
            )
        pred, label, score = cols["pred"], cols["label"], cols["score"]
        gt = np.bincount(label, minlength=c)
        hit = pred == label

        def counts_at(keep: np.ndarray) -> Tuple[Any, Any, Any, Any]:
            tp = np.bincount(pred[keep & hit], minlength=c)
            return prf_support(tp, np.bincount(pred[keep], minlength=c), gt, self.average)

        if label_preds.all():  # thresholds need scores: MMEval ignores them for label predictions
            return format_prf(counts_at(np.ones_like(hit)), self.items, self.average)
        out: Dict[str, Any] = {}
        for thr in self.thrs:
            suffix = "" if len(self.thrs) == 1 else ("_no-thr" if thr is None else f"_thr-{thr:.2f}")
            keep = np.ones_like(hit) if thr is None else score > thr
            out.update(format_prf(counts_at(keep), self.items, self.average, suffix))
        return out

    def _from_state(self, state: MetricState) -> Dict[str, Any]:
        scored, n = int(state["scored"]), state.num_samples
        if 0 < scored < n:
            raise ValueError(
                f"{type(self).__name__}: the results mix label predictions (N,) and score predictions (N, C); "
                f"give every rank the same kind"
            )
        tp, predicted, gt = state["tp"], state["predicted"], state["gt"]
        if scored == 0:  # thresholds need scores: MMEval ignores them for label predictions
            return format_prf(prf_support(tp[0], predicted[0], gt, self.average), self.items, self.average)
        out: Dict[str, Any] = {}
        for t, thr in enumerate(self.thrs):
            suffix = "" if len(self.thrs) == 1 else ("_no-thr" if thr is None else f"_thr-{thr:.2f}")
            out.update(format_prf(prf_support(tp[t], predicted[t], gt, self.average), self.items, self.average, suffix))
        return out


#: MMEval 0.2.1's other name for :class:`SingleLabelMetric`.
SingleLabelPrecisionRecallF1score = SingleLabelMetric
