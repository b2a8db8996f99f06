"""The exact float sums' family: each float-state metric with exact and plain sums, its section of the report."""

from __future__ import annotations

from typing import Any, Dict, List

from report_common import fmt_bytes, fmt_ms, records, table


def exactsum_table(result: Dict[str, Any]) -> List[str]:
    """Each float-state metric: bytes sent per rank and compute() time, its sums plain and exact, at n and 4 n."""
    rows = []
    for rec in sorted(records(result, "exactsum"), key=lambda r: (r["backend"], r["ws"])):
        cells = [rec["case"], f"{rec['backend']} ws={rec['ws']}", str(rec["n"])]
        for scale in ("x1", "x4"):
            plain, exact = rec[f"plain_{scale}"], rec[f"exact_{scale}"]
            cells += [fmt_bytes(max(plain["sent_bytes_per_rank"])), fmt_bytes(max(exact["sent_bytes_per_rank"]))]
            cells += [fmt_ms(plain["compute_s"]), fmt_ms(exact["compute_s"])]
        rows.append(cells)
    heads = ["case", "where", "n"]
    for at in ("n", "4n"):
        heads += [f"sent plain ({at})", f"sent exact ({at})", f"compute ms plain ({at})", f"compute ms exact ({at})"]
    return table(heads, rows)


def section(result: Dict[str, Any]) -> List[str]:
    """The exact sums' section (nothing when the part did not run)."""
    rows = exactsum_table(result)
    if len(rows) <= 2:
        return []
    return [
        "",
        "## Exact float sums",
        "",
        "`benchmarks/exact_sums.py`: every case of the table whose metric declares an `exact_sum` "
        "statistic, as shipped (exact: int64 limbs, the same bits at any world size, see docs/bitwise.md) and "
        "with the same statistics re-declared plain float64 sums (the state before), side by side in one run, "
        "measured as in the catalogue above.",
        "",
        *rows,
    ]
