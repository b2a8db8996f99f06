"""MeanIoU against scikit-learn's confusion matrix / scores, single-process and over 2 and 3 real ranks."""

from __future__ import annotations

import functools
import math
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
from hub_backend import run_ranks
from metric_helpers import assert_all_rejected, assert_ranks_match, compute_sharded, same
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import cohen_kappa_score, confusion_matrix, jaccard_score, precision_recall_fscore_support

from mmeval.metrics.mean_iou import MeanIoU

NUM_CLASSES = 11  # background + the ten digits
IGNORE = 255


@functools.cache
def digit_segmentation(n: int = 240) -> Tuple[List[np.ndarray], List[np.ndarray]]:
    """Segmentation maps from scikit-learn's digits, predictions from a logistic regression's class scores.

    Ground truth: a pixel is its digit's class (1..10) where the ink is dark
    (>= 8), background (0) where it is blank, and ``IGNORE`` on the faint
    boundary in between (as VOC marks object borders). Prediction: the
    classifier's predicted class where the ink is at least 5 -- wrong classes
    where the classifier errs, boundary pixels taken or missed. Every fourth
    map is cropped so that the images differ in size.
    """
    digits = load_digits()
    x, y = digits.data, digits.target
    clf = LogisticRegression(max_iter=200).fit(
        x[n : n + 500], y[n : n + 500]
    )  # trained on other images: realistic mistakes
    rng = np.random.default_rng(0)
    scores = clf.predict_proba(x[:n]) + rng.normal(0, 0.15, (n, 10))  # noisier: more confusion
    predicted = scores.argmax(axis=1)
    preds, labels = [], []
    for i in range(n):
        img = digits.images[i]
        lab = np.where(img >= 8, y[i] + 1, 0).astype(np.int64)
        lab[(img > 2) & (img < 8)] = IGNORE
        pred = np.where(img >= 5, predicted[i] + 1, 0).astype(np.int64)
        if i % 4 == 3:
            lab, pred = lab[1:, :7], pred[1:, :7]
        preds.append(pred)
        labels.append(lab)
    return preds, labels


def reference(preds, labels, beta: float = 1.0, nan_to_num=None) -> Dict[str, Any]:
    """From definitions, on sklearn's confusion matrix of the flattened maps (ignored pixels dropped).

    A per-class value whose denominator is 0 is NaN (MMEval's convention), and
    NaN classes are left out of the means unless ``nan_to_num`` is given.
    """
    p = np.concatenate([a.ravel() for a in preds])
    t = np.concatenate([a.ravel() for a in labels])
    keep = t != IGNORE
    p, t = p[keep], t[keep]
    cm = confusion_matrix(t, p, labels=list(range(NUM_CLASSES))).astype(np.float64)  # rows: truth
    tp = np.diag(cm)
    fn = cm.sum(axis=1) - tp
    fp = cm.sum(axis=0) - tp

    def div(a, b):
        return np.array([x / y if y else math.nan for x, y in zip(a, b)])

    iou = div(tp, tp + fp + fn)
    acc = div(tp, tp + fn)
    dice = div(2 * tp, 2 * tp + fp + fn)
    prec = div(tp, tp + fp)
    rec = acc
    fscore = div((1 + beta**2) * prec * rec, beta**2 * prec + rec)

    def mean(v):
        if nan_to_num is not None:
            v = np.where(np.isnan(v), nan_to_num, v)
        return float(np.nanmean(v))

    return {
        "aAcc": tp.sum() / cm.sum(),
        "mIoU": mean(iou),
        "mAcc": mean(acc),
        "mDice": mean(dice),
        "mPrecision": mean(prec),
        "mRecall": mean(rec),
        "mFscore": mean(fscore),
        "kappa": cohen_kappa_score(t, p),
        "classwise": {"IoU": iou, "Acc": acc, "Dice": dice, "Precision": prec, "Recall": rec, "Fscore": fscore},
        "flat": (t, p),
    }


KEYS = ["aAcc", "mIoU", "mAcc", "mDice", "mPrecision", "mRecall", "mFscore", "kappa"]


@pytest.mark.parametrize("beta", [1, 0.5, 2])
def test_matches_sklearn_reference_on_digit_maps(beta):
    preds, labels = digit_segmentation()
    ref = reference(preds, labels, beta=beta)
    metric = MeanIoU(num_classes=NUM_CLASSES, beta=beta, classwise_results=True)
    for start in range(0, len(preds), 32):  # batches of maps of different sizes: the list form
        metric.add(preds[start : start + 32], labels[start : start + 32])
    got = metric.compute()
    assert list(got) == KEYS + ["classwise_results"]
    for key in KEYS:
        assert got[key] == pytest.approx(ref[key], rel=1e-12), key
    for key, values in ref["classwise"].items():
        np.testing.assert_allclose(got["classwise_results"][key], values, rtol=1e-12, equal_nan=True)
    # the per-class scores agree with sklearn's own where sklearn defines them the same way
    t, p = ref["flat"]
    present = np.isin(np.arange(NUM_CLASSES), np.concatenate([t, p]))
    np.testing.assert_allclose(
        np.asarray(got["classwise_results"]["IoU"])[present],
        jaccard_score(t, p, labels=np.arange(NUM_CLASSES)[present], average=None),
        rtol=1e-12,
    )
    prec, rec, fb, _ = precision_recall_fscore_support(
        t, p, labels=list(range(NUM_CLASSES)), beta=beta, average=None, zero_division=np.nan
    )
    np.testing.assert_allclose(got["classwise_results"]["Precision"], prec, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(got["classwise_results"]["Recall"], rec, rtol=1e-12, equal_nan=True)
    both = (np.asarray(prec) + np.asarray(rec)) > 0  # sklearn makes F 0 where precision = recall = 0; MMEval NaN
    np.testing.assert_allclose(np.asarray(got["classwise_results"]["Fscore"])[both], fb[both], rtol=1e-12)


def test_mmeval_docstring_example_and_nan_to_num():
    labels = np.asarray([[[0, 1, 1], [2, 3, 2]]])
    preds = np.asarray([[[0, 2, 1], [1, 3, 2]]])
    assert MeanIoU(num_classes=4)(preds, labels) == {
        "aAcc": 0.6666666666666666,
        "mIoU": 0.6666666666666666,
        "mAcc": 0.75,
        "mDice": 0.75,
        "mPrecision": 0.75,
        "mRecall": 0.75,
        "mFscore": 0.75,
        "kappa": 0.5384615384615384,
    }
    # class 4 never appears: NaN per class, left out of the means -- or counted as nan_to_num
    out = MeanIoU(num_classes=5, classwise_results=True)(preds, labels)
    assert out["mIoU"] == pytest.approx(0.6666666666666666) and math.isnan(out["classwise_results"]["IoU"][4])
    assert MeanIoU(num_classes=5, nan_to_num=0)(preds, labels)["mIoU"] == pytest.approx(4 * 0.6666666666666666 / 5)
    preds_p, labels_p = digit_segmentation(60)
    ref = reference(preds_p, labels_p, nan_to_num=-1)
    got = MeanIoU(num_classes=NUM_CLASSES, nan_to_num=-1)(preds_p, labels_p)
    for key in KEYS:
        assert got[key] == pytest.approx(ref[key], rel=1e-12), key


def test_inputs_array_list_and_framework_like_tensors_agree():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 4, (6, 5, 7))
    labels[:, 0, :] = IGNORE
    preds = np.where(rng.random((6, 5, 7)) < 0.7, labels % 4, rng.integers(0, 4, (6, 5, 7)))

    class EagerTensorLike:  # duck-typed like an eager TensorFlow tensor: numpy(), no __array__
        def __init__(self, a):
            self.numpy = lambda: a

    metric = MeanIoU(num_classes=4)
    want = metric(preds, labels)
    assert same(metric(list(preds), list(labels)), want)
    assert same(metric(preds.astype(np.float32), labels.astype(np.float64)), want)
    assert same(metric(EagerTensorLike(preds), EagerTensorLike(labels)), want)
    assert same(metric([EagerTensorLike(p) for p in preds], [lab.tolist() for lab in labels]), want)
    assert same(MeanIoU(dataset_meta={"classes": ["a", "b", "c", "d"]})(preds, labels), want)
    assert same(MeanIoU(dataset_meta={"num_classes": 4})(preds, labels), want)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_classes": 0}, "num_classes must be a positive int"),
        ({"num_classes": 2.5}, "num_classes must be a positive int"),
        ({"num_classes": 3, "ignore_index": "x"}, "ignore_index must be an int"),
        ({"num_classes": 3, "beta": 0}, "beta must be a positive"),
        ({"num_classes": 3, "nan_to_num": "zero"}, "nan_to_num must be a number"),
        ({"num_classes": 3, "classwise_results": "yes"}, "classwise_results must be True or False"),
    ],
)
def test_bad_arguments_raise_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MeanIoU(**kwargs)


def test_bad_inputs_raise_naming_them_and_keep_nothing():
    m = MeanIoU(num_classes=3)
    good = np.zeros((2, 4, 4), dtype=np.int64)
    cases = [
        ((good, good[:1]), "different lengths: 2 prediction maps, 1 label maps"),
        ((good[0], good[0]), r"shape \(N, H, W\).*got shape \(4, 4\); wrap a single map"),
        (([good[0], good[0, :3]], [good[0], good[0]]), r"predictions\[1\] has shape \(3, 4\) but labels\[1\]"),
        (
            (good, np.full((2, 4, 4), 3)),
            r"labels\[0\] out of range: got 3 at pixel \(0, 0\); values must be "
            r"integers in \[0, 2\] or ignore_index=255",
        ),
        ((np.full((2, 4, 4), -1), good), r"predictions\[0\] out of range: got -1 at pixel \(0, 0\)"),
        ((good + 0.5, good), r"predictions\[0\] must hold integer class indices: got 0.5 at pixel \(0, 0\)"),
        ((good, good.astype(str)), r"labels\[0\] must hold integer class indices, got dtype <U"),
        (([], []), "needs at least one label map"),
    ]
    assert_all_rejected(m, cases)
    with pytest.raises(ValueError, match=r"num_classes is not set.*pass MeanIoU\(num_classes=C\)"):
        MeanIoU().add(good, good)
    # a prediction under an ignored label may be anything, even out of range or NaN
    lab = np.full((1, 2, 2), IGNORE)
    lab[0, 0, 0] = 1
    pred = np.asarray([[[1.0, np.nan], [7.0, -3.0]]])
    assert m(pred, lab)["aAcc"] == 1.0


def test_stores_three_count_vectors_per_image_not_the_maps():
    preds, labels = digit_segmentation(40)
    m = MeanIoU(num_classes=NUM_CLASSES)
    m.add(preds, labels)
    (batch,) = m._batches
    assert {k: (v.shape, v.dtype) for k, v in batch.items()} == {
        k: ((40, NUM_CLASSES), np.dtype(np.int64)) for k in ("tp", "gt", "pred")
    }


# -- distributed ----------------------------------------------------------------------------------


def _add_in_batches(metric: MeanIoU, preds, labels, idx, batch=7) -> None:
    for s in range(0, len(idx), batch):
        chunk = idx[s : s + batch]
        metric.add([preds[i] for i in chunk], [labels[i] for i in chunk])


def _make(**kwargs: Any) -> MeanIoU:
    return MeanIoU(num_classes=NUM_CLASSES, classwise_results=True, **kwargs)


def shard_worker(backend, n: int) -> Dict[str, Any]:
    preds, labels = digit_segmentation(n)
    return compute_sharded(backend, n, _make, lambda m, idx: _add_in_batches(m, preds, labels, idx))


@pytest.mark.parametrize("ws", [2, 3])
def test_distributed_equals_single_process_exactly(ws):
    n = 121  # not a multiple of 2 or 3: padding and uneven shards both happen
    preds, labels = digit_segmentation(n)
    single = MeanIoU(num_classes=NUM_CLASSES, classwise_results=True)
    _add_in_batches(single, preds, labels, list(range(n)))
    want = single.compute()
    ref = reference(preds, labels)
    assert want["mIoU"] == pytest.approx(ref["mIoU"], rel=1e-12)
    assert_ranks_match(shard_worker, ws, n, want)


# -- a state metric: only the per-class sums move -------------------------------------------------------------------


def _bytes_worker(backend, classes: int):
    import warnings

    from mmeval.core.hooks import enable_comm_stats

    stats = enable_comm_stats(print_at_exit=False)
    out = {}
    for images in (4, 40):
        rng = np.random.default_rng(backend.rank)
        labels = rng.integers(0, classes, (images, 16, 16))
        preds = np.where(rng.random(labels.shape) < 0.7, labels, rng.integers(0, classes, labels.shape))
        m = MeanIoU(num_classes=classes, dist_backend=backend)
        m.add(preds, labels)
        stats.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # no size: the ShardingWarning
            m.compute()
        out[images] = stats.rows()
    return out


def test_compute_sends_the_class_sums_not_the_images():
    classes = 150
    out = run_ranks(_bytes_worker, 2, classes, timeout=120)
    for rank in range(2):
        status, got = out[rank]
        assert status == "ok", got
        (few,), (many,) = got[4], got[40]
        assert few["op"] == many["op"] == "all_reduce" and few["calls"] == many["calls"] == 1
        # 3 * C + 1 int64 sums and the ranks' counts: far under the 150 x 150 int64 confusion matrix
        assert few["bytes_sent"] == many["bytes_sent"] <= 1.1 * classes * classes * 8 / 4, (few, many)
