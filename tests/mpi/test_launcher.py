"""Launcher detection from the environment alone, for every vendor (no MPI involved)."""

from __future__ import annotations

from typing import Dict

import pytest

mmeval_mpi4py = pytest.importorskip("mmeval_mpi4py")
from mmeval_mpi4py.launcher import launch_info, launcher_world_size  # noqa: E402

CASES = {
    "no launcher": ({}, None, False),
    "plain shell with HYDRA_ config vars": (
        {"HYDRA_HOST_FILE": "/etc/hosts.mpi", "HYDRA_LAUNCHER": "ssh"},
        None,
        False,
    ),
    "MPICH Hydra": (
        {
            "PMI_SIZE": "4",
            "PMI_RANK": "2",
            "PMI_FD": "7",
            "HYDI_CONTROL_FD": "9",
            "MPI_LOCALNRANKS": "4",
            "MPI_LOCALRANKID": "2",
        },
        4,
        True,
    ),
    "MPICH Hydra -n 1": ({"PMI_SIZE": "1", "PMI_RANK": "0", "PMI_FD": "7", "MPI_LOCALNRANKS": "1"}, 1, True),
    "Intel MPI": ({"PMI_SIZE": "8", "PMI_RANK": "3", "I_MPI_HYDRA_TOPOLIB": "hwloc", "MPI_LOCALNRANKS": "2"}, 8, True),
    "Open MPI 4": (
        {"OMPI_COMM_WORLD_SIZE": "3", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "3"},
        3,
        True,
    ),
    "Open MPI 5 (PRRTE, PMIx)": (
        {"PMIX_RANK": "1", "PMIX_NAMESPACE": "prterun-x-1@1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"},
        2,
        True,
    ),
    "MVAPICH": ({"MV2_COMM_WORLD_SIZE": "6", "MV2_COMM_WORLD_RANK": "5"}, 6, True),
    "MVAPICH mpirun_rsh": ({"MPIRUN_NPROCS": "2", "MPIRUN_RANK": "0"}, 2, True),
    "Hydra, size only from local ranks": (
        {"HYDI_CONTROL_FD": "9", "MPI_LOCALNRANKS": "3", "MPI_LOCALRANKID": "0"},
        3,
        True,
    ),
    "Hydra marker, no size": ({"HYDI_CONTROL_FD": "9"}, None, True),
    "srun --mpi=pmix": (
        {
            "PMIX_RANK": "0",
            "PMIX_NAMESPACE": "slurm.pmix.1.0",
            "SLURM_STEP_NUM_TASKS": "4",
            "SLURM_NTASKS": "8",
            "SLURM_PROCID": "0",
        },
        4,
        True,
    ),
    "srun --mpi=pmi2": ({"PMI_FD": "5", "PMI_RANK": "1", "PMI_JOBID": "12.0", "SLURM_NTASKS": "2"}, 2, True),
    "sbatch script without srun": (
        {"SLURM_NTASKS": "8", "SLURM_NPROCS": "8", "SLURM_JOB_ID": "12", "SLURM_PROCID": "0"},
        None,
        False,
    ),
    "srun without an MPI plugin": (
        {"SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "1", "SLURM_STEP_ID": "0"},
        None,
        False,
    ),
    "garbage values": ({"PMI_SIZE": "many", "OMPI_COMM_WORLD_SIZE": "-2"}, None, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_launch_info(case: str) -> None:
    env, size, launched = CASES[case]
    info = launch_info(env)
    assert info.world_size == size, info
    assert info.launched is launched, info
    assert launcher_world_size(env) == size


def _detect_with(monkeypatch: pytest.MonkeyPatch, env: Dict[str, str]) -> bool:
    import os

    for key in list(os.environ):
        if key.startswith(("PMI", "OMPI_", "HYD", "MPI_LOCAL", "MV2_", "MPIRUN_", "SLURM_")):
            monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return bool(mmeval_mpi4py.MPI4PyDist.detect())


@pytest.mark.parametrize("case", list(CASES))
def test_detect_and_is_initialized_follow_the_launcher(monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    import sys

    if "mpi4py.MPI" in sys.modules:  # pragma: no cover - an initialized MPI would answer instead
        pytest.skip("mpi4py.MPI was imported in this process")
    env, size, _ = CASES[case]
    want = size is not None and size > 1
    assert _detect_with(monkeypatch, env) is want
    backend = mmeval_mpi4py.MPI4PyDist()
    assert backend.is_initialized is want
    if not want:  # a world of one answers without MPI
        assert (backend.rank, backend.world_size) == (0, 1)
    assert "mpi4py.MPI" not in sys.modules


def test_size_variables_have_a_priority() -> None:
    # PMI's own size wins over a SLURM allocation count
    info = launch_info({"PMI_SIZE": "2", "PMI_RANK": "0", "SLURM_NTASKS": "16"})
    assert (info.world_size, info.source) == (2, "PMI_SIZE")
