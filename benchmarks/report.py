"""Turn the suite's JSON into docs/benchmarks.md (tables, targets with PASS/MISS) and docs/benchmarks.png.

Run alone to re-render from a JSON file::

    python benchmarks/report.py docs/benchmarks.json [--out-dir docs]

Conventions of every table: a time is the median over iterations of the
per-iteration maximum over ranks; ``raw`` is the raw transport of the same
bytes into a fresh receive buffer (what an object collective has to produce:
new memory), ``floor`` the same into a buffer preallocated once; ratios are
``method / raw``, with ``method / floor`` beside them.

Each benchmark family renders its own section from its own module (``report_collectives``,
``report_compute``, ``report_catalogue``, ``report_exactsum``, ``report_detection``, ``report_startup``,
``report_collection``, ``report_codec``; ``report_metrics`` has targets only); shared helpers are in ``report_common``.
This module puts the document together: the header, every family's targets in one table, the
sections in order, the scaling plot.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import report_catalogue
import report_codec
import report_collection
import report_collectives
import report_compute
import report_detection
import report_exactsum
import report_startup
from report_catalogue import catalogue_table, catalogue_targets
from report_common import (
    BACKENDS,
    OPS,
    PAYLOAD_ORDER,
    Target,
    best_raw,
    collective_index,
    load,
    med,
    records,
    table,
    versions,
)
from report_detection import detection_table, detection_targets
from report_metrics import metric_targets

__all__ = [
    "load",
    "versions",
    "targets",
    "metric_targets",
    "catalogue_targets",
    "catalogue_table",
    "detection_targets",
    "detection_table",
    "plot",
    "render",
    "main",
]

#: The sections after the targets and the analysis, in the document's order.
FAMILIES = (
    report_collectives,
    report_compute,
    report_catalogue,
    report_exactsum,
    report_detection,
    report_collection,
    report_startup,
    report_codec,
)


def targets(result: Dict[str, Any]) -> List[Target]:
    """Every target with its measured ratio, in the report's order (issue 7's six, then each family's)."""
    return (
        report_collectives.targets_vs_mmeval021(result)
        + report_compute.targets_vs_raw(result)
        + report_collectives.targets_big_payloads(result)
        + report_compute.targets_vs_mmeval021(result)
        + report_collectives.targets_small_payloads(result)
        + report_startup.targets(result)
        + metric_targets(result)
        + catalogue_targets(result)
        + detection_targets(result)
    )


# --------------------------------------------------------------------------
# the plot
# --------------------------------------------------------------------------


def plot(result: Dict[str, Any], path: Path) -> bool:
    """docs/benchmarks.png: time vs payload per backend and operation, compute and memory vs world size."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    idx = collective_index(result)
    backends = [b for b in BACKENDS if any(k[1] == b and k[0] == "ours" for k in idx)]
    nrows = len(backends) + 1
    fig, axes = plt.subplots(nrows, 3, figsize=(16, 4.2 * nrows), squeeze=False)
    styles = {
        "mmeval": ("tab:blue", "mmeval"),
        "framework": ("tab:orange", "framework's own"),
        "pkl5": ("tab:purple", "mpi4py pkl5"),
        "raw": ("tab:green", "raw (fresh buffer)"),
    }
    arrays = [p for p in PAYLOAD_ORDER if p != "tuples100k"]
    for row, backend in enumerate(backends):
        for col, op in enumerate(OPS):
            ax = axes[row][col]
            for ws, dash in ((2, "-"), (4, "--")):
                for method, (color, label) in styles.items():
                    xs, ys = [], []
                    for payload in arrays:
                        key = ("ours", backend, ws, op, payload, method if method != "raw" else "mmeval")
                        if key not in idx:
                            continue
                        value = (
                            best_raw(idx, "ours", backend, ws, op, payload)
                            if method == "raw"
                            else med(idx, ("ours", backend, ws, op, payload, method))
                        )
                        if value is not None:
                            xs.append(idx[key]["bytes"])
                            ys.append(value * 1e3)
                    if xs:
                        ax.plot(xs, ys, dash, color=color, marker="o", ms=3, label=f"{label} ws={ws}")
                    tup = (
                        best_raw(idx, "ours", backend, ws, op, "tuples100k")
                        if method == "raw"
                        else med(idx, ("ours", backend, ws, op, "tuples100k", method))
                    )
                    rec = idx.get(("ours", backend, ws, op, "tuples100k", "mmeval"))
                    if tup is not None and rec is not None:
                        ax.scatter(
                            [rec["bytes"]], [tup * 1e3], color=color, marker="X" if ws == 2 else "P", s=60, zorder=5
                        )
                old = med(
                    idx, ("mmeval021", backend, ws, "all_gather" if op == "gather" else op, "tuples100k", "mmeval")
                )
                rec = idx.get(("ours", backend, ws, op, "tuples100k", "mmeval"))
                if old is not None and rec is not None:
                    ax.scatter(
                        [rec["bytes"]],
                        [old * 1e3],
                        color="tab:red",
                        marker="X" if ws == 2 else "P",
                        s=60,
                        zorder=5,
                        label=f"MMEval 0.2.1 tuples100k ws={ws}",
                    )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{backend}: {op} (X/P = 100k per-sample tuples)", fontsize=10)
            ax.set_xlabel("bytes per rank (plain pickle of the payload)")
            ax.set_ylabel("median ms (max over ranks)")
            ax.grid(True, which="both", alpha=0.3)
            if col == 0:
                ax.legend(fontsize=7)
    # last row: compute vs world size, memory, overhead ratio
    comp = records(result, "compute")
    ax_t, ax_m, ax_r = axes[nrows - 1]
    for backend, color in (("torch_cpu", "tab:blue"), ("mpi4py", "tab:green")):
        for impl, dash in (("ours", "-"), ("mmeval021", ":")):
            pts = sorted(
                (r["ws"], r) for r in comp if r["backend"] == backend and r["impl"] == impl and r["method"] == "compute"
            )
            if not pts:
                continue
            name = "this project" if impl == "ours" else "MMEval 0.2.1"
            ax_t.plot(
                [p[0] for p in pts],
                [p[1]["median_s"] * 1e3 for p in pts],
                dash,
                color=color,
                marker="o",
                label=f"{name} {backend}",
            )
            ax_m.plot(
                [p[0] for p in pts],
                [max(p[1]["peak_extra_bytes_per_rank"][1:]) / 2**20 for p in pts],
                dash,
                color=color,
                marker="o",
                label=f"{name} {backend}",
            )
    ax_t.set_title("Accuracy.compute, 100k samples per rank", fontsize=10)
    ax_t.set_xlabel("world size")
    ax_t.set_ylabel("median ms")
    ax_t.set_yscale("log")
    ax_t.legend(fontsize=7)
    ax_t.grid(True, alpha=0.3)
    ax_m.set_title("peak extra memory of a non-computing rank during compute()", fontsize=10)
    ax_m.set_xlabel("world size")
    ax_m.set_ylabel("MiB")
    ax_m.legend(fontsize=7)
    ax_m.grid(True, alpha=0.3)
    for backend, color in (("torch_cpu", "tab:blue"), ("mpi4py", "tab:green"), ("torch_horovod", "tab:brown")):
        for ws, dash in ((2, "-"), (4, "--")):
            xs, ys = [], []
            for payload in arrays:
                ours = med(idx, ("ours", backend, ws, "all_gather", payload, "mmeval"))
                raw = best_raw(idx, "ours", backend, ws, "all_gather", payload)
                if ours is not None and raw is not None:
                    xs.append(idx[("ours", backend, ws, "all_gather", payload, "mmeval")]["bytes"])
                    ys.append(ours / raw)
            if xs:
                ax_r.plot(xs, ys, dash, color=color, marker="o", label=f"{backend} ws={ws}")
    ax_r.axhline(1.15, color="tab:red", lw=0.8, ls=":", label="target 1.15x")
    ax_r.set_xscale("log")
    ax_r.set_yscale("log")
    ax_r.set_title("all_gather_object / raw transport vs payload", fontsize=10)
    ax_r.set_xlabel("bytes per rank")
    ax_r.set_ylabel("ratio")
    ax_r.legend(fontsize=7)
    ax_r.grid(True, which="both", alpha=0.3)
    meta = result.get("meta", {}).get("machine", {})
    fig.suptitle(
        f"mmeval benchmarks -- {meta.get('cpu_model', '?')} x{meta.get('cpus', '?')}, "
        f"load {meta.get('loadavg', ['?'])[0]}, {meta.get('time', '')}",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------
# the document
# --------------------------------------------------------------------------

ANALYSIS_FILE = Path(__file__).resolve().parent / "analysis.md"


def render(result: Dict[str, Any], out_dir: Path) -> str:
    """Write benchmarks.md (and benchmarks.png) into ``out_dir``; return the targets table as text."""
    meta = result.get("meta", {})
    machine, end = meta.get("machine", {}), meta.get("machine_at_end", {})
    plotted = plot(result, out_dir / "benchmarks.png")
    rows = targets(result)
    target_lines = table(
        ["target", "where", "measured", "ratio", "limit", "verdict", "vs floor"], [t.row() for t in rows]
    )
    versions_line = ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items())
    lines = [
        "# Benchmarks",
        "",
        "Generated by `benchmarks/run.py` (`tox -e bench`); re-render with "
        "`python benchmarks/report.py docs/benchmarks.json`. Raw figures: [benchmarks.json](benchmarks.json).",
        "",
        "## How to run",
        "",
        "```",
        "tox -e bench            # the whole suite, ~30 min on 2 cores; writes docs/benchmarks.{json,md,png}",
        "python benchmarks/run.py --parts detection --keep-other-parts   # one part again, the others kept",
        "python benchmarks/run.py --quick          # smoke run (a few minutes)",
        "python benchmarks/collectives.py --backend torch_cpu --payloads arr64m --ops all_gather   # one cell",
        "```",
        "",
        "`bench` is **not** in tox's default `env_list`: the test command (`python -m tox`) must stay within CI's "
        "90 minutes, and timings are only worth taking on demand, on a quiet machine. The env installs torch==2.13.0 "
        "(from local disk), mpi4py, the mpich wheel, matplotlib, numpy, ./core and the plugins; MMEval 0.2.1 goes into "
        "its own venv (`.tox/bench-mmeval021`, built once by `benchmarks/mmeval021_env.py`: it shares the import "
        "name `mmeval`); Horovod is benchmarked only when a Horovod build is importable "
        "(`.tox/horovod-torch`, or `MMEVAL_BENCH_HOROVOD_PYTHON`).",
        "",
        "## Where these figures come from",
        "",
        f"- machine: {machine.get('cpu_model', '?')}, {machine.get('cpus', '?')} cores, "
        f"{machine.get('mem_total_gib', '?')} GiB RAM, {machine.get('platform', '?')}",
        f"- load average (1, 5, 15 min) at start: {machine.get('loadavg')}, at end: {end.get('loadavg')} "
        "(the machine is shared: other jobs ran meanwhile)",
        f"- taken {machine.get('time', '?')}, in {meta.get('seconds', 0) / 60:.1f} min; command: `{meta.get('command', '?')}`"
        + (" (**quick mode**)" if meta.get("quick") else ""),
        f"- versions: Python {meta.get('python', '?')}, {versions_line}",
        "- every timed process: `MALLOC_MMAP_THRESHOLD_=65536` (glibc's adaptive mmap threshold otherwise makes "
        "1-32 MB timings depend on run order), gloo on `lo`, `OMP_NUM_THREADS=1`",
        "- a time is the median over iterations of the per-iteration **maximum over ranks** (barrier before each "
        "call); the methods of one cell run interleaved in one process group (A B C, B C A, ...)",
        "- `raw` = the raw transport of the same bytes into a **fresh** receive buffer (numpy memory, huge pages: "
        "the fastest fresh allocation), the like-for-like yardstick since an object collective must hand back new "
        "memory; `floor` = the faster of that and the same transport into a buffer **preallocated** once. Verdicts "
        "use `raw`; the ratio to the floor stands beside each",
    ]
    lines += [f"- note: {n}" for n in meta.get("notes", [])]
    lines += [f"- **failed part**: {e}" for e in meta.get("errors", [])]
    lines += ["", "## Targets", "", *target_lines]
    if ANALYSIS_FILE.exists():
        lines += ["", ANALYSIS_FILE.read_text().strip()]
    for family in FAMILIES:
        lines += family.section(result)
    if plotted:
        lines += ["", "## Scaling", "", "![benchmarks](benchmarks.png)"]
    (out_dir / "benchmarks.md").write_text("\n".join(lines) + "\n")
    return "\n".join(target_lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path)
    parser.add_argument("--out-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    print(render(load(args.json), args.out_dir or args.json.parent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
