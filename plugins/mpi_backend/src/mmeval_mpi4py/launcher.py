"""What the MPI launcher told this process, read from the environment only.

Nothing here imports ``mpi4py.MPI`` (whose import runs ``MPI_Init``): these
functions decide whether a run was started by an MPI launcher, and with how
many processes, before MPI is touched. Every vendor announces itself
differently:

==========================  =================================================
launcher                    variables read
==========================  =================================================
MPICH Hydra, Intel MPI,     ``PMI_SIZE`` / ``PMI_RANK`` (PMI-1 and PMI-2 wire
MS-MPI, Cray PMI, srun      protocols; ``srun --mpi=pmi2`` sets them too)
--mpi=pmi2
Open MPI (``mpirun``,       ``OMPI_COMM_WORLD_SIZE`` / ``OMPI_COMM_WORLD_RANK``
``prterun``), Spectrum MPI  (with ``PMIX_RANK`` under Open MPI 5)
MVAPICH                     ``MV2_COMM_WORLD_SIZE``, ``MPIRUN_NPROCS``
Hydra (any PMI version)     ``MPI_LOCALNRANKS`` (ranks on this node: more
                            than one means more than one in the world)
SLURM ``srun``              ``SLURM_STEP_NUM_TASKS`` / ``SLURM_NTASKS`` /
                            ``SLURM_NPROCS``, **only** together with a PMI or
                            PMIx variable (``PMI_FD``, ``PMI_RANK``,
                            ``PMIX_RANK``, ``PMIX_NAMESPACE``): a batch script
                            that runs ``python`` directly inherits
                            ``SLURM_NTASKS`` without being an MPI rank.
==========================  =================================================

``HYDI_CONTROL_FD`` (set by Hydra in every process it starts) and
``PMIX_RANK`` mark a launched process but carry no size; alone they are
reported as a launch of unknown size, which is not enough to claim a
distributed run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Optional, Tuple

__all__ = ["LaunchInfo", "launch_info", "launcher_world_size"]

#: Variables whose value is the number of processes of the job, in the order
#: they are trusted, with the vendor they come from.
_SIZE_VARS: Tuple[Tuple[str, str], ...] = (
    ("PMI_SIZE", "PMI (MPICH Hydra, Intel MPI, MS-MPI, Cray, srun --mpi=pmi2)"),
    ("OMPI_COMM_WORLD_SIZE", "Open MPI"),
    ("MV2_COMM_WORLD_SIZE", "MVAPICH"),
    ("MPIRUN_NPROCS", "MVAPICH mpirun_rsh"),
)

#: Variables that say "an MPI process manager started me" without a size.
_MARKER_VARS: Tuple[str, ...] = (
    "PMI_RANK",
    "PMI_FD",
    "PMI_PORT",
    "PMIX_RANK",
    "PMIX_NAMESPACE",
    "OMPI_COMM_WORLD_RANK",
    "MV2_COMM_WORLD_RANK",
    "HYDI_CONTROL_FD",
    "MPI_LOCALRANKID",
)

#: PMI/PMIx variables that make SLURM's task count trustworthy (``srun --mpi=...``).
_SLURM_PMI_VARS: Tuple[str, ...] = ("PMI_FD", "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "PMIX_NAMESPACE")
_SLURM_SIZE_VARS: Tuple[str, ...] = ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")


@dataclass(frozen=True)
class LaunchInfo:
    """What the environment says about the launch.

    ``launched`` is true when a process manager's variables are present;
    ``world_size`` is the job's process count when one of them states it
    (``None`` otherwise); ``source`` names the variable it came from.
    """

    launched: bool
    world_size: Optional[int]
    source: str = ""


def _positive_int(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        return None
    return n if n > 0 else None


def launch_info(environ: Optional[Mapping[str, str]] = None) -> LaunchInfo:
    """Read the launcher's variables from ``environ`` (default ``os.environ``); never touches MPI."""
    env = os.environ if environ is None else environ
    for var, _vendor in _SIZE_VARS:
        size = _positive_int(env.get(var))
        if size is not None:
            return LaunchInfo(True, size, var)
    marked = [var for var in _MARKER_VARS if var in env]
    if any(var in env for var in _SLURM_PMI_VARS):
        for var in _SLURM_SIZE_VARS:
            size = _positive_int(env.get(var))
            if size is not None:
                return LaunchInfo(True, size, var)
    local = _positive_int(env.get("MPI_LOCALNRANKS"))
    if local is not None and local > 1:
        # ranks on this node; the world has at least as many
        return LaunchInfo(True, local, "MPI_LOCALNRANKS")
    if marked:
        return LaunchInfo(True, None, marked[0])
    return LaunchInfo(False, None, "")


def launcher_world_size(environ: Optional[Mapping[str, str]] = None) -> Optional[int]:
    """The number of processes the launcher started, or ``None`` if no launcher says."""
    return launch_info(environ).world_size
