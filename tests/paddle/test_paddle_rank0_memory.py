"""Rank 0's peak memory in a per-sample compute() on paddle_dist: 3 ranks under paddle's launcher (a ratio, not a time).

Before the gather went in rounds, rank 0 received a padded block of every rank,
its own too (as much as the world's results), and built the output beside it:
2.0x at 2 ranks in benchmarks/rank0_memory.py, 2.02x here. Now each peer's bytes
land in a buffer of its own, a round at a time, whose pages go back as the rows
are copied out (docs/benchmarks.md): 1.13x here.
"""

from __future__ import annotations

from typing import Any

from _launch import launch

from mmeval.testing.rank0_memory import RANK_ENV

#: rank 0's peak extra memory in compute() / the world's results
LIMIT = 1.35


def test_rank0_peak_memory_in_a_per_sample_compute(tmp_path: Any, monkeypatch: Any) -> None:
    for key, value in RANK_ENV.items():
        monkeypatch.setenv(key, value)
    run = launch(3, "rank0_memory", str(tmp_path), timeout=180)
    assert run.returncode == 0, run.describe()
    got = [run.ranks.get(r, {}).get("rank0_memory", {}) for r in range(3)]
    for r, g in enumerate(got):
        assert "ok" in g, f"rank {r}: {g.get('trace') or g}\n{run.describe()}"
        assert g["ok"]["result_ok"], f"rank {r}: compute() did not return every rank's rows in dataset order"
    ratio = got[0]["ok"]["ratio"]
    print(f"paddle_dist: rank 0 peak {ratio}x the world's results")
    assert ratio <= LIMIT, f"rank 0's peak extra memory is {ratio}x the world's results (limit {LIMIT}x)"
