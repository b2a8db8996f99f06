"""Precision, recall, F1-score and support for multi-label classification (MMEval's ``MultiLabelMetric``)."""

from __future__ import annotations

import numbers
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import ArrayResults, BaseMetric
from ..core.errors import MetricArgumentError
from ..core.inputs import SCORES, FloatInput, class_indices, to_numpy, warn_user
from ..core.state import MetricState
from .single_label import check_items_and_average, format_prf, prf_support

__all__ = ["MultiLabelMetric", "MultiLabelPrecisionRecallF1score", "OnehotFlags", "dense_rows"]


def _rows(value: Any, what: str) -> List[np.ndarray]:
    """``value`` as a list of per-sample arrays (0-d or 1-d): a sequence of them, an (N,) or an (N, K) array."""
    if isinstance(value, (list, tuple)):
        rows = [to_numpy(v, f"{what}[{i}]") for i, v in enumerate(value)]
    else:
        arr = to_numpy(value, what)
        if arr.ndim not in (1, 2):
            raise MetricArgumentError(
                f"{what} must be an (N,) or (N, C) array or a sequence of N index lists, got shape {arr.shape}"
            )
        rows = list(arr)
    for i, row in enumerate(rows):
        if row.ndim > 1:
            raise MetricArgumentError(
                f"{what}[{i}] must be one index, an index list or a row of C values, got shape {row.shape}"
            )
    return rows


#: Warned by :func:`dense_rows` when it reads a 2-class row of 0s and 1s as class indices (MMEval's reading).
AMBIGUOUS_TWO_CLASS = (
    "{what}: with 2 classes, a row of two 0/1 values is ambiguous; it was read as class indices, as MMEval 0.2.1 "
    "reads it ([0, 1] is classes 0 and 1, [1, 1] is class 1). Set {flag}=True on the metric if these rows are "
    "one-hot ({flag}=False reads every row as class indices and silences this warning)"
)


def dense_rows(
    value: Any, what: str, num_classes: int, scores: bool, is_onehot: Optional[bool] = None, flag: str = ""
) -> np.ndarray:
    """Per-sample inputs as an (N, C) array: float64 scores (``scores=True``) or a bool one-hot matrix.

    ``is_onehot`` is MMEval 0.2.1's ``pred_is_onehot`` / ``label_is_onehot``
    (``flag`` is its name, for the messages):

    * ``True``: every row is C values: scores (any real numbers but NaN) when
      ``scores``, else one-hot values (0 or 1);
    * ``False``: every row is label format: one class index or a list of them
      (integers in ``[0, C - 1]``, any length);
    * ``None`` (MMEval's default): each sample is read on its own (so the
      result does not depend on how samples are batched or sharded): a row of
      exactly C values that are all in [0, 1] (0 or 1 when ``scores`` is
      False) is scores / one-hot, anything else label format -- except that
      with ``C == 2`` a row of two 0/1 values is ambiguous and is read as
      class indices, as MMEval reads it, with a ``UserWarning`` saying how to
      choose (a 2-class row holding a score strictly between 0 and 1 is scores).

    A :class:`~mmeval.core.errors.MetricArgumentError` names the sample and what is expected.
    """
    rows = _rows(value, what)
    if not rows:
        raise MetricArgumentError(f"{what} is empty: add() needs at least one sample")
    out = np.zeros((len(rows), num_classes), dtype=np.float64 if scores else bool)
    ambiguous = False
    for i, row in enumerate(rows):
        name = f"{what}[{i}]"
        if row.dtype.kind not in "iubf":
            raise MetricArgumentError(f"{name} must hold numbers (scores, 0/1 or class indices), got dtype {row.dtype}")
        dense = row.ndim == 1 and row.shape[0] == num_classes
        if is_onehot and not dense:
            kind = "scores" if scores else "one-hot values (0 or 1)"
            raise MetricArgumentError(
                f"{name} has shape {row.shape}, but {flag}=True reads every sample as {num_classes} {kind}: pass "
                f"rows of {num_classes} values, or leave {flag}=None for class-index lists"
            )
        if dense and is_onehot is not False:
            vals = row.astype(np.float64)
            if np.isnan(vals).any():
                raise MetricArgumentError(f"{name} contains NaN")
            zero_one = bool(((vals == 0) | (vals == 1)).all())
            if is_onehot:
                if not scores and not zero_one:
                    raise MetricArgumentError(
                        f"{name} = {row.tolist()} is not one-hot ({flag}=True): one-hot rows hold {num_classes} "
                        f"values of 0 or 1"
                    )
                out[i] = vals if scores else vals.astype(bool)
                continue
            if zero_one and num_classes == 2:
                ambiguous = True  # MMEval's reading: class indices (below)
            elif zero_one or (scores and bool(((vals >= 0) & (vals <= 1)).all())):
                out[i] = vals if scores else vals.astype(bool)
                continue
        if is_onehot is False:
            hint = f" ({flag}=False reads every sample as class indices)"
        else:
            hint = "; score rows must be C values in [0, 1]" if scores else "; one-hot rows must be C values of 0 or 1"
        try:
            idx = class_indices(np.atleast_1d(row), name, num_classes)
        except ValueError as exc:
            raise MetricArgumentError(f"{exc} (label format){hint}") from None
        out[i, idx] = 1
    if ambiguous:
        warn_user(AMBIGUOUS_TWO_CLASS.format(what=what, flag=flag or "is_onehot"), UserWarning)
    return out


class OnehotFlags:
    """MMEval 0.2.1's ``pred_is_onehot`` / ``label_is_onehot`` attributes of the multi-label metrics.

    ``None`` (the default), ``True`` or ``False``: how :func:`dense_rows` reads
    the predictions / labels (see there). They are read when :meth:`add` reads
    a batch (MMEval reads them at ``compute()``): set them before adding, or
    pass them to the constructor. Changing one while the metric holds samples
    read with the other value raises a
    :class:`~mmeval.core.errors.MetricArgumentError` (call ``reset()`` first)
    rather than leave those samples read the old way.
    """

    _pred_is_onehot: Optional[bool] = None
    _label_is_onehot: Optional[bool] = None

    def _set_onehot_flag(self, name: str, value: Any) -> None:
        if value is not None and not isinstance(value, (bool, np.bool_)):
            raise MetricArgumentError(f"{type(self).__name__}: {name} must be None, True or False, got {value!r}")
        value = None if value is None else bool(value)
        current = getattr(self, "_" + name)
        held = int(getattr(self, "num_results", 0))
        if value != current and held:
            raise MetricArgumentError(
                f"{type(self).__name__}: {name} is read when add() reads a batch, and {held} samples were read "
                f"with {name}={current}: set {name}={value} before adding (call reset() first)"
            )
        setattr(self, "_" + name, value)

    @property
    def pred_is_onehot(self) -> Optional[bool]:
        """Whether predictions are rows of C scores / one-hot values (``None``: decided per row)."""
        return self._pred_is_onehot

    @pred_is_onehot.setter
    def pred_is_onehot(self, value: Optional[bool]) -> None:
        self._set_onehot_flag("pred_is_onehot", value)

    @property
    def label_is_onehot(self) -> Optional[bool]:
        """Whether labels are one-hot rows of C values (``None``: decided per row)."""
        return self._label_is_onehot

    @label_is_onehot.setter
    def label_is_onehot(self, value: Optional[bool]) -> None:
        self._set_onehot_flag("label_is_onehot", value)


class MultiLabelMetric(OnehotFlags, BaseMetric):
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
        pred_is_onehot: MMEval 0.2.1's attribute of this name (settable after
            construction too, before :meth:`add`): how the rows of predictions
            are read. ``None`` (default): each row on its own, see below;
            ``True``: every row is C values (scores -- any real numbers -- or
            one-hot); ``False``: every row is class indices.
        label_is_onehot: the same for the rows of labels.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments (``dist_backend``,
            ``dist_collect_mode``, ``dataset_meta``).

    ``add(predictions, labels)``: per sample, predictions are C scores in
    [0, 1] (or one-hot) or a list of predicted class indices; labels are
    one-hot (C values of 0 / 1) or a list of class indices (lists may differ
    in length; one index per sample as an (N,) array also works). An (N, C)
    array, a sequence of rows, numpy, lists or framework tensors (converted
    like :class:`~mmeval.metrics.Accuracy` converts them). With the flags at
    ``None`` each sample is read on its own: a row of exactly C values that
    are all in [0, 1] (labels: all 0 or 1) is scores / one-hot, anything else
    a list of class indices. **With C == 2 a row of two 0/1 values is
    ambiguous** and is read as class indices, as MMEval 0.2.1 reads it:
    ``[0, 1]`` and ``[1, 0]`` are classes 0 and 1, ``[1, 1]`` is class 1
    (a ``UserWarning`` says so); set ``label_is_onehot=True`` (predictions:
    ``pred_is_onehot=True``) when such rows are one-hot -- then ``[0, 1]`` is
    class 1 -- or ``False`` to read every row as class indices without the
    warning. (MMEval guesses one format for the whole input from all its
    rows; here each row is read alone, so the result does not depend on
    batching or sharding. A 2-class row holding a score strictly between 0
    and 1 is read as scores.) Bad input raises a
    :class:`~mmeval.core.errors.MetricArgumentError` (a ``ValueError``, and
    an ``AssertionError`` as MMEval raised) naming the argument and the
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

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs):
    #: scores are finite (a NaN or infinite score has no rank); labels are checked as class indices
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"predictions": SCORES}

    def __init__(
        self,
        num_classes: int,
        thr: Optional[float] = None,
        topk: Optional[int] = None,
        items: Sequence[str] = ("precision", "recall", "f1-score"),
        average: Optional[str] = "macro",
        *,
        pred_is_onehot: Optional[bool] = None,
        label_is_onehot: Optional[bool] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        name = type(self).__name__
        if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or num_classes < 1:
            raise MetricArgumentError(
                f"{name}: num_classes must be a positive int (the number of labels), got {num_classes!r}"
            )
        if thr is not None and (
            isinstance(thr, bool) or not isinstance(thr, numbers.Real) or not np.isfinite(float(thr))
        ):
            raise MetricArgumentError(f"{name}: thr must be a finite number or None, got {thr!r}")
        if topk is not None and (
            isinstance(topk, bool) or not isinstance(topk, numbers.Integral) or not 1 <= topk <= num_classes
        ):
            raise MetricArgumentError(
                f"{name}: topk must be None or an int in [1, num_classes={num_classes}], got {topk!r}"
            )
        self.pred_is_onehot = pred_is_onehot
        self.label_is_onehot = label_is_onehot
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

        Raises :class:`~mmeval.core.errors.MetricArgumentError` (and keeps
        nothing of the batch) on different lengths or values that are neither
        scores / one-hot nor class indices (as ``pred_is_onehot`` /
        ``label_is_onehot`` ask).
        """
        scores, gt = self._dense(predictions, labels)
        self._add_batch(positive=self._positives(scores), label=gt)

    def _dense(self, predictions: Any, labels: Any) -> Tuple[np.ndarray, np.ndarray]:
        """Predictions as float64 (N, C) scores and labels as bool (N, C), read as the flags say."""
        scores = dense_rows(predictions, "predictions", self.num_classes, True, self._pred_is_onehot, "pred_is_onehot")
        gt = dense_rows(labels, "labels", self.num_classes, False, self._label_is_onehot, "label_is_onehot")
        if scores.shape[0] != gt.shape[0]:
            raise MetricArgumentError(
                f"predictions and labels have different lengths: {scores.shape[0]} predictions, {gt.shape[0]} labels"
            )
        return scores, gt

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
            scores, gt = self._dense(list(p), list(lab))
            positive = self._positives(scores)
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
