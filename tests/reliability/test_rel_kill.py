"""Killed ranks: a rank is SIGKILLed inside a collective; every other rank raises in time, naming the operation.

The victim enters the collective and stops at a chosen point -- in the header
exchange, or in the payload transfer after the headers went through -- and
the test SIGKILLs it there (no cleanup, no goodbye: the kernel closes its
sockets). Operations and victims: an all-gather; a gather whose victim is a
sender, or the destination; a broadcast whose victim is the source, or a
receiver. Three ranks, so there are two survivors.

A survivor raises a DistCommunicationError naming the operation and the
backend. One whose own part of the operation was already complete (a gather
sender whose bytes were delivered, a broadcast receiver served before the
victim) returns from it -- it has nothing wrong to report -- and its next
collective (a barrier) raises instead. Either way within the timeout
(10 s) plus slack, measured from the SIGKILL.

MPI ranks run under ``mpiexec -disable-auto-cleanup`` with a shell parent
each: Hydra SIGKILLs the whole job the moment one of its direct children
dies by a signal (nothing hangs then, but the survivors never get to
raise); see ``reliability_harness.launch_mpi``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from reliability_harness import launch_backend

TIMEOUT = 10.0
SLACK = 8.0
WS, VICTIM = 3, 2

#: (operation, root, who the victim is)
CASES = [
    ("all_gather_object", 0, "a peer"),
    ("gather_object", 0, "a sender"),
    ("gather_object", VICTIM, "the destination"),
    ("broadcast_object", VICTIM, "the source"),
    ("broadcast_object", 0, "a receiver"),
]


@pytest.mark.parametrize("phase", ["headers", "payload"])
@pytest.mark.parametrize("op,root,role", CASES, ids=[f"{op}-{role.split()[-1]}" for op, _, role in CASES])
def test_sigkill_inside_a_collective(
    backend: str, op: str, root: int, role: str, phase: str, scratch: Path, figures: Any
) -> None:
    params = {"op": op, "phase": phase, "victim": VICTIM, "root": root}
    with launch_backend(backend, scratch, WS, ["killed_rank"], timeout=TIMEOUT, params=params, faults=True) as launch:
        launch.wait_event([VICTIM], "victim", 180)
        launch.wait_event([0, 1], "entering", 60)
        time.sleep(0.3)  # the survivors are waiting inside the operation
        killed_at = launch.kill_rank(VICTIM)
        infos = launch.results([0, 1], "killed_rank", TIMEOUT + 60)
    for r, info in infos.items():
        err = info["error"]
        surfaced = err["raised_at"] - killed_at
        assert info["raised_in"] in (op, "barrier"), info
        assert surfaced < TIMEOUT + SLACK, f"rank {r} raised {surfaced:.1f}s after the SIGKILL"
        figures(
            "SIGKILL inside a collective",
            backend=backend,
            op=op,
            victim=role,
            phase=phase,
            rank=r,
            raised_in=info["raised_in"],
            error=err["type"],
            seconds_after_kill=surfaced,
        )
    # every survivor that had not finished its part raises in the operation itself
    assert any(i["raised_in"] == op for i in infos.values()), infos
