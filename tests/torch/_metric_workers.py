"""One torch_cpu launch per world size that runs every metric case of tests/metric_cases.py.

:func:`run_world` runs ``world_size`` ranks with :func:`mmeval.testing.ranks.run_ranks` (gloo on
127.0.0.1, one intra-op thread each); every rank joins the group, runs :func:`metric_cases.run_all`
on a ``TorchCPUDist`` and returns its report. Past ``timeout`` seconds whatever is left is killed,
so a hang fails the test instead of the session.

The module does not import torch at the top: the workers set their environment first.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Dict, List

from _torch_workers import WORKER_ENV

from mmeval.testing.ranks import RankOutcome, free_port, run_ranks

#: seconds one collective may take (only a bug reaches it)
COLLECTIVE_TIMEOUT = 120.0


def rank_main(rank: int, world_size: int, port: int, payload: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """A rank's body (run by :func:`mmeval.testing.ranks.run_ranks`): join the gloo group, run every case."""
    import metric_cases
    import torch.distributed as dist

    from mmeval_torch import TorchCPUDist

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=COLLECTIVE_TIMEOUT),
    )
    try:
        return metric_cases.run_all(TorchCPUDist(timeout=COLLECTIVE_TIMEOUT), payload)
    finally:
        dist.destroy_process_group()


def run_world(world_size: int, payload: Dict[str, Dict[str, Any]], timeout: float = 300.0) -> List[RankOutcome]:
    """Every rank's outcome (``value``: its :func:`metric_cases.run_all` report), within ``timeout`` s.

    A rank that raised, died or did not finish in time says so in its outcome
    (:class:`mmeval.testing.ranks.RankOutcome`); every process is gone when this returns.
    """
    env = {k: v or None for k, v in WORKER_ENV.items()}  # "": not set in the rank
    return run_ranks(rank_main, world_size, free_port(), payload, timeout=timeout, env=env)
