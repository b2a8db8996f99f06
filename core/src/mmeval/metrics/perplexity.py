"""Perplexity of a language model's token scores, MMEval 0.2.1's ``Perplexity``."""

from __future__ import annotations

import math
import numbers
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError
from ..core.inputs import FINITE, FloatInput, to_numpy
from ..core.state import MetricState

__all__ = ["Perplexity"]


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class Perplexity(BaseMetric):
    """``exp`` of the mean negative log-likelihood of the target tokens under the softmax of the scores.

    Args:
        ignore_labels: a target value (an int) or a list of them whose tokens
            are left out (padding, ``-100``); ``None`` (default) keeps every
            token.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, targets)``: ``predictions`` the scores (logits: a
    softmax over the vocabulary turns them into probabilities) of shape
    (batch, seq_len, vocab) or a sequence of (seq_len, vocab) arrays (the
    lengths may differ between samples), ``targets`` (batch, seq_len) or a
    sequence of (seq_len,) token ids; numpy arrays, lists, torch / paddle /
    TensorFlow / JAX tensors (any device). A target that is not ignored must
    be an integer in ``[0, vocab - 1]``. One sample is one sequence. The
    log-likelihoods are computed in float64 as ``score[target] -
    logsumexp(scores)``.

    Result key: ``perplexity``: ``exp(sum of NLL / tokens counted)`` over
    every token of every sample (0.0 when every token was ignored, as
    MMEval 0.2.1).

    Units: ``perplexity`` is a perplexity (1 for a model certain of every target, larger is worse), natural
    logarithms, as MMEval 0.2.1 reports it.

    A state metric: per sample its NLL sum (float64) and token count (int64);
    :meth:`compute` moves the two sums, whatever the number of samples.
    """

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs)
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"predictions": FINITE}

    def __init__(self, ignore_labels: Union[int, Sequence[int], None] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        labels: Optional[List[int]]
        if ignore_labels is None:
            labels = None
        else:
            given: Any = [ignore_labels] if _is_int(ignore_labels) else ignore_labels
            if not isinstance(given, (list, tuple)) or not all(_is_int(v) for v in given):
                raise MetricArgumentError(
                    f"Perplexity: ignore_labels must be None, an int or a list of ints, got {ignore_labels!r}"
                )
            labels = sorted({int(v) for v in given})
        self.ignore_labels = labels
        self._declare_state("nll", (), "float64", "exact_sum")
        self._declare_state("tokens")

    def add(self, predictions: Any, targets: Any) -> None:
        """Add a batch: scores (batch, seq_len, vocab) and target ids (batch, seq_len), or per-sample sequences."""
        preds, targs = _samples(predictions, "predictions"), _samples(targets, "targets")
        if len(preds) != len(targs):
            raise MetricArgumentError(
                f"Perplexity: {len(preds)} predictions and {len(targs)} targets: pass one "
                f"(seq_len, vocab) prediction and one (seq_len,) target per sample"
            )
        nll = np.empty(len(preds), dtype=np.float64)
        count = np.empty(len(preds), dtype=np.int64)
        for i, (pred, target) in enumerate(zip(preds, targs)):
            nll[i], count[i] = self._sample(i, pred, target)
        if len(preds):
            self._add_rows(nll=nll, tokens=count)

    def _sample(self, i: int, pred: np.ndarray, target: np.ndarray) -> Tuple[float, int]:
        """One sequence's NLL sum and token count (checked; nothing kept on error)."""
        if pred.ndim != 2:
            raise MetricArgumentError(
                f"Perplexity: predictions[{i}] must be (seq_len, vocab) scores, got shape {pred.shape}"
            )
        if target.ndim != 1:
            raise MetricArgumentError(
                f"Perplexity: targets[{i}] must be (seq_len,) token ids, got shape {target.shape}"
            )
        if pred.shape[0] != target.shape[0]:
            raise MetricArgumentError(
                f"Perplexity: predictions[{i}] has {pred.shape[0]} positions and targets[{i}] "
                f"{target.shape[0]}: they must have the same seq_len"
            )
        if pred.dtype.kind not in "iuf":
            raise MetricArgumentError(f"Perplexity: predictions[{i}] must hold real scores, got dtype {pred.dtype}")
        if target.dtype.kind not in "iuf":
            raise MetricArgumentError(f"Perplexity: targets[{i}] must hold integer token ids, got dtype {target.dtype}")
        t = target.astype(np.float64)
        keep = np.ones(t.shape, dtype=bool)
        for label in self.ignore_labels or ():
            keep &= t != label
        vocab = pred.shape[1]
        bad = keep & ~(np.isfinite(t) & (np.floor(t) == t) & (t >= 0) & (t < vocab))
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise MetricArgumentError(
                f"Perplexity: targets[{i}][{j}] = {target[j].item()!r} is not a token id in "
                f"[0, {vocab - 1}] (vocab {vocab}) nor in ignore_labels={self.ignore_labels}"
            )
        scores = pred[keep].astype(np.float64)
        ids = t[keep].astype(np.int64)
        if not ids.size:
            return 0.0, 0
        top = scores.max(axis=1, keepdims=True)
        log_norm = top[:, 0] + np.log(np.exp(scores - top).sum(axis=1))
        return float(np.sum(log_norm - scores[np.arange(ids.size), ids])), int(ids.size)

    def compute_metric(self, results: MetricState) -> Dict[str, float]:
        """The perplexity of the summed NLL and token count."""
        if not results.num_samples:
            raise ValueError("Perplexity.compute_metric: no results to compute on (nothing was added)")
        tokens = int(results["tokens"])
        return {"perplexity": math.exp(float(results["nll"]) / tokens) if tokens else 0.0}


def _samples(value: Any, what: str) -> List[np.ndarray]:
    """A batch as a list of per-sample arrays: a sequence of array-likes, or an array-like split on its first axis."""
    if isinstance(value, (list, tuple)) and value and not isinstance(value[0], numbers.Number):
        try:
            return [to_numpy(v, f"{what}[{i}]") for i, v in enumerate(value)]
        except (TypeError, ValueError) as exc:
            raise MetricArgumentError(f"Perplexity: {exc}") from None
    try:
        arr = to_numpy(value, what)
    except (TypeError, ValueError) as exc:
        raise MetricArgumentError(f"Perplexity: {exc}") from None
    if arr.ndim == 0:
        raise MetricArgumentError(f"Perplexity: {what} must be a batch (one item per sample), got a scalar")
    return list(arr)
