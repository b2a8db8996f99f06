"""COCODetection's cases for the shared table of tests/metric_cases.py (every backend, 2 and 3 ranks, 4 shardings)."""

from __future__ import annotations

from typing import Any, Dict

CASE_NAMES = (
    "COCODetection-bbox-proposal",
    "COCODetection-segm",
    "COCODetection-ann-file-two-images",
    "COCODetection-shared-img-ids",
)


def ann_file_of(gts: Any, classes: Any) -> str:
    """The ground truths as a COCO json in the temporary directory, named by its content (the ranks read it)."""
    import hashlib
    import json
    import os
    import tempfile

    from coco_reference import coco_json

    js = coco_json(gts, classes)
    js["categories"] = js["categories"][::-1]  # listed against class order: labels map by name (issue 32, item 8)
    text = json.dumps(js, sort_keys=True)
    path = os.path.join(tempfile.gettempdir(), f"mmeval-case-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json")
    if not os.path.exists(path):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    return path


def build_cases() -> Dict[str, Dict[str, Any]]:
    """Small synthetic COCO-like images (crowd regions, every area range, empty images, a class without ground
    truth), checked against pycocotools' COCOeval in tests/core/metrics/test_metric_coco_detection.py."""
    from coco_reference import detections

    classes = tuple(f"cls{i}" for i in range(5))
    common = {"dataset_meta": {"classes": classes}, "print_results": False}
    n = 43
    preds, gts = detections(n, 5, seed=41, crowd=0.2)
    seg_n = 25
    seg_preds, seg_gts = detections(seg_n, 5, seed=42, masks=True)
    two_preds, two_gts = detections(2, 5, seed=45)
    # pairs of images sharing an img_id (each evaluated as its own image, with a warning), 2-decimal scores:
    # equal scores of the two rank by what each image is, never by which came first (issue 32, item 5)
    pair_preds, pair_gts = detections(16, 5, seed=46)
    for i in range(1, len(pair_preds), 2):  # the second of a pair: the first's detections, its own truths
        pair_preds[i] = {**pair_preds[i - 1], "bboxes": pair_preds[i - 1]["bboxes"] + 1.0}
        pair_preds[i]["img_id"] = pair_gts[i]["img_id"] = pair_gts[i - 1]["img_id"]
    return {
        "COCODetection-bbox-proposal": {
            "metric": "mmeval.metrics.coco_detection:COCODetection",
            "kwargs": {**common, "metric": ["bbox", "proposal"], "classwise": True},
            "inputs": [preds, gts],
            "n": n,
        },
        "COCODetection-segm": {
            "metric": "mmeval.metrics.coco_detection:COCODetection",
            "kwargs": {**common, "metric": "segm"},
            "inputs": [seg_preds, seg_gts],
            "n": seg_n,
        },
        # two images on up to four ranks: ranks that added no image (issue 32, item 8), the ground truths from a file
        "COCODetection-ann-file-two-images": {
            "metric": "mmeval.metrics.coco_detection:COCODetection",
            "kwargs": {**common, "ann_file": ann_file_of(two_gts, classes), "metric": ["bbox", "proposal"]},
            "inputs": [two_preds, [{} for _ in two_gts]],
            "n": 2,
        },
        "COCODetection-shared-img-ids": {
            "metric": "mmeval.metrics.coco_detection:COCODetection",
            "kwargs": {**common, "metric": "bbox"},
            "inputs": [pair_preds, pair_gts],
            "n": 16,
        },
    }
