"""Launch real multi-process JAX groups for the tests: one ``python jax_worker.py`` per rank.

Each rank calls ``jax.distributed.initialize("127.0.0.1:PORT", num_processes=N,
process_id=i)`` on a free port, runs one scenario of :mod:`jax_worker` and
writes its outcome as JSON; :func:`run_ranks` returns the outcomes in rank
order. Every wait is bounded: processes still alive at the deadline are
killed (by the pid this module started) and reported as ``"killed"``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

from mmeval.testing.ranks import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "jax_worker.py")


def run_ranks(
    world_size: int, scenario: str, *args: Any, deadline: float = 120.0, exit_grace: float = 30.0
) -> List[Dict[str, Any]]:
    """Run ``scenario`` on ``world_size`` processes; one outcome dict per rank.

    An outcome is the scenario's JSON result plus ``"returncode"`` and
    ``"status"``: ``"ok"`` (a result was written), ``"died"`` (the process
    exited without one) or ``"killed"`` (still running at the deadline, or
    ``exit_grace`` seconds after every rank had written its result).
    """
    port = free_port()
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory(prefix="mmeval-jax-") as tmp:
        procs = []
        for rank in range(world_size):
            cmd = [sys.executable, WORKER, str(port), str(world_size), str(rank), tmp, scenario, json.dumps(list(args))]
            log = open(os.path.join(tmp, f"rank{rank}.log"), "wb")
            procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=HERE), log))
        end = time.monotonic() + deadline
        results_seen_at = None
        try:
            while time.monotonic() < end:
                if all(p.poll() is not None for p, _ in procs):
                    break
                if results_seen_at is None and all(
                    os.path.exists(os.path.join(tmp, f"rank{r}.json")) or procs[r][0].poll() is not None
                    for r in range(world_size)
                ):
                    results_seen_at = time.monotonic()
                if results_seen_at is not None and time.monotonic() - results_seen_at > exit_grace:
                    break
                time.sleep(0.05)
        finally:
            killed = set()
            for rank, (p, log) in enumerate(procs):
                if p.poll() is None:
                    p.kill()
                    killed.add(rank)
                p.wait()
                log.close()
        outcomes = []
        for rank, (p, _) in enumerate(procs):
            path = os.path.join(tmp, f"rank{rank}.json")
            with open(os.path.join(tmp, f"rank{rank}.log"), "rb") as f:
                tail = f.read()[-3000:].decode(errors="replace")
            outcome: Dict[str, Any] = {"returncode": p.returncode, "log": tail}
            if os.path.exists(path):
                with open(path) as f:
                    outcome.update(json.load(f))
                outcome["status"] = "ok"
            else:
                outcome["status"] = "killed" if rank in killed else "died"
            outcome["exit_killed"] = rank in killed
            outcomes.append(outcome)
        return outcomes


def results(outcomes: List[Dict[str, Any]]) -> List[Any]:
    """The scenario results, asserting that every rank reported one without an error."""
    for r, o in enumerate(outcomes):
        assert o["status"] == "ok", f"rank {r} {o['status']} (exit {o['returncode']}):\n{o['log']}"
        assert "error" not in o, f"rank {r} raised {o['error']}:\n{o.get('traceback', '')}"
    return [o["result"] for o in outcomes]
