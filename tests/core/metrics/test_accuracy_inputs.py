"""Accuracy's input handling: class-index ranges, top-k with label predictions, the default threshold, array-likes."""

from __future__ import annotations

import inspect
import re
import warnings

import numpy as np
import pytest

from mmeval import Accuracy
from mmeval.metrics import AccuracyWarning, DefaultThresholdWarning, TopkWithLabelsWarning

INT64_MAX = 2**63 - 1


def _refused(acc: Accuracy, preds, labels, *words: str) -> None:
    """``add`` raises a ValueError containing every word, and keeps nothing of the batch."""
    before = acc.num_results
    with pytest.raises(ValueError) as info:
        acc.add(preds, labels)
    for word in words:
        assert word in str(info.value), f"{word!r} not in {info.value}"
    assert acc.num_results == before
    acc.reset()  # the refusal is remembered until reset() (issue 32, item 2); what follows starts afresh


# -- class indices: out of range, NaN, non-integral, negative ----------------------------------------------------


def test_uint64_labels_beyond_int64_are_refused_not_wrapped():
    big = np.array([2**63 + 5, 1], dtype=np.uint64)
    acc = Accuracy()
    _refused(acc, big, big, "predictions (labels) out of range", str(2**63 + 5), "index 0", f"[0, {INT64_MAX}]")
    _refused(acc, np.array([0, 1]), big, "labels out of range", str(2**63 + 5), f"[0, {INT64_MAX}]")
    # the largest index that fits is kept exactly: a correct prediction is a hit
    top = np.array([INT64_MAX, 3], dtype=np.uint64)
    acc.add(top, top)
    assert acc.compute() == {"top1": 1.0}


@pytest.mark.parametrize(
    "bad,shown",
    [
        (np.nan, "nan"),
        (np.inf, "inf"),
        (1.5, "1.5"),
        (-1.0, "-1.0"),
        (float(2**63), repr(float(2**63))),
    ],
)
def test_bad_float_predicted_labels_are_refused_with_value_and_range(bad, shown):
    preds = np.array([0.0, 1.0, bad])
    _refused(Accuracy(), preds, np.array([0, 1, 2]), "predictions (labels)", shown, "index 2", f"[0, {INT64_MAX}]")


def test_negative_predicted_labels_are_refused():
    _refused(
        Accuracy(),
        np.array([0, -3]),
        np.array([0, 1]),
        "predictions (labels) out of range",
        "-3",
        "index 1",
        f"[0, {INT64_MAX}]",
    )


@pytest.mark.parametrize(
    "bad,words",
    [
        (np.array([0.0, np.nan]), ("labels", "nan", "index 1")),
        (np.array([0.0, 2.5]), ("labels", "2.5", "non-integral")),
        (np.array([0, -1]), ("labels out of range", "-1")),
        (np.array([0.0, -2.0]), ("labels out of range", "-2.0")),
    ],
)
def test_bad_labels_are_refused_with_label_predictions_too(bad, words):
    _refused(Accuracy(), np.array([0, 1]), bad, *words, f"[0, {INT64_MAX}]")


def test_labels_beyond_the_class_count_name_the_range():
    _refused(Accuracy(), np.eye(3)[[0, 1]], np.array([0, 3]), "labels out of range", "3", "[0, 2]", "3 classes")


def test_integral_float_class_indices_are_accepted_and_stored_as_int64():
    acc = Accuracy()
    acc.add(np.array([0.0, 2.0, 1.0]), np.array([0.0, 2.0, 2.0], dtype=np.float32))
    acc.add(np.array([1, 1], dtype=np.uint8), np.array([1, 0], dtype=np.int16))
    assert acc.compute() == {"top1": 0.6}
    assert acc.num_results == 5  # kept as per-sample hit counts (state rows), not as the predictions


# -- topk > 1 with label predictions ------------------------------------------------------------------------------


def test_topk_above_one_with_label_predictions_warns_once_and_reports_top1_like_mmeval():
    acc = Accuracy(topk=(1, 5))
    with pytest.warns(TopkWithLabelsWarning, match=r"top-k for k > 1 needs scores") as record:
        acc.add(np.array([0, 2, 1, 3]), np.array([0, 1, 2, 3]))
        acc.add(np.array([4]), np.array([4]))
    assert len([w for w in record if issubclass(w.category, AccuracyWarning)]) == 1
    assert acc.compute() == {"top1": 0.6}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Accuracy()(np.array([0, 1]), np.array([0, 1]))  # topk=(1,): nothing to warn about


# -- the default threshold ----------------------------------------------------------------------------------------

LOGITS = np.array([[2.0, -0.5, -1.0], [1.0, -0.2, -3.0], [-1.0, -2.0, 0.5], [0.3, 0.1, -0.4]])
LOGIT_LABELS = np.array([1, 1, 2, 0])  # true classes at rank 1, 1, 0, 0; scores -0.5, -0.2, 0.5, 0.3


def test_default_threshold_warns_once_when_it_turns_a_topk_hit_into_a_miss():
    acc = Accuracy(topk=(1, 2))
    acc.add(LOGITS, LOGIT_LABELS)
    with pytest.warns(DefaultThresholdWarning, match=r"2 of 4 samples .* top2 is 0\.5000, 1\.0000 without") as rec:
        assert acc.compute() == {"top1": 0.5, "top2": 0.5}  # MMEval's numbers: the default is kept
        acc.compute()
    assert len([w for w in rec if issubclass(w.category, AccuracyWarning)]) == 1
    assert "thrs=None" in str(rec[0].message)


@pytest.mark.parametrize("thrs,expected", [(0.0, {"top1": 0.5, "top2": 0.5}), (None, {"top1": 0.5, "top2": 1.0})])
def test_a_chosen_threshold_does_not_warn(thrs, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Accuracy(topk=(1, 2), thrs=thrs)(LOGITS, LOGIT_LABELS) == expected


def test_default_threshold_is_silent_on_probabilities():
    probs = np.exp(LOGITS) / np.exp(LOGITS).sum(axis=1, keepdims=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Accuracy(topk=(1, 2))(probs, LOGIT_LABELS) == {"top1": 0.5, "top2": 1.0}


def test_default_threshold_still_reads_as_mmevals():
    default = inspect.signature(Accuracy).parameters["thrs"].default
    assert default == 0.0 and repr(default) == "0.0"
    assert Accuracy().thrs == (0.0,) and type(Accuracy().thrs[0]) is float


# -- array-likes: __array__ only (JAX arrays), ml_dtypes' bfloat16 / float8 (JAX, TensorFlow) -----------------


class ArrayOnly:
    """Implements ``__array__`` and nothing else, as far as Accuracy can tell (like a jax.Array)."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = np.asarray(a)

    def __array__(self, dtype=None, copy=None):
        return self._a if dtype is None else self._a.astype(dtype)


def test_objects_with_only_array_interface_are_accepted():
    rng = np.random.default_rng(0)
    scores = rng.random((20, 5)).astype(np.float32)
    labels = rng.integers(0, 5, 20)
    expected = Accuracy(topk=(1, 3))(scores, labels)
    assert Accuracy(topk=(1, 3))(ArrayOnly(scores), ArrayOnly(labels)) == expected
    assert Accuracy(topk=(1, 3))([ArrayOnly(s) for s in scores], [ArrayOnly(x) for x in labels]) == expected
    assert Accuracy()(ArrayOnly(labels), ArrayOnly(labels)) == {"top1": 1.0}


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_ml_dtypes_scores_as_jax_and_tensorflow_return_them_are_widened_exactly(name):
    import ml_dtypes  # what np.asarray(jax_array) / tf_tensor.numpy() return for these dtypes

    rng = np.random.default_rng(1)
    narrow = (rng.standard_normal((200, 7)) * 4).astype(getattr(ml_dtypes, name))  # many ties after rounding
    labels = rng.integers(0, 7, 200)
    wide = narrow.astype(np.float32)
    metric = Accuracy(topk=(1, 2, 5), thrs=(None, 0.0, 0.5))
    assert metric(ArrayOnly(narrow), ArrayOnly(labels)) == metric(wide, labels)
    assert metric(narrow, labels) == metric(wide, labels)


def test_unconvertible_inputs_name_the_argument():
    with pytest.raises(ValueError, match=re.escape("predictions (scores) must be real numbers")):
        Accuracy()(np.array([["a", "b"]]), np.array([0]))
    with pytest.raises(ValueError, match="labels must be integer class indices, got dtype bool"):
        Accuracy()(np.array([0]), np.array([True]))
