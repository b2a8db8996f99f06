"""paddle_dist's gather to one rank in rounds: frames of different sizes, many rounds of 1 KiB, 3 ranks."""

from __future__ import annotations

from typing import Any

from _launch import launch


def test_uneven_frames_arrive_whole_through_many_rounds(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("MMEVAL_PADDLE_DIST_GATHER_ROUND_MIB", "0.001")  # 1 KiB rounds: a frame of 12 KB takes 12
    run = launch(3, "gather_rounds", str(tmp_path), timeout=180)
    assert run.returncode == 0, run.describe()
    got = [run.ranks.get(r, {}).get("gather_rounds", {}) for r in range(3)]
    for r, g in enumerate(got):
        assert "ok" in g, f"rank {r}: {g.get('trace') or g}\n{run.describe()}"
    assert got[0]["ok"] is None and got[1]["ok"] is None  # only the destination receives
    assert got[2]["ok"] == [[0, True], [1, True], [2, True]]
