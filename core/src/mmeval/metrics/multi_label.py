"""Precision, recall, F1-score and support for multi-label classification (MMEval's ``MultiLabelMetric``)."""

from __future__ import annotations

import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import ArrayResults, BaseMetric
from ..core.inputs import class_indices, to_numpy, warn_user
from ..core.state import MetricState
from .single_label import check_items_and_average, format_prf, prf_support

__all__ = ["MultiLabelMetric", "MultiLabelPrecisionRecallF1score", "dense_rows"]


def _rows(value: Any, what: str) -> List[np.ndarray]:
    """``value`` as a list of per-sample arrays (0-d or 1-d): a sequence of them, an (N,) or an (N, K) array."""
    if isinstance(value, (list, tuple)):
        rows = [to_numpy(v, f"{what}[{i}]") for i, v in enumerate(value)]
    else:
        arr = to_numpy(value, what)
        if arr.ndim not in (1, 2):
            raise ValueError(
                f"{what} must be an (N,) or (N, C) array or a sequence of N index lists, got shape {arr.shape}"
            )
        rows = list(arr)
    for i, row in enumerate(rows):
        if row.ndim > 1:
            raise ValueError(f"{what}[{i}] must be one index, an index list or a row of C values, got shape {row.shape}")
    return rows


def dense_rows(value: Any, what: str, num_classes: int, scores: bool) -> np.ndarray:
    """Per-sample inputs as an (N, C) array: float64 scores (``scores=True``) or a bool one-hot matrix.

    Each sample is read on its own (so the result does not depend on how
    samples are batched or sharded): a row of exactly C values that are all
    in [0, 1] (0 or 1 when ``scores`` is False) is scores / one-hot; anything
    else (one index, or a list of indices of any length) is label format: the
    indices must be integers in ``[0, C - 1]``. A ``ValueError`` names the
    sample and what is expected.
    """
    rows = _rows(value, what)
    if not rows:
        raise ValueError(f"{what} is empty: add() needs at least one sample")
    out = np.zeros((len(rows), num_classes), dtype=np.float64 if scores else bool)
    for i, row in enumerate(rows):
        name = f"{what}[{i}]"
        if row.dtype.kind not in "iubf":
            raise ValueError(f"{name} must hold numbers (scores, 0/1 or class indices), got dtype {row.dtype}")
        if row.ndim == 1 and row.shape[0] == num_classes:
            vals = row.astype(np.float64)
            if np.isnan(vals).any():
                raise ValueError(f"{name} contains NaN")
            onehot = bool(((vals == 0) | (vals == 1)).all())
            if onehot or (scores and bool(((vals >= 0) & (vals <= 1)).all())):
                out[i] = vals if scores else vals.astype(bool)
                continue
        hint = "; score rows must be C values in [0, 1]" if scores else "; one-hot rows must be C values of 0 or 1"
        try:
            idx = class_indices(np.atleast_1d(row), name, num_classes)
        except ValueError as exc:
            raise ValueError(f"{exc} (label format){hint}") from None
        out[i, idx] = 1
    return out


class MultiLabelMetric(BaseMetric):
    """Precision, recall, F1-score and support of multi-label classification.

    The names, arguments and result keys are MMEval 0.2.1's
    ``MultiLabelMetric`` (also exported as ``MultiLabelPrecisionRecallF1score``).

    Args:
        num_classes: the number of classes ``C`` (a positive int).
        thr: a class is predicted positive when its score is ``>= thr``.
        topk: the ``topk`` highest-scored classes of a sample are predicted
            positive (ties: the lower class index first). When neither ``thr``
            nor ``topk`` is given, ``thr=0.5``; when both are, ``thr`` is used
            (and a ``UserWarning`` says so), as in MMEval.
        items: which of ``'precision'``, ``'recall'``, ``'f1-score'`` and
            ``'support'`` to report (always reported in that order).
        average: ``'macro'`` (the mean of the per-class values over all C
            classes; support: the total positive labels), ``'micro'`` (from
            the counts summed over classes; keys end in ``_micro``) or
            ``None`` (per class: keys end in ``_classwise``, lists of C values).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments (``dist_backend``,
            ``dist_collect_mode``, ``dataset_meta``).

    ``add(predictions, labels)``: per sample, predictions are C scores in
    [0, 1] (or one-hot) or a list of predicted class indices; labels are
    one-hot (C values of 0 / 1) or a list of class indices (lists may differ
    in length; one index per sample as an (N,) array also works). An (N, C)
    array, a sequence of rows, numpy, lists or framework tensors (converted
    like :class:`~mmeval.metrics.Accuracy` converts them). Each sample is
    read on its own: a row of exactly C values that are all 0 or 1 is
    one-hot, so write the label-format index list ``[0, 1]`` for classes 0
    and 1 when ``C == 2`` (MMEval guesses the format for a whole input
    instead). Bad input raises a ``ValueError`` naming the argument and the
    sample, and keeps nothing of the batch.

    Each sample is kept as two bool rows (predicted positives, true
    positives), decided at :meth:`add` with this metric's ``thr`` / ``topk``,
    so the result is the same however the samples are sharded. A state
    metric: :meth:`compute` turns the rows this rank counts into per-class
    true-positive, predicted-positive and positive-label counts and moves only
    those (``3 * C + 1`` int64 values per rank), exactly.

    Result keys: ``precision``, ``recall``, ``f1-score`` (percentages,
    rounded to 4 decimals) and ``support`` (an int), per ``items``; with a
    suffix ``_thr-{thr:.2f}`` when ``thr`` is not 0.5, ``_top{k}`` with
    ``topk``, then ``_micro`` / ``_classwise`` by ``average``.

    Units: ``precision``, ``recall`` and ``f1-score`` are percentages in [0, 100]; ``support`` is a count of
    samples. These are MMEval's scales, kept as they are for compatibility with MMEval: one result dict may
    mix fractions and percentages.
    """

    def __init__(
        self,
        num_classes: int,
        thr: Optional[float] = None,
        topk: Optional[int] = None,
        items: Sequence[str] = ("precision", "recall", "f1-score"),
        average: Optional[str] = "macro",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or num_classes < 1:
            raise ValueError(f"num_classes must be a positive int (the number of labels), got {num_classes!r}")
        if thr is not None and (isinstance(thr, bool) or not isinstance(thr, numbers.Real)
                                or not np.isfinite(float(thr))):
            raise ValueError(f"thr must be a finite number or None, got {thr!r}")
        if topk is not None and (isinstance(topk, bool) or not isinstance(topk, numbers.Integral)
                                 or not 1 <= topk <= num_classes):
            raise ValueError(f"topk must be None or an int in [1, num_classes={num_classes}], got {topk!r}")
        if thr is None and topk is None:
            thr = 0.5
        elif thr is not None and topk is not None:
            warn_user(f"MultiLabelMetric: both thr={thr} and topk={topk} are given; thr is used", UserWarning)
        self.num_classes: int = int(num_classes)
        self.thr: Optional[float] = None if thr is None else float(thr)
        self.topk: Optional[int] = None if topk is None else int(topk)
        self.items: Tuple[str, ...] = check_items_and_average(items, average, type(self).__name__)
        self.average: Optional[str] = average
        for name in ("tp", "predicted", "gt"):
            self._declare_state(name, (self.num_classes,))

    def add(self, predictions: Any, labels: Any) -> None:
        """Add a batch of N samples (see the class docstring for the accepted forms).

        Raises ``ValueError`` (and keeps nothing of the batch) on different
        lengths or values that are neither scores / one-hot nor class indices.
        """
        scores = dense_rows(predictions, "predictions", self.num_classes, scores=True)
        gt = dense_rows(labels, "labels", self.num_classes, scores=False)
        if scores.shape[0] != gt.shape[0]:
            raise ValueError(
                f"predictions and labels have different lengths: {scores.shape[0]} predictions, {gt.shape[0]} labels"
            )
        self._add_batch(positive=self._positives(scores), label=gt)

    def _positives(self, scores: np.ndarray) -> np.ndarray:
        """The predicted positives (bool (N, C)): ``scores >= thr``, or the top ``topk`` per row."""
        if self.thr is not None:
            return scores >= self.thr
        assert self.topk is not None
        top = np.argsort(-scores, axis=1, kind="stable")[:, : self.topk]
        positive = np.zeros(scores.shape, dtype=bool)
        np.put_along_axis(positive, top, True, axis=1)
        return positive

    def _state_of_rows(self, rows: ArrayResults) -> Dict[str, np.ndarray]:
        positive, gt = rows["positive"], rows["label"]
        return {"tp": (positive & gt).sum(axis=0), "predicted": positive.sum(axis=0), "gt": gt.sum(axis=0)}

    def compute_metric(self, results: Union[MetricState, ArrayResults, Sequence[Tuple[Any, Any]]]) -> Dict[str, Any]:
        """The metric of ``results``: the reduced :class:`~mmeval.core.state.MetricState` (per-class ``tp``,
        ``predicted``, ``gt`` counts), an :class:`ArrayResults` with bool (N, C) columns ``positive`` and
        ``label``, or a sequence of per-sample ``(prediction, label)`` pairs (MMEval's form)."""
        if not len(results):
            raise ValueError(f"{type(self).__name__}.compute_metric: no results to compute on (nothing was added)")
        if isinstance(results, MetricState):
            values = prf_support(results["tp"], results["predicted"], results["gt"], self.average)
            return format_prf(values, self.items, self.average, self._suffix())
        if isinstance(results, ArrayResults):
            positive, gt = results["positive"], results["label"]
        else:
            p, lab = zip(*results)
            positive = self._positives(dense_rows(list(p), "predictions", self.num_classes, scores=True))
            gt = dense_rows(list(lab), "labels", self.num_classes, scores=False)
        if positive.shape[1] != self.num_classes:
            raise ValueError(
                f"{type(self).__name__}: the results have {positive.shape[1]} classes, num_classes={self.num_classes}"
            )
        tp = (positive & gt).sum(axis=0)
        values = prf_support(tp, positive.sum(axis=0), gt.sum(axis=0), self.average)
        return format_prf(values, self.items, self.average, self._suffix())

    def _suffix(self) -> str:
        if self.thr is not None:
            return "" if self.thr == 0.5 else f"_thr-{self.thr:.2f}"
        return f"_top{self.topk}"


#: MMEval 0.2.1's other name for :class:`MultiLabelMetric`.
MultiLabelPrecisionRecallF1score = MultiLabelMetric
