"""The text metrics' cases for the shared table (tests/metric_cases.py): one per metric, ROUGE and F1Score in two modes.

The data are tests/core/metrics/test_metric_text.py's (each checked there against nltk, rouge-score, scikit-learn or a loop
from the definition): lists with one item per sample (texts, reference lists, ragged arrays), 61 samples each.
"""

from __future__ import annotations

from typing import Any, Dict

CASE_NAMES = (
    "BLEU",
    "ROUGE-avg",
    "ROUGE-best-L",
    "Perplexity",
    "F1Score-macro-micro",
    "F1Score-cared",
    "CharRecallPrecision",
    "WordAccuracy",
)


def build_cases() -> Dict[str, Dict[str, Any]]:
    """Parent side (imports the core tests' data builders)."""
    from test_metric_text import recognitions, tag_sequences, token_scores, translations

    n = 61  # no world size of 2 or 3 divides it
    texts, ocr = list(translations(n)), list(recognitions(n))
    module = "mmeval.metrics"
    return {
        "BLEU": {"metric": f"{module}.bleu:BLEU", "kwargs": {"smooth": True}, "inputs": texts, "n": n},
        "ROUGE-avg": {
            "metric": f"{module}.rouge:ROUGE",
            "kwargs": {"rouge_keys": [1, 2, "L"], "accumulate": "avg"},
            "inputs": texts,
            "n": n,
        },
        "ROUGE-best-L": {"metric": f"{module}.rouge:ROUGE", "kwargs": {"rouge_keys": "L"}, "inputs": texts, "n": n},
        "Perplexity": {
            "metric": f"{module}.perplexity:Perplexity",
            "kwargs": {"ignore_labels": -100},
            "inputs": list(token_scores(n)),
            "n": n,
        },
        "F1Score-macro-micro": {
            "metric": f"{module}.f1_score:F1Score",
            "kwargs": {"num_classes": 6, "mode": ["macro", "micro"]},
            "inputs": list(tag_sequences(n)),
            "n": n,
        },
        "F1Score-cared": {
            "metric": f"{module}.f1_score:F1Score",
            "kwargs": {"num_classes": 6, "mode": "macro", "cared_classes": [0, 2, 5]},
            "inputs": list(tag_sequences(n)),
            "n": n,
        },
        "CharRecallPrecision": {
            "metric": f"{module}.char_recall_precision:CharRecallPrecision",
            "kwargs": {"letter_case": "lower"},
            "inputs": ocr,
            "n": n,
        },
        "WordAccuracy": {
            "metric": f"{module}.word_accuracy:WordAccuracy",
            "kwargs": {"mode": ["exact", "ignore_case", "ignore_case_symbol"]},
            "inputs": ocr,
            "n": n,
        },
    }
