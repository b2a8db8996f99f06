"""mmeval-coco-native (native/coco/) against COCODetection's pure numpy path: the same numbers, bit for bit.

Runs where the optional distribution is installed (the ``coco-native`` tox env builds it with the
machine's C compiler); elsewhere it is skipped -- the pure path is then the one every other COCO test
checks against pycocotools. Each case runs the metric twice on the same data, ``MMEVAL_COCO_NATIVE=0``
(pure) and ``1`` (native), and also checks each kernel alone against its numpy counterpart.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np
import pytest
from coco_reference import coco_json, cocoeval, detections

from mmeval.metrics import coco_accumulate, coco_native
from mmeval.metrics.coco_detection import COCODetection

native = pytest.importorskip("mmeval_coco_native", reason="mmeval-coco-native is not installed in this env")
pytest.importorskip("pycocotools")

C = 6
CLASSES = [f"cls{i}" for i in range(C)]


def _run(monkeypatch, use: str, preds, gts, batch: int = 7, **kwargs: Any) -> Dict[str, Any]:
    monkeypatch.setenv("MMEVAL_COCO_NATIVE", use)
    assert (coco_native.kernels() is None) == (use == "0")
    metric = COCODetection(dataset_meta={"classes": CLASSES}, print_results=False, classwise=True, **kwargs)
    for s in range(0, len(preds), batch):
        metric.add(preds[s : s + batch], gts[s : s + batch])
    return metric.compute()


def _same(a: Dict[str, Any], b: Dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        x, y = np.asarray(a[k], dtype=float), np.asarray(b[k], dtype=float)
        assert np.array_equal(x, y, equal_nan=True), (k, a[k], b[k])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"metric": ["bbox", "proposal"]},
        {"metric": ["bbox", "proposal"], "iou_thrs": [0.3, 0.5, 0.75, 0.9], "proposal_nums": (3, 1, 100)},
        {"metric": ["bbox", "proposal"], "proposal_nums": (300, 100, 200)},
        {"metric": ["bbox", "segm"]},
    ],
    ids=["bbox-proposal", "thresholds-maxdets", "precision-at-two-maxdets", "segm"],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_native_equals_pure_bit_for_bit(monkeypatch, kwargs, seed):
    """Every stat and each class's AP: crowd regions, all area ranges, maxDets cutting, empty images."""
    preds, gts = detections(50, C, seed=seed, masks="segm" in kwargs["metric"], crowd=0.3)
    pure = _run(monkeypatch, "0", preds, gts, **kwargs)
    fast = _run(monkeypatch, "1", preds, gts, **kwargs)
    _same(pure, fast)
    ev = cocoeval(coco_json(gts, CLASSES), preds, CLASSES, "bbox", kwargs.get("iou_thrs"))
    assert abs(fast["bbox_mAP"] - ev.stats[0]) <= 1e-12


def test_tied_scores_duplicate_boxes_and_equal_ious(monkeypatch):
    """Ties in score (the ranking's place order), two detections on one object, equal IoUs (the last
    ground truth wins), an ignored twin of a ground truth."""
    box = np.array([[10.0, 10.0, 50.0, 50.0], [10.0, 10.0, 50.0, 50.0], [60.0, 60.0, 90.0, 95.0]])
    preds = [
        {"img_id": i, "bboxes": box[[0, 0, 2]], "scores": np.array([0.5, 0.5, 0.5]), "labels": np.array([1, 1, 2])}
        for i in range(4)
    ]
    gts = [
        {"img_id": i, "bboxes": box, "labels": np.array([1, 1, 2]), "ignore_flags": np.array([0, i % 2, 0])}
        for i in range(4)
    ]
    _same(_run(monkeypatch, "0", preds, gts), _run(monkeypatch, "1", preds, gts))


def test_pairwise_sum_is_numpys():
    rng = np.random.default_rng(0)
    for n in [*range(0, 300), 1010, 4097]:
        a = rng.random(n) * rng.random(n) ** 3
        assert native.pairwise_sum(a) == a.sum()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ranked_equals_the_pure_ranking(monkeypatch, dtype):
    """Ties (place order), 0.0 and -0.0 (equal), infinities, NaN of either sign (last), float32 and float64."""
    rng = np.random.default_rng(5)
    lens = rng.integers(0, 30, 40)
    n, k_all = int(lens.sum()), 9
    cats = np.concatenate([np.sort(rng.integers(0, k_all, int(m))) for m in lens]).astype(np.uint16)
    scores = (rng.integers(-2, 5, n) / 4).astype(dtype)  # many ties
    scores[::17] = np.nan
    scores[::19] = -np.nan
    scores[::13] = -0.0
    scores[::23] = np.inf
    scores[::29] = -np.inf
    scores[1::7] = rng.random(scores[1::7].shape[0])
    got = coco_accumulate.ranked(scores, cats, lens, k_all)
    monkeypatch.setenv("MMEVAL_COCO_NATIVE", "0")
    want = coco_accumulate.ranked(scores, cats, lens, k_all)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


def test_mask_area_and_iou_equal_pycocotools():
    """Random blobs, empty masks and full ones (areas past 2**16), crowd and not: pycocotools' area and iou."""
    from pycocotools import mask as mask_api

    rng = np.random.default_rng(7)
    h, w = 300, 400
    arrays = [np.zeros((h, w), np.uint8), np.ones((h, w), np.uint8)]
    for _ in range(30):
        m = np.zeros((h, w), np.uint8)
        y, x = rng.integers(0, h), rng.integers(0, w)
        m[y : y + rng.integers(1, 200), x : x + rng.integers(1, 300)] = 1
        m[rng.random((h, w)) < 0.05] ^= 1
        arrays.append(m)
    rles = [mask_api.encode(np.asfortranarray(m)) for m in arrays]
    counts = [r["counts"] for r in rles]
    offsets = np.r_[0, np.cumsum([len(c) for c in counts])].astype(np.int64)
    runs = np.empty(int(offsets[-1]), np.uint32)
    starts = np.empty(len(rles) + 1, np.int64)
    area = np.empty(len(rles))
    native.rle_decode(b"".join(counts), offsets, runs, starts, area)
    assert area.tolist() == [float(mask_api.area(r)) for r in rles]
    a, b = (g.ravel().astype(np.int64) for g in np.meshgrid(np.arange(len(rles)), np.arange(len(rles))))
    for crowd in (0, 1):
        got = np.empty(a.shape[0])
        native.rle_iou(runs, starts, area, a, b, np.full(a.shape[0], crowd, np.uint8), got)
        want = np.asarray(mask_api.iou(rles, rles, [crowd] * len(rles)))  # (dets, gts)
        assert np.array_equal(got, want[a, b])
