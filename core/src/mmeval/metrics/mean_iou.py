"""Mean intersection over union (and its companions) for semantic segmentation."""

from __future__ import annotations

import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import ArrayResults, BaseMetric
from ..core.errors import MetricArgumentError, MetricArgumentMissingError
from ..core.inputs import to_numpy
from ..core.state import MetricState

__all__ = ["MeanIoU"]


class MeanIoU(BaseMetric):
    """Mean IoU, pixel accuracy, mean accuracy, Dice, precision, recall, F-score and Cohen's kappa.

    The names, arguments and result keys are MMEval 0.2.1's ``MeanIoU``.

    Args:
        num_classes: the number of classes ``C``. ``None`` takes it from
            ``dataset_meta['num_classes']`` or ``len(dataset_meta['classes'])``
            at the first :meth:`add`.
        ignore_index: the label value whose pixels are left out (default 255).
            Any other label must lie in ``[0, C - 1]``.
        nan_to_num: when given, a class whose per-class value is undefined
            (NaN, e.g. a class neither present nor predicted) counts as this
            number in the means; when ``None`` such classes are left out of
            the means (``nanmean``).
        beta: the weight of recall in the F-score (``F_beta``), a positive number.
        classwise_results: also return the per-class values.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments (``dist_backend``,
            ``dist_collect_mode``, ``dataset_meta``).

    ``add(predictions, labels)`` takes label maps: an array of shape
    (N, H, W), or a sequence of N (H, W) maps (the images may differ in
    size; a prediction and its label must not); numpy arrays, lists, torch /
    paddle / TensorFlow / JAX tensors (converted like
    :class:`~mmeval.metrics.Accuracy` converts them). Values must be integers
    (of an integer or floating dtype): labels ``ignore_index`` or in ``[0, C -
    1]``, predictions in ``[0, C - 1]`` wherever the label is not ignored.
    Anything else raises :class:`~mmeval.core.errors.MetricArgumentError` (a
    ``ValueError``, and an ``AssertionError`` as MMEval asserted) naming the
    argument, the image and the pixel, and keeps nothing of the batch; so do
    refused constructor arguments.

    Each image is kept as three int64 vectors of length ``C`` -- its true
    positives (the confusion matrix's diagonal), ground-truth and predicted
    pixel counts per class (the matrix's row and column sums) -- not its label
    maps. Every result is a function of those sums, so the result does not
    depend on how the images are sharded across ranks. A state metric: the
    three vectors are its declared int64 sums, and :meth:`compute` moves only
    their totals (``3 * C + 1`` int64 values per rank, plus a round for the
    padding ``size`` cuts when ``C`` is large), not one row per image.

    Result keys (fractions, not rounded; Python floats): ``aAcc`` (pixel
    accuracy), ``mIoU``, ``mAcc``, ``mDice``, ``mPrecision``, ``mRecall``,
    ``mFscore`` (means over classes, see ``nan_to_num``) and ``kappa``; with
    ``classwise_results=True`` also ``classwise_results``: a dict with keys
    ``IoU``, ``Acc``, ``Dice``, ``Precision``, ``Recall``, ``Fscore``, each a
    list of ``C`` floats (NaN where undefined). MMEval returns numpy arrays
    there; lists carry the same values over every codec.

    Units: every value is a fraction in [0, 1] (``kappa`` in [-1, 1]). These are MMEval's scales, kept as they
    are for compatibility with MMEval: one result dict may mix fractions and percentages.
    """

    def __init__(
        self,
        num_classes: Optional[int] = None,
        ignore_index: int = 255,
        nan_to_num: Optional[float] = None,
        beta: float = 1,
        classwise_results: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if num_classes is not None and not (_is_int(num_classes) and int(num_classes) >= 1):
            raise MetricArgumentError(
                f"num_classes must be a positive int or None (from dataset_meta), got {num_classes!r}"
            )
        if not _is_int(ignore_index):
            raise MetricArgumentError(
                f"ignore_index must be an int (the label value to leave out), got {ignore_index!r}"
            )
        if nan_to_num is not None and not (isinstance(nan_to_num, numbers.Real) and not isinstance(nan_to_num, bool)):
            raise MetricArgumentError(f"nan_to_num must be a number or None, got {nan_to_num!r}")
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not (0 < float(beta) < float("inf")):
            raise MetricArgumentError(f"beta must be a positive finite number (the weight of recall), got {beta!r}")
        if not isinstance(classwise_results, (bool, np.bool_)):
            raise MetricArgumentError(f"classwise_results must be True or False, got {classwise_results!r}")
        self._num_classes: Optional[int] = None if num_classes is None else int(num_classes)
        self.ignore_index: int = int(ignore_index)
        self.nan_to_num: Optional[float] = nan_to_num
        self.beta: float = beta
        self.classwise_results: bool = bool(classwise_results)
        if (
            num_classes is not None
            or "num_classes" in (self.dataset_meta or {})
            or "classes" in (self.dataset_meta or {})
        ):
            self._declare_counts()

    def _declare_counts(self) -> None:
        """Declare the per-class count states (once the class count is known)."""
        if not self._state_specs:
            c = self.num_classes
            for name in ("tp", "gt", "pred"):
                self._declare_state(name, (c,))

    def compute(self, size: Optional[int] = None) -> Dict[str, Any]:
        if self._num_classes is not None:
            self._declare_counts()
        return super().compute(size)

    @property
    def num_classes(self) -> int:
        """The class count: the argument, else ``dataset_meta['num_classes']`` or ``len(dataset_meta['classes'])``."""
        if self._num_classes is not None:
            return self._num_classes
        meta = self.dataset_meta or {}
        if "num_classes" in meta:
            value: Any = meta["num_classes"]
        elif "classes" in meta:
            value = len(meta["classes"])
        else:
            raise MetricArgumentMissingError(
                f"MeanIoU: num_classes is not set and dataset_meta ({self.dataset_meta!r}) has no 'num_classes' "
                f"or 'classes': pass MeanIoU(num_classes=C)"
            )
        if not (_is_int(value) and int(value) >= 1):
            raise MetricArgumentError(f"MeanIoU: dataset_meta gives num_classes={value!r}; it must be a positive int")
        self._num_classes = int(value)
        return self._num_classes

    def _question(self, size: Optional[int]) -> Dict[str, Any]:
        question = super()._question(size)
        question["num_classes"] = self._num_classes
        return question

    # -- accumulate ----------------------------------------------------------

    def add(self, predictions: Any, labels: Any) -> None:
        """Add a batch of label maps: (N, H, W) arrays or sequences of (H, W) maps.

        Raises ``MetricArgumentError`` (and keeps nothing of the batch) on mismatched
        lengths or shapes and on values that are not valid class indices.
        """
        preds, labs = _maps(predictions, "predictions"), _maps(labels, "labels")
        if len(preds) != len(labs):
            raise MetricArgumentError(
                f"predictions and labels have different lengths: {len(preds)} prediction maps, {len(labs)} label maps"
            )
        if not preds:
            raise MetricArgumentError("predictions is empty: add() needs at least one label map")
        c = self.num_classes
        self._declare_counts()
        tp = np.empty((len(preds), c), dtype=np.int64)
        gt = np.empty_like(tp)
        pr = np.empty_like(tp)
        for i, (p, lab) in enumerate(zip(preds, labs)):
            if p.shape != lab.shape:
                raise MetricArgumentError(
                    f"predictions[{i}] has shape {p.shape} but labels[{i}] has shape {lab.shape}: each prediction "
                    f"map must have its label map's (H, W)"
                )
            lab_i = _indices(lab, f"labels[{i}]", c, self.ignore_index)
            keep = lab_i != self.ignore_index
            p_i = _indices(p, f"predictions[{i}]", c, None, where=keep)
            matrix = np.bincount(lab_i[keep] * c + p_i[keep], minlength=c * c).reshape(c, c)
            tp[i], gt[i], pr[i] = np.diagonal(matrix), matrix.sum(axis=1), matrix.sum(axis=0)
        self._add_rows(tp=tp, gt=gt, pred=pr)

    # -- compute -------------------------------------------------------------

    def compute_metric(
        self, results: Union[MetricState, ArrayResults, Sequence[Tuple[Any, Any, Any]]]
    ) -> Dict[str, Any]:
        """The metric of ``results``: the reduced :class:`~mmeval.core.state.MetricState` (``tp``, ``gt``,
        ``pred`` summed over the images), an :class:`ArrayResults` with those columns (per image, (N, C)
        int64), or a sequence of per-image ``(tp, gt, pred)`` vectors (MMEval's form).
        """
        if isinstance(results, MetricState):
            if not results.num_samples:
                raise ValueError("MeanIoU.compute_metric: no results to compute on (nothing was added)")
            tp, gt, pr = (np.asarray(results[k], dtype=np.int64) for k in ("tp", "gt", "pred"))
        elif isinstance(results, ArrayResults):
            if not len(results):
                raise ValueError("MeanIoU.compute_metric: no results to compute on (nothing was added)")
            tp, gt, pr = (np.asarray(results[k], dtype=np.int64).sum(axis=0) for k in ("tp", "gt", "pred"))
        else:
            if not len(results):
                raise ValueError("MeanIoU.compute_metric: no results to compute on (nothing was added)")
            tp, gt, pr = (np.sum([np.asarray(r[j], dtype=np.int64) for r in results], axis=0) for j in range(3))
        return self._from_counts(tp, gt, pr)

    def _from_counts(self, tp: np.ndarray, gt: np.ndarray, pr: np.ndarray) -> Dict[str, Any]:
        """Every result from the summed per-class true positives, ground-truth and predicted pixel counts."""
        tp_f, gt_f, pr_f = tp.astype(np.float64), gt.astype(np.float64), pr.astype(np.float64)
        total = float(gt.sum())
        b2 = float(self.beta) ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = tp_f / (gt_f + pr_f - tp_f)
            acc = tp_f / gt_f
            dice = 2 * tp_f / (gt_f + pr_f)
            precision = tp_f / pr_f
            recall = acc
            fscore = (1 + b2) * precision * recall / (b2 * precision + recall)
            a_acc = np.float64(tp.sum()) / np.float64(total)
            pe = np.float64(float((gt_f * pr_f).sum())) / np.float64(total * total)
            kappa = (a_acc - pe) / (1 - pe)
        out: Dict[str, Any] = {
            "aAcc": float(a_acc),
            "mIoU": self._mean(iou),
            "mAcc": self._mean(acc),
            "mDice": self._mean(dice),
            "mPrecision": self._mean(precision),
            "mRecall": self._mean(recall),
            "mFscore": self._mean(fscore),
            "kappa": float(kappa),
        }
        if self.classwise_results:
            out["classwise_results"] = {
                name: [float(v) for v in values]
                for name, values in (
                    ("IoU", iou),
                    ("Acc", acc),
                    ("Dice", dice),
                    ("Precision", precision),
                    ("Recall", recall),
                    ("Fscore", fscore),
                )
            }
        return out

    def _mean(self, values: np.ndarray) -> float:
        """The mean over classes: NaN classes replaced by ``nan_to_num``, or left out (NaN if all are)."""
        if self.nan_to_num is not None:
            values = np.nan_to_num(values, nan=float(self.nan_to_num))
        defined = values[~np.isnan(values)]
        return float(defined.mean()) if defined.size else float("nan")


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _maps(value: Any, what: str) -> List[np.ndarray]:
    """``value`` as a list of (H, W) arrays: an (N, H, W) array-like or a sequence of (H, W) array-likes."""
    if isinstance(value, (list, tuple)):
        maps = [to_numpy(v, f"{what}[{i}]") for i, v in enumerate(value)]
    else:
        arr = to_numpy(value, what)
        if arr.ndim != 3:
            raise MetricArgumentError(
                f"{what} must be label maps of shape (N, H, W) or a sequence of (H, W) maps, got shape {arr.shape}"
                + ("; wrap a single map as a batch of one: x[None]" if arr.ndim == 2 else "")
            )
        maps = list(arr)
    for i, m in enumerate(maps):
        if m.ndim != 2:
            raise MetricArgumentError(f"{what}[{i}] must be an (H, W) label map, got shape {m.shape}")
    return maps


def _indices(
    arr: np.ndarray, what: str, num_classes: int, ignore_index: Optional[int], where: Optional[np.ndarray] = None
) -> np.ndarray:
    """A label map as int64 class indices in ``[0, num_classes - 1]`` (or ``ignore_index``), checked at ``where``.

    The error names ``what``, the first bad pixel (row, column) and value, and the valid values.
    """
    orig, kind = arr, arr.dtype.kind
    if kind not in "iubf":
        raise MetricArgumentError(f"{what} must hold integer class indices, got dtype {arr.dtype}")
    if kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) | (np.floor(arr) != arr)
        if where is not None:
            bad &= where
        if bad.any():
            pos = tuple(int(x) for x in np.argwhere(bad)[0])
            raise MetricArgumentError(f"{what} must hold integer class indices: got {float(arr[pos])!r} at pixel {pos}")
        with np.errstate(invalid="ignore"):
            arr = np.where(np.isfinite(arr) & (np.abs(arr) < 2.0**62), arr, -1).astype(np.int64)
    else:
        arr = (
            arr.astype(np.int64, copy=False)
            if kind != "u" or arr.dtype.itemsize < 8
            else np.minimum(arr, np.uint64(2**62)).astype(np.int64)
        )
    bad = (arr < 0) | (arr >= num_classes)
    if ignore_index is not None:
        bad &= arr != ignore_index
    if where is not None:
        bad &= where
    if bad.any():
        pos = tuple(int(x) for x in np.argwhere(bad)[0])
        valid = f"integers in [0, {num_classes - 1}]"
        valid += f" or ignore_index={ignore_index}" if ignore_index is not None else " where the label is not ignored"
        raise MetricArgumentError(
            f"{what} out of range: got {orig[pos].item()!r} at pixel {pos}; values must be {valid}"
        )
    return arr
