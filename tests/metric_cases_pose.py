"""The pose metrics' cases for the shared table (tests/metric_cases.py): one per metric, NME in both modes.

The data are tests/core/metrics/test_metric_pose.py's (checked there against references written from the
definitions): 60 samples, each with 0, 1 or 2 instances, sizes with a zero or a negative value now
and then. EPE and NME sum float32 distances in float64: with these integer pixel offsets the sums are
exact in any order, so every sharding equals one process.
"""

from __future__ import annotations

from typing import Any, Dict

CASE_NAMES = (
    "PCKAccuracy",
    "MpiiPCKAccuracy",
    "JhmdbPCKAccuracy",
    "KeypointAUC",
    "KeypointEndPointError",
    "KeypointNME",
    "KeypointNME-keypoint_distance",
)


def build_cases() -> Dict[str, Dict[str, Any]]:
    from test_metric_pose import CASES, case_data, pose_data

    n = 60
    out: Dict[str, Dict[str, Any]] = {}
    for name, (cls, kwargs, (k, _)) in CASES.items():
        out[name] = {
            "metric": f"{cls.__module__}:{cls.__name__}",
            # num_keypoints given: a rank that added nothing knows K too (without it, every rank raises naming
            # num_keypoints, tests/core/metrics/test_metric_pose.py) -- the shared suite's empty rank needs it
            "kwargs": {**kwargs, "num_keypoints": k} if cls.__name__ != "MpiiPCKAccuracy" else dict(kwargs),
            "inputs": list(case_data(name, n)),
            "n": n,
        }
    meta = {"dataset_name": "horse10", "num_keypoints": 6}
    out["KeypointNME-keypoint_distance"] = {
        "metric": "mmeval.metrics.keypoint_nme:KeypointNME",
        "kwargs": {"norm_mode": "keypoint_distance", "dataset_meta": meta},
        "inputs": list(pose_data(n, 6, 17)),
        "n": n,
    }
    return out
