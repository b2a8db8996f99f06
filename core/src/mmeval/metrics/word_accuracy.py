"""Word-level accuracy of text recognition (OCR), MMEval 0.2.1's ``WordAccuracy``."""

from __future__ import annotations

from typing import Any, Dict, Sequence, Union

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError
from ..core.state import MetricState
from .char_recall_precision import DEFAULT_INVALID_SYMBOL, compile_symbols
from .utils.grammar import check_texts

__all__ = ["WordAccuracy"]

#: mode -> result key, in the order the keys are reported
MODES = {
    "exact": "accuracy",
    "ignore_case": "ignore_case_accuracy",
    "ignore_case_symbol": "ignore_case_symbol_accuracy",
}


class WordAccuracy(BaseMetric):
    """The fraction of words recognised exactly, ignoring case, or ignoring case and symbols.

    Args:
        mode: one of ``'exact'``, ``'ignore_case'``, ``'ignore_case_symbol'``
            (default; the usual academic setting), or a list of them.
        invalid_symbol: a regular expression of the characters
            ``'ignore_case_symbol'`` drops (default: all but ASCII letters,
            digits and the CJK ideographs U+4E00 to U+9FA5).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths)``: two lists of str, one per sample.
    ``mode`` is kept as a set (as MMEval 0.2.1 keeps it).

    Result keys (MMEval 0.2.1's, fractions in [0, 1]), in this order, those
    of the modes asked: ``accuracy``, ``ignore_case_accuracy``,
    ``ignore_case_symbol_accuracy``.

    Units: fractions in [0, 1], MMEval 0.2.1's scale.

    A state metric: three int64 hits per sample (one per mode); :meth:`compute`
    moves their sums (exact, whatever the number of samples).

    >>> WordAccuracy(mode=['exact', 'ignore_case'])(['hello', 'hello'], ['hello', 'HELLO'])
    {'accuracy': 0.5, 'ignore_case_accuracy': 1.0}
    """

    def __init__(
        self,
        mode: Union[str, Sequence[str]] = "ignore_case_symbol",
        invalid_symbol: str = DEFAULT_INVALID_SYMBOL,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        modes = [mode] if isinstance(mode, str) else mode
        if (
            not isinstance(modes, (list, tuple))
            or not modes
            or not all(isinstance(m, str) and m in MODES for m in modes)
        ):
            raise MetricArgumentError(
                f"WordAccuracy: mode must be one of {list(MODES)} or a non-empty list of them, got {mode!r}"
            )
        self.mode = set(modes)
        self.invalid_symbol = compile_symbols("WordAccuracy", invalid_symbol)
        self._declare_state("hits", (len(MODES),))

    def add(self, predictions: Sequence[str], groundtruths: Sequence[str]) -> None:
        """Add a batch: the recognised words and their ground-truth words (lists of str of one length)."""
        preds, gts = check_texts(self.name, predictions, groundtruths, ("predictions", "groundtruths"))
        if not preds:
            return
        hits = np.empty((len(preds), len(MODES)), dtype=bool)
        for i, (pred, gt) in enumerate(zip(preds, gts)):
            p_low, g_low = pred.lower(), gt.lower()
            hits[i] = (
                pred == gt,
                p_low == g_low,
                self.invalid_symbol.sub("", p_low) == self.invalid_symbol.sub("", g_low),
            )
        self._add_rows(hits=hits)

    def compute_metric(self, results: MetricState) -> Dict[str, float]:
        """The accuracy of each mode asked, from the summed hits."""
        n = results.num_samples
        if not n:
            raise ValueError("WordAccuracy.compute_metric: no results to compute on (nothing was added)")
        hits = results["hits"]
        return {key: int(hits[i]) / n for i, (mode, key) in enumerate(MODES.items()) if mode in self.mode}
