"""The metric catalogue's family: its targets, its table and its section of the report."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from report_common import Target, fmt_bytes, fmt_ms, records, table


def _catalogue_sent(rec: Dict[str, Any], scale: str) -> Optional[float]:
    got = rec.get(scale, {})
    return None if "sent_bytes_per_rank" not in got else max(got["sent_bytes_per_rank"])


def catalogue_targets(result: Dict[str, Any]) -> List[Target]:
    """Issue 22's target: every state metric's compute() sends the same bytes at n and 4 n samples."""
    out: List[Target] = []
    for backend, ws in sorted({(r["backend"], r["ws"]) for r in records(result, "catalogue")}):
        state = [
            r
            for r in records(result, "catalogue")
            if (r["backend"], r["ws"]) == (backend, ws) and r.get("metric_kind") == "state"
        ]
        grew = [r["case"] for r in state if _catalogue_sent(r, "x1") != _catalogue_sent(r, "x4")]
        out.append(
            Target(
                "every state metric of the catalogue sends the same bytes at n and 4n samples",
                f"{backend} ws={ws}",
                f"{len(state) - len(grew)} of {len(state)} state cases"
                + (f"; grew: {', '.join(grew)}" if grew else ""),
                float(len(grew)),
                0,
                unit="cases",
            )
        )
    return out


def catalogue_table(result: Dict[str, Any]) -> List[str]:
    """Every metric case: its kind, bytes sent per rank and compute() time at n and 4 n samples."""
    rows = []
    for rec in sorted(records(result, "catalogue"), key=lambda r: (r["backend"], r["ws"])):
        cells = [rec["case"], rec.get("metric_kind", "?"), f"{rec['backend']} ws={rec['ws']}", str(rec["n"])]
        for scale in ("x1", "x4"):
            got = rec.get(scale, {})
            if "error" in got:
                cells += ["refused", "-"]
            else:
                cells += [fmt_bytes(max(got["sent_bytes_per_rank"])), fmt_ms(got["compute_s"])]
        rows.append(cells)
    return table(["case", "kind", "where", "n", "sent at n", "compute ms at n", "sent at 4n", "compute ms at 4n"], rows)


#: The pycocotools stats a detection result may differ from (|diff|), issue 21's bound of "equal".


def section(result: Dict[str, Any]) -> List[str]:
    """The metric catalogue's section (nothing when the part did not run)."""
    cat = catalogue_table(result)
    if len(cat) <= 2:
        return []
    return [
        "",
        "## The metric catalogue",
        "",
        "`benchmarks/catalogue.py`: every case of the shared test table (tests/metric_cases*.py, 40 to 120 "
        "samples each), added as round-robin shards of n and of 4n samples (the case's samples repeated), "
        "then `compute(size=...)`. sent: the most any rank sent during compute() (comm-stats hook; rank 0 "
        "also broadcasts the result); a state metric's is the same at n and 4n. compute ms: the slowest "
        "rank's, median over iterations. refused: the metric refuses repeated samples (a frame added twice).",
        "",
        *cat,
    ]
