"""Fixtures of the MPI tests; the launching machinery lives in :mod:`mpi_runner`.

A run ends by removing the shared-memory files its killed ranks left in /dev/shm (:mod:`shm_leaks`).
"""

from __future__ import annotations

from mpi_runner import mpi_impl, mpiexec
from shm_leaks import session_fixture

_remove_leaked_shm = session_fixture()

__all__ = ["mpi_impl", "mpiexec"]
