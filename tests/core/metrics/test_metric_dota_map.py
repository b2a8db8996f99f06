"""DOTAMeanAP and the rotated-box helpers against references written from the definitions (shapely polygons
for the IoU, the VOC devkit's loop for the AP), MMEval 0.2.1's documented numbers, and over 2 and 3 ranks."""

from __future__ import annotations

import math
import sys
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
from metric_helpers import assert_all_rejected, assert_ranks_match, compute_sharded
from test_metric_voc_map import _add, as_image, devkit_class_ap

from mmeval.core.errors import MetricArgumentError, MissingExtraError
from mmeval.metrics.dota_map import DOTAMeanAP
from mmeval.metrics.utils.bbox_overlaps_rotated import (
    calculate_bboxes_area_rotated,
    calculate_overlaps_rotated,
    le90_to_oc,
    qbox_to_rbox,
)

NUM_CLASSES = 3


def rotated_detections(n: int = 80, seed: int = 0) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Aerial-like synthetic detections: 0-6 rotated objects per 400x400 image (long thin vehicles and
    squarish buildings, any angle, about 1 in 8 ignored), found with jittered centre, size and angle,
    sometimes twice or with the wrong class, plus background boxes. Scores rounded to 2 decimals (ties)."""
    rng = np.random.default_rng(seed)
    preds, gts = [], []
    for _ in range(n):
        m = 0 if rng.random() < 1 / 8 else int(rng.integers(1, 7))
        w = rng.choice([12.0, 40.0, 90.0], m) * rng.uniform(0.7, 1.3, m)
        h = w * rng.choice([0.4, 1.0], m)
        boxes = (
            np.stack(
                [rng.uniform(40, 360, m), rng.uniform(40, 360, m), w, h, rng.uniform(-np.pi / 2, np.pi / 2, m)], axis=1
            )
            if m
            else np.zeros((0, 5))
        )
        labels = rng.integers(0, NUM_CLASSES, m)
        ignored = rng.random(m) < 1 / 8
        pb, ps, pl = [], [], []
        for b, lab in zip(boxes, labels):
            for copy in range(1 + int(rng.random() < 0.15)):
                if copy == 0 and rng.random() < 0.15:
                    continue
                jitter = np.concatenate(
                    [rng.normal(0, 0.06 * b[2], 2), b[2:4] * rng.normal(0, 0.08, 2), rng.normal(0, 0.08, 1)]
                )
                pb.append(b + jitter)
                ps.append(rng.uniform(0.5, 1.0) if copy == 0 else rng.uniform(0.3, 0.8))
                pl.append(lab if rng.random() < 0.9 else rng.integers(0, NUM_CLASSES))
        for _ in range(int(rng.integers(0, 3))):
            s = rng.uniform(10, 80)
            pb.append(
                np.array(
                    [rng.uniform(0, 400), rng.uniform(0, 400), s, s * rng.uniform(0.3, 1.0), rng.uniform(-np.pi, np.pi)]
                )
            )
            ps.append(rng.uniform(0.05, 0.6))
            pl.append(rng.integers(0, NUM_CLASSES))
        pred, gt = as_image(pb, ps, pl, boxes, labels, ignored, 5)
        preds.append(pred)
        gts.append(gt)
    return preds, gts


# -- the references -----------------------------------------------------------------------------------


def polygon(b):
    """The rectangle of (cx, cy, w, h, angle) as a shapely polygon: an axis-aligned box turned about its centre.

    Only the tests that use this reference need shapely (the ``shapely`` extra); they skip without it."""
    pytest.importorskip("shapely")
    from shapely import affinity
    from shapely.geometry import box as shapely_box

    cx, cy, w, h, a = (float(v) for v in b)
    return affinity.rotate(
        shapely_box(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), a, origin=(cx, cy), use_radians=True
    )


def ref_iou(a, b):
    pa, pb = polygon(a), polygon(b)
    inter = pa.intersection(pb).area
    union = pa.area + pb.area - inter
    return inter / union if union > 0 else 0.0


def ref_class_ap(preds, gts, cls, thr, rng, mode):
    """DOTA's devkit loop (VOC's, :func:`devkit_class_ap`): polygon IoU, and the scale range by area w * h."""
    return devkit_class_ap(preds, gts, cls, thr, rng, mode, lambda b: b[2] * b[3], ref_iou)


def reference(preds, gts, iou_thrs, scale_ranges, mode):
    ranges = list(scale_ranges) + [(None, None)]
    table = {}
    for thr in iou_thrs:
        for rng in ranges:
            aps = [ref_class_ap(preds, gts, c, thr, rng, mode) for c in range(NUM_CLASSES)]
            kept = [ap for npos, ap in aps if npos > 0]
            table[thr, rng] = sum(kept) / len(kept) if kept else math.nan
    out = {f"AP{round(thr * 100)}": table[thr, (None, None)] for thr in iou_thrs}
    for rng in ranges:
        out["mAP" if rng == (None, None) else f"mAP@{rng}"] = sum(table[t, rng] for t in iou_thrs) / len(iou_thrs)
    return out


# -- rotated IoU ----------------------------------------------------------------------------------------


def test_rotated_iou_equals_shapely_polygons():
    rng = np.random.default_rng(3)
    a = np.stack(
        [
            rng.uniform(0, 60, 40),
            rng.uniform(0, 60, 40),
            rng.uniform(1, 30, 40),
            rng.uniform(1, 30, 40),
            rng.uniform(-np.pi, np.pi, 40),
        ],
        axis=1,
    )
    # hard cases: the same box, the box turned by a quarter / half turn, shifted by its width along its own axis
    # (a shared edge), by half of it, shrunk inside itself, and integer axis-aligned boxes with collinear edges
    turn = a.copy()
    turn[:, 4] += np.pi / 2
    half = a.copy()
    half[:, 4] += np.pi
    shift = a.copy()
    shift[:, 0] += a[:, 2] * np.cos(a[:, 4])
    shift[:, 1] += a[:, 2] * np.sin(a[:, 4])
    part = a.copy()
    part[:, 0] += a[:, 2] / 2 * np.cos(a[:, 4])
    part[:, 1] += a[:, 2] / 2 * np.sin(a[:, 4])
    inner = a.copy()
    inner[:, 2:4] *= 0.5
    grid = np.array([[x + 5, y + 5, 10, 10, 0.0] for x in range(0, 25, 5) for y in range(0, 25, 5)], dtype=float)
    for one, two in [
        (a, a),
        (a, turn),
        (a, half),
        (a, shift),
        (a, part),
        (a, inner),
        (grid, grid),
        (grid, grid + [0, 0, 0, 0, np.pi / 2]),
    ]:
        got = calculate_overlaps_rotated(one, two)
        want = np.array([[ref_iou(x, y) for y in two] for x in one])
        assert got.shape == want.shape and got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert calculate_overlaps_rotated(np.zeros((0, 5)), a).shape == (0, 40)
    zero = np.array([[5.0, 5.0, 0.0, 0.0, 0.3]])
    assert calculate_overlaps_rotated(zero, zero).tolist() == [[0.0]]  # an empty union: IoU 0
    # the angle convention and the direction do not change an IoU (the same rectangles)
    np.testing.assert_allclose(
        calculate_overlaps_rotated(le90_to_oc(a), a, clockwise=False), calculate_overlaps_rotated(a, a), atol=1e-12
    )


def test_helpers_mmeval_documented_values():
    rboxes = np.array([[18, 21, 20, 10, np.pi / 2], [100, 120, 40, 20, np.pi / 2]])
    assert calculate_bboxes_area_rotated(rboxes).tolist() == [200, 800]
    le90 = rboxes * [1, 1, 1, 1, -1]
    np.testing.assert_allclose(le90_to_oc(le90), rboxes)
    for bad in (np.zeros((2, 7)), np.zeros(8)):
        with pytest.raises(MetricArgumentError, match=r"must have shape \(n, 8\)"):
            qbox_to_rbox(bad)
    with pytest.raises(MetricArgumentError, match=r"bboxes1 must have shape \(n, 5\)"):
        calculate_overlaps_rotated(np.zeros((2, 4)), np.zeros((2, 5)))
    q = np.array([[13, 11, 13, 31, 23, 31, 23, 11], [0, 0, 10, 5, 5, 15, -5, 10]], dtype=float)
    pytest.importorskip("cv2")
    r = qbox_to_rbox(q)
    np.testing.assert_allclose(r[0], [18, 21, 20, 10, np.pi / 2], atol=1e-6)
    assert 0 < r[1, 4] <= np.pi / 2
    # the rectangle of the tilted square has the square's corners
    np.testing.assert_allclose(
        ref_iou(r[1], [2.5, 7.5, math.sqrt(125), math.sqrt(125), math.atan2(5, 10)]), 1.0, atol=1e-6
    )


# -- the metric ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"iou_thrs": [0.5, 0.75], "scale_ranges": [(0, 32), (32, 1e4)], "eval_mode": "area"},
    ],
)
def test_matches_dota_reference(kwargs):
    preds, gts = rotated_detections()
    metric = DOTAMeanAP(num_classes=NUM_CLASSES, **kwargs)
    for s in range(0, len(preds), 16):
        metric.add(preds[s : s + 16], gts[s : s + 16])
    got = metric.compute()
    thrs = kwargs.get("iou_thrs", [0.5])
    want = reference(preds, gts, thrs, kwargs.get("scale_ranges", []), kwargs.get("eval_mode", "11points"))
    assert list(got) == list(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    assert 0.2 < got["mAP"] < 0.95


def test_mmeval_documented_case_and_defaults():
    boxes = np.array(
        [
            [23, 31, 10.0, 20.0, 0.0],
            [100, 120, 10.0, 20.0, 0.1],
            [150, 160, 10.0, 20.0, 0.2],
            [250, 260, 10.0, 20.0, 0.3],
        ]
    )
    pred = {"bboxes": boxes, "scores": np.array([1.0, 0.98, 0.96, 0.95]), "labels": np.zeros(4, dtype=int)}
    gt = {
        "bboxes": boxes,
        "labels": np.zeros(4, dtype=int),
        "bboxes_ignore": np.empty((0, 5)),
        "labels_ignore": np.empty((0,)),
    }
    assert DOTAMeanAP(num_classes=2)([pred], [gt]) == {"AP50": 1.0, "mAP": 1.0}
    metric = DOTAMeanAP(num_classes=2)
    assert metric.eval_mode == "11points" and metric.use_legacy_coordinate is False


def test_quadrilaterals_are_their_rectangles():
    pytest.importorskip("cv2")
    # integer-cornered axis-aligned and turned squares: minAreaRect gives back the same rectangles
    q = np.array([[10, 10, 30, 10, 30, 50, 10, 50], [0, 0, 10, 5, 5, 15, -5, 10]], dtype=float)
    rect = qbox_to_rbox(q)
    pred = {"bboxes": q, "scores": np.array([0.9, 0.8]), "labels": np.array([0, 1])}
    gt = {"bboxes": q[::-1], "labels": np.array([1, 0])}
    as_rect = DOTAMeanAP(num_classes=2, classwise=True)([{**pred, "bboxes": rect}], [{**gt, "bboxes": rect[::-1]}])
    assert DOTAMeanAP(num_classes=2, classwise=True)([pred], [gt]) == as_rect
    assert as_rect["mAP"] == 1.0


def test_quadrilaterals_without_opencv_name_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cv2", None)
    q = np.array([[10, 10, 30, 10, 30, 50, 10, 50]], dtype=float)
    metric = DOTAMeanAP(num_classes=1)
    with pytest.raises(MissingExtraError, match=r"mmeval-core\[opencv\]"):
        metric.add([{"bboxes": q, "scores": [0.5], "labels": [0]}], [{"bboxes": q, "labels": [0]}])
    # rotated boxes need no extra
    r = np.array([[20.0, 30.0, 20.0, 40.0, 0.2]])
    assert metric([{"bboxes": r, "scores": [0.5], "labels": [0]}], [{"bboxes": r, "labels": [0]}])["mAP"] == 1.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"iou_thrs": 0}, "iou_thrs must be"),
        ({"eval_mode": "coco"}, "eval_mode must be one of"),
        ({"scale_ranges": [(1, 2, 3)]}, "scale_ranges must be"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DOTAMeanAP(**kwargs)


def test_bad_inputs_name_the_field_and_keep_nothing():
    metric = DOTAMeanAP(num_classes=2)
    box = np.array([[10.0, 10.0, 5.0, 5.0, 0.0]])
    pred = {"bboxes": box, "scores": np.array([0.5]), "labels": np.array([0])}
    gt = {"bboxes": box, "labels": np.array([1])}
    cases = [
        (([pred], []), "different lengths"),
        ((pred, gt), "must be sequences of dicts"),
        (([{**pred, "bboxes": np.zeros((1, 4))}], [gt]), r"predictions\[0\]\['bboxes'\] must have shape \(n, 5\)"),
        (([pred], [{**gt, "bboxes_ignore": np.zeros((2, 6))}]), r"groundtruths\[0\]\['bboxes_ignore'\] must have"),
        (([{**pred, "bboxes": box * np.nan}], [gt]), r"predictions\[0\]\['bboxes'\] holds NaN"),
        (([pred], [{**gt, "labels": np.array([2])}]), r"groundtruths\[0\]\['labels'\]: got label 2"),
        (([{**pred, "scores": np.array([0.5, 0.4])}], [gt]), r"predictions\[0\]: 1 bboxes but 2 scores"),
        (([{"bboxes": box, "labels": [0]}], [gt]), r"predictions\[0\] has no \['scores'\]"),
        (([pred], ["gt"]), r"groundtruths\[0\] must be a dict"),
    ]
    assert_all_rejected(metric, cases)
    with pytest.raises(MetricArgumentError):
        metric.add(pred, gt)


# -- distributed --------------------------------------------------------------------------------------------

KW = {"num_classes": NUM_CLASSES, "iou_thrs": [0.5, 0.75], "scale_ranges": [(0, 32)], "classwise": True}


def _make(**kwargs):
    return DOTAMeanAP(**KW, **kwargs)


def shard_worker(backend, n):
    preds, gts = rotated_detections(n)
    return compute_sharded(backend, n, _make, lambda m, idx: _add(m, preds, gts, idx))


@pytest.mark.parametrize("ws", [2, 3])
def test_distributed_equals_single_process_exactly(ws):
    n = 37
    preds, gts = rotated_detections(n)
    single = DOTAMeanAP(**KW)
    _add(single, preds, gts, list(range(n)))
    assert_ranks_match(shard_worker, ws, n, single.compute())


def _bytes_worker(backend, n):
    import warnings

    from mmeval.core.hooks import enable_comm_stats

    stats = enable_comm_stats(print_at_exit=False)
    out = {}
    for images in (n, 2 * n):
        preds, gts = rotated_detections(images, seed=backend.rank + 1)
        metric = DOTAMeanAP(num_classes=NUM_CLASSES, dist_backend=backend)
        metric.add(preds, gts)
        metric._summarize_pending()
        stats.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            metric.compute()
        out[images] = (sum(r["bytes_sent"] for r in stats.rows()), sum(len(p["labels"]) for p in preds))
    return out


def test_images_are_matched_on_their_rank():
    """Rank 1 sends rank 0 its images' summaries (score, class, state per detection, object counts per image),
    never their boxes: the bytes added by n more images (about 5 detections each), per detection, were 47 here
    and 182 while the images' dicts moved to rank 0."""
    from hub_backend import run_ranks

    out = run_ranks(_bytes_worker, 2, 30, timeout=120)
    status, got = out[1]
    assert status == "ok", got
    (b1, d1), (b2, d2) = got[30], got[60]
    per_det = (b2 - b1) / (d2 - d1)
    print(f"{per_det:.2f} bytes sent per detection")
    assert per_det <= 60, per_det
