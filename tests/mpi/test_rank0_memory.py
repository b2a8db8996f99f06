"""Issue 33 item 5: rank 0's peak memory in a per-sample compute() under mpiexec (a ratio with margin, not a time).

Before: rank 0 held every received block (in one pooled receive buffer) and the
whole output at once, 1.80x the world's results on 2 ranks with AveragePrecision
and 1 + (ws-1)/ws + what compute_metric allocates on more; the check below
read 1.67x on 3 ranks. Now each block arrives in a buffer of its own whose
pages go back as its rows are copied out (programs/rank0_memory.py: the shared
measurement, :mod:`mmeval.testing.rank0_memory`, launched with its ``RANK_ENV``
as every other launcher's test is).
"""

from __future__ import annotations

import pytest
from mpi_runner import run_program

from mmeval.testing.rank0_memory import RANK_ENV


@pytest.mark.parametrize("mode", ["unzip", "cat"])
def test_rank0_peak_memory_in_a_per_sample_compute(mpiexec: str, mode: str) -> None:
    run = run_program(mpiexec, "rank0_memory.py", 3, "400000", mode, timeout=180, env=RANK_ENV)
    run.expect_success(3)
    print(f"{mode}: rank 0 peak {run.results[0]['info']['ratio']}x the world's results")
