"""Start-up: its targets, its table and its section of the report."""

from __future__ import annotations

from typing import Any, Dict, List

from report_common import NON_PLUGIN, Target, records, table


def targets(result: Dict[str, Any]) -> List[Target]:
    """Start-up: what listing backends imports and costs (issue 7, target 6)."""

    out: List[Target] = []
    start = {r["probe"]: r for r in records(result, "startup") if "error" not in r}
    lab, bare = start.get("list_all_backends()"), start.get("bare entry_points(group=...) scan")
    if lab is not None and bare is not None:
        plugins = [m for m in lab["imported"] if m in NON_PLUGIN]
        out.append(
            Target(
                "list_all_backends() imports no plugin",
                "fresh process",
                ", ".join(plugins) or "no plugin or framework module",
                float(len(plugins)),
                0,
                unit="modules",
            )
        )
        lab_total = lab["steps_s"]["import"] + lab["steps_s"]["call"]
        bare_total = bare["steps_s"]["import importlib.metadata"] + bare["steps_s"]["call"]
        out.append(
            Target(
                "list_all_backends() ≤1.5x a bare entry_points scan (import + call)",
                "fresh process",
                f"{lab_total * 1e3:.1f} / {bare_total * 1e3:.1f} ms",
                lab_total / bare_total,
                1.5,
            )
        )
        out.append(
            Target(
                "list_all_backends() ≤1.5x a bare entry_points scan (the call alone)",
                "fresh process",
                f"{lab['steps_s']['call'] * 1e3:.2f} / {bare['steps_s']['call'] * 1e3:.2f} ms",
                lab["steps_s"]["call"] / bare["steps_s"]["call"],
                1.5,
            )
        )
    return out


def startup_table(result: Dict[str, Any]) -> List[str]:
    """Fresh-process start-up probes."""
    rows = []
    for r in records(result, "startup"):
        if "error" in r:
            rows.append([f"`{r['probe']}`", "failed", "-", r["error"][:80]])
            continue
        steps = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in r["steps_s"].items()) or "-"
        rows.append([f"`{r['probe']}`", f"{r['wall_s'] * 1e3:.1f}", steps, ", ".join(r["imported"]) or "nothing heavy"])
    return table(
        ["probe (fresh process)", "process wall ms", "in-process steps (median)", "heavy modules imported"], rows
    )


def section(result: Dict[str, Any]) -> List[str]:
    """The start-up section."""
    return ["", "## Start-up", "", *startup_table(result)]
