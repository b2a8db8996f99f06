"""Issue 33 item 4: a real MemoryError on rank 1 reaches every rank naming rank 1 and the step.

``mpiexec -n 2 python memory_error.py``: both ranks add 1,000,000 samples x 10
classes to ``AveragePrecision``; rank 1 then lowers its address-space limit
(``RLIMIT_AS``) to what it uses plus 10 MiB, so that its ~86 MiB send buffer
of ``compute()``'s gather cannot be allocated -- numpy raises a real
``MemoryError`` (with 200,000 samples, ~18 MiB, Open MPI's slack in the
address space let it through). Each rank reports the error its ``compute()``
raised. Before, rank 0 raised nothing: it waited in the gather until rank 1's
``MPI_Abort`` at exit ended the job.
"""

from __future__ import annotations

import os
import resource
import time

import numpy as np
from _harness import Checker, launcher_rank, report

N = 1_000_000


def main() -> None:
    import mmeval

    rank = launcher_rank()
    rng = np.random.default_rng(rank)
    metric = mmeval.AveragePrecision(dist_backend="mpi4py")
    metric.add(rng.random((N, 10)).astype(np.float32), rng.integers(0, 10, N))
    metric.dist_comm.barrier()  # MPI runs, the buffers of the first collective are in place
    if rank == 1:
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (used + 10 * 2**20, resource.RLIM_INFINITY))
    c = Checker()
    start = time.monotonic()
    try:
        metric.compute(size=2 * N)
        c.check("compute() raised", False)
    except Exception as exc:
        c.info.update(error=f"{type(exc).__name__}: {exc}", seconds=time.monotonic() - start)
    report(rank, c)


if __name__ == "__main__":
    main()
