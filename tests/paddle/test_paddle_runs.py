"""paddle_dist between real processes started by paddle's launcher, world sizes 1, 2 and 3 (gloo, CPU)."""

from __future__ import annotations

from typing import Any, Dict, Iterator

import pytest
from _launch import Run, launch

from mmeval.testing.conformance import CHECKS, FAULT_CHECKS, TERMINAL_CHECKS

WORLD_SIZES = (1, 2, 3)


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda ws: f"ws{ws}")
def main_run(request: Any, tmp_path_factory: Any) -> Iterator[Run]:
    """One launch per world size running the ``main`` scenario; the tests read what each rank recorded."""
    yield launch(request.param, "main", str(tmp_path_factory.mktemp(f"paddle_main_ws{request.param}")))


def _ok(run: Run, rank: int, check: str) -> Any:
    got: Dict[str, Any] = run.ranks.get(rank, {}).get(check, {})
    assert "ok" in got, f"rank {rank} did not pass {check!r}: {got.get('trace') or got}\n{run.describe()}"
    return got["ok"]


def test_launch_completes(main_run: Run) -> None:
    ws = main_run.world_size
    assert main_run.returncode == 0, main_run.describe()
    assert sorted(main_run.ranks) == list(range(ws)), main_run.describe()
    for r in range(ws):
        assert _ok(main_run, r, "done") is True


def test_identity_and_auto_selection(main_run: Run) -> None:
    ws = main_run.world_size
    for r in range(ws):
        got = _ok(main_run, r, "identity")
        if ws == 1:  # init_parallel_env() initializes nothing for one process: non_dist is picked, rank 0 of 1
            assert got == {
                "auto": "non_dist",
                "rank": 0,
                "world_size": 1,
                "detect": False,
                "is_initialized": False,
                "global_rank": 0,
            }
        else:
            assert got == {
                "auto": "paddle_dist",
                "rank": r,
                "world_size": ws,
                "detect": True,
                "is_initialized": True,
                "global_rank": r,
            }


def test_conformance_suite(main_run: Run) -> None:
    """Every check, and from 2 ranks on the terminal ones (poisoning, two threads, Ctrl-C) over new groups."""
    ws = main_run.world_size
    terminal = list(TERMINAL_CHECKS) if ws > 1 else []
    for r in range(ws):
        done = _ok(main_run, r, "conformance")
        assert done == list(CHECKS) + list(FAULT_CHECKS) + terminal
        if ws > 1:
            assert {"question_mismatch", "poisoning", "concurrent_calls", "interrupt"} <= set(done), done


@pytest.mark.parametrize("check", ["accuracy_padded", "accuracy_uneven"])
def test_accuracy_equals_single_process(main_run: Run, check: str) -> None:
    for r in range(main_run.world_size):
        got = _ok(main_run, r, check)
        assert got["got"] == got["expected"]


def test_accuracy_padded_shards_really_padded(main_run: Run) -> None:
    ws = main_run.world_size
    seen = sum(_ok(main_run, r, "accuracy_padded")["seen"] for r in range(ws))
    assert seen == -(-1013 // ws) * ws  # DistributedBatchSampler repeated samples: size= must drop them


def test_sub_group(main_run: Run) -> None:
    ws = main_run.world_size
    members = sorted({0, ws - 1})
    for r in range(ws):
        got = _ok(main_run, r, "sub_group")
        if r not in members:
            assert got["member"] is False
            assert got["refused"] and "not a member" in got["refused"]
            continue
        n = len(members)
        me = members.index(r)
        assert (got["rank"], got["world_size"]) == (me, n)
        assert got["all_gather"] == [[g, True] for g in members]
        assert got["gather"] == (members if me == n - 1 else None)
        assert got["broadcast"] == [members[-1], True]
        assert got["accuracy"][0] == got["accuracy"][1]


def test_new_groups_one_after_another(tmp_path: Any) -> None:
    """Ten groups in a row from mmeval_paddle.new_group, a rank late to each, all usable (3 ranks).

    paddle's own ``dist.new_group`` fails here within 3-8 groups ("Connection refused" or a hang): its gloo
    rendezvous reuses the keys of earlier groups (scenario ``groups-paddle`` shows it)."""
    run = launch(3, "groups", str(tmp_path))
    assert run.returncode == 0, run.describe()
    for r in range(3):
        assert _ok(run, r, "groups") == [True] * 10
