"""BLEU (Papineni et al., 2002) of machine translation, MMEval 0.2.1's ``BLEU``: a corpus score from n-gram counts."""

from __future__ import annotations

import math
import numbers
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError
from ..core.state import MetricState
from .utils.grammar import Tokenizer, check_texts, get_n_gram, tokenizer_argument, tokenizer_for

__all__ = ["BLEU", "get_n_gram"]


class BLEU(BaseMetric):
    """Corpus BLEU: the weighted geometric mean of the clipped n-gram precisions, times the brevity penalty.

    Args:
        n_gram: the longest n-gram counted (default 4).
        smooth: add one to the matches and the totals of every order but the
            unigrams (Lin and Och, 2004). As in MMEval 0.2.1 the score is
            0.0 whenever some order has no match at all, smoothed or not.
        ngram_weights: the weight of each order's log precision, ``n_gram``
            numbers (default: ``1 / n_gram`` each).
        tokenizer_fn: a callable (text -> list of tokens), ``'en'``
            (``str.split``), ``'cn'`` / ``'zh'`` (characters), or ``None``:
            each prediction's language picks, for it and its references
            (characters when it holds a CJK ideograph, else ``str.split``).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, references)``: a list of predicted texts and, for
    each, a non-empty list of reference texts. Per sample: the prediction's
    n-grams of each order, each clipped to its largest count in any one
    reference (the matches), the prediction's n-gram count per order (the
    totals), its length, and the length of the reference closest to it (the
    first such reference on a tie, as MMEval 0.2.1).

    Result key: ``bleu``, a fraction in [0, 1]: ``BP * exp(sum_n w_n *
    log(matches_n / totals_n))`` over the corpus sums, with ``BP = 1`` when
    the predictions are longer than the chosen references in total, else
    ``exp(1 - ref_len / pred_len)``.

    Units: ``bleu`` is a fraction in [0, 1] (0.4007 is 40.07 BLEU points), MMEval 0.2.1's scale.

    A state metric: per sample ``2 * n_gram + 2`` int64 counts; :meth:`compute`
    moves their sums (exact integers, whatever the number of samples).

    >>> BLEU()(['the cat is on the mat', 'There is a big tree near the park here'],
    ...        [['a cat is on the mat'], ['A big tree is growing near the park here']])
    {'bleu': 0.5226045319355426}
    """

    def __init__(
        self,
        n_gram: int = 4,
        smooth: bool = False,
        ngram_weights: Optional[Sequence[float]] = None,
        tokenizer_fn: Union[Callable[[str], List[str]], str, None] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(n_gram, numbers.Integral) or isinstance(n_gram, bool) or n_gram < 1:
            raise MetricArgumentError(f"BLEU: n_gram must be a positive int, got {n_gram!r}")
        self.n_gram: int = int(n_gram)
        self.smooth: bool = bool(smooth)
        if ngram_weights is None:
            weights = [1.0 / self.n_gram] * self.n_gram
        else:
            if (
                isinstance(ngram_weights, str)
                or not isinstance(ngram_weights, Sequence)
                or len(ngram_weights) != self.n_gram
                or not all(isinstance(w, numbers.Real) and math.isfinite(w) for w in ngram_weights)
            ):
                raise MetricArgumentError(
                    f"BLEU: ngram_weights must be n_gram={self.n_gram} finite numbers (one "
                    f"weight per order) or None, got {ngram_weights!r}"
                )
            weights = [float(w) for w in ngram_weights]
        self.ngram_weights: List[float] = weights
        self.tokenizer_fn: Optional[Tokenizer] = tokenizer_argument(tokenizer_fn, "tokenizer_fn", "BLEU")
        self._declare_state("matches", (self.n_gram,))
        self._declare_state("totals", (self.n_gram,))
        self._declare_state("pred_len")
        self._declare_state("ref_len")

    def add(self, predictions: Sequence[str], references: Sequence[Sequence[str]]) -> None:
        """Add a batch: predicted texts, and a list of reference texts for each."""
        preds, refs = check_texts(self.name, predictions, references, ("predictions", "references"), nested=True)
        if not preds:
            return
        n, order = len(preds), self.n_gram
        matches = np.zeros((n, order), dtype=np.int64)
        totals = np.zeros((n, order), dtype=np.int64)
        lengths = np.zeros((2, n), dtype=np.int64)
        for i, (pred, its_refs) in enumerate(zip(preds, refs)):
            tokenize = tokenizer_for(pred, self.tokenizer_fn)  # the prediction's language decides for its refs
            pred_tokens = list(tokenize(pred))
            ref_tokens = [list(tokenize(r)) for r in its_refs]
            closest = min(ref_tokens, key=lambda r: abs(len(r) - len(pred_tokens)))
            lengths[:, i] = len(pred_tokens), len(closest)
            pred_counts = get_n_gram(pred_tokens, order)
            best_ref: Counter[Any] = Counter()
            for r in ref_tokens:
                best_ref |= get_n_gram(r, order)
            for gram, count in pred_counts.items():
                totals[i, len(gram) - 1] += count
                matches[i, len(gram) - 1] += min(count, best_ref[gram])
        self._add_rows(matches=matches, totals=totals, pred_len=lengths[0], ref_len=lengths[1])

    def compute_metric(self, results: MetricState) -> Dict[str, float]:
        """BLEU of the summed counts."""
        if not results.num_samples:
            raise ValueError("BLEU.compute_metric: no results to compute on (nothing was added)")
        matches = np.asarray(results["matches"], dtype=np.int64)
        totals = np.asarray(results["totals"], dtype=np.int64)
        if int(matches.min()) == 0:
            return {"bleu": 0.0}
        m, t = matches.astype(np.float64), totals.astype(np.float64)
        if self.smooth:
            m[1:] += 1.0
            t[1:] += 1.0
        log_precision = float(np.dot(np.asarray(self.ngram_weights), np.log(m / t)))
        pred_len, ref_len = int(results["pred_len"]), int(results["ref_len"])
        penalty = 1.0 if pred_len > ref_len else math.exp(1.0 - ref_len / pred_len)
        return {"bleu": penalty * math.exp(log_precision)}
