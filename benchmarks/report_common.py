"""The benchmark report's shared half: loading the JSON, indexing records, formatting, the target row.

Each family's section is in its own module (``report_<family>.py``); ``report.py`` puts them together."""

from __future__ import annotations

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


def where(backend: str, ws: int) -> str:
    """A target's ``where`` cell: backend and world size (MPI beyond 2 ranks is erratic here: info only)."""
    tag = " (erratic, info only)" if backend == "mpi4py" and ws > 2 else ""
    return f"{backend} ws={ws}{tag}"
