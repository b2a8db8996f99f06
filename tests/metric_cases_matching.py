"""The matching metrics' cases for the shared table (tests/metric_cases.py): AVA, proposals, text polygons.

The data come from tests/core/metrics/test_metric_matching.py, where each metric is checked against a reference
written from its definition. AVA's ground truth is the fixture tests/fixtures/ava (every rank reads it).
"""

from __future__ import annotations

from typing import Any, Dict

CASE_NAMES = ("AVAMeanAP", "ProposalRecall", "HmeanIoU-max_matching")


def build_cases() -> Dict[str, Dict[str, Any]]:
    from test_metric_matching import AVA_KW, ava_frames, proposal_images, text_images

    frames = ava_frames(72)  # the fixture's frames, each once: excluded, annotated and unannotated ones
    preds, gts = proposal_images(60)
    pp, ps, gp, gi = text_images(50)
    return {
        "AVAMeanAP": {
            "metric": "mmeval.metrics.ava_map:AVAMeanAP",
            "kwargs": dict(AVA_KW),
            "inputs": [frames],
            "n": len(frames),
        },
        "ProposalRecall": {
            "metric": "mmeval.metrics.proposal_recall:ProposalRecall",
            "kwargs": {"proposal_nums": (1, 5, 30), "print_results": False},
            "inputs": [preds, gts],
            "n": len(preds),
        },
        "HmeanIoU-max_matching": {
            "metric": "mmeval.metrics.hmean_iou:HmeanIoU",
            "kwargs": {"strategy": "max_matching"},
            "inputs": [pp, ps, gp, gi],
            "n": len(pp),
        },
    }
