"""Faults: a rank that dies or never comes makes every other rank raise within the timeout.

Each test starts its own group (a fault leaves a group unusable) and bounds
every wait: the backend's timeout inside the ranks, and the parent's deadline
on top of it, after which the group is killed.
"""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
from _torch_groups import group_params
from _torch_workers import Outcome, Ranks

TIMEOUT = 10.0
#: Slack over the backend's timeout for a rank to notice and report.
SLACK = 8.0


def _survivor_errors(outcomes: List[Outcome], gone: int) -> Dict[int, Dict[str, Any]]:
    errors = {}
    for o in outcomes:
        if o.rank == gone:
            continue
        assert o.status == "ok", f"rank {o.rank} did not report: {o}"
        errors[o.rank] = o.value
    return errors


def _assert_comm_error(exc: Dict[str, Any], kind: str, ops: Any, limit: float) -> None:
    assert "DistCommunicationError" in exc["mro"], exc
    assert kind in exc["message"], exc["message"]
    assert any(op in exc["message"] for op in ops), exc["message"]
    assert exc["elapsed"] < limit, f"raised after {exc['elapsed']:.1f}s, limit {limit}s"


@pytest.mark.parametrize("group", group_params(world_sizes=(2, 3)))
def test_rank_exits_before_the_collective(group: Any) -> None:
    kind, ws = group
    with Ranks(ws, kind) as r:
        outcomes = r.run("die_before", 1, TIMEOUT, timeout=TIMEOUT + 60)
    assert outcomes[1].status == "died"
    for exc in _survivor_errors(outcomes, 1).values():
        _assert_comm_error(exc, kind, ["all_gather_object"], TIMEOUT + SLACK)


@pytest.mark.parametrize(
    "group,op",
    [
        pytest.param(p.values[0], op, marks=p.marks, id=f"{p.id}-{op}")
        for p, op in zip(group_params(world_sizes=(2, 4)), ["all_gather_object", "compute"] * 2)
    ],
)
def test_rank_exits_mid_collective(group: Any, op: str) -> None:
    kind, ws = group
    dying = ws - 1
    with Ranks(ws, kind) as r:
        outcomes = r.run("die_mid", dying, op, TIMEOUT, timeout=TIMEOUT + 60)
    assert outcomes[dying].status == "died"
    ops = ["all_gather_object"] if op == "all_gather_object" else ["gather_object", "broadcast_object"]
    errors = _survivor_errors(outcomes, dying)
    assert len(errors) == ws - 1
    for exc in errors.values():
        _assert_comm_error(exc, kind, ops, TIMEOUT + SLACK)


@pytest.mark.parametrize(
    "group,op",
    [
        pytest.param(p.values[0], op, marks=p.marks, id=f"{p.id}-{op}")
        for p, op in zip(group_params(world_sizes=(2, 3)), ["all_gather_object", "broadcast_object"] * 2)
    ],
)
def test_rank_that_never_arrives_times_out(group: Any, op: str) -> None:
    kind, ws = group
    idle, timeout = 1, 3.0
    with Ranks(ws, kind) as r:
        outcomes = r.run("stay_away", idle, op, timeout, timeout=timeout + 60)
        r.broken = True  # the idle rank's peers gave up mid-collective: do not reuse or wait on it
    assert outcomes[idle].value == {"idle": True}
    for exc in _survivor_errors(outcomes, idle).values():
        assert exc["type"] == "CollectiveTimeoutError", exc
        assert "TimeoutError" in exc["mro"]
        _assert_comm_error(exc, kind, [op], timeout + SLACK)
        assert exc["elapsed"] >= timeout * 0.9
        assert "within 3s" in exc["message"]


def test_a_group_whose_port_was_taken_meanwhile_starts_on_another(monkeypatch: Any) -> None:
    """free_port() answers a port free a moment ago; the suite's envs run side by side, and once another process
    took it before rank 0's store listened (EADDRINUSE: test_rank_exits_mid_collective failed so, rank 1
    waiting the whole start timeout). The harness starts the group again on a new port, that error only."""
    import socket

    import _torch_workers

    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    ports = [held.getsockname()[1]]
    real = _torch_workers.free_port
    monkeypatch.setattr(_torch_workers, "free_port", lambda: ports.pop() if ports else real())
    try:
        with Ranks(2, "torch_cpu", start_timeout=60) as r:
            assert [o.status for o in r.run("info")] == ["ok", "ok"]
    finally:
        held.close()
    assert not ports  # the taken port was tried first
