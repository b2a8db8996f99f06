"""A rank that leaves or hangs: the others raise an mmeval error within the timeout and exit (no hang)."""

from __future__ import annotations

from typing import Any

import pytest
from _launch import launch


@pytest.mark.parametrize("ws", [2, 3])
def test_rank_exits(ws: int, tmp_path: Any) -> None:
    """The last rank exits after a barrier; the others' all-gather (timeout 30 s) fails fast."""
    run = launch(ws, "exit", str(tmp_path), timeout=120)
    assert run.returncode == 0, run.describe()
    for r in range(ws - 1):
        got = run.ranks[r]["fault"].get("ok")
        assert got, run.describe()
        assert got["mmeval"] and got["error"] in ("CollectiveFailedError", "CollectiveTimeoutError"), got
        assert "paddle_dist" in got["message"] and "all_gather" in got["message"], got
        assert got["seconds"] < 30, got


@pytest.mark.parametrize("ws", [2, 3])
def test_rank_hangs(ws: int, tmp_path: Any) -> None:
    """The last rank never calls; the others raise CollectiveTimeoutError after 3 s and their processes exit."""
    run = launch(ws, "hang", str(tmp_path), timeout=120)
    for r in range(ws - 1):
        got = run.ranks[r]["fault"].get("ok")
        assert got, run.describe()
        assert got["error"] == "CollectiveTimeoutError" and got["mmeval"], got
        assert "within 3s" in got["message"] and "MMEVAL_PADDLE_DIST_TIMEOUT" in got["message"], got
        assert 2.5 < got["seconds"] < 10, got
    waited = run.ranks[ws - 1]["fault"]["ok"]["peers_exited_after"]
    assert waited is not None and waited < 15, f"the ranks that timed out did not exit: {run.describe()}"
