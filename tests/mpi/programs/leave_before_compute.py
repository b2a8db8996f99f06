"""Issue 20 item 12: the last rank exits 0 before ``compute()``, before MPI was ever started in the job.

``MMEVAL_MPI4PY_TIMEOUT=T mpiexec -n N python leave_before_compute.py``: every
rank builds ``Accuracy(dist_backend='mpi4py')`` and adds its share (nothing of
that starts MPI); the last rank then exits with status 0. The others call
``compute()``, whose first use of the backend starts MPI (``MPI_Init``), which
waits for the rank that left. They must end within about ``T`` seconds with a
message naming the timeout on stderr -- not hang in ``MPI_Init``. A rank that
gets an answer prints ``MMEVAL-COMPUTED``.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from _harness import launcher_rank


def main() -> None:
    import mmeval

    rank = launcher_rank()
    size = int(os.environ.get("PMI_SIZE") or os.environ.get("OMPI_COMM_WORLD_SIZE") or "1")
    metric = mmeval.Accuracy(dist_backend="mpi4py")
    metric.add(np.eye(4)[[rank % 4, 1]], np.array([rank % 4, 2]))
    assert "mpi4py.MPI" not in sys.modules, "nothing before compute() may start MPI"
    if rank == size - 1:
        sys.exit(0)
    print(f"rank {rank}: computing", flush=True)
    result = metric.compute()
    print(f"MMEVAL-COMPUTED rank {rank}: {result}", flush=True)


if __name__ == "__main__":
    main()
