"""Fixtures of the MPI tests; the launching machinery lives in :mod:`mpi_runner`."""

from __future__ import annotations

from mpi_runner import mpi_impl, mpiexec

__all__ = ["mpi_impl", "mpiexec"]
