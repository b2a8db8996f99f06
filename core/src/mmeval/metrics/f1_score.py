"""F1 score of label sequences (micro and macro over the classes asked), MMEval 0.2.1's ``F1Score``."""

from __future__ import annotations

import numbers
from typing import Any, Dict, List, Sequence, Union

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError
from ..core.inputs import to_numpy
from ..core.state import MetricState

__all__ = ["F1Score"]

MODES = ("micro", "macro")


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class F1Score(BaseMetric):
    """Micro and/or macro F1 over the cared classes of integer label sequences (e.g. token tags).

    Args:
        num_classes: the number of classes ``C``; labels lie in ``[0, C - 1]``.
        mode: ``'micro'`` (default: F1 of the true / false positive and false
            negative counts summed over the cared classes), ``'macro'`` (the
            mean of the cared classes' F1) or a list of them.
        cared_classes: the classes counted (default: all); or
        ignored_classes: the classes not counted (not both).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, labels)``: one prediction and one label per sample,
    each a sequence of class indices (a list, a numpy array or a tensor; a
    single int is a sequence of one) of the same length; position ``j`` of the
    prediction is compared with position ``j`` of the label. Values must be
    integers below ``C``; negative values belong to no class (a negative label
    is never a false negative, a negative prediction never a false positive).

    Per class ``c``: true positives (prediction and label ``c``), false
    positives (prediction ``c``, label not) and false negatives (label ``c``,
    prediction not); ``F1 = 2 P R / (P + R)``, with ``P = tp / (tp + fp)``,
    ``R = tp / (tp + fn)`` and 0 for an empty denominator.

    Result keys (MMEval 0.2.1's, fractions in [0, 1]): ``macro_f1`` then
    ``micro_f1``, those of the modes asked.

    Units: fractions in [0, 1], MMEval 0.2.1's scale.

    A state metric: per sample three int64 counts per cared class;
    :meth:`compute` moves their sums (exact, whatever the number of samples).

    >>> F1Score(num_classes=5, mode=['macro', 'micro'])([0, 1, 2], [0, 1, 4])
    {'macro_f1': 0.4, 'micro_f1': 0.6666666666666666}
    """

    def __init__(
        self,
        num_classes: int,
        mode: Union[str, Sequence[str]] = "micro",
        cared_classes: Sequence[int] = (),
        ignored_classes: Sequence[int] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not _is_int(num_classes) or num_classes < 1:
            raise MetricArgumentError(f"F1Score: num_classes must be a positive int, got {num_classes!r}")
        modes = [mode] if isinstance(mode, str) else mode
        if not isinstance(modes, (list, tuple)) or not modes or not all(m in MODES for m in modes):
            raise MetricArgumentError(f"F1Score: mode must be 'micro', 'macro' or a list of them, got {mode!r}")
        for name, given in (("cared_classes", cared_classes), ("ignored_classes", ignored_classes)):
            if not isinstance(given, (list, tuple)) or not all(_is_int(c) and 0 <= c < num_classes for c in given):
                raise MetricArgumentError(
                    f"F1Score: {name} must be a list of classes in [0, {num_classes - 1}], got {given!r}"
                )
        if len(cared_classes) and len(ignored_classes):
            raise MetricArgumentError(
                f"F1Score: give cared_classes or ignored_classes, not both (got "
                f"cared_classes={cared_classes!r}, ignored_classes={ignored_classes!r})"
            )
        self.num_classes = int(num_classes)
        self.mode = list(modes)
        if len(cared_classes):
            cared = sorted({int(c) for c in cared_classes})
        else:
            cared = sorted(set(range(self.num_classes)) - {int(c) for c in ignored_classes})
        if not cared:
            raise MetricArgumentError(f"F1Score: ignored_classes={ignored_classes!r} leaves no class to count")
        self.cared_labels = np.asarray(cared, dtype=np.int64)
        k = len(cared)
        self._declare_state("tp", (k,))
        self._declare_state("fp", (k,))
        self._declare_state("fn", (k,))

    def add(self, predictions: Sequence[Any], labels: Sequence[Any]) -> None:
        """Add a batch: a label sequence predicted for each sample, and its true label sequence."""
        preds, labs = self._sequences(predictions, "predictions"), self._sequences(labels, "labels")
        if len(preds) != len(labs):
            raise MetricArgumentError(
                f"F1Score: {len(preds)} predictions and {len(labs)} labels: pass one sequence of each per sample"
            )
        for i, (p, lab) in enumerate(zip(preds, labs)):
            if p.shape != lab.shape:
                raise MetricArgumentError(
                    f"F1Score: predictions[{i}] has {p.size} labels and labels[{i}] "
                    f"{lab.size}: each prediction needs as many labels as its label sequence"
                )
        if not preds:
            return
        # class index -> position among the cared classes (-1: not counted)
        slot = np.full(self.num_classes, -1, dtype=np.int64)
        slot[self.cared_labels] = np.arange(self.cared_labels.size)
        k = self.cared_labels.size
        counts = np.zeros((3, len(preds), k), dtype=np.int64)
        for i, (p, lab) in enumerate(zip(preds, labs)):
            p_slot = np.where(p >= 0, slot[np.maximum(p, 0)], -1)
            l_slot = np.where(lab >= 0, slot[np.maximum(lab, 0)], -1)
            hit = p == lab
            counts[0, i] = np.bincount(p_slot[hit & (p_slot >= 0)], minlength=k)
            counts[1, i] = np.bincount(p_slot[~hit & (p_slot >= 0)], minlength=k)
            counts[2, i] = np.bincount(l_slot[~hit & (l_slot >= 0)], minlength=k)
        self._add_rows(tp=counts[0], fp=counts[1], fn=counts[2])

    def _sequences(self, value: Any, what: str) -> List[np.ndarray]:
        """Each sample's labels as a 1-D int64 array (checked: integers below ``num_classes``)."""
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
            raise MetricArgumentError(
                f"F1Score: {what} must be a sequence with one label sequence per sample, got {type(value).__name__}"
            )
        out = []
        for i in range(len(value)):
            try:
                arr = to_numpy(value[i], f"{what}[{i}]").reshape(-1)
            except (TypeError, ValueError) as exc:
                raise MetricArgumentError(f"F1Score: {exc}") from None
            if arr.dtype.kind == "f":
                bad = ~np.isfinite(arr) | (np.floor(arr) != arr)
                if bad.any():
                    raise MetricArgumentError(
                        f"F1Score: {what}[{i}] must hold integer class indices, got {float(arr[bad][0])!r}"
                    )
            elif arr.dtype.kind not in "iu":
                raise MetricArgumentError(
                    f"F1Score: {what}[{i}] must hold integer class indices, got dtype {arr.dtype}"
                )
            if arr.size and arr.max() >= self.num_classes:
                raise MetricArgumentError(
                    f"F1Score: {what}[{i}] holds the class {arr.max().item()!r}, not below "
                    f"num_classes={self.num_classes}"
                )
            out.append(arr.astype(np.int64))
        return out

    def compute_metric(self, results: MetricState) -> Dict[str, float]:
        """Macro and/or micro F1 of the summed per-class counts."""
        if not results.num_samples:
            raise ValueError("F1Score.compute_metric: no results to compute on (nothing was added)")
        tp, fp, fn = (np.asarray(results[k], dtype=np.int64) for k in ("tp", "fp", "fn"))
        out: Dict[str, float] = {}
        if "macro" in self.mode:
            out["macro_f1"] = float(np.mean([_f1(int(a), int(b), int(c)) for a, b, c in zip(tp, fp, fn)]))
        if "micro" in self.mode:
            out["micro_f1"] = _f1(int(tp.sum()), int(fp.sum()), int(fn.sum()))
        return out


def _f1(tp: int, fp: int, fn: int) -> float:
    """F1 of one set of counts: the harmonic mean of precision and recall, 0 where undefined."""
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0
