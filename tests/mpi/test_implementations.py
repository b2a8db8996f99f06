"""The MPI implementation each tox env installs is the one that really runs, and every launcher is recognized.

``tox -e mpi`` (MPICH), ``tox -e mpi-openmpi`` (Open MPI) and ``tox -e mpi-impi``
(Intel MPI) each set ``MMEVAL_MPI_IMPL``; these tests launch
``programs/which_mpi.py`` under that env's real ``mpiexec`` / ``mpirun`` and
check that ``MPI.Get_library_version()`` names that implementation, that
mpi4py's wheel loaded the env's own ``libmpi`` through the matching ABI module,
and that :func:`mmeval_mpi4py.launcher.launch_info` read the world size from
that launcher's own variable before MPI was initialized.
"""

from __future__ import annotations

import os

import pytest
from mpi_runner import EXPECTED_IMPL, MPIImpl, run_program

#: The extension module mpi4py's wheel loads for each implementation's ABI.
_ABI_MODULE = {"mpich": "MPI.mpich.", "impi": "MPI.mpich.", "openmpi": "MPI.openmpi."}


def _check_run(run_ranks: dict, impl: MPIImpl, n: int, describe: str) -> None:
    for rank in range(n):
        res = run_ranks[rank]
        assert impl.library_marker in res["library"], f"rank {rank}: {res['library']!r}\n{describe}"
        assert res["size"] == n and res["world_size"] == n, describe
        assert res["source"] == impl.launcher_source, f"rank {rank} read {res['source']}\n{describe}"
        assert res["module"].startswith(_ABI_MODULE[impl.name]), f"rank {rank}: {res['module']}\n{describe}"
        # the env's own library, not one from elsewhere on the machine
        assert res["libmpi"].startswith(res["prefix"] + os.sep), f"rank {rank}: {res['libmpi']}\n{describe}"


def test_mpiexec_is_the_expected_implementation(mpi_impl: MPIImpl) -> None:
    """``mpiexec --version`` names the implementation the env installed (the fixture fails otherwise)."""
    if not EXPECTED_IMPL:
        pytest.skip("MMEVAL_MPI_IMPL is not set: any implementation is accepted")
    assert mpi_impl.name == EXPECTED_IMPL, mpi_impl


@pytest.mark.parametrize("n", [1, 2, 3, 4], ids=lambda n: f"np{n}")
def test_library_and_launcher_under_mpiexec(mpiexec: str, mpi_impl: MPIImpl, n: int) -> None:
    """Under the real ``mpiexec -n N``: the library is the implementation's, and launch detection matches MPI."""
    run = run_program(mpiexec, "which_mpi.py", n, timeout=120)
    run.expect_success(n)
    _check_run(run.results, mpi_impl, n, run.describe())


def test_library_and_launcher_under_mpirun(mpiexec: str, mpi_impl: MPIImpl) -> None:
    """The same under the ``mpirun -np`` alias every implementation ships."""
    mpirun = os.path.join(os.path.dirname(mpiexec), "mpirun")
    if not os.path.exists(mpirun):  # pragma: no cover - an MPI without the alias
        pytest.skip(f"no mpirun next to {mpiexec}")
    run = run_program(mpirun, "which_mpi.py", 2, timeout=120, count_flag="-np")
    run.expect_success(2)
    _check_run(run.results, mpi_impl, 2, run.describe())
