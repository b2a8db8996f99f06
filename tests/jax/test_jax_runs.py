"""The jax backend between real processes (``jax.distributed.initialize`` on 127.0.0.1, gloo on CPU)."""

from __future__ import annotations

from typing import List

import pytest
from jax_ranks import results, run_ranks

from mmeval.testing.conformance import CHECKS, FAULT_CHECKS, TERMINAL_CHECKS


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_conformance_suite(world_size: int) -> None:
    """Every check, and from 2 ranks on the terminal ones (poisoning, two threads, Ctrl-C), each on a new group."""
    done = results(run_ranks(world_size, "conformance", deadline=300))
    terminal = list(TERMINAL_CHECKS) if world_size > 1 else []
    assert done == [list(CHECKS) + list(FAULT_CHECKS) + terminal] * world_size
    if world_size > 1:
        assert {"question_mismatch", "poisoning", "concurrent_calls", "interrupt"} <= set(done[0])


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("shards", ["padded", "uneven"])
def test_auto_selected_evaluation_equals_single_process(world_size: int, shards: str) -> None:
    """No backend named: ``jax`` is picked, and Accuracy over 1001 samples matches one process."""
    for res in results(run_ranks(world_size, "evaluate", shards, "auto")):
        assert res["backend"] == "jax"
        assert res["metric"] == res["single"]


def test_accuracy_accepts_jax_arrays() -> None:
    for res in results(run_ranks(2, "jax_arrays")):
        assert res["metric"] == res["single"]


@pytest.mark.parametrize("members", [[0, 2], [2, 1]])
def test_sub_group(members: List[int]) -> None:
    """A group of two of three processes, in the given rank order; the outsider stays out, then all three meet."""
    out = results(run_ranks(3, "subgroup", members))
    for proc, res in enumerate(out):
        assert res["world"] == [0, 1, 2]
        if proc not in members:
            assert "not a member of group" in res["outsider"]
            continue
        rank = members.index(proc)
        assert (res["rank"], res["world_size"]) == (rank, 2)
        assert res["gathered"] == [["p", p, [p] * 3] for p in members]
        assert res["to_last"] == ([p * 10 for p in members] if rank == 1 else None)
        assert res["bcast"] == f"from {members[1]}"
        assert res["metric"] == res["single"]
