"""COCODetection's cases for the shared table of tests/metric_cases.py (every backend, 2 and 3 ranks, 4 shardings)."""

from __future__ import annotations

from typing import Any, Dict

CASE_NAMES = ("COCODetection-bbox-proposal", "COCODetection-segm")


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
    }
