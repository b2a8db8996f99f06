"""jax's gather to one rank in rounds: frames of different sizes, many rounds of 1 KiB, 3 processes."""

from __future__ import annotations

from typing import Any

from jax_ranks import results, run_ranks


def test_uneven_frames_arrive_whole_through_many_rounds(monkeypatch: Any) -> None:
    monkeypatch.setenv("MMEVAL_JAX_GATHER_ROUND_MIB", "0.001")  # 1 KiB rounds: a frame of 12 KB takes 12
    got = results(run_ranks(3, "gather_rounds", deadline=180))
    assert got[0] is None and got[1] is None  # only the destination keeps the blocks
    assert got[2] == [[0, True], [1, True], [2, True]]
