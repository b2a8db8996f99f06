"""Character-level recall and precision of text recognition (OCR), MMEval 0.2.1's ``CharRecallPrecision``."""

from __future__ import annotations

import re
from typing import Any, Dict, Sequence

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError
from ..core.state import MetricState
from .utils.grammar import check_texts, longest_common_subsequence

__all__ = ["CharRecallPrecision"]

#: What MMEval 0.2.1 keeps by default: ASCII letters and digits, and the CJK ideographs U+4E00 to U+9FA5.
DEFAULT_INVALID_SYMBOL = "[^A-Za-z0-9\u4e00-\u9fa5]"
LETTER_CASES = ("unchanged", "upper", "lower")


def compile_symbols(metric: str, invalid_symbol: Any) -> "re.Pattern[str]":
    """``invalid_symbol`` (a regular expression of the characters to drop) compiled, or a MetricArgumentError."""
    if not isinstance(invalid_symbol, str):
        raise MetricArgumentError(
            f"{metric}: invalid_symbol must be a regular expression (a str), got {invalid_symbol!r}"
        )
    try:
        return re.compile(invalid_symbol)
    except re.error as exc:
        raise MetricArgumentError(
            f"{metric}: invalid_symbol={invalid_symbol!r} is not a regular expression ({exc})"
        ) from None


class CharRecallPrecision(BaseMetric):
    """Character recall and precision over a dataset of recognised words.

    Args:
        letter_case: ``'unchanged'`` (default), ``'upper'`` or ``'lower'``:
            convert both texts to that case first.
        invalid_symbol: a regular expression of the characters to drop from
            both texts before comparing (default: all but ASCII letters,
            digits and the CJK ideographs U+4E00 to U+9FA5).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths)``: two lists of str, one per sample.
    A sample's correct characters are the length of the longest common
    subsequence of its two (filtered) texts.

    Result keys (MMEval 0.2.1's, fractions in [0, 1]): ``recall`` (correct
    characters / ground-truth characters) and ``precision`` (correct /
    predicted characters), each denominator at least 1.

    Units: fractions in [0, 1], MMEval 0.2.1's scale.

    A state metric: three int64 counts per sample; :meth:`compute` moves the
    three sums (exact, whatever the number of samples).

    >>> metric = CharRecallPrecision()
    >>> metric(['helL', 'HEL'], ['hello', 'HELLO'])
    {'recall': 0.6, 'precision': 0.8571428571428571}
    """

    def __init__(
        self, letter_case: str = "unchanged", invalid_symbol: str = DEFAULT_INVALID_SYMBOL, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if letter_case not in LETTER_CASES:
            raise MetricArgumentError(
                f"CharRecallPrecision: letter_case must be one of {list(LETTER_CASES)}, got {letter_case!r}"
            )
        self.letter_case = letter_case
        self.invalid_symbol = compile_symbols("CharRecallPrecision", invalid_symbol)
        self._declare_state("gt_chars")
        self._declare_state("pred_chars")
        self._declare_state("correct_chars")

    def _clean(self, text: str) -> str:
        if self.letter_case == "upper":
            text = text.upper()
        elif self.letter_case == "lower":
            text = text.lower()
        return self.invalid_symbol.sub("", text)

    def add(self, predictions: Sequence[str], groundtruths: Sequence[str]) -> None:
        """Add a batch: the recognised texts and their ground-truth texts (lists of str of one length)."""
        preds, gts = check_texts(self.name, predictions, groundtruths, ("predictions", "groundtruths"))
        if not preds:
            return
        counts = np.empty((3, len(preds)), dtype=np.int64)
        for i, (pred, gt) in enumerate(zip(preds, gts)):
            p, g = self._clean(pred), self._clean(gt)
            counts[:, i] = len(g), len(p), longest_common_subsequence(p, g)
        self._add_rows(gt_chars=counts[0], pred_chars=counts[1], correct_chars=counts[2])

    def compute_metric(self, results: MetricState) -> Dict[str, float]:
        """Recall and precision from the summed character counts."""
        if not results.num_samples:
            raise ValueError("CharRecallPrecision.compute_metric: no results to compute on (nothing was added)")
        correct = int(results["correct_chars"])
        return {
            "recall": correct / max(int(results["gt_chars"]), 1),
            "precision": correct / max(int(results["pred_chars"]), 1),
        }
