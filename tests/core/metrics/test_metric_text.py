"""The text metrics (BLEU, ROUGE, Perplexity, F1Score, CharRecallPrecision, WordAccuracy) against independent
references -- nltk's corpus_bleu, Google's rouge-score, scikit-learn's f1_score, and plain loops written from the
definitions -- in one process and over 2 and 3 real ranks, with the bytes compute() moves."""

from __future__ import annotations

import functools
import math
import sys
import warnings
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np
import pytest
from hub_backend import run_ranks
from metric_helpers import compute_sharded, real_torch

from mmeval.core.errors import MetricArgumentError, MissingExtraError
from mmeval.metrics.bleu import BLEU
from mmeval.metrics.char_recall_precision import CharRecallPrecision
from mmeval.metrics.f1_score import F1Score
from mmeval.metrics.perplexity import Perplexity
from mmeval.metrics.rouge import ROUGE
from mmeval.metrics.word_accuracy import WordAccuracy

# -- data: small corpora with a known structure (seeded) ------------------------------------------------------------

WORDS = (
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    "a",
    "dog",
    "ran",
    "to",
    "park",
    "big",
    "tree",
    "near",
    "here",
    "sun",
    "rises",
    "in",
    "east",
    "with",
    "light",
    "I",
    "was",
    "late",
    "for",
    "work",
    "today",
    "rain",
    "my",
    "name",
    "is",
)
HANZI = "猫坐在垫子上公园旁边有棵树太阳从东方升起我今天上班迟到了"


def _edit(tokens: List[str], rng: np.random.Generator, alphabet: Sequence[str], rate: float) -> List[str]:
    """``tokens`` with about ``rate`` of them replaced, dropped or followed by an inserted one."""
    out: List[str] = []
    for t in tokens:
        r = rng.random()
        if r < rate / 3:
            out.append(str(rng.choice(alphabet)))
        elif r < 2 * rate / 3:
            continue
        else:
            out.append(t)
            if r > 1 - rate / 3:
                out.append(str(rng.choice(alphabet)))
    return out


@functools.cache
def translations(n: int = 61, seed: int = 3, max_refs: int = 3) -> Tuple[List[str], List[List[str]]]:
    """``n`` predictions (4 tokens or more) and their 1 to ``max_refs`` references: every fifth sample in Chinese
    (characters), the others English with capitals and punctuation; references sorted by token count (see
    test_bleu_equals_nltk_corpus_bleu)."""
    rng = np.random.default_rng(seed)
    preds, refs = [], []
    for i in range(n):
        chinese = i % 5 == 2
        alphabet = list(HANZI) if chinese else list(WORDS)
        base = [str(w) for w in rng.choice(alphabet, rng.integers(4, 13))]
        its = [_edit(base, rng, alphabet, 0.3) or base for _ in range(rng.integers(1, max_refs + 1))]
        pred = _edit(base, rng, alphabet, 0.4)
        pred = pred if len(pred) >= 4 else base  # nltk counts a sentence without 4-grams as one 4-gram (max(1, 0))
        if chinese:
            preds.append("".join(pred))
            refs.append(["".join(r) for r in sorted(its, key=len)])
        else:
            preds.append(" ".join(pred).capitalize() + rng.choice([".", "!", ""]))
            refs.append([" ".join(r) + "," * int(rng.integers(0, 2)) for r in sorted(its, key=len)])
    return preds, refs


@functools.cache
def recognitions(n: int = 61, seed: int = 5) -> Tuple[List[str], List[str]]:
    """``n`` recognised words and their ground truths: case changes, symbols and character errors."""
    rng = np.random.default_rng(seed)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789$-.!"
    preds, gts = [], []
    for _ in range(n):
        gt = "".join(rng.choice(list(letters[:36]), rng.integers(2, 10)))
        if rng.random() < 0.3:
            gt = "$" + gt.upper() + "."
        r = rng.random()
        if r < 0.25:
            pred = gt
        elif r < 0.45:
            pred = gt.swapcase()
        elif r < 0.6:
            pred = gt.strip("$.").lower()
        else:
            pred = "".join(_edit(list(gt), rng, list(letters), 0.4))
        preds.append(pred)
        gts.append(gt)
    return preds, gts


@functools.cache
def token_scores(n: int = 61, vocab: int = 11, seed: int = 7) -> Tuple[List[np.ndarray], List[np.ndarray]]:
    """``n`` sequences of 3 to 9 tokens: logits (seq_len, vocab) and target ids, some -100 (padding)."""
    rng = np.random.default_rng(seed)
    logits, targets = [], []
    for _ in range(n):
        length = int(rng.integers(3, 10))
        t = rng.integers(0, vocab, length)
        x = rng.normal(size=(length, vocab)) * 2
        x[np.arange(length), t] += 1.5
        t[rng.random(length) < 0.2] = -100
        logits.append(x)
        targets.append(t)
    return logits, targets


@functools.cache
def tag_sequences(n: int = 61, classes: int = 6, seed: int = 9) -> Tuple[List[np.ndarray], List[np.ndarray]]:
    """``n`` label sequences of 1 to 8 tags in [-1, classes - 1] (-1: no class) and noisy predictions of them."""
    rng = np.random.default_rng(seed)
    preds, labels = [], []
    for _ in range(n):
        lab = rng.integers(-1, classes, rng.integers(1, 9))
        pred = np.where(rng.random(lab.size) < 0.35, rng.integers(-1, classes, lab.size), lab)
        preds.append(pred)
        labels.append(lab)
    return preds, labels


def _add_in_batches(metric: Any, inputs: Sequence[Sequence[Any]], idx: Sequence[int], batch: int = 7) -> None:
    idx = list(idx)
    for s in range(0, len(idx), batch):
        metric.add(*[[values[i] for i in idx[s : s + batch]] for values in inputs])


def _tokens(text: str) -> List[str]:
    """The reference tokenisation: characters for a text with an ideograph, else whitespace words."""
    return list(text) if any("\u4e00" <= ch <= "\u9fa5" for ch in text) else text.split()


# -- BLEU -------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_gram", [1, 2, 3, 4])
@pytest.mark.parametrize("smooth", [False, True])
def test_bleu_equals_nltk_corpus_bleu(n_gram, smooth):
    from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu

    preds, refs = translations()
    metric = BLEU(n_gram=n_gram, smooth=smooth)
    _add_in_batches(metric, [preds, refs], range(len(preds)))
    got = metric.compute()["bleu"]
    # nltk: the same clipped counts and brevity penalty; method2 is add-one for every order but the unigrams.
    # References are sorted by length, so nltk's tie rule (the shorter) and MMEval's (the first) agree.
    want = corpus_bleu(
        [[_tokens(r) for r in rs] for rs in refs],
        [_tokens(p) for p in preds],
        weights=[1.0 / n_gram] * n_gram,
        smoothing_function=SmoothingFunction().method2 if smooth else None,
    )
    assert 0.05 < got < 0.95
    assert got == pytest.approx(want, rel=1e-12)


def test_bleu_weights_and_given_tokenizer_equal_nltk():
    from nltk.translate.bleu_score import corpus_bleu

    preds, refs = translations()
    weights = (0.4, 0.3, 0.2, 0.1)
    got = BLEU(ngram_weights=weights, tokenizer_fn=list)(preds, refs)["bleu"]
    want = corpus_bleu([[list(r) for r in rs] for rs in refs], [list(p) for p in preds], weights=weights)
    assert got == pytest.approx(want, rel=1e-12)


def test_bleu_mmeval_documented_numbers():
    preds = ["the cat is on the mat", "There is a big tree near the park here"]
    refs = [["a cat is on the mat"], ["A big tree is growing near the park here"]]
    assert BLEU()(preds, refs) == {"bleu": pytest.approx(0.5226045319355426, rel=1e-12)}
    assert BLEU(smooth=True)(preds, refs) == {"bleu": pytest.approx(0.566315716093867, rel=1e-12)}


def test_bleu_is_zero_when_an_order_has_no_match_even_smoothed():
    """MMEval 0.2.1's rule: no 4-gram in common gives 0.0, smoothing or not (nltk would smooth it)."""
    for smooth in (False, True):
        assert BLEU(smooth=smooth)(["a b c d e"], [["a b c x d e"]]) == {"bleu": 0.0}


def test_bleu_closest_reference_tie_takes_the_first():
    """Two references as far from the prediction (3 tokens): the first one's length is r, as in MMEval 0.2.1."""
    longer_first = BLEU(n_gram=1)(["a b c"], [["a b c d", "a b"]])["bleu"]
    shorter_first = BLEU(n_gram=1)(["a b c"], [["a b", "a b c d"]])["bleu"]
    assert longer_first == pytest.approx(math.exp(1 - 4 / 3), rel=1e-12)
    assert shorter_first == 1.0


def test_bleu_language_is_read_per_prediction():
    """A batch mixing English and Chinese scores each sample with its own tokenizer: the counts add up the same
    however the samples are grouped into batches or ranks."""
    preds, refs = translations()
    whole = BLEU()
    whole.add(preds, refs)
    one_by_one = BLEU()
    for p, r in zip(preds, refs):
        one_by_one.add([p], [r])
    assert whole.compute() == one_by_one.compute()


def test_texts_may_come_as_tuples_or_numpy_arrays_of_str():
    preds, refs = translations()
    want = BLEU()(preds, refs)
    assert BLEU()(tuple(preds), [tuple(r) for r in refs]) == want
    assert BLEU()(np.array(preds), [np.array(r) for r in refs]) == want
    assert WordAccuracy()(np.array(["a", "b"]), np.array(["a", "c"])) == {"ignore_case_symbol_accuracy": 0.5}


def test_get_n_gram_is_importable_from_bleu():
    from collections import Counter

    from mmeval.metrics.bleu import get_n_gram

    assert get_n_gram(["a", "b", "a"], 2) == Counter({("a",): 2, ("b",): 1, ("a", "b"): 1, ("b", "a"): 1})


# -- ROUGE ------------------------------------------------------------------------------------------------------------


class _Chars:
    """rouge-score's tokenizer interface, by character (what the 'cn' tokenizer does)."""

    def tokenize(self, text: str) -> List[str]:
        return [ch for ch in text if ch.strip()]


def _rouge_score_reference(
    preds: List[str], refs: List[List[str]], keys: Sequence[Any], accumulate: str, use_stemmer: bool = False
) -> Dict[str, float]:
    """Google's rouge-score per (prediction, reference), then MMEval's accumulation and the mean over samples."""
    from rouge_score.rouge_scorer import RougeScorer

    types = [f"rouge{k}" for k in keys]
    english = RougeScorer(types, use_stemmer=use_stemmer)
    chinese = RougeScorer(types, tokenizer=_Chars())
    sums = {f"{t}_{item}": 0.0 for t in types for item in ("fmeasure", "precision", "recall")}
    for pred, its in zip(preds, refs):
        scorer = chinese if any("\u4e00" <= ch <= "\u9fa5" for ch in pred) else english
        per_ref = [scorer.score(r, pred) for r in its]
        for t in types:
            for item in ("fmeasure", "precision", "recall"):
                values = [getattr(s[t], item) for s in per_ref]
                sums[f"{t}_{item}"] += max(values) if accumulate == "best" else sum(values) / len(values)
    return {k: v / len(preds) for k, v in sums.items()}


@pytest.mark.parametrize("accumulate", ["best", "avg"])
def test_rouge_equals_rouge_score(accumulate):
    preds, refs = translations()
    keys = (1, 2, 3, "L")
    metric = ROUGE(rouge_keys=keys, accumulate=accumulate)
    _add_in_batches(metric, [preds, refs], range(len(preds)))
    got = metric.compute()
    want = _rouge_score_reference(preds, refs, keys, accumulate)
    assert list(got) == list(want)
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-15), key
    assert 0.2 < got["rougeL_fmeasure"] < 0.9


def test_rouge_with_stemmer_equals_rouge_score():
    preds, refs = translations()
    english = [i for i, p in enumerate(preds) if p.isascii()]
    preds, refs = (
        [preds[i] + " runnings parks" for i in english],
        [[r + " running park" for r in refs[i]] for i in english],
    )
    got = ROUGE(use_stemmer=True)(preds, refs)
    want = _rouge_score_reference(preds, refs, (1, 2, "L"), "best", use_stemmer=True)
    assert got == {k: pytest.approx(v, rel=1e-12) for k, v in want.items()}


def test_rouge_l_is_the_longest_common_subsequence():
    """ROUGE-L counts the LCS: 'd c b a a d b d' and 'a c b d c b' share 'c b d b' (4), where a greedy block
    matcher (difflib's, MMEval 0.2.1's) finds 3. Checked against a table-filling loop on random tokens too."""
    from mmeval.metrics.utils.grammar import longest_common_subsequence

    def table_lcs(a: Sequence[str], b: Sequence[str]) -> int:
        rows = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i in range(len(a)):
            for j in range(len(b)):
                rows[i + 1][j + 1] = rows[i][j] + 1 if a[i] == b[j] else max(rows[i][j + 1], rows[i + 1][j])
        return rows[-1][-1]

    got = ROUGE(rouge_keys="L")(["d c b a a d b d"], [["a c b d c b"]])
    assert got["rougeL_precision"] == 4 / 8 and got["rougeL_recall"] == 4 / 6
    rng = np.random.default_rng(0)
    for _ in range(300):
        a, b = (list(rng.choice(list("abcd"), rng.integers(0, 80))) for _ in range(2))
        assert longest_common_subsequence(a, b) == table_lcs(a, b)


def test_rouge_mmeval_documented_numbers():
    assert ROUGE(rouge_keys="L")(["the cat is on the mat"], [["a cat is on the mat"]]) == {
        "rougeL_fmeasure": pytest.approx(0.8333333, abs=1e-7),
        "rougeL_precision": pytest.approx(0.8333333, abs=1e-7),
        "rougeL_recall": pytest.approx(0.8333333, abs=1e-7),
    }


def test_rouge_stemmer_without_nltk_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "nltk", None)
    monkeypatch.setitem(sys.modules, "nltk.stem", None)
    monkeypatch.setitem(sys.modules, "nltk.stem.porter", None)
    with pytest.raises(MissingExtraError, match=r"ROUGE\(use_stemmer=True\).*nltk"):
        ROUGE(use_stemmer=True)
    assert ROUGE()(["a b"], [["a b"]])["rouge1_fmeasure"] == 1.0  # nltk only for the stemmer


# -- Perplexity -------------------------------------------------------------------------------------------------------


def _perplexity_loop(logits: List[np.ndarray], targets: List[np.ndarray], ignore: Sequence[int]) -> float:
    """exp(mean over kept tokens of -log softmax(logits)[target]), token by token with math."""
    total, count = 0.0, 0
    for x, t in zip(logits, targets):
        for row, target in zip(x.tolist(), t.tolist()):
            if target in ignore:
                continue
            denominator = sum(math.exp(v) for v in row)
            total -= math.log(math.exp(row[target]) / denominator)
            count += 1
    return math.exp(total / count)


def test_perplexity_equals_the_definition_loop():
    logits, targets = token_scores()
    metric = Perplexity(ignore_labels=-100)
    _add_in_batches(metric, [logits, targets], range(len(logits)))
    got = metric.compute()["perplexity"]
    assert got == pytest.approx(_perplexity_loop(logits, targets, (-100,)), rel=1e-12)
    # a (batch, seq_len, vocab) array gives the same, and no ignore_labels counts the -100 nowhere: refused
    same_len = [x[:3] for x in logits], [np.abs(t[:3]) % 11 for t in targets]
    assert Perplexity()(np.stack(same_len[0]), np.stack(same_len[1]))["perplexity"] == pytest.approx(
        _perplexity_loop(*same_len, ()), rel=1e-12
    )
    with pytest.raises(MetricArgumentError, match=r"targets\[\d+\]\[\d+\] = -100 .* ignore_labels=None"):
        Perplexity()(logits, targets)


def test_perplexity_takes_framework_tensors():
    torch = real_torch()
    logits, targets = token_scores()
    want = Perplexity(ignore_labels=[-100, 10])(logits, targets)
    got = Perplexity(ignore_labels=[-100, 10])([torch.tensor(x) for x in logits], [torch.tensor(t) for t in targets])
    assert got == want


def test_perplexity_mmeval_numbers():
    preds = np.array(
        [
            [
                [0.27032791, 0.1314828, 0.05537432, 0.30159863],
                [0.26211815, 0.45614057, 0.68328134, 0.69562545],
                [0.28351885, 0.37992696, 0.18115096, 0.78854551],
                [0.05684808, 0.69699724, 0.7786954, 0.77740756],
            ]
        ]
    )
    # MMEval's test values (computed there in float32: equal to 1e-7); here float64 throughout
    assert Perplexity()(preds, np.array([[3, 2, 0, 0]]))["perplexity"] == pytest.approx(4.491682289784082, abs=1e-7)
    assert Perplexity(ignore_labels=[-100, -101])(preds, np.array([[3, 2, -100, -101]]))["perplexity"] == pytest.approx(
        3.529430098122886, abs=1e-6
    )
    assert Perplexity(ignore_labels=5)(preds[:, :1], np.array([[5]])) == {"perplexity": 0.0}  # every token ignored


# -- F1Score ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [{}, {"ignored_classes": [1]}, {"cared_classes": [0, 2, 5]}])
def test_f1_equals_sklearn(kwargs):
    from sklearn.metrics import f1_score

    preds, labels = tag_sequences()
    metric = F1Score(num_classes=6, mode=["macro", "micro"], **kwargs)
    _add_in_batches(metric, [preds, labels], range(len(preds)))
    got = metric.compute()
    cared = metric.cared_labels.tolist()
    y_pred, y_true = np.concatenate(preds), np.concatenate(labels)
    for mode in ("macro", "micro"):
        want = f1_score(y_true, y_pred, labels=cared, average=mode, zero_division=0)
        assert got[f"{mode}_f1"] == pytest.approx(want, rel=1e-12), mode
    assert list(got) == ["macro_f1", "micro_f1"]


def test_f1_mmeval_documented_numbers():
    f1 = F1Score(num_classes=5, mode=["macro", "micro"])
    assert f1(np.asarray([0, 1, 2]), np.asarray([0, 1, 4])) == {"macro_f1": 0.4, "micro_f1": pytest.approx(2 / 3)}
    assert F1Score(num_classes=5, ignored_classes=[1], mode="macro")(
        [np.array([0, 1]), np.array([2])], [np.array([0, 1]), np.array([4])]
    ) == {"macro_f1": 0.25}


def test_f1_a_class_never_seen_scores_zero_like_sklearn():
    from sklearn.metrics import f1_score

    got = F1Score(num_classes=4, mode="macro")([[0, 0, 1]], [[0, 1, 1]])["macro_f1"]
    assert got == pytest.approx(
        f1_score([0, 1, 1], [0, 0, 1], labels=[0, 1, 2, 3], average="macro", zero_division=0), rel=1e-12
    )


# -- CharRecallPrecision and WordAccuracy -------------------------------------------------------------------------------


def _char_loop(preds: List[str], gts: List[str], case: str) -> Dict[str, float]:
    """Character recall / precision from the definition: per word the LCS of the kept characters, filled in a table."""

    def keep(text: str) -> str:
        text = text.upper() if case == "upper" else text.lower() if case == "lower" else text
        return "".join(ch for ch in text if (ch.isascii() and ch.isalnum()) or "\u4e00" <= ch <= "\u9fa5")

    correct = gt_total = pred_total = 0
    for pred, gt in zip(preds, gts):
        p, g = keep(pred), keep(gt)
        table = [[0] * (len(g) + 1) for _ in range(len(p) + 1)]
        for i in range(len(p)):
            for j in range(len(g)):
                table[i + 1][j + 1] = table[i][j] + 1 if p[i] == g[j] else max(table[i][j + 1], table[i + 1][j])
        correct += table[-1][-1]
        gt_total += len(g)
        pred_total += len(p)
    return {"recall": correct / max(gt_total, 1), "precision": correct / max(pred_total, 1)}


@pytest.mark.parametrize("case", ["unchanged", "upper", "lower"])
def test_char_recall_precision_equals_the_definition_loop(case):
    preds, gts = recognitions()
    metric = CharRecallPrecision(letter_case=case)
    _add_in_batches(metric, [preds, gts], range(len(preds)))
    assert metric.compute() == pytest.approx(_char_loop(preds, gts, case), rel=1e-15)


def test_char_recall_precision_mmeval_documented_numbers():
    assert CharRecallPrecision()(["helL", "HEL"], ["hello", "HELLO"]) == {
        "recall": 0.6,
        "precision": pytest.approx(6 / 7),
    }
    assert CharRecallPrecision(letter_case="upper")(["helL", "HEL"], ["hello", "HELLO"]) == {
        "recall": 0.7,
        "precision": 1.0,
    }


def test_word_accuracy_equals_the_definition_loop():
    preds, gts = recognitions()
    metric = WordAccuracy(mode=["ignore_case_symbol", "exact", "ignore_case"])
    _add_in_batches(metric, [preds, gts], range(len(preds)))
    got = metric.compute()

    def alnum(text: str) -> str:
        return "".join(ch for ch in text if ch.isascii() and ch.isalnum())

    n = len(preds)
    want = {
        "accuracy": sum(p == g for p, g in zip(preds, gts)) / n,
        "ignore_case_accuracy": sum(p.lower() == g.lower() for p, g in zip(preds, gts)) / n,
        "ignore_case_symbol_accuracy": sum(alnum(p.lower()) == alnum(g.lower()) for p, g in zip(preds, gts)) / n,
    }
    assert got == want and list(got) == list(want)
    assert 0 < want["accuracy"] < want["ignore_case_accuracy"] < want["ignore_case_symbol_accuracy"] < 1


def test_word_accuracy_mmeval_documented_numbers():
    assert WordAccuracy()(["hello", "hello", "hello"], ["hello", "HELLO", "$HELLO$"]) == {
        "ignore_case_symbol_accuracy": 1.0
    }
    assert WordAccuracy(mode=["exact", "ignore_case", "ignore_case_symbol"])(
        ["hello", "hello", "hello"], ["hello", "HELLO", "$HELLO$"]
    ) == {"accuracy": 1 / 3, "ignore_case_accuracy": 2 / 3, "ignore_case_symbol_accuracy": 1.0}
    assert WordAccuracy(mode=["ignore_case", "exact"]).mode == {"ignore_case", "exact"}


# -- refusals ---------------------------------------------------------------------------------------------------------

BAD_ARGUMENTS: List[Tuple[Callable[..., Any], Dict[str, Any], str]] = [
    (BLEU, {"n_gram": 0}, "n_gram must be a positive int, got 0"),
    (BLEU, {"n_gram": 2, "ngram_weights": [1.0]}, r"ngram_weights must be n_gram=2 finite numbers"),
    (BLEU, {"tokenizer_fn": "fr"}, r"tokenizer_fn must be a callable .* got 'fr'"),
    (BLEU, {"tokenizer_fn": 3}, r"tokenizer_fn must be .* got 3"),
    (ROUGE, {"rouge_keys": 10}, r"rouge_keys must be 1 to 9 or 'L'.* got 10"),
    (ROUGE, {"rouge_keys": ["L", "M"]}, r"rouge_keys .* got \['L', 'M'\]"),
    (ROUGE, {"accumulate": "max"}, r"accumulate must be 'best' or 'avg', got 'max'"),
    (ROUGE, {"tokenizer": "xx"}, r"tokenizer must be a callable"),
    (ROUGE, {"normalizer": "lower"}, r"normalizer must be a callable"),
    (Perplexity, {"ignore_labels": "pad"}, r"ignore_labels must be None, an int or a list of ints, got 'pad'"),
    (Perplexity, {"ignore_labels": [1.5]}, r"ignore_labels must be"),
    (F1Score, {"num_classes": "3"}, r"num_classes must be a positive int, got '3'"),
    (F1Score, {"num_classes": 3, "mode": "weighted"}, r"mode must be 'micro', 'macro' or a list of them"),
    (F1Score, {"num_classes": 3, "cared_classes": [0], "ignored_classes": [1]}, r"not both"),
    (F1Score, {"num_classes": 3, "ignored_classes": 1}, r"ignored_classes must be a list of classes in \[0, 2\]"),
    (F1Score, {"num_classes": 3, "cared_classes": [3]}, r"cared_classes must be a list of classes in \[0, 2\]"),
    (F1Score, {"num_classes": 2, "ignored_classes": [0, 1]}, r"leaves no class"),
    (CharRecallPrecision, {"letter_case": "fake"}, r"letter_case must be one of .* got 'fake'"),
    (CharRecallPrecision, {"invalid_symbol": "[a-"}, r"invalid_symbol='\[a-' is not a regular expression"),
    (WordAccuracy, {"mode": "micro"}, r"mode must be one of .* got 'micro'"),
    (WordAccuracy, {"mode": [1, 2]}, r"mode must be one of"),
]


@pytest.mark.parametrize("cls,kwargs,match", BAD_ARGUMENTS)
def test_bad_arguments_raise_metric_argument_error(cls, kwargs, match):
    with pytest.raises(MetricArgumentError, match=match) as info:
        cls(**kwargs)
    assert isinstance(info.value, AssertionError)  # what MMEval 0.2.1 raised


BAD_INPUTS: List[Tuple[Callable[[], Any], Tuple[Any, ...], str]] = [
    (BLEU, (["a b"], ["a b"]), r"references\[0\] must be a non-empty sequence of reference texts .* the str"),
    (BLEU, (["a b"], [[]]), r"references\[0\] must be a non-empty sequence"),
    (BLEU, ("a b", [["a b"]]), r"predictions must be a sequence .* wrap a single text"),
    (BLEU, (["a", "b"], [["a"]]), r"different lengths \(2 and 1\)"),
    (ROUGE, ([3], [["a"]]), r"predictions\[0\] must be a str, got int"),
    (ROUGE, (["a"], [["a", None]]), r"references\[0\]\[1\] must be a str"),
    (WordAccuracy, (["a"], [b"a"]), r"groundtruths\[0\] must be a str, got bytes"),
    (CharRecallPrecision, (["a", "b"], ["a"]), r"different lengths"),
    (lambda: F1Score(num_classes=3), ([[0, 3]], [[0, 1]]), r"predictions\[0\] holds the class 3, not below"),
    (lambda: F1Score(num_classes=3), ([[0, 1]], [[0]]), r"predictions\[0\] has 2 labels and labels\[0\] 1"),
    (lambda: F1Score(num_classes=3), ([[0.5]], [[0]]), r"must hold integer class indices, got 0.5"),
    (Perplexity, (np.zeros((1, 3)), np.zeros((1, 3), int)), r"predictions\[0\] must be \(seq_len, vocab\)"),
    (Perplexity, (np.zeros((1, 3, 4)), np.zeros((1, 2), int)), r"3 positions and targets\[0\] 2"),
    (Perplexity, (np.zeros((1, 2, 4)), np.array([[0, 4]])), r"targets\[0\]\[1\] = 4 is not a token id in \[0, 3\]"),
    (Perplexity, (np.zeros((2, 2, 4)), np.zeros((1, 2), int)), r"2 predictions and 1 targets"),
]


@pytest.mark.parametrize("make,args,match", BAD_INPUTS)
def test_bad_inputs_raise_naming_them_and_keep_nothing(make, args, match):
    metric = make()
    with pytest.raises(MetricArgumentError, match=match):
        metric.add(*args)
    assert metric.num_results == 0
    with pytest.raises(ValueError, match="refused since reset"):  # a refused add() is remembered (issue 32, item 2)
        metric.compute()


# -- over ranks: equal to one process; compute() moves the same bytes for n and 4n samples -----------------------------


def text_cases(n: int = 61) -> Dict[str, Tuple[Callable[..., Any], List[Any]]]:
    """name -> (metric factory taking BaseMetric kwargs, inputs): one case per metric, on the data above."""
    return {
        "BLEU": (functools.partial(BLEU, smooth=True), list(translations(n))),
        "ROUGE": (functools.partial(ROUGE, rouge_keys=(1, 2, "L"), accumulate="avg"), list(translations(n))),
        "Perplexity": (functools.partial(Perplexity, ignore_labels=-100), list(token_scores(n))),
        "F1Score": (functools.partial(F1Score, num_classes=6, mode=["micro", "macro"]), list(tag_sequences(n))),
        "CharRecallPrecision": (functools.partial(CharRecallPrecision, letter_case="lower"), list(recognitions(n))),
        "WordAccuracy": (functools.partial(WordAccuracy, mode=["exact", "ignore_case_symbol"]), list(recognitions(n))),
    }


def _ranks_worker(backend: Any, n: int) -> Dict[str, Any]:
    from mmeval.core.hooks import enable_comm_stats

    out: Dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # uneven / cat shards without size: the ShardingWarning (tested elsewhere)
        for name, (make, inputs) in text_cases(n).items():
            out[name] = compute_sharded(
                backend, n, make, lambda m, idx, _inputs=inputs: _add_in_batches(m, _inputs, idx)
            )
        stats = enable_comm_stats(print_at_exit=False)
        for name, (make, _) in text_cases(n).items():
            for samples in (n, 4 * n):
                inputs = text_cases(samples)[name][1]
                metric = make(dist_backend=backend)
                _add_in_batches(metric, inputs, range(backend.rank, samples, backend.world_size), batch=64)
                stats.reset()
                metric.compute()
                out[f"bytes/{name}/{samples}"] = [(r["op"], r["calls"], r["bytes_sent"]) for r in stats.rows()]
    return out


def _close(got: Any, want: Any) -> bool:
    """Equal keys; counts' fractions equal, float sums' results equal to a relative 1e-12 (their order differs)."""
    return list(got) == list(want) and all(math.isclose(got[k], want[k], rel_tol=1e-12, abs_tol=0.0) for k in want)


@pytest.mark.parametrize("ws", [2, 3])
def test_distributed_equals_single_process_and_moves_bytes_independent_of_n(ws):
    n = 61  # no world size of 2 or 3 divides it: padding and uneven shards both happen
    out = run_ranks(_ranks_worker, ws, n, timeout=180)
    for name, (make, inputs) in text_cases(n).items():
        single = make()
        _add_in_batches(single, inputs, range(n))
        want = single.compute()
        for rank in range(ws):
            status, value = out[rank]
            assert status == "ok", value
            for scheme in ("padded", "uneven", "cat"):
                assert _close(value[name][scheme], want), (name, rank, scheme, value[name][scheme], want)
            few, many = value[f"bytes/{name}/{n}"], value[f"bytes/{name}/{4 * n}"]
            assert few == many and all(op == "all_reduce" for op, _, _ in few), (name, few, many)
            assert sum(b for _, _, b in few) <= 64 * 1024, (name, few)


def test_a_set_in_the_configuration_asks_the_same_question_in_every_process():
    """WordAccuracy keeps ``mode`` as a set (MMEval 0.2.1 does): its readable text in the question must not follow
    the process's string hash order, or ranks started with other hash seeds refuse each other's question."""
    import os
    import subprocess

    code = (
        "from mmeval.metrics.word_accuracy import WordAccuracy; from mmeval.core.wire.question import "
        "encode_question; m = WordAccuracy(mode=['exact', 'ignore_case', 'ignore_case_symbol']); "
        "print(encode_question(m._question(None), 'compute').decode())"
    )
    seen = set()
    for seed in ("0", "1", "2", "3", "4", "5"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        seen.add(
            subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        )
    assert len(seen) == 1, seen
