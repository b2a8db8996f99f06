"""The VOC family's cases for the shared table (tests/metric_cases.py): OIDMeanAP and DOTAMeanAP.

Their data come from the core tests (tests/core/metrics/test_metric_oid_map.py, test_metric_dota_map.py), where each
metric is checked against a reference written from its definition. Small: every case computes in well under a
second per world size.
"""

from __future__ import annotations

from typing import Any, Dict

CASE_NAMES = ("OIDMeanAP", "DOTAMeanAP")


def build_cases() -> Dict[str, Dict[str, Any]]:
    """``{name: {"metric": "module:Class", "kwargs": {...}, "inputs": [predictions, groundtruths], "n": int}}``."""
    from test_metric_dota_map import KW as DOTA_KW
    from test_metric_dota_map import rotated_detections
    from test_metric_oid_map import KW as OID_KW
    from test_metric_oid_map import oid_detections

    n = 41  # neither 2 nor 3 divides it: padding and uneven shards both happen
    oid_preds, oid_gts = oid_detections(n, seed=1)
    dota_preds, dota_gts = rotated_detections(n, seed=1)
    return {
        "OIDMeanAP": {
            "metric": "mmeval.metrics.oid_map:OIDMeanAP",
            "kwargs": dict(OID_KW),
            "inputs": [oid_preds, oid_gts],
            "n": n,
        },
        "DOTAMeanAP": {
            "metric": "mmeval.metrics.dota_map:DOTAMeanAP",
            "kwargs": dict(DOTA_KW),
            "inputs": [dota_preds, dota_gts],
            "n": n,
        },
    }
