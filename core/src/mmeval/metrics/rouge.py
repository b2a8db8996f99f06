"""ROUGE-N and ROUGE-L (Lin, 2004) of summaries and translations, MMEval 0.2.1's ``ROUGE``: means over samples."""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError
from ..core.identity import callable_identity
from ..core.state import MetricState
from .extras import import_extra
from .utils.grammar import (
    Tokenizer,
    check_texts,
    longest_common_subsequence,
    ngram_counts,
    tokenizer_argument,
    tokenizer_for,
)

__all__ = ["ROUGE"]

RougeKey = Union[int, str]


def _scores(matches: int, pred_len: int, ref_len: int) -> Tuple[float, float, float]:
    """(F1, precision, recall) of ``matches`` among ``pred_len`` predicted and ``ref_len`` reference units."""
    if matches == 0:
        return 0.0, 0.0, 0.0
    precision, recall = matches / pred_len, matches / ref_len
    return 2 * precision * recall / (precision + recall), precision, recall


class ROUGE(BaseMetric):
    """ROUGE-1 to ROUGE-9 (n-gram overlap) and ROUGE-L (longest common subsequence), averaged over samples.

    Args:
        rouge_keys: ``1`` to ``9`` and/or ``'L'``: an int, ``'L'``, or a list /
            tuple of them (default ``(1, 2, 'L')``).
        use_stemmer: strip word suffixes with nltk's Porter stemmer (tokens
            longer than 3 characters) before matching; needs ``nltk``.
        normalizer: a callable (text -> text) replacing the default
            normalisation (see below).
        tokenizer: a callable (text -> list of tokens), ``'en'``
            (``str.split``), ``'cn'`` / ``'zh'`` (characters) or ``None``:
            each prediction's language picks, for it and its references.
        accumulate: ``'best'`` (default: the largest F1, precision and recall
            over a prediction's references, each on its own) or ``'avg'``
            (their means over the references).
        lowercase: with the default normalisation, lowercase the text first.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    Normalisation (as MMEval 0.2.1): with the ``str.split`` tokenizer each
    text goes through ``normalizer`` if given, else every run of characters
    other than ``a-z0-9`` (``A-Za-z0-9`` when ``lowercase=False``) becomes a
    space, after lowercasing when ``lowercase``. Other tokenizers get the
    text as it is. Empty tokens are dropped.

    ``add(predictions, references)``: a list of predicted texts and, for each,
    a non-empty list of reference texts. ROUGE-N counts the clipped matches
    of the n-grams; ROUGE-L the length of the longest common subsequence of
    the tokens. A score is 0 when nothing matches or a side has no n-gram.

    Result keys (MMEval 0.2.1's), for each key ``k`` in order:
    ``rouge{k}_fmeasure``, ``rouge{k}_precision``, ``rouge{k}_recall``: means
    over the samples, fractions in [0, 1].

    Units: every value is a fraction in [0, 1], MMEval 0.2.1's scale.

    A state metric: per sample three float64 scores per key; :meth:`compute`
    moves their sums (float64 sums, equal to one process's up to the order of
    the additions), whatever the number of samples.

    >>> ROUGE(rouge_keys='L')(['the cat is on the mat'], [['a cat is on the mat']])
    {'rougeL_fmeasure': 0.8333333333333334, 'rougeL_precision': 0.8333333333333334, 'rougeL_recall': 0.8333333333333334}
    """

    def __init__(
        self,
        rouge_keys: Union[Sequence[RougeKey], RougeKey] = (1, 2, "L"),
        use_stemmer: bool = False,
        normalizer: Optional[Callable[[str], str]] = None,
        tokenizer: Union[Callable[[str], List[str]], str, None] = None,
        accumulate: str = "best",
        lowercase: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        keys = [rouge_keys] if isinstance(rouge_keys, (int, str)) else rouge_keys
        if (
            not isinstance(keys, (list, tuple))
            or not keys
            or not all(
                k == "L" if isinstance(k, str) else isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= 9
                for k in keys
            )
        ):
            raise MetricArgumentError(
                f"ROUGE: rouge_keys must be 1 to 9 or 'L', or a non-empty list of them, got {rouge_keys!r}"
            )
        self.rouge_keys = keys
        self.stemmer = (
            import_extra("nltk.stem.porter", "ROUGE(use_stemmer=True)").PorterStemmer() if use_stemmer else None
        )
        if normalizer is not None and not callable(normalizer):
            raise MetricArgumentError(
                f"ROUGE: normalizer must be a callable (text -> text) or None, got {normalizer!r}"
            )
        if normalizer is not None:
            callable_identity(normalizer, "normalizer", "ROUGE")  # refused up front when ranks could not compare it
        self.normalizer = normalizer
        self.tokenizer_fn = tokenizer_argument(tokenizer, "tokenizer", "ROUGE")
        if accumulate not in ("best", "avg"):
            raise MetricArgumentError(f"ROUGE: accumulate must be 'best' or 'avg', got {accumulate!r}")
        self.accumulate = accumulate
        self.lowercase = bool(lowercase)
        # per key: the sums over the samples of (F1, precision, recall)
        self._declare_state("scores", (len(keys), 3), "float64", "exact_sum")

    def _tokens(self, text: str, tokenize: Tokenizer) -> List[str]:
        if tokenize is str.split:
            if self.normalizer is not None:
                text = self.normalizer(text)
            elif self.lowercase:
                text = re.sub(r"[^a-z0-9]+", " ", text.lower())
            else:
                text = re.sub(r"[^A-Za-z0-9]+", " ", text)
        tokens = list(tokenize(text))
        if self.stemmer is not None:
            tokens = [self.stemmer.stem(t) if len(t) > 3 else t for t in tokens]
        return [t for t in tokens if isinstance(t, str) and t]

    def _score(self, key: RougeKey, pred: List[str], ref: List[str]) -> Tuple[float, float, float]:
        if key == "L":
            return (
                _scores(longest_common_subsequence(pred, ref), len(pred), len(ref)) if pred and ref else (0.0, 0.0, 0.0)
            )
        p_counts, r_counts = ngram_counts(pred, int(key)), ngram_counts(ref, int(key))
        p_len, r_len = sum(p_counts.values()), sum(r_counts.values())
        if not p_len or not r_len:
            return 0.0, 0.0, 0.0
        return _scores(sum((p_counts & r_counts).values()), p_len, r_len)

    def add(self, predictions: Sequence[str], references: Sequence[Sequence[str]]) -> None:
        """Add a batch: predicted texts, and a list of reference texts for each."""
        preds, refs = check_texts(self.name, predictions, references, ("predictions", "references"), nested=True)
        if not preds:
            return
        scores = np.empty((len(preds), len(self.rouge_keys), 3), dtype=np.float64)
        for i, (pred, its_refs) in enumerate(zip(preds, refs)):
            tokenize = tokenizer_for(pred, self.tokenizer_fn)
            pred_tokens = self._tokens(pred, tokenize)
            ref_tokens = [self._tokens(r, tokenize) for r in its_refs]
            for k, key in enumerate(self.rouge_keys):
                per_ref = np.array([self._score(key, pred_tokens, r) for r in ref_tokens])
                scores[i, k] = per_ref.max(axis=0) if self.accumulate == "best" else per_ref.mean(axis=0)
        self._add_rows(scores=scores)

    def compute_metric(self, results: MetricState) -> Dict[str, float]:
        """The mean scores from their sums over the samples."""
        n = results.num_samples
        if not n:
            raise ValueError("ROUGE.compute_metric: no results to compute on (nothing was added)")
        sums = np.asarray(results["scores"], dtype=np.float64)
        out: Dict[str, float] = {}
        for k, key in enumerate(self.rouge_keys):
            for j, item in enumerate(("fmeasure", "precision", "recall")):
                out[f"rouge{key}_{item}"] = float(sums[k, j]) / n
        return out
