"""What a metric's compute() sends and holds (``benchmarks/metrics.py``): its targets."""

from __future__ import annotations

from typing import Any, Dict, List

from report_common import Target, fmt_bytes, fmt_ms, records


def metric_targets(result: Dict[str, Any]) -> List[Target]:
    """Issue 15's targets: what a metric's compute() sends and holds, from ``benchmarks/metrics.py``."""
    out: List[Target] = []
    for rec in records(result, "metrics"):
        where = f"{rec['backend']} ws={rec['ws']}"
        if rec["case"] == "accuracy_state":
            sent = max(rec["sent_bytes_per_rank"])
            out.append(
                Target(
                    f"Accuracy.compute() at {rec['samples_per_rank']:,} samples/rank sends ≤ 4 KiB per rank",
                    where,
                    f"{sent:.0f} B in {rec['collectives']} collective(s)",
                    sent,
                    4096,
                    unit="bytes",
                )
            )
            if "raw_all_gather_s" in rec:
                out.append(
                    Target(
                        "Accuracy.compute() ≤0.05x a raw all-gather of the scores",
                        where,
                        f"{fmt_ms(rec['compute_s'])} / {fmt_ms(rec['raw_all_gather_s'])} ms "
                        f"({fmt_bytes(rec['raw_bytes_per_rank'])} per rank)",
                        rec["compute_s"] / rec["raw_all_gather_s"],
                        0.05,
                    )
                )
        elif rec["case"] == "mean_iou_state":
            sent = max(rec["sent_bytes_per_rank"])
            out.append(
                Target(
                    f"MeanIoU ({rec['classes']} classes, {rec['images_per_rank']} images of "
                    f"{rec['side']}x{rec['side']}/rank) sends ≤1.1x a confusion matrix",
                    where,
                    f"{fmt_bytes(sent)} / {fmt_bytes(rec['confusion_matrix_bytes'])}",
                    sent / rec["confusion_matrix_bytes"],
                    1.1,
                )
            )
        elif rec["case"] == "per_sample_memory":
            peak = rec["peak_extra_bytes_per_rank"][0]
            out.append(
                Target(
                    f"per-sample metric ({rec.get('metric', 'AveragePrecision')}): rank 0's peak extra "
                    "memory in compute() ≤1.5x the world's results",
                    where,
                    f"{fmt_bytes(peak)} / {fmt_bytes(rec['world_results_bytes'])}",
                    peak / rec["world_results_bytes"],
                    1.5,
                )
            )
    return out
