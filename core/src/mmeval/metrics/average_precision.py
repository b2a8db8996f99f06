"""Average precision of multi-label classification (MMEval's ``AveragePrecision``)."""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import ArrayResults, BaseMetric
from ..core.errors import MetricArgumentError
from ..core.inputs import SCORES, FloatInput, to_numpy
from .curves import CurveMixin, PRCurves, pr_curve, thin
from .multi_label import OnehotFlags, dense_rows

__all__ = ["AveragePrecision", "average_precision"]


def average_precision(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per-class average precision (fractions) of ``scores`` (N, C) against bool ``labels`` (N, C).

    AP = sum over thresholds of (R_n - R_{n-1}) * P_n, one threshold per
    distinct score (tied scores enter the ranking together, as in
    scikit-learn's ``average_precision_score``; the result does not depend on
    the order of the samples). A class with no positive label has AP 0.

    One class at a time: the working memory is a few arrays of N, not of N x C.
    """
    return np.array([_class_ap(scores[:, c], labels[:, c]) for c in range(scores.shape[1])], dtype=np.float64)


def _class_ap(scores: np.ndarray, labels: np.ndarray) -> float:
    """Average precision of one class: ``scores`` (N,), bool ``labels`` (N,)."""
    n = scores.shape[0]
    if n == 0:
        return 0.0
    order = np.argsort(-scores, kind="stable")
    s = scores[order]
    y = labels[order]
    del order
    tp = np.cumsum(y)
    ends = np.ones(n, dtype=bool)
    ends[:-1] = s[1:] != s[:-1]  # the last sample of each group of equal scores
    del s
    # each sample's group end: the first end at or after it
    group_end = np.minimum.accumulate(np.where(ends, np.arange(n), n)[::-1])[::-1]
    del ends
    total = int(tp[-1])
    hits = group_end[y]  # only the positives' precisions are summed
    return float((tp[hits] / (hits + 1.0)).sum() / max(total, 1))


class AveragePrecision(CurveMixin, OnehotFlags, BaseMetric):
    """Average precision per class of multi-label classification, and its mean (mAP).

    The names, arguments and result keys are MMEval 0.2.1's ``AveragePrecision``.

    Args:
        average: ``'macro'`` (the mean AP over all C classes) or ``None``
            (the AP of each class).
        label_is_onehot: MMEval 0.2.1's attribute of this name (settable after
            construction too, before :meth:`add`): ``None`` (default) reads
            each label row on its own, ``True`` reads every row as C one-hot
            values, ``False`` as class indices (see
            :class:`~mmeval.metrics.MultiLabelMetric`: with C == 2, a row of
            two 0/1 values is read as class indices unless this is ``True``).
            ``pred_is_onehot`` is ``False`` and stays so: AP needs scores.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments (``dist_backend``,
            ``dist_collect_mode``, ``dataset_meta``).

    ``add(predictions, labels)``: ``predictions`` are scores (N, C) (any
    real numbers, not NaN); per sample, ``labels`` are one-hot (C values of 0
    / 1) or a list of class indices (lists may differ in length; an (N,)
    array gives one index per sample), read like
    :class:`~mmeval.metrics.MultiLabelMetric` reads them. numpy arrays,
    lists or framework tensors (converted like :class:`~mmeval.metrics.Accuracy`
    converts them). Bad input raises a
    :class:`~mmeval.core.errors.MetricArgumentError` (a ``ValueError``, and
    an ``AssertionError`` as MMEval raised) naming the argument, and keeps
    nothing of the batch.

    AP is the area under the step precision-recall curve with one step per
    distinct score (scikit-learn's ``average_precision_score``); tied scores
    are ranked together, so the result does not depend on sample order or
    sharding. (MMEval ranks tied scores in an arbitrary order and sums in
    float32; without ties the two agree up to that rounding.) A class with no
    positive label has AP 0.

    Result keys: ``mAP`` (``average='macro'``) or ``AP_classwise`` (a list of
    C values): percentages, rounded to 4 decimals.

    Units: ``mAP`` and ``AP_classwise`` are percentages in [0, 100] (91.82 is 91.82 %). These are MMEval's
    scales, kept as they are for compatibility with MMEval: one result dict may mix fractions and percentages.
    """

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs):
    #: scores are finite (a NaN or infinite score has no rank); labels are checked as class indices
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"predictions": SCORES}

    def __init__(
        self, average: Optional[str] = "macro", *, label_is_onehot: Optional[bool] = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if average not in ("macro", None):
            raise MetricArgumentError(
                f"AveragePrecision: Invalid `average` argument: average must be 'macro' or None, got {average!r}"
            )
        self.average: Optional[str] = average
        self.label_is_onehot = label_is_onehot

    @property
    def pred_is_onehot(self) -> Optional[bool]:
        """``False``: average precision ranks scores, so predictions are always read as (N, C) scores."""
        return False

    @pred_is_onehot.setter
    def pred_is_onehot(self, value: Optional[bool]) -> None:
        if value is not False:
            raise MetricArgumentError(
                f"AveragePrecision: pred_is_onehot must stay False (predictions are scores, which average precision "
                f"ranks), got {value!r}"
            )

    def add(self, predictions: Any, labels: Any) -> None:
        """Add a batch: ``predictions`` (N, C) scores, ``labels`` one-hot or index lists per sample.

        Raises :class:`~mmeval.core.errors.MetricArgumentError` (and keeps nothing of the batch) on a bad shape,
        NaN scores, a class count other than earlier batches', different
        lengths, or labels that are neither one-hot nor class indices in range.
        """
        scores, gt = self._checked(predictions, labels, self._label_is_onehot)
        if self._batches and self._batches[0]["scores"].shape[1] != scores.shape[1]:
            raise MetricArgumentError(
                f"predictions have {scores.shape[1]} classes but earlier batches had "
                f"{self._batches[0]['scores'].shape[1]}: the class count must not change"
            )
        self._add_batch(scores=scores, label=gt)

    @staticmethod
    def _checked(predictions: Any, labels: Any, label_is_onehot: Optional[bool]) -> Tuple[np.ndarray, np.ndarray]:
        scores = to_numpy(predictions, "predictions")
        if scores.ndim != 2 or scores.shape[1] == 0:
            raise MetricArgumentError(f"predictions must be scores of shape (N, C), got shape {scores.shape}")
        if scores.dtype.kind not in "iubf":
            raise MetricArgumentError(f"predictions (scores) must be real numbers, got dtype {scores.dtype}")
        scores = scores.astype(np.float64)
        if np.isnan(scores).any():
            raise MetricArgumentError("predictions contain NaN scores")
        gt = dense_rows(labels, "labels", scores.shape[1], False, label_is_onehot, "label_is_onehot")
        if scores.shape[0] != gt.shape[0]:
            raise MetricArgumentError(
                f"predictions and labels have different lengths: {scores.shape[0]} predictions, {gt.shape[0]} labels"
            )
        return scores, gt

    def compute_metric(self, results: Union[ArrayResults, Sequence[Tuple[Any, Any]]]) -> Dict[str, Any]:
        """The metric of ``results``: an :class:`ArrayResults` with columns ``scores`` (float64 (N, C)) and
        ``label`` (bool (N, C)), or a sequence of per-sample ``(scores, label)`` pairs (MMEval's form)."""
        if not len(results):
            raise ValueError("AveragePrecision.compute_metric: no results to compute on (nothing was added)")
        if isinstance(results, ArrayResults):
            scores, gt = results["scores"], results["label"]
        else:
            p, lab = zip(*results)
            scores, gt = self._checked(list(p), list(lab), self._label_is_onehot)
        ap = average_precision(scores, gt) * 100
        if self.keep_curves:  # plot(): one curve per class (see mmeval.metrics.curves)
            per_class = [thin(*pr_curve(scores[:, c], gt[:, c])) for c in range(scores.shape[1])]
            names = [str(c) for c in (self.dataset_meta or {}).get("classes", range(len(per_class)))]
            self._keep(
                PRCurves(
                    "AveragePrecision", names, [r for r, _ in per_class], [p for _, p in per_class], list(ap / 100)
                )
            )
        if self.average is None:
            return {"AP_classwise": [round(float(v), 4) for v in ap]}
        return {"mAP": round(float(ap.mean()), 4)}
