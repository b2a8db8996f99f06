"""Start-up: ``import mmeval``, ``list_all_backends()`` and the first ``get_dist_backend`` of each backend, in fresh processes.

Each probe is a fresh interpreter (``python -c``) that times its own steps
with ``perf_counter`` and reports which heavy modules it ended up importing;
the probes are interleaved (A B C A B C ...) and repeated. The yardstick of
``list_all_backends()`` is a bare ``importlib.metadata.entry_points(group=...)``
scan in a fresh process -- what any plugin registry has to do at least.

Run::

    python benchmarks/startup.py [--reps 9] [--out /tmp/startup.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common

#: Modules whose presence after a probe means a plugin or a framework was imported.
HEAVY = ("mmeval_torch", "mmeval_mpi4py", "mmeval_horovod", "torch", "mpi4py.MPI", "horovod", "tensorflow", "numpy")

_REPORT = (
    "import json, sys\n"
    f"_heavy = {HEAVY!r}\n"
    "print('@@' + json.dumps({'steps': _steps, 'imported': [m for m in _heavy if m in sys.modules]}))\n"
)


def _probe(body: str) -> str:
    """A ``python -c`` program: ``body`` fills ``_steps`` (name -> seconds), then the report is printed."""
    return "from time import perf_counter as _pc\n_steps = {}\n" + body + _REPORT


PROBES: Dict[str, str] = {
    "python -c pass": _probe(""),
    "bare entry_points(group=...) scan": _probe(
        "_t = _pc(); import importlib.metadata as _m; _steps['import importlib.metadata'] = _pc() - _t\n"
        "_t = _pc(); _eps = _m.entry_points(group='mmeval.dist_backends'); _n = sorted(e.name for e in _eps)\n"
        "_steps['call'] = _pc() - _t\n"
    ),
    "import mmeval": _probe("_t = _pc(); import mmeval; _steps['import'] = _pc() - _t\n"),
    "list_all_backends()": _probe(
        "_t = _pc(); from mmeval.core.dist import list_all_backends; _steps['import'] = _pc() - _t\n"
        "_t = _pc(); _names = list_all_backends(); _steps['call'] = _pc() - _t\n"
    ),
}


def backend_probe(name: str) -> str:
    """The probe timing the first ``get_dist_backend(name)`` of a fresh process."""
    return _probe(
        "_t = _pc(); from mmeval.core.dist import get_dist_backend; _steps['import'] = _pc() - _t\n"
        f"_t = _pc(); _b = get_dist_backend({name!r}); _steps['call'] = _pc() - _t\n"
    )


def installed_backends() -> List[str]:
    """The backend names this environment lists (asked in a child process)."""
    out = subprocess.run(
        [sys.executable, "-c", "from mmeval.core.dist import list_all_backends as l; print(*l())"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.split()


def probe_env() -> Dict[str, str]:
    """The probes' environment: bytecode caching on, as for any installed package.

    With ``PYTHONDONTWRITEBYTECODE`` set (tox envs, this machine's shell) and no
    ``__pycache__`` yet, every probe would compile mmeval's sources from
    scratch -- a cost no installed copy pays (pip writes the ``.pyc`` files).
    The first, discarded round of probes writes them. ``MMEVAL_DISABLE_PLUGINS``
    is dropped too: the probes measure the default configuration.
    """
    env = dict(os.environ, **common.MALLOC_PIN)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # with plugins disabled by name, listing reads every plugin distribution's metadata: not the default path
    env.pop("MMEVAL_DISABLE_PLUGINS", None)
    return env


def run_probe(code: str, timeout: float = 120) -> Dict[str, Any]:
    """Run one probe in a fresh interpreter; its steps, imported modules and the process's wall time."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=probe_env()
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"probe failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("@@"))
    data: Dict[str, Any] = json.loads(line[2:])
    data["wall"] = wall
    return data


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    probes = dict(PROBES)
    for name in installed_backends():
        if name != "non_dist":
            probes[f"get_dist_backend({name!r})"] = backend_probe(name)
    runs: Dict[str, List[Dict[str, Any]]] = {k: [] for k in probes}
    failed: Dict[str, str] = {}
    names = list(probes)
    for rep in range(args.reps + 1):  # the first round warms the page cache and is dropped
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            if name in failed:
                continue
            try:
                result = run_probe(probes[name])
            except (RuntimeError, subprocess.TimeoutExpired) as exc:  # e.g. a plugin that does not load here
                failed[name] = str(exc).strip().splitlines()[-1][:300]
                continue
            if rep:
                runs[name].append(result)
    records: List[Dict[str, Any]] = []
    for name, why in failed.items():
        records.append({"kind": "startup", "probe": name, "error": why})
        print(f"  startup {name:40s} FAILED: {why}", flush=True)
    for name, results in runs.items():
        if name in failed or not results:
            continue
        steps = {s: common.median([r["steps"][s] for r in results]) for s in results[0]["steps"]}
        imported = sorted({m for r in results for m in r["imported"]})
        records.append(
            {
                "kind": "startup",
                "probe": name,
                "wall_s": common.median([r["wall"] for r in results]),
                "steps_s": steps,
                "imported": imported,
                "reps": len(results),
            }
        )
        print(
            f"  startup {name:40s} wall {records[-1]['wall_s'] * 1e3:7.1f} ms  "
            + " ".join(f"{s}={v * 1e3:.2f}ms" for s, v in steps.items())
            + f"  imports {imported}",
            flush=True,
        )
    if args.out:
        common.write_json(Path(args.out), {"meta": {"python": sys.executable}, "records": records})
    return 0


if __name__ == "__main__":
    sys.exit(main())
