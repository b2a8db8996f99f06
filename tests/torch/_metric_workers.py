"""One torch_cpu launch per world size that runs every metric case of tests/metric_cases.py.

:func:`run_world` spawns ``world_size`` processes (start method ``spawn``, gloo on 127.0.0.1, one
intra-op thread each); every rank joins the group, runs :func:`metric_cases.run_all` on a
``TorchCPUDist`` and sends its report back over its own pipe. The parent waits at most ``timeout``
seconds for all of them, then kills whatever is left, so a hang fails the test instead of the session.

The module does not import torch at the top: the workers set their environment first.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any, Dict, List, Optional

from _torch_workers import WORKER_ENV, Outcome, describe, free_port

#: seconds one collective may take (only a bug reaches it)
COLLECTIVE_TIMEOUT = 120.0


def rank_main(rank: int, world_size: int, port: int, payload: Dict[str, Dict[str, Any]], conn: Any) -> None:
    """Process entry: join the gloo group, run every case, send an :class:`Outcome` with the report."""
    for key, value in WORKER_ENV.items():
        if value:
            os.environ[key] = value
        else:
            os.environ.pop(key, None)
    start = time.monotonic()
    try:
        import metric_cases
        import torch.distributed as dist

        from mmeval_torch import TorchCPUDist

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=COLLECTIVE_TIMEOUT))
        try:
            report = metric_cases.run_all(TorchCPUDist(timeout=COLLECTIVE_TIMEOUT), payload)
        finally:
            dist.destroy_process_group()
        outcome = Outcome(rank, "ok", report, elapsed=time.monotonic() - start)
    except BaseException as exc:
        outcome = Outcome(rank, "raised", error=describe(exc, time.monotonic() - start))
    conn.send(outcome)
    conn.close()


def run_world(world_size: int, payload: Dict[str, Dict[str, Any]], timeout: float = 300.0) -> List[Outcome]:
    """Every rank's :class:`Outcome` (``value``: its :func:`metric_cases.run_all` report), within ``timeout`` s.

    A rank that dies or does not answer in time is reported as ``died`` / ``no answer``; every
    process is gone when this returns.
    """
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    port = free_port()
    conns, procs = [], []
    for rank in range(world_size):
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=rank_main, args=(rank, world_size, port, payload, child),
                           name=f"mmeval-metrics-rank{rank}", daemon=True)
        proc.start()
        child.close()
        conns.append(parent)
        procs.append(proc)
    outcomes: List[Optional[Outcome]] = [None] * world_size
    deadline = time.monotonic() + timeout
    try:
        while any(o is None for o in outcomes) and time.monotonic() < deadline:
            for rank, (conn, proc) in enumerate(zip(conns, procs)):
                if outcomes[rank] is not None:
                    continue
                if conn.poll(0.05):
                    try:
                        outcomes[rank] = conn.recv()
                    except (EOFError, OSError):
                        proc.join(5)
                        outcomes[rank] = Outcome(rank, "died", error={"exitcode": proc.exitcode})
                elif not proc.is_alive():
                    outcomes[rank] = Outcome(rank, "died", error={"exitcode": proc.exitcode})
    finally:
        for proc in procs:
            proc.join(max(0.1, min(20.0, deadline - time.monotonic())))
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for conn in conns:
            conn.close()
    return [o if o is not None else Outcome(r, "no answer", error={"waited_s": timeout})
            for r, o in enumerate(outcomes)]
