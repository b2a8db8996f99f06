"""What every part of the benchmark suite shares: payloads, the interleaved timing loop, memory, the machine.

Imports only the standard library and numpy, so the MMEval 0.2.1 side of the
suite (run in its own environment) can use it too.
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import platform
import socket
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

MB = 2**20
#: Every payload of the object-collective benchmark, smallest first.
PAYLOADS = ("dict1k", "arr1m", "arr16m", "arr64m", "arr256m", "tuples100k")
#: Timed iterations per payload (after one warm-up), sized so the whole suite fits ~20 min on 2 cores.
ITERS = {"dict1k": 30, "arr1m": 9, "arr16m": 5, "arr64m": 4, "arr256m": 5, "tuples100k": 5}
#: Payloads timed without a warm-up iteration (each call of them costs seconds at world size 4).
NO_WARMUP = ("arr256m",)
#: Array payloads: bytes of the array inside the dict.
ARRAY_BYTES = {"arr1m": MB, "arr16m": 16 * MB, "arr64m": 64 * MB, "arr256m": 256 * MB}
#: Rows of the per-sample payload, and scores per row.
TUPLES, SCORES = 100_000, 10
#: The allocator pin of every timed process (glibc's adaptive mmap threshold makes 1-32 MB timings order-dependent).
MALLOC_PIN = {"MALLOC_MMAP_THRESHOLD_": "65536"}
#: Operations of the object-collective benchmark.
OPS = ("all_gather", "gather", "broadcast")

Method = Callable[[], Any]


# --------------------------------------------------------------------------
# payloads
# --------------------------------------------------------------------------


def _array(nbytes: int, rank: int) -> np.ndarray:
    """A deterministic float32 array of ``nbytes`` bytes, different per rank (cheap to rebuild and check)."""
    out = np.arange(nbytes // 4, dtype=np.float32)
    out *= np.float32(1e-3)
    out += np.float32(rank)
    return out


def tuples_payload(rank: int, rows: int = TUPLES) -> List[Any]:
    """Per-sample results as metrics keep them: ``(int label, float32 scores[10])`` per sample.

    The score rows are views of one batch array, as when a metric appends
    ``scores[i]`` of each batch.
    """
    rng = np.random.default_rng(1000 + rank)
    scores = rng.random((rows, SCORES), dtype=np.float32)
    labels = ((np.arange(rows) * 7 + rank) % SCORES).tolist()
    return [(labels[i], scores[i]) for i in range(rows)]


def make_payload(name: str, rank: int) -> Any:
    """The payload ``name`` (one of :data:`PAYLOADS`) as rank ``rank`` sends it."""
    if name == "dict1k":
        return {
            "rank": rank,
            "epoch": 3,
            "tag": "val",
            "ids": list(range(rank, rank + 100)),
            "loss": 0.25 + rank,
            "names": [f"sample_{i:05d}" for i in range(40)],
        }
    if name in ARRAY_BYTES:
        return {"rank": rank, "data": _array(ARRAY_BYTES[name], rank)}
    if name == "tuples100k":
        return tuples_payload(rank)
    raise ValueError(f"unknown payload {name!r}; choose from {PAYLOADS}")


def check_payload(name: str, got: Any, rank: int) -> None:
    """Raise ``AssertionError`` unless ``got`` is rank ``rank``'s payload ``name`` (sampled for big ones)."""
    if name == "dict1k":
        assert got == make_payload(name, rank), f"{name} from rank {rank} differs"
    elif name in ARRAY_BYTES:
        assert got["rank"] == rank, f"{name}: rank field {got['rank']} != {rank}"
        data = got["data"]
        assert isinstance(data, np.ndarray) and data.dtype == np.float32 and data.nbytes == ARRAY_BYTES[name]
        idx = np.linspace(0, data.size - 1, 4097).astype(np.int64)
        want = idx.astype(np.float32) * np.float32(1e-3) + np.float32(rank)
        assert np.array_equal(data[idx], want), f"{name} from rank {rank}: wrong bytes"
    elif name == "tuples100k":
        want = tuples_payload(rank)
        assert isinstance(got, list) and len(got) == len(want), f"{name} from rank {rank}: wrong length"
        for i in (0, 1, len(want) // 2, len(want) - 1):
            assert type(got[i]) is tuple and got[i][0] == want[i][0] and type(got[i][0]) is int
            assert np.array_equal(got[i][1], want[i][1]) and got[i][1].dtype == np.float32
    else:
        raise ValueError(name)


def raw_nbytes(payload: Any) -> int:
    """Bytes the raw transport moves for ``payload``: its plain pickle (protocol 5, in-band).

    For array payloads that is the array plus ~100 bytes; for the per-sample
    list it is the 7.5 MB that pickle makes of 100,000 tuples (the size the
    baseline measured MMEval 0.2.1 against).
    """
    return len(pickle.dumps(payload, protocol=5))


# --------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------


def interleaved(
    methods: Dict[str, Method],
    iters: int,
    warmup: int,
    barrier: Callable[[], None],
    max_over_ranks: Callable[[float], float],
    after: Optional[Callable[[str, Any], None]] = None,
) -> Dict[str, List[float]]:
    """Time every method, interleaved: iteration ``i`` runs all of them once, in an order rotated by ``i``.

    Each call is preceded by a barrier; its time is the slowest rank's (the
    per-iteration max over ranks). ``after(name, result)`` sees each result
    of the first iteration (for checks). Returns the timed iterations'
    seconds per method.
    """
    names = list(methods)
    times: Dict[str, List[float]] = {n: [] for n in names}
    for it in range(warmup + iters):
        k = it % len(names)
        for name in names[k:] + names[:k]:
            barrier()
            t0 = time.perf_counter()
            out = methods[name]()
            dt = time.perf_counter() - t0
            if it == 0 and after is not None:  # the first iteration (a warm-up one if there is any) is checked
                after(name, out)
            del out
            worst = max_over_ranks(dt)
            if it >= warmup:
                times[name].append(worst)
        gc.collect()
    return times


def median(values: Sequence[float]) -> float:
    """The median (``nan`` for no values)."""
    return float(np.median(values)) if len(values) else float("nan")


# --------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------


def vm_status() -> Dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak RSS) of this process, in bytes, from ``/proc/self/status``."""
    out: Dict[str, int] = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return out


def trim_heap() -> None:
    """Give the heap's free pages back to the system (glibc ``malloc_trim``), so that a peak measured next
    counts fresh pages rather than reusing what earlier work in this process freed. No-op elsewhere."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS (``VmHWM``) to its current RSS; ``False`` where Linux does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


# --------------------------------------------------------------------------
# the machine
# --------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> Dict[str, Any]:
    """Where the figures come from: CPU, cores, load, memory, OS, Python."""
    mem_total = mem_avail = 0
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem_total = int(line.split()[1]) * 1024
                elif line.startswith("MemAvailable:"):
                    mem_avail = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "mem_total_gib": round(mem_total / 2**30, 1),
        "mem_available_gib": round(mem_avail / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def mem_available() -> int:
    """``MemAvailable`` in bytes (0 if unknown)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON (atomically: a temporary file renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False))
    tmp.replace(path)


def testing_ranks() -> Any:
    """:mod:`mmeval.testing.ranks` (the tests' multi-rank runner; standard library only).

    In MMEval 0.2.1's environment ``mmeval`` is that project, which has no such
    module: the file is then imported from this checkout as the top-level module
    ``ranks`` (on ``sys.path``, so spawned ranks find it by name too).
    """
    try:
        from mmeval.testing import ranks
    except ImportError:
        import sys

        where = str(Path(__file__).resolve().parents[1] / "core" / "src" / "mmeval" / "testing")
        if where not in sys.path:
            sys.path.insert(0, where)
        import ranks  # type: ignore[no-redef]
    return ranks


def under_mpi_launcher() -> bool:
    """Whether this process was started by an MPI launcher (MPICH / Open MPI / PMIx)."""
    return any(k in os.environ for k in ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"))


def relaunch_under_mpiexec(script: str, world_size: int, argv: Sequence[str], timeout: float) -> int:
    """Run ``script argv`` under the ``mpiexec -n world_size`` next to this Python; its exit status."""
    import shutil
    import subprocess
    import sys

    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    if mpiexec is None:
        print("mpiexec not found next to this Python or on PATH", file=sys.stderr)
        return 2
    cmd = [mpiexec, "-n", str(world_size), sys.executable, os.path.abspath(script), *argv]
    try:
        return subprocess.run(cmd, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"mpiexec run exceeded {timeout:g}s and was killed", file=sys.stderr)
        return 124


def spawn_torch_ranks(worker: Callable[..., None], world_size: int, args: Any, timeout: float) -> int:
    """Run ``worker(rank, world_size, port, args)`` in ``world_size`` spawned processes; 0, or 124 on timeout.

    A rank that raised or died raises :class:`RanksFailed` naming it.
    """
    import sys

    ranks = testing_ranks()
    outcomes = ranks.run_ranks(worker, world_size, ranks.free_port(), args, timeout=timeout)
    if any(o.status == "timed out" for o in outcomes):
        print(f"ranks exceeded {timeout:g}s and were killed", file=sys.stderr)
        return 124
    ranks.raise_for_failures(outcomes)
    return 0
