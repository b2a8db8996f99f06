"""Desynchronized programs on each backend: a clear error on every rank, and nothing hangs.

Three ranks run, in one group: different collectives; a gather with another
``dst`` on one rank; a broadcast with another ``src`` on one rank; one rank
calling one collective more before a common one -- each a
CollectiveMismatchError on every rank, naming the calls, after which the
group still works; and finally one rank calling one collective more at the
end, alone: it raises a timeout naming the operation (the others made no
call to fail).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reliability_harness import launch_backend

TIMEOUT = 5.0
WS = 3
STEPS = ["different_collectives", "different_dst", "different_src", "one_more_first"]


def test_desynchronized_calls(backend: str, scratch: Path, figures: Any) -> None:
    with launch_backend(backend, scratch, WS, ["desync"], timeout=TIMEOUT, faults=True) as launch:
        infos = launch.results(range(WS), "desync", 180)
    for r, info in infos.items():
        for step in STEPS:
            assert info[step]["type"] == "CollectiveMismatchError", (r, step, info[step])
            assert backend in info[step]["message"]
            figures(
                "desynchronized calls",
                backend=backend,
                rank=r,
                case=step,
                error=info[step]["type"],
                seconds=info[step]["seconds"],
            )
    last = infos[0]["one_more_last"]
    assert last["type"] in ("CollectiveTimeoutError", "CollectiveFailedError"), last
    assert "all_gather_object" in last["message"] and last["seconds"] < TIMEOUT + 10, last
    figures(
        "desynchronized calls",
        backend=backend,
        rank=0,
        case="one_more_last",
        error=last["type"],
        seconds=last["seconds"],
    )
