"""Turn the suite's JSON into docs/benchmarks.md (tables, targets with PASS/MISS) and docs/benchmarks.png.

Run alone to re-render from a JSON file::

    python benchmarks/report.py docs/benchmarks.json [--out-dir docs]

Conventions of every table: a time is the median over iterations of the
per-iteration maximum over ranks; ``raw`` is the raw transport of the same
bytes into a fresh receive buffer (what an object collective has to produce:
new memory), ``floor`` the same into a buffer preallocated once; ratios are
``method / raw``, with ``method / floor`` beside them.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

PAYLOAD_ORDER = ("dict1k", "arr1m", "arr16m", "arr64m", "arr256m", "tuples100k")
OPS = ("all_gather", "gather", "broadcast")
BACKENDS = ("torch_cpu", "mpi4py", "torch_horovod")
NON_PLUGIN = ("mmeval_torch", "mmeval_mpi4py", "mmeval_horovod", "torch", "mpi4py.MPI", "horovod", "tensorflow")

Key = Tuple[str, str, int, str, str, str]  # impl, backend, ws, op, payload, method


def load(path: Path) -> Dict[str, Any]:
    """Read one JSON file."""
    return json.loads(Path(path).read_text())  # type: ignore[no-any-return]


def versions() -> Dict[str, str]:
    """Versions of what the suite measured (asked in a child: importing torch here costs a second)."""
    code = (
        "import json, importlib.metadata as m\n"
        "out = {}\n"
        "for d in ('mmeval-core', 'mmeval-torch', 'mmeval-mpi4py', 'mmeval-horovod', 'torch', 'mpi4py', 'mpich',"
        " 'numpy', 'matplotlib', 'pycocotools', 'faster-coco-eval', 'torchmetrics'):\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        return json.loads(proc.stdout)  # type: ignore[no-any-return]
    except Exception:  # versions are informative only
        return {}


# --------------------------------------------------------------------------
# indexing
# --------------------------------------------------------------------------


def records(result: Dict[str, Any], kind: str) -> List[Dict[str, Any]]:
    """Every record of ``kind`` across the runs."""
    return [r for run in result.get("runs", []) for r in run.get("records", []) if r.get("kind") == kind]


def collective_index(result: Dict[str, Any]) -> Dict[Key, Dict[str, Any]]:
    """Collective records by (impl, backend, ws, op, payload, method)."""
    return {
        (r.get("impl", "ours"), r["backend"], r["ws"], r["op"], r["payload"], r["method"]): r
        for r in records(result, "collective")
    }


def med(index: Dict[Key, Dict[str, Any]], key: Key) -> Optional[float]:
    """The median seconds of one record, or ``None`` when it was not run (or was skipped)."""
    rec = index.get(key)
    if rec is None or not rec.get("times_s"):
        return None
    value = float(rec["median_s"])
    return None if math.isnan(value) else value


def best_raw(
    index: Dict[Key, Dict[str, Any]], impl: str, backend: str, ws: int, op: str, payload: str
) -> Optional[float]:
    """The raw transport into a fresh receive buffer (the like-for-like yardstick), else the floor."""
    fresh = med(index, (impl, backend, ws, op, payload, "raw"))
    return fresh if fresh is not None else floor_raw(index, impl, backend, ws, op, payload)


def floor_raw(
    index: Dict[Key, Dict[str, Any]], impl: str, backend: str, ws: int, op: str, payload: str
) -> Optional[float]:
    """The faster of the raw transports (fresh or preallocated receive buffer): the floor."""
    values = [med(index, (impl, backend, ws, op, payload, m)) for m in ("raw", "raw_prealloc")]
    present = [v for v in values if v is not None]
    return min(present) if present else None


def fmt_ms(seconds: Optional[float]) -> str:
    """Milliseconds with 3 significant digits ('-' for nothing)."""
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def fmt_ratio(a: Optional[float], b: Optional[float]) -> str:
    """``a / b`` as '1.23x' ('-' if either is missing)."""
    if a is None or b is None or b <= 0:
        return "-"
    r = a / b
    return f"{r:.2f}x" if r < 100 else f"{r:.0f}x"


def fmt_bytes(n: float) -> str:
    """Bytes as KB / MB (binary)."""
    if n >= 2**20:
        return f"{n / 2**20:.1f} MB"
    return f"{n / 2**10:.1f} KB"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> List[str]:
    """A Markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


# --------------------------------------------------------------------------
# targets
# --------------------------------------------------------------------------


class Target:
    """One row of the targets table."""

    def __init__(
        self,
        target: str,
        where: str,
        measured: str,
        value: Optional[float],
        limit: float,
        higher_is_better: bool = False,
        note: str = "",
        unit: str = "x",
        floor: Optional[float] = None,
    ) -> None:
        self.target, self.where, self.measured = target, where, measured
        self.value, self.limit, self.higher = value, limit, higher_is_better
        self.note, self.unit, self.floor = note, unit, floor

    @property
    def verdict(self) -> str:
        if self.value is None:
            return "n/a"
        ok = self.value >= self.limit if self.higher else self.value <= self.limit
        return "PASS" if ok else "MISS"

    def row(self) -> List[str]:
        if self.unit != "x":  # a count
            value = "-" if self.value is None else f"{self.value:g} {self.unit}"
            limit = ("≥ " if self.higher else "≤ ") + f"{self.limit:g} {self.unit}"
            return [self.target, self.where, self.measured, value, limit, f"**{self.verdict}**", "-"]
        value = "-" if self.value is None else (f"{self.value:.2f}x" if self.value < 100 else f"{self.value:.0f}x")
        limit = ("≥ " if self.higher else "≤ ") + f"{self.limit:g}x"
        floor = "-" if self.floor is None else f"{self.floor:.2f}x"
        return [self.target, self.where, self.measured, value, limit, f"**{self.verdict}**", floor]


def _mpi_ws(index: Dict[Key, Dict[str, Any]]) -> List[int]:
    return sorted({k[2] for k in index if k[1] == "mpi4py" and k[0] == "ours"})


def targets(result: Dict[str, Any]) -> List[Target]:
    """Every target of issue 7 with its measured ratio."""
    idx = collective_index(result)
    comp = {(r["impl"], r["backend"], r["ws"], r["method"]): r for r in records(result, "compute")}
    out: List[Target] = []
    sizes = sorted({k[2] for k in idx if k[0] == "ours"})

    def where(backend: str, ws: int) -> str:
        tag = " (erratic, info only)" if backend == "mpi4py" and ws > 2 else ""
        return f"{backend} ws={ws}{tag}"

    # 1. tuples100k vs MMEval 0.2.1 and vs raw gloo
    for backend in ("torch_cpu", "mpi4py"):
        for ws in sizes:
            old = med(idx, ("mmeval021", backend, ws, "all_gather", "tuples100k", "mmeval"))
            for op in ("all_gather", "gather"):
                ours = med(idx, ("ours", backend, ws, op, "tuples100k", "mmeval"))
                if ours is None:
                    continue
                value = old / ours if old is not None else None
                out.append(
                    Target(
                        f"tuples100k {op}_object ≥10x faster than MMEval 0.2.1",
                        where(backend, ws),
                        f"{fmt_ms(old)} ms (0.2.1 all_gather) / {fmt_ms(ours)} ms",
                        value,
                        10,
                        True,
                        note="0.2.1 has no gather_object; its compute() all-gathers",
                    )
                )
    for ws in sizes:
        for op in ("all_gather", "gather"):
            ours = med(idx, ("ours", "torch_cpu", ws, op, "tuples100k", "mmeval"))
            raw = best_raw(idx, "ours", "torch_cpu", ws, op, "tuples100k")
            floor = floor_raw(idx, "ours", "torch_cpu", ws, op, "tuples100k")
            if ours is not None and raw is not None:
                out.append(
                    Target(
                        f"tuples100k {op}_object ≤5x raw gloo",
                        f"torch_cpu ws={ws}",
                        f"{fmt_ms(ours)} / {fmt_ms(raw)} ms",
                        ours / raw,
                        5,
                        floor=ours / floor if floor else None,
                    )
                )
    # 2. Accuracy.compute at ws 2 vs a raw all_gather of the scores' bytes
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
    # 3. big payloads and broadcast vs raw
    for backend in ("torch_cpu", "mpi4py", "torch_horovod"):
        for ws in sorted({k[2] for k in idx if k[1] == backend and k[0] == "ours"}):
            for op in OPS:
                for payload in ("arr64m", "arr256m"):
                    ours = med(idx, ("ours", backend, ws, op, payload, "mmeval"))
                    raw = best_raw(idx, "ours", backend, ws, op, payload)
                    floor = floor_raw(idx, "ours", backend, ws, op, payload)
                    if ours is None or raw is None:
                        continue
                    out.append(
                        Target(
                            f"{payload} {op}_object ≤1.15x raw",
                            where(backend, ws),
                            f"{fmt_ms(ours)} / {fmt_ms(raw)} ms",
                            ours / raw,
                            1.15,
                            floor=ours / floor if floor else None,
                        )
                    )
    # 4. compute at ws 4 vs 0.2.1, and the non-computing ranks' memory
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
    # 5. 1 KB vs the framework's own object collective
    for backend in ("torch_cpu", "mpi4py", "torch_horovod"):
        for ws in sorted({k[2] for k in idx if k[1] == backend and k[0] == "ours"}):
            for op in OPS:
                ours = med(idx, ("ours", backend, ws, op, "dict1k", "mmeval"))
                theirs = med(idx, ("ours", backend, ws, op, "dict1k", "framework"))
                if ours is None or theirs is None:
                    continue
                label = idx[("ours", backend, ws, op, "dict1k", "framework")]["label"]
                out.append(
                    Target(
                        f"1 KB {op} no slower than {label}",
                        where(backend, ws),
                        f"{fmt_ms(ours)} / {fmt_ms(theirs)} ms",
                        ours / theirs,
                        1.0,
                    )
                )
    # 6. start-up
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
    return out + metric_targets(result) + catalogue_targets(result) + detection_targets(result)


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


#: The pycocotools stats a detection result may differ from (|diff|), issue 21's bound of "equal".
DETECTION_EXACT = 1e-12


def _detection_index(result: Dict[str, Any]) -> Dict[Tuple[str, str, str, int], Dict[str, Any]]:
    """Detection records by (case, impl, backend, ws); the single-process ones have backend 'single process'."""
    return {(r["case"], r["impl"], r["backend"], r["ws"]): r for r in records(result, "detection")}


def _det_total(rec: Optional[Dict[str, Any]]) -> Optional[float]:
    """The evaluation's seconds: evaluate + accumulate for the references, add() + compute() for the metrics."""
    if rec is None or rec.get("error") or not rec.get("times_s"):
        return None
    if "eval_s" in rec:
        return float(rec["eval_s"])
    return float(rec["add_s"]) + float(rec["compute_s"])


def _det_diff(rec: Dict[str, Any], reference: Optional[Dict[str, Any]]) -> Optional[float]:
    """max |stat - pycocotools' stat| over the 12 COCO stats (None when either is missing)."""
    if reference is None or not rec.get("stats") or not reference.get("stats"):
        return None
    return max(abs(a - b) for a, b in zip(rec["stats"], reference["stats"]))


def _det_summary_bytes(rec: Dict[str, Any]) -> Optional[float]:
    """The compact summaries of the world: every rank's packed summaries (older records: the bytes per
    detection the sending ranks sent, times every detection -- when they all went to rank 0)."""
    if rec.get("summary_bytes_per_rank"):
        return float(sum(rec["summary_bytes_per_rank"]))
    sent, dets = rec.get("sent_bytes_per_rank"), rec.get("dets_per_rank")
    if not sent or not dets or rec["ws"] < 2:
        return None
    senders = [(s, d) for s, d in zip(sent[1:], dets[1:]) if d]
    if not senders:
        return None
    return sum(s for s, _ in senders) / sum(d for _, d in senders) * float(rec["world_detections"])


def detection_targets(result: Dict[str, Any]) -> List[Target]:
    """The COCO detection targets, each case of ``benchmarks/detection.py`` measured side by side."""
    idx = _detection_index(result)
    out: List[Target] = []
    for case in sorted(
        {k[0] for k in idx}, key=lambda c: ("bbox", "lvis", "segm").index(c) if c in ("bbox", "lvis", "segm") else 9
    ):
        pyc = idx.get((case, "pycocotools", "single process", 1))
        fce = idx.get((case, "faster-coco-eval", "single process", 1))
        ours1 = idx.get((case, "ours", "single process", 1))
        t_pyc, t_fce, t_ours1 = _det_total(pyc), _det_total(fce), _det_total(ours1)
        if t_ours1 is not None and t_fce is not None:
            out.append(
                Target(
                    f"COCODetection {case}: add()+compute() ≤1.1x faster-coco-eval's evaluate+accumulate",
                    "single process",
                    f"{t_ours1:.2f} / {t_fce:.2f} s",
                    t_ours1 / t_fce,
                    1.1,
                )
            )
        if t_ours1 is not None and t_pyc is not None:
            out.append(
                Target(
                    f"COCODetection {case}: ≥5x faster than pycocotools' evaluate+accumulate",
                    "single process",
                    f"{t_pyc:.2f} / {t_ours1:.2f} s",
                    t_pyc / t_ours1,
                    5,
                    True,
                )
            )
        for (c, impl, backend, ws), rec in sorted(idx.items(), key=lambda kv: (kv[0][2], kv[0][3])):
            if c != case or impl != "ours" or ws < 2 or rec.get("error"):
                continue
            where = f"{backend} ws={ws}"
            total = _det_total(rec)
            beside = rec.get("single_beside_s")  # the same job, interleaved: the same load
            alone = float(beside) if beside else t_ours1
            if ws == 2 and total is not None and alone is not None:
                out.append(
                    Target(
                        f"COCODetection {case}: add()+compute() at ws=2 ≤0.6x single process",
                        where,
                        f"{total:.2f} / {alone:.2f} s"
                        + (" (single process interleaved in the same job)" if beside else ""),
                        total / alone,
                        0.6,
                    )
                )
            tm = idx.get((case, "torchmetrics", backend, ws))
            t_tm = _det_total(tm)
            if t_tm is not None and total is not None:
                out.append(
                    Target(
                        f"COCODetection {case}: ≥1.8x faster than torchmetrics (faster_coco_eval) at ws={ws}",
                        where,
                        f"{t_tm:.2f} / {total:.2f} s",
                        t_tm / total,
                        1.8,
                        True,
                    )
                )
            if rec.get("bytes_per_det") is not None:
                out.append(
                    Target(
                        f"COCODetection {case}: bytes sent per rank per detection ≤ 16",
                        where,
                        f"{max(rec['sent_bytes_per_rank']):,.0f} B / {max(rec['dets_per_rank']):,.0f} dets",
                        round(float(rec["bytes_per_det"]), 2),
                        16,
                        unit="B/det",
                    )
                )
            summaries = _det_summary_bytes(rec)
            if summaries:
                peak = rec["peak_extra_bytes_per_rank"][0]
                traced = rec.get("traced_peak_bytes_per_rank")
                live = f" (live peak, tracemalloc: {fmt_bytes(traced[0])})" if traced else ""
                out.append(
                    Target(
                        f"COCODetection {case}: rank 0's peak extra memory in compute() ≤2x the world's "
                        "compact summaries",
                        where,
                        f"{fmt_bytes(peak)} / {fmt_bytes(summaries)}{live}",
                        peak / summaries,
                        2,
                    )
                )
        for (c, impl, backend, ws), rec in sorted(idx.items(), key=lambda kv: (kv[0][2], kv[0][3])):
            diff = _det_diff(rec, pyc)
            if c == case and impl == "ours" and diff is not None:
                out.append(
                    Target(
                        f"COCODetection {case}: every stat equal to pycocotools (max |diff|)",
                        f"{backend} ws={ws}",
                        "12 stats",
                        diff,
                        DETECTION_EXACT,
                        unit="abs",
                    )
                )
    return out


def detection_table(result: Dict[str, Any]) -> List[str]:
    """Every detection record: time, bytes, memory, and the distance of its stats from pycocotools'."""
    idx = _detection_index(result)
    rows = []
    names = {"ours": "this project", "mmeval021": "MMEval 0.2.1", "torchmetrics": "torchmetrics (faster_coco_eval)"}
    impls = ("pycocotools", "faster-coco-eval", "ours", "torchmetrics", "mmeval021")
    for (case, impl, backend, ws), rec in sorted(
        idx.items(),
        key=lambda kv: (
            ("bbox", "lvis", "segm", kv[0][0]).index(kv[0][0]),
            kv[0][3],
            kv[0][2] != "torch_cpu",
            kv[0][2],
            impls.index(kv[0][1]) if kv[0][1] in impls else len(impls),
        ),
    ):
        data = rec.get("data") or {}
        size = (
            f"{data['images']:,} img, {data['detections']:,} dets, {data['ground_truths']:,} gts"
            if data
            else f"{rec.get('images', 0):,} img, {rec.get('world_detections', 0):,} dets"
        )
        if rec.get("error"):
            rows.append(
                [
                    case,
                    names.get(impl, impl),
                    f"{backend} ws={ws}",
                    size,
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "error: " + str(rec["error"])[:120],
                ]
            )
            continue
        first = f"{rec['build_s']:.2f} (build)" if "build_s" in rec else f"{rec['add_s']:.2f}"
        second = f"{rec['eval_s']:.2f} (evaluate+accumulate)" if "eval_s" in rec else f"{rec['compute_s']:.2f}"
        total = _det_total(rec)
        if rec.get("bytes_per_det") is not None:
            moved = f"{rec['bytes_per_det']:.1f} sent"
        elif rec.get("gathered_bytes_per_det") is not None:
            moved = f"{rec['gathered_bytes_per_det']:.0f} gathered (its states)"
        else:
            moved = "-"
        peaks = rec.get("peak_extra_bytes_per_rank") or []
        traced = rec.get("traced_peak_bytes_per_rank") or []
        peak_text = "-" if not peaks else fmt_bytes(peaks[0]) + (f" (live {fmt_bytes(traced[0])})" if traced else "")
        diff = _det_diff(rec, idx.get((case, "pycocotools", "single process", 1)))
        if rec.get("single_beside_s"):
            rec.setdefault("notes", []).append(
                f"single process interleaved in this job: {rec['single_beside_s']:.2f} s"
            )
        rows.append(
            [
                case,
                names.get(impl, impl),
                f"{backend} ws={ws}" if ws > 1 else backend,
                size,
                first,
                second,
                "-" if total is None else f"{total:.2f}",
                moved,
                peak_text,
                "-" if diff is None or impl == "pycocotools" else f"{diff:.1e}",
                "; ".join(rec.get("notes", [])),
            ]
        )
    return table(
        [
            "case",
            "impl",
            "where",
            "data",
            "add / build s",
            "compute / eval s",
            "total s",
            "B per detection",
            "rank 0 peak extra (VmHWM; live: tracemalloc)",
            "max abs diff vs pycocotools (12 stats)",
            "notes",
        ],
        rows,
    )


# --------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------


def collective_tables(result: Dict[str, Any]) -> List[str]:
    """One table per backend: every payload, operation and world size."""
    idx = collective_index(result)
    lines: List[str] = []
    for backend in BACKENDS:
        keys = [k for k in idx if k[0] == "ours" and k[1] == backend]
        if not keys:
            continue
        has_pkl5 = any(k[5] == "pkl5" for k in keys)
        lines += ["", f"### {backend}", ""]
        header = (
            ["ws", "op", "payload", "bytes", "mmeval ms", "framework ms"]
            + (["pkl5 ms"] if has_pkl5 else [])
            + ["raw ms", "floor ms", "mmeval / raw", "mmeval / floor", "framework / raw", "mmeval / framework"]
        )
        rows = []
        for ws in sorted({k[2] for k in keys}):
            for op in OPS:
                for payload in PAYLOAD_ORDER:
                    mine = idx.get(("ours", backend, ws, op, payload, "mmeval"))
                    if mine is None:
                        continue
                    ours = med(idx, ("ours", backend, ws, op, payload, "mmeval"))
                    fw = med(idx, ("ours", backend, ws, op, payload, "framework"))
                    raw = best_raw(idx, "ours", backend, ws, op, payload)
                    row = [str(ws), op, payload, fmt_bytes(mine["bytes"]), fmt_ms(ours), fmt_ms(fw)]
                    if has_pkl5:
                        row.append(fmt_ms(med(idx, ("ours", backend, ws, op, payload, "pkl5"))))
                    floor = floor_raw(idx, "ours", backend, ws, op, payload)
                    row += [
                        fmt_ms(med(idx, ("ours", backend, ws, op, payload, "raw"))),
                        fmt_ms(floor),
                        fmt_ratio(ours, raw),
                        fmt_ratio(ours, floor),
                        fmt_ratio(fw, raw),
                        fmt_ratio(ours, fw),
                    ]
                    rows.append(row)
        lines += table(header, rows)
        labels = sorted({(k[3], k[5], idx[k]["label"]) for k in keys})
        lines += ["", "Methods: " + "; ".join(f"{op} {m} = `{label}`" for op, m, label in labels) + "."]
    return lines


def mmeval021_table(result: Dict[str, Any]) -> List[str]:
    """MMEval 0.2.1's object collectives (its own env, separate run) beside ours."""
    idx = collective_index(result)
    keys = sorted({k[1:5] for k in idx if k[0] == "mmeval021" and k[5] == "mmeval"})
    if not keys:
        return []
    rows = []
    for backend, ws, op, payload in keys:
        old = med(idx, ("mmeval021", backend, ws, op, payload, "mmeval"))
        old_raw = best_raw(idx, "mmeval021", backend, ws, op, payload)
        ours = med(idx, ("ours", backend, ws, op, payload, "mmeval"))
        ours_g = med(idx, ("ours", backend, ws, "gather", payload, "mmeval")) if op == "all_gather" else None
        raw = best_raw(idx, "ours", backend, ws, op, payload)
        rows.append(
            [
                backend,
                str(ws),
                op,
                payload,
                fmt_ms(old),
                fmt_ratio(old, old_raw),
                fmt_ms(ours),
                fmt_ratio(ours, raw),
                fmt_ratio(old, ours),
                fmt_ms(ours_g),
                fmt_ratio(old, ours_g),
            ]
        )
    return [
        "",
        *table(
            [
                "backend",
                "ws",
                "op",
                "payload",
                "0.2.1 ms",
                "0.2.1 / raw (its run)",
                "ours ms",
                "ours / raw",
                "speed-up",
                "ours gather ms",
                "speed-up (gather)",
            ],
            rows,
        ),
    ]


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


def codec_table(result: Dict[str, Any]) -> List[str]:
    """safe vs pickle codec in one process."""
    recs = records(result, "codec")
    by = {(r["payload"], r["method"]): r for r in recs}
    rows = []
    for payload in PAYLOAD_ORDER:
        p, s, plain = (
            by.get((payload, "pickle codec")),
            by.get((payload, "safe codec")),
            by.get((payload, "plain pickle")),
        )
        if p is None or s is None:
            continue
        tp, ts = p["encode_s"] + p["decode_s"], s["encode_s"] + s["decode_s"]
        tplain = plain["encode_s"] + plain["decode_s"] if plain else None
        rows.append(
            [
                payload,
                f"{fmt_ms(p['encode_s'])} + {fmt_ms(p['decode_s'])}",
                f"{fmt_ms(s['encode_s'])} + {fmt_ms(s['decode_s'])}",
                f"{fmt_ms(plain['encode_s'])} + {fmt_ms(plain['decode_s'])}" if plain else "-",
                fmt_ratio(ts, tp),
                fmt_ratio(ts, tplain),
            ]
        )
    return table(
        [
            "payload",
            "pickle codec ms (encode + decode)",
            "safe codec ms",
            "plain pickle.dumps/loads ms",
            "safe / pickle codec",
            "safe / plain pickle",
        ],
        rows,
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
    lines += [
        "",
        "## Object collectives",
        "",
        "Payloads: `dict1k` a 1 KB dict; `arrNm` a dict holding an N MiB float32 array; `tuples100k` a list "
        "of 100,000 `(int label, float32[10] scores)` tuples (the shape of metric results). `bytes` = the "
        "payload's plain pickle, what the raw transports move. framework = torch.distributed's / mpi4py's / "
        "Horovod's own object collective.",
        *collective_tables(result),
    ]
    old = mmeval021_table(result)
    if old:
        lines += [
            "",
            "### MMEval 0.2.1 (its own venv, run right after ours)",
            "",
            "0.2.1 has no gather_object (its `compute()` all-gathers), so our gather is compared with its "
            "all_gather too.",
            *old,
        ]
    lines += [
        "",
        "## BaseMetric.compute end to end",
        "",
        "Accuracy(topk=(1, 5)), 100,000 samples of 10 float32 scores per rank added in batches of 1,000; "
        "`raw` = a raw all_gather of the scores' bytes (4 MB per rank); peak extra = VmHWM during "
        "compute() minus VmRSS before it (peak reset through /proc/self/clear_refs).",
        "",
        *compute_table(result),
    ]
    cat = catalogue_table(result)
    if len(cat) > 2:
        lines += [
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
    exact = exactsum_table(result)
    if len(exact) > 2:
        blurb = (
            "`benchmarks/exact_sums.py`: every case of the table whose metric declares an `exact_sum` "
            "statistic, as shipped (exact: int64 limbs, the same bits at any world size, see docs/bitwise.md) and "
            "with the same statistics re-declared plain float64 sums (the state before), side by side in one run, "
            "measured as in the catalogue above."
        )
        lines += ["", "## Exact float sums", "", blurb, "", *exact]
    det = detection_table(result)
    if len(det) > 2:
        lines += [
            "",
            "## COCO detection",
            "",
            "`benchmarks/detection.py` on synthetic COCO-like data (`benchmarks/coco_data.py`, the same images "
            "for every side). total = evaluate + accumulate for pycocotools / faster-coco-eval (building their "
            "COCO objects apart), add() + compute() for the metrics (each the slowest rank's, median over "
            "iterations). B per detection: what our compute() sends per rank (comm-stats hook), or for the "
            "others the bytes of the states every rank hands to the all-gather. peak extra: VmHWM during "
            "compute() minus VmRSS before it, rank 0 (the heap trimmed first, so that memory freed by an "
            "earlier evaluation in the process is not reused unseen).",
            "",
            *det,
        ]
    lines += [
        "",
        "## Start-up",
        "",
        *startup_table(result),
        "",
        "## The safe codec vs pickle (one process, encode + decode of one frame)",
        "",
        *codec_table(result),
    ]
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
