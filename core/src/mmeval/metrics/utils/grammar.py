"""Text helpers the language metrics share: n-gram counts, tokenizers, the language of a text, LCS length.

The names ``get_n_gram``, ``infer_language`` and ``get_tokenizer`` are MMEval 0.2.1's
(``mmeval.metrics.utils.grammar``, also importable from ``mmeval.metrics.bleu``).
``longest_common_subsequence`` is the one LCS length of the package (ROUGE-L, CharRecallPrecision).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple

from mmeval.core.errors import MetricArgumentError
from mmeval.core.identity import callable_identity

__all__ = [
    "check_texts",
    "get_n_gram",
    "get_tokenizer",
    "infer_language",
    "longest_common_subsequence",
    "ngram_counts",
    "tokenizer_argument",
    "tokenizer_for",
]

#: A tokenizer: one text in, its tokens out.
Tokenizer = Callable[[str], List[str]]

#: The CJK Unified Ideographs block MMEval 0.2.1 reads as Chinese (U+4E00 to U+9FA5).
_CJK_FIRST, _CJK_LAST = "\u4e00", "\u9fa5"


def get_n_gram(token: Sequence[Hashable], n_gram: int) -> "Counter[Tuple[Hashable, ...]]":
    """Every n-gram of ``token`` of length 1 to ``n_gram``, as a ``Counter`` of token tuples.

    ``get_n_gram(['a', 'b', 'a'], 2)`` counts ``('a',)`` twice, ``('b',)``,
    ``('a', 'b')`` and ``('b', 'a')`` once each.
    """
    counts: "Counter[Tuple[Hashable, ...]]" = Counter()
    for n in range(1, n_gram + 1):
        counts.update(ngram_counts(token, n))
    return counts


def ngram_counts(tokens: Sequence[Hashable], n: int) -> "Counter[Tuple[Hashable, ...]]":
    """The n-grams of exactly length ``n`` of ``tokens`` (none when there are fewer than ``n`` tokens)."""
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def infer_language(text: str) -> str:
    """``'cn'`` when ``text`` holds a CJK ideograph (U+4E00 to U+9FA5), else ``'en'``."""
    return "cn" if any(_CJK_FIRST <= ch <= _CJK_LAST for ch in text) else "en"


def get_tokenizer(language: str) -> Optional[Tokenizer]:
    """The tokenizer of a language: ``'en'`` splits on whitespace (``str.split``), ``'cn'`` / ``'zh'`` takes
    each character (``list``); ``None`` for any other name."""
    if language == "en":
        return str.split
    if language in ("cn", "zh"):
        return list
    return None


def longest_common_subsequence(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """The length of the longest common subsequence of ``a`` and ``b`` (tokens or characters).

    Exact, bit-parallel (Hyyro's bit-vector form of the LCS recurrence): one
    big-integer step per item of ``b``, whose bits are the items of ``a``, so
    long texts cost O(len(a) * len(b) / 64) word operations rather than the
    table's O(len(a) * len(b)) Python steps.
    """
    if not a or not b:
        return 0
    positions: Dict[Hashable, int] = {}
    for i, item in enumerate(a):
        positions[item] = positions.get(item, 0) | (1 << i)
    mask = (1 << len(a)) - 1
    v = mask  # a zero bit i: a[: i + 1] gained one more match in the LCS
    for item in b:
        u = v & positions.get(item, 0)
        v = ((v + u) | (v - u)) & mask
    return len(a) - bin(v).count("1")


def tokenizer_argument(value: Any, argument: str, metric: str) -> Optional[Tokenizer]:
    """A text metric's tokenizer argument: a callable, ``'en'``, ``'cn'`` / ``'zh'`` or ``None`` (by language).

    Raises :class:`MetricArgumentError` naming ``metric``, ``argument`` and the value otherwise.
    """
    if value is None:
        return None
    if callable(value):
        callable_identity(value, argument, metric)  # refused up front when ranks could not compare it
        return value  # type: ignore[no-any-return]
    if isinstance(value, str):
        found = get_tokenizer(value)
        if found is not None:
            return found
    raise MetricArgumentError(
        f"{metric}: {argument} must be a callable (text -> tokens), 'en', 'cn', 'zh' or None "
        f"(the language of each prediction picks str.split or characters), got {value!r}"
    )


def tokenizer_for(text: str, tokenizer: Optional[Tokenizer]) -> Tokenizer:
    """``tokenizer``, or when it is ``None`` the tokenizer of the language of ``text`` (see :func:`infer_language`)."""
    if tokenizer is not None:
        return tokenizer
    return get_tokenizer(infer_language(text))  # type: ignore[return-value]


def check_texts(
    metric: str, predictions: Any, others: Any, names: Tuple[str, str], nested: bool = False
) -> Tuple[List[str], List[Any]]:
    """One batch of texts, checked: ``predictions`` a sequence of str, ``others`` as many str (or, ``nested``,
    as many non-empty sequences of str: the references of each prediction).

    Raises :class:`MetricArgumentError` naming ``metric``, the argument and the item, before anything is kept.
    """
    pred_name, other_name = names
    preds, others_l = _as_list(metric, predictions, pred_name), _as_list(metric, others, other_name)
    if len(preds) != len(others_l):
        raise MetricArgumentError(
            f"{metric}: {pred_name} and {other_name} have different lengths "
            f"({len(preds)} and {len(others_l)}): pass one item of each per sample"
        )
    for i, p in enumerate(preds):
        if not isinstance(p, str):
            raise MetricArgumentError(f"{metric}: {pred_name}[{i}] must be a str, got {type(p).__name__}")
    for i, o in enumerate(others_l):
        if not nested:
            if not isinstance(o, str):
                raise MetricArgumentError(f"{metric}: {other_name}[{i}] must be a str, got {type(o).__name__}")
            continue
        if type(o).__module__ == "numpy" and hasattr(o, "tolist") and getattr(o, "ndim", 0) == 1:
            o = others_l[i] = o.tolist()
        if isinstance(o, str) or not isinstance(o, Sequence) or not len(o):
            got = f"the str {o!r}" if isinstance(o, str) else repr(o) if isinstance(o, Sequence) else type(o).__name__
            raise MetricArgumentError(
                f"{metric}: {other_name}[{i}] must be a non-empty sequence of reference "
                f"texts (a list of str, one list per prediction), got {got}"
            )
        for j, text in enumerate(o):
            if not isinstance(text, str):
                raise MetricArgumentError(f"{metric}: {other_name}[{i}][{j}] must be a str, got {type(text).__name__}")
    return preds, others_l


def _as_list(metric: str, value: Any, name: str) -> List[Any]:
    """``value`` as a list: a sequence (list, tuple), or a numpy array of str (nested ones to nested lists)."""
    if type(value).__module__ == "numpy" and hasattr(value, "tolist") and getattr(value, "ndim", 0) >= 1:
        value = value.tolist()
    if isinstance(value, str) or not isinstance(value, Sequence):
        shown = f"the str {value!r}" if isinstance(value, str) else type(value).__name__
        raise MetricArgumentError(
            f"{metric}: {name} must be a sequence (a list) with one item per sample, "
            f"got {shown}" + ("; wrap a single text as [text]" if isinstance(value, str) else "")
        )
    return list(value)
