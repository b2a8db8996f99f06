"""The benchmark report's catalogue part (issue 22): a state metric whose bytes grow with n is a MISS, named."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"
sys.path.insert(0, str(BENCH))

import report  # noqa: E402
import report_exactsum  # noqa: E402


def _rec(case: str, kind: str, sent_1: float, sent_4: Any) -> Dict[str, Any]:
    x4 = sent_4 if isinstance(sent_4, dict) else {"sent_bytes_per_rank": [sent_4, sent_4], "compute_s": 0.002}
    return {
        "kind": "catalogue",
        "case": case,
        "metric": case,
        "metric_kind": kind,
        "backend": "torch_cpu",
        "ws": 2,
        "n": 61,
        "x1": {"sent_bytes_per_rank": [sent_1, sent_1], "compute_s": 0.001},
        "x4": x4,
    }


def test_a_state_metric_whose_bytes_grow_with_n_is_a_miss_naming_it() -> None:
    result = {
        "runs": [
            {
                "records": [
                    _rec("Accuracy", "state", 4096, 4096),
                    _rec("Leaky", "state", 4096, 8192),
                    _rec("AveragePrecision", "per-sample", 12288, 29784),
                ]
            }
        ]
    }
    (target,) = report.catalogue_targets(result)
    assert target.verdict == "MISS" and "1 of 2 state cases" in target.measured and "grew: Leaky" in target.measured
    ok = {
        "runs": [
            {"records": [_rec("Accuracy", "state", 4096, 4096), _rec("AveragePrecision", "per-sample", 12288, 29784)]}
        ]
    }
    (target,) = report.catalogue_targets(ok)
    assert target.verdict == "PASS"


def test_the_table_lists_every_case_and_a_refusal() -> None:
    refused = {"error": "ValueError: AVAMeanAP: frame ('v', 902) was added 4 times"}
    lines = report.catalogue_table(
        {
            "runs": [
                {"records": [_rec("Accuracy", "state", 4096, 4096), _rec("AVAMeanAP", "per-sample", 12288, refused)]}
            ]
        }
    )
    body = "\n".join(lines)
    assert "| Accuracy | state | torch_cpu ws=2 | 61 | 4.0 KB |" in body
    assert "| AVAMeanAP | per-sample |" in body and "refused" in body


def test_the_exact_sum_table_puts_plain_and_exact_side_by_side() -> None:
    """Issue 32: each float-state case's bytes and compute() time, plain float sums then exact sums."""

    def measured(sent: float, seconds: float) -> Dict[str, Any]:
        return {"sent_bytes_per_rank": [sent, sent], "compute_s": seconds, "collectives": 1}

    rec = {"kind": "exactsum", "case": "MeanSquaredError", "backend": "torch_cpu", "ws": 2, "n": 41}
    rec.update({"plain_x1": measured(12288, 0.02), "exact_x1": measured(4096, 0.01)})
    rec.update({"plain_x4": measured(12288, 0.03), "exact_x4": measured(4096, 0.015)})
    lines = report_exactsum.exactsum_table({"runs": [{"records": [rec]}]})
    assert (
        lines[2]
        == "| MeanSquaredError | torch_cpu ws=2 | 41 | 12.0 KB | 4.0 KB | 20.0 | 10.0 | 12.0 KB | 4.0 KB | 30.0 | 15.0 |"
    )
    assert report_exactsum.exactsum_table({"runs": []})[2:] == []
