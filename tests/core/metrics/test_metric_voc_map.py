"""VOCMeanAP against a reference written from the PASCAL VOC definition, single-process and over 2 and 3 ranks."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
from metric_helpers import assert_all_rejected, assert_ranks_match, compute_sharded

from mmeval.metrics.voc_map import VOCMeanAP

NUM_CLASSES = 4


def detections(n: int = 120, seed: int = 0) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Realistic synthetic detector output on 320x320 images.

    Each image holds 0-5 objects of several classes and sizes (about 1 in 8
    marked difficult: ``bboxes_ignore``); about 1 image in 6 holds none. The
    detector finds most objects with a jittered box (the smaller the object,
    the larger the relative jitter) and a high score, sometimes twice (a
    duplicate: a false positive), sometimes with the wrong class; it misses
    some objects and adds low-scored boxes on the background. Scores are
    rounded to 2 decimals so that ties occur.
    """
    rng = np.random.default_rng(seed)
    preds, gts = [], []
    for _ in range(n):
        m = 0 if rng.random() < 1 / 6 else int(rng.integers(1, 6))
        size = rng.choice([20.0, 60.0, 140.0], m) * rng.uniform(0.7, 1.4, m)
        xy = rng.uniform(0, 320 - size[:, None], (m, 2)) if m else np.zeros((0, 2))
        boxes = np.concatenate([xy, xy + size[:, None]], axis=1) if m else np.zeros((0, 4))
        labels = rng.integers(0, NUM_CLASSES, m)
        difficult = rng.random(m) < 1 / 8
        pb, ps, pl = [], [], []
        for box, lab, s in zip(boxes, labels, size):
            for copy in range(1 + int(rng.random() < 0.15)):
                if copy == 0 and rng.random() < 0.2:
                    continue  # missed
                pb.append(box + rng.normal(0, 0.08 * s + 1.0, 4))
                ps.append(rng.uniform(0.5, 1.0) if copy == 0 else rng.uniform(0.3, 0.8))
                pl.append(lab if rng.random() < 0.9 else rng.integers(0, NUM_CLASSES))
        for _ in range(int(rng.integers(0, 4))):  # background false positives
            s = rng.uniform(10, 120)
            x, y = rng.uniform(0, 320 - s, 2)
            pb.append(np.array([x, y, x + s, y + s * rng.uniform(0.5, 1.5)]))
            ps.append(rng.uniform(0.05, 0.6))
            pl.append(rng.integers(0, NUM_CLASSES))
        pred, gt = as_image(pb, ps, pl, boxes, labels, difficult, 4)
        preds.append(pred)
        gts.append(gt)
    return preds, gts


def as_image(pb, ps, pl, boxes, labels, ignored, width):
    """One image's prediction and ground truth dicts from the detections (boxes of ``width`` numbers, scores
    rounded to 2 decimals: ties) and the objects, those at ``ignored`` in ``bboxes_ignore`` (VOC's and DOTA's
    cases)."""
    pred = {
        "bboxes": np.array(pb, dtype=np.float64).reshape(-1, width),
        "scores": np.round(np.array(ps, dtype=np.float64), 2),
        "labels": np.array(pl, dtype=np.int64),
    }
    gt = {
        "bboxes": boxes[~ignored],
        "labels": labels[~ignored],
        "bboxes_ignore": boxes[ignored],
        "labels_ignore": labels[ignored],
    }
    return pred, gt


def ref_area(box, legacy):
    e = 1.0 if legacy else 0.0
    return (box[2] - box[0] + e) * (box[3] - box[1] + e)


def ref_iou(a, b, legacy):
    e = 1.0 if legacy else 0.0
    iw = min(a[2], b[2]) - max(a[0], b[0]) + e
    ih = min(a[3], b[3]) - max(a[1], b[1]) + e
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    return inter / max(ref_area(a, legacy) + ref_area(b, legacy) - inter, 1e-6)


def ref_class_ap(preds, gts, cls, thr, rng, mode, legacy):
    """The VOC devkit's loop for axis-aligned boxes (``legacy``: the +1 pixel convention)."""
    return devkit_class_ap(
        preds, gts, cls, thr, rng, mode, lambda box: ref_area(box, legacy), lambda a, b: ref_iou(a, b, legacy)
    )


def devkit_class_ap(preds, gts, cls, thr, rng, mode, area, iou):
    """The VOC devkit's loop (DOTA's devkit keeps it): every detection of ``cls`` over all images by descending
    score, each matched to the object it overlaps most (``iou``); objects outside the scale range (``area``) and
    ignored ones count for nothing. Returns ``(positives, AP)``."""
    lo, hi = (None if rng[0] is None else rng[0] ** 2), (None if rng[1] is None else rng[1] ** 2)

    def in_range(box):
        a = area(box)
        return (lo is None or a >= lo) and (hi is None or a < hi)

    objects = []  # per image: [(box, ignored)]
    npos = 0
    for gt in gts:
        objs = [(b, False) for b, lab in zip(gt["bboxes"], gt["labels"]) if lab == cls]
        objs += [(b, True) for b, lab in zip(gt["bboxes_ignore"], gt["labels_ignore"]) if lab == cls]
        npos += sum(1 for b, ign in objs if not ign and in_range(b))
        objects.append(objs)
    dets = [
        (s, img, b)
        for img, p in enumerate(preds)
        for b, s, lab in zip(p["bboxes"], p["scores"], p["labels"])
        if lab == cls
    ]
    dets.sort(key=lambda d: -d[0])  # stable: ties keep dataset order
    taken = [[False] * len(o) for o in objects]
    tp, fp = [], []
    for _, img, box in dets:
        ovmax, jmax = -1.0, -1
        for j, (gbox, _) in enumerate(objects[img]):
            ov = iou(box, gbox)
            if ov > ovmax:
                ovmax, jmax = ov, j
        if ovmax >= thr:
            gbox, ignored = objects[img][jmax]
            if ignored or not in_range(gbox):
                continue
            hit = not taken[img][jmax]
            taken[img][jmax] = True
            tp.append(1 if hit else 0)
            fp.append(0 if hit else 1)
        elif in_range(box):
            tp.append(0)
            fp.append(1)
    if not tp:
        return npos, 0.0
    ctp, cfp = np.cumsum(tp), np.cumsum(fp)
    eps = float(np.finfo(np.float32).eps)
    rec = ctp / max(npos, eps)
    prec = ctp / np.maximum(ctp + cfp, eps)
    if mode == "11points":
        return npos, sum(max([p for p, r in zip(prec, rec) if r >= t] or [0.0]) for t in np.arange(0, 1.001, 0.1)) / 11
    mrec = [0.0, *rec, 1.0]
    mpre = [0.0, *prec, 0.0]
    for i in range(len(mpre) - 2, -1, -1):
        mpre[i] = max(mpre[i], mpre[i + 1])
    return npos, sum((mrec[i + 1] - mrec[i]) * mpre[i + 1] for i in range(len(mrec) - 1) if mrec[i + 1] != mrec[i])


def reference(preds, gts, iou_thrs, scale_ranges, mode="area", legacy=False, drop=True):
    ranges = list(scale_ranges) + ([(None, None)] if (None, None) not in scale_ranges else [])
    table = {}
    for thr in iou_thrs:
        for rng in ranges:
            aps = [ref_class_ap(preds, gts, c, thr, rng, mode, legacy) for c in range(NUM_CLASSES)]
            kept = [ap for npos, ap in aps if npos > 0 or not drop]
            table[thr, rng] = sum(kept) / len(kept) if kept else math.nan
    out = {f"AP{round(thr * 100)}": table[thr, (None, None)] for thr in iou_thrs}
    for rng in ranges:
        out["mAP" if rng == (None, None) else f"mAP@{rng}"] = sum(table[t, rng] for t in iou_thrs) / len(iou_thrs)
    return out


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"iou_thrs": [0.5, 0.75], "scale_ranges": [(0, 32), (32, 96), (96, 1e5)]},
        {"iou_thrs": 0.7, "eval_mode": "11points", "use_legacy_coordinate": True},
        {"iou_thrs": (0.3, 0.5), "drop_class_ap": False, "scale_ranges": [(0, 32)]},
    ],
)
def test_matches_voc_reference(kwargs):
    preds, gts = detections()
    metric = VOCMeanAP(num_classes=NUM_CLASSES, **kwargs)
    for s in range(0, len(preds), 16):
        metric.add(preds[s : s + 16], gts[s : s + 16])
    got = metric.compute()
    thrs = kwargs.get("iou_thrs", 0.5)
    thrs = [thrs] if isinstance(thrs, float) else list(thrs)
    want = reference(
        preds,
        gts,
        thrs,
        kwargs.get("scale_ranges", []),
        kwargs.get("eval_mode", "area"),
        kwargs.get("use_legacy_coordinate", False),
        kwargs.get("drop_class_ap", True),
    )
    assert list(got) == list(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    assert 0.2 < got["mAP"] < 0.95  # a realistic detector: neither trivial nor hopeless


def test_keys_and_edge_cases():
    box = np.array([[10.0, 10.0, 50.0, 50.0]])
    gt = {"bboxes": box, "labels": np.array([1])}
    perfect = {"bboxes": box, "scores": np.array([0.9]), "labels": np.array([1])}
    assert VOCMeanAP(num_classes=3)([perfect], [gt]) == {"AP50": 1.0, "mAP": 1.0}
    out = VOCMeanAP(num_classes=3, iou_thrs=[0.5, 0.95], scale_ranges=[(0, 32), (32, 64)])([perfect], [gt])
    assert out == {"AP50": 1.0, "AP95": 1.0, "mAP@(0, 32)": math.nan, "mAP@(32, 64)": 1.0, "mAP": 1.0} or (
        list(out) == ["AP50", "AP95", "mAP@(0, 32)", "mAP@(32, 64)", "mAP"] and math.isnan(out["mAP@(0, 32)"])
    )
    # no predictions at all, and images without objects: AP 0 for the classes with objects
    empty = {"bboxes": np.zeros((0, 4)), "scores": np.zeros(0), "labels": np.zeros(0, dtype=int)}
    assert VOCMeanAP(num_classes=3)([empty, empty], [gt, {"bboxes": [], "labels": []}]) == {"AP50": 0.0, "mAP": 0.0}
    # a detection of a difficult object counts for nothing
    difficult = {"bboxes": np.zeros((0, 4)), "labels": np.zeros(0), "bboxes_ignore": box, "labels_ignore": [1]}
    got = VOCMeanAP(num_classes=3, drop_class_ap=False)([perfect], [difficult])
    assert got == {"AP50": 0.0, "mAP": 0.0}
    classwise = VOCMeanAP(num_classes=2, classwise=True)([perfect], [gt])["classwise_result"]
    assert classwise[1] == {"num_gts": [[1]], "num_dets": 1, "ap": [[1.0]]}
    assert VOCMeanAP(dataset_meta={"classes": ("a", "b")})([perfect], [gt])["mAP"] == 1.0


def test_nproc_one_or_less_means_no_pool():
    """MMEval's nproc <= 1 (and -1) runs without a worker pool: accepted, same result."""
    preds, gts = detections(12)
    want = VOCMeanAP(num_classes=NUM_CLASSES)(preds, gts)
    for nproc in (-1, 0, 1, 8):
        assert VOCMeanAP(num_classes=NUM_CLASSES, nproc=nproc)(preds, gts) == want


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"iou_thrs": 0}, r"iou_thrs must be a number in \(0, 1\)"),
        ({"iou_thrs": 1}, r"iou_thrs must be a number in \(0, 1\)"),  # MMEval 0.2.1 refused it too
        ({"iou_thrs": []}, "iou_thrs must be"),
        ({"scale_ranges": [(0, 32, 64)]}, "scale_ranges must be"),
        ({"eval_mode": "coco"}, "eval_mode must be one of"),
        ({"num_classes": 0}, "num_classes must be a positive int"),
        ({"nproc": 1.5}, "nproc must be"),
        ({"classwise": "yes"}, "classwise must be True or False"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        VOCMeanAP(**kwargs)


def test_bad_inputs_name_the_field_and_keep_nothing():
    m = VOCMeanAP(num_classes=2)
    box = np.array([[0.0, 0.0, 5.0, 5.0]])
    pred = {"bboxes": box, "scores": np.array([0.5]), "labels": np.array([0])}
    gt = {"bboxes": box, "labels": np.array([1])}
    cases = [
        (([pred], []), "different lengths"),
        (([pred, {"bboxes": box, "labels": [0]}], [gt, gt]), r"predictions\[1\] has no \['scores'\]"),
        (([pred], [{**gt, "labels": np.array([2])}]), r"groundtruths\[0\]\['labels'\]: got label 2; .*\[0, 1\]"),
        (([{**pred, "bboxes": np.zeros((1, 5))}], [gt]), r"predictions\[0\]\['bboxes'\] must have shape \(n, 4\)"),
        (([{**pred, "scores": np.array([np.nan])}], [gt]), r"predictions\[0\]\['scores'\] holds NaN"),
        (([{**pred, "scores": np.array([0.5, 0.4])}], [gt]), r"predictions\[0\]: 1 bboxes but 2 scores"),
        (([pred], ["gt"]), r"groundtruths\[0\] must be a dict"),
    ]
    assert_all_rejected(m, cases)
    with pytest.raises(ValueError, match=r"num_classes is not set.*VOCMeanAP\(num_classes=C\)"):
        VOCMeanAP().add([pred], [gt])


# -- distributed ----------------------------------------------------------------------------------

KW = {"num_classes": NUM_CLASSES, "iou_thrs": [0.5, 0.75], "scale_ranges": [(0, 32), (32, 96)], "classwise": True}


def _add(metric, preds, gts, idx, batch=5):
    for s in range(0, len(idx), batch):
        metric.add([preds[i] for i in idx[s : s + batch]], [gts[i] for i in idx[s : s + batch]])


def _make(**kwargs):
    return VOCMeanAP(**KW, **kwargs)


def shard_worker(backend, n):
    preds, gts = detections(n)
    return compute_sharded(backend, n, _make, lambda m, idx: _add(m, preds, gts, idx))


@pytest.mark.parametrize("ws", [2, 3])
def test_distributed_equals_single_process_exactly(ws):
    n = 61
    preds, gts = detections(n)
    single = VOCMeanAP(**KW)
    _add(single, preds, gts, list(range(n)))
    want = single.compute()
    assert_ranks_match(shard_worker, ws, n, want)
