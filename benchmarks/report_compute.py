"""BaseMetric.compute end to end: its targets, its table and its section of the report."""

from __future__ import annotations

from typing import Any, Dict, List

from report_common import Target, fmt_bytes, fmt_ms, fmt_ratio, records, table, where


def targets_vs_raw(result: Dict[str, Any]) -> List[Target]:
    """Accuracy.compute at ws 2 against a raw all_gather of the scores' bytes (issue 7, target 2)."""
    comp = {(r["impl"], r["backend"], r["ws"], r["method"]): r for r in records(result, "compute")}
    out: List[Target] = []
    for backend in ("torch_cpu", "mpi4py"):
        c = comp.get(("ours", backend, 2, "compute"))
        fresh, pre = comp.get(("ours", backend, 2, "raw")), comp.get(("ours", backend, 2, "raw_prealloc"))
        if c is not None and fresh is not None:
            raw = float(fresh["median_s"])
            floor = min(raw, float(pre["median_s"])) if pre is not None else raw
            out.append(
                Target(
                    "Accuracy.compute 100k/rank ≤5x raw all_gather of the scores",
                    f"{backend} ws=2" + ("" if backend == "torch_cpu" else " (not a target: see below)"),
                    f"{fmt_ms(c['median_s'])} / {fmt_ms(raw)} ms",
                    float(c["median_s"]) / raw,
                    5,
                    floor=float(c["median_s"]) / floor,
                )
            )
    return out


def targets_vs_mmeval021(result: Dict[str, Any]) -> List[Target]:
    """compute at ws 4 against 0.2.1, and the non-computing ranks' memory (issue 7, target 4)."""
    comp = {(r["impl"], r["backend"], r["ws"], r["method"]): r for r in records(result, "compute")}
    out: List[Target] = []
    for backend in ("torch_cpu", "mpi4py"):
        for ws in sorted({k[2] for k in comp if k[1] == backend}):
            ours, old = comp.get(("ours", backend, ws, "compute")), comp.get(("mmeval021", backend, ws, "compute"))
            if ours is not None and old is not None and ws >= 4:
                out.append(
                    Target(
                        "Accuracy.compute ≥5x faster than MMEval 0.2.1",
                        where(backend, ws),
                        f"{fmt_ms(old['median_s'])} / {fmt_ms(ours['median_s'])} ms",
                        float(old["median_s"]) / float(ours["median_s"]),
                        5,
                        True,
                    )
                )
            if ours is not None and ws >= 2:
                peaks = ours["peak_extra_bytes_per_rank"][1:]
                own = float(ours["own_results_bytes"])
                worst = max(peaks) if peaks else None
                out.append(
                    Target(
                        "non-computing ranks' peak extra memory ≤1.2x own results",
                        where(backend, ws),
                        f"{fmt_bytes(worst or 0)} / {fmt_bytes(own)}",
                        (worst / own) if worst is not None and own else None,
                        1.2,
                    )
                )
    return out


def compute_table(result: Dict[str, Any]) -> List[str]:
    """Accuracy.compute end to end, ours and MMEval 0.2.1."""
    recs = records(result, "compute")
    comp = {(r["impl"], r["backend"], r["ws"], r["method"]): r for r in recs}
    rows = []
    for backend in ("torch_cpu", "mpi4py"):
        for ws in sorted({r["ws"] for r in recs if r["backend"] == backend}):
            raws = [comp.get(("ours", backend, ws, m)) for m in ("raw", "raw_prealloc")]
            raw_vals = [float(r["median_s"]) for r in raws if r is not None]
            raw = min(raw_vals) if raw_vals else None
            for impl in ("ours", "mmeval021"):
                c = comp.get((impl, backend, ws, "compute"))
                if c is None:
                    continue
                peaks = c["peak_extra_bytes_per_rank"]
                own = float(c["own_results_bytes"])
                rows.append(
                    [
                        backend,
                        str(ws),
                        "this project" if impl == "ours" else "MMEval 0.2.1",
                        fmt_ms(c["median_s"]),
                        fmt_ms(c["add_median_s"]),
                        fmt_ms(raw),
                        fmt_ratio(float(c["median_s"]), raw),
                        fmt_bytes(peaks[0]),
                        fmt_bytes(max(peaks[1:])) if len(peaks) > 1 else "-",
                        fmt_bytes(own),
                        f"{max(peaks[1:]) / own:.2f}x" if len(peaks) > 1 and own else "-",
                    ]
                )
    return table(
        [
            "backend",
            "ws",
            "impl",
            "compute() ms",
            "add() ms (all batches)",
            "raw all_gather ms",
            "compute / raw",
            "rank 0 peak extra",
            "others' peak extra (max)",
            "own results",
            "others' peak / own",
        ],
        rows,
    )


def section(result: Dict[str, Any]) -> List[str]:
    """The section of BaseMetric.compute end to end."""
    return [
        "",
        "## BaseMetric.compute end to end",
        "",
        "Accuracy(topk=(1, 5)), 100,000 samples of 10 float32 scores per rank added in batches of 1,000; "
        "`raw` = a raw all_gather of the scores' bytes (4 MB per rank); peak extra = VmHWM during "
        "compute() minus VmRSS before it (peak reset through /proc/self/clear_refs).",
        "",
        *compute_table(result),
    ]
