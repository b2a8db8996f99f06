"""mpi4py's native reductions (Iallreduce / Ireduce) under ``mpiexec``: conformance, bits, split communicators."""

from __future__ import annotations

import pytest
from mpi_runner import run_program


@pytest.mark.parametrize("n", [2, 3], ids=lambda n: f"np{n}")
def test_native_reductions(mpiexec: str, n: int) -> None:
    run = run_program(mpiexec, "reductions.py", n, timeout=300)
    run.expect_success(n)
