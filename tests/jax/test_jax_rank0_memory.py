"""Rank 0's peak memory in a per-sample compute() on jax: 3 processes of multi-process JAX (a ratio, not a time).

Before the gather went in rounds, it was one all-gather of a padded block of
the largest frame per rank, kept on rank 0: rank 0 held all of it (its own
block too) and built the output beside it: 2.07x the world's results at 2
ranks in benchmarks/rank0_memory.py, 2.10x here. Now every round all-gathers a
few MiB per rank and rank 0 copies each peer's block into a buffer of its own
whose pages go back as the rows are copied out: 1.10x here.
"""

from __future__ import annotations

from typing import Any

from jax_ranks import results, run_ranks

from mmeval.testing.rank0_memory import RANK_ENV

#: rank 0's peak extra memory in compute() / the world's results
LIMIT = 1.35


def test_rank0_peak_memory_in_a_per_sample_compute(monkeypatch: Any) -> None:
    for key, value in RANK_ENV.items():
        monkeypatch.setenv(key, value)
    got = results(run_ranks(3, "rank0_memory", 400_000, deadline=180))
    for r, g in enumerate(got):
        assert g["result_ok"], f"rank {r}: compute() did not return every rank's rows in dataset order"
    ratio = got[0]["ratio"]
    print(f"jax: rank 0 peak {ratio}x the world's results")
    assert ratio <= LIMIT, f"rank 0's peak extra memory is {ratio}x the world's results (limit {LIMIT}x)"
