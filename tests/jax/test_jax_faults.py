"""Faults: a process that exits or never calls makes the others raise an mmeval error within the timeout.

Every wait is bounded twice: by the backend's timeout inside the ranks, and by
the launcher's deadline, after which the processes are killed.
"""

from __future__ import annotations

from typing import Any, Dict

import pytest
from jax_ranks import run_ranks

TIMEOUT = 20.0
#: Slack over the backend's timeout for a loaded 2-core machine.
SLACK = 10.0


def _assert_comm_error(err: Dict[str, Any], limit: float) -> None:
    assert "DistCommunicationError" in err["mro"], err
    assert err["message"].startswith("jax: all_gather_object"), err["message"]
    assert err["elapsed"] < limit, f"raised after {err['elapsed']:.1f}s, limit {limit}s"


@pytest.mark.parametrize("world_size", [2, 3])
def test_a_rank_that_exits_makes_the_others_raise(world_size: int) -> None:
    dying = world_size - 1
    outcomes = run_ranks(world_size, "die_before", dying, TIMEOUT, deadline=TIMEOUT + 60)
    assert outcomes[dying]["status"] == "died" and outcomes[dying]["returncode"] == 3
    for rank, o in enumerate(outcomes[:dying]):
        assert o["status"] == "ok", f"rank {rank} did not report: {o['log']}"
        _assert_comm_error(o["error"], TIMEOUT + SLACK)


def test_when_the_coordinator_exits_no_process_hangs() -> None:
    """Process 0 runs JAX's coordination service: when it dies JAX ends the others (an abort), or they raise."""
    outcomes = run_ranks(3, "die_before", 0, TIMEOUT, deadline=TIMEOUT + 60, exit_grace=TIMEOUT)
    assert outcomes[0]["returncode"] == 3
    for rank, o in enumerate(outcomes[1:], start=1):
        assert not o["exit_killed"], f"rank {rank} was still running at the deadline: {o['log']}"
        if o["status"] == "ok":
            _assert_comm_error(o["error"], TIMEOUT + SLACK)
        else:  # terminated by JAX's coordination agent ("the JAX distributed service detected fatal errors")
            assert o["returncode"] != 0


def test_a_rank_that_never_calls_times_out_and_the_backend_says_it_is_unusable() -> None:
    timeout = 4.0
    outcomes = run_ranks(2, "stay_away", 1, timeout, deadline=timeout * 4 + 60)
    # the idle rank sleeps, then reports -- unless process 0 left first and JAX's coordination service ended it
    assert "error" not in outcomes[1] and not outcomes[1]["exit_killed"], outcomes[1]["log"]
    assert outcomes[0]["status"] == "ok", outcomes[0]["log"]
    first, second = outcomes[0]["result"]["errors"]
    assert first["type"] == "CollectiveTimeoutError" and "TimeoutError" in first["mro"]
    assert timeout * 0.9 <= first["elapsed"] < timeout + SLACK
    _assert_comm_error(first, timeout + SLACK)
    # the stuck transfer still holds the transport: the next call fails too, within the timeout, and says why
    # (the backend's worker says so, or the core refuses a group that already failed)
    _assert_comm_error(second, timeout + SLACK)
    assert "cannot be used any more" in second["message"] or "unusable" in second["message"], second["message"]
