"""The collection's family: five metrics in one exchange against five compute() calls, its section of the report."""

from __future__ import annotations

from typing import Any, Dict, List

from report_common import fmt_bytes, fmt_ms, records, table


def collection_table(result: Dict[str, Any]) -> List[str]:
    """Five metrics in one MetricCollection.compute() against their five own compute() calls."""
    rows = []
    for rec in sorted(records(result, "collection"), key=lambda r: (r["backend"], r["ws"], r["samples_per_rank"])):
        one, five = rec["collection"], rec["separate"]
        rows.append(
            [
                f"{rec['backend']} ws={rec['ws']}",
                f"{rec['samples_per_rank']:,}",
                f"{one['collectives']} / {five['collectives']}",
                f"{fmt_bytes(one['sent_bytes'])} / {fmt_bytes(five['sent_bytes'])}",
                f"{fmt_ms(one['compute_s'])} / {fmt_ms(five['compute_s'])}",
                f"{five['compute_s'] / one['compute_s']:.2f}x" if one["compute_s"] else "-",
                f"{fmt_ms(one.get('cpu_s'))} / {fmt_ms(five.get('cpu_s'))}",
                "yes" if rec["equal"] else "NO",
            ]
        )
    header = ["where", "samples / rank", "collectives", "sent (most of any rank)", "ms", "speed-up", "CPU ms", "equal"]
    return table(header, rows)


def section(result: Dict[str, Any]) -> List[str]:
    """The collection's section (nothing when the part did not run)."""
    rows = collection_table(result)
    if len(rows) <= 2:
        return []
    return [
        "",
        "## Five metrics in one exchange (`MetricCollection`)",
        "",
        "`benchmarks/collection.py`: Accuracy(topk=(1, 5)), SingleLabelMetric, MultiLabelMetric, "
        "AveragePrecision macro and per class over one input (10 classes), each rank adding its round-robin "
        "shard, then one `MetricCollection.compute(size=...)` / the five metrics' own `compute(size=...)` one "
        "after the other (each cell: collection / separate). sent: bytes during the call (comm-stats hook), "
        "the most any rank sent; ms: the slowest rank's wall time, median over iterations (the two sides "
        "interleaved); CPU ms: the ranks' CPU time summed, the figure a loaded machine disturbs least (on a "
        "2-core machine shared with other jobs, the wall time of 4 against 11 rounds mostly measures the "
        "scheduler: see the load average above); equal: the collection's results are the separate ones. The "
        "collection is one all-gather of the layouts, one all-reduce of every state, one gather of every "
        "per-sample result and one reply (docs/collection-and-adapters.md).",
        "",
        *rows,
    ]
