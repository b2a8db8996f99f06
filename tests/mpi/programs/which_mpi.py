"""Which launcher started this rank, and which MPI library mpi4py really loaded.

Run under ``mpiexec -n N`` (or ``mpirun -np N``). First, before MPI is
touched, reads what :func:`mmeval_mpi4py.launcher.launch_info` makes of the
launcher's environment and what the backend's ``detect()`` says; then imports
``mpi4py.MPI`` and reports MPI's own rank and size, ``MPI.Get_library_version()``,
the mpi4py extension module the wheel picked (``MPI.mpich...`` or
``MPI.openmpi...``) and the file of the ``libmpi`` mapped into the process. The
pytest side compares them with the implementation behind ``mpiexec``.
"""

from __future__ import annotations

import os
import sys

from _harness import Checker, launcher_rank, report


def mapped_libmpi() -> str:
    """Path of the ``libmpi.so*`` mapped into this process (empty when none is)."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if os.path.basename(path).startswith("libmpi.so"):
                return os.path.realpath(path)
    return ""


def main() -> None:
    c = Checker()
    from mmeval_mpi4py import MPI4PyDist
    from mmeval_mpi4py.launcher import launch_info

    info = launch_info()
    detected = MPI4PyDist.detect()
    env_rank = launcher_rank()
    c.equal("mpi4py.MPI not imported by detection", "mpi4py.MPI" in sys.modules, False)

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    c.equal("launcher's rank is MPI's", env_rank, rank)
    c.equal("launcher's world size is MPI's", info.world_size, size)
    c.equal("launched", info.launched, True)
    c.equal("detect() is world size > 1", detected, size > 1)
    c.equal(
        "the ranks agree on the library", comm.allgather(MPI.Get_library_version()), [MPI.Get_library_version()] * size
    )
    report(
        rank,
        c,
        source=info.source,
        world_size=info.world_size,
        size=size,
        library=MPI.Get_library_version(),
        module=os.path.basename(MPI.__file__ or ""),
        libmpi=mapped_libmpi(),
        prefix=os.path.realpath(sys.prefix),
    )


if __name__ == "__main__":
    main()
