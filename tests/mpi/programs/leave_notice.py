"""Issue 33 items 1-2: a rank leaves outside a collective; its peers raise within seconds naming it and why.

``mpiexec -n N python leave_notice.py HOW``: every rank imports ``mpi4py.MPI``
first (MPI runs on every rank), builds ``Accuracy(dist_backend='mpi4py')`` and
adds its share. Then every rank but the last leaves, by ``HOW``:

* ``raise``: ``add()`` raises a plain MetricArgumentError (uncaught);
* ``exit``: ``sys.exit(3)``;
* ``normal``: the end of the script, no ``compute()``;
* ``sigterm``: the rank sends itself SIGTERM;
* ``late``: after one ``compute()`` with the others, the end of the script
  (the others' second ``compute()`` must fail, their first must not).

The last rank calls ``compute()`` (twice for ``late``) and prints one
``MMEVAL-RESULT`` line: the error's text and the seconds from the call to it.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np
from _harness import Checker, launcher_rank, report
from mpi4py import MPI  # noqa: F401  (MPI starts on every rank, as the README's recipe does)


def main() -> None:
    import mmeval
    from mmeval.core.errors import DistCommunicationError

    how = sys.argv[1]
    rank = launcher_rank()
    size = int(os.environ.get("PMI_SIZE") or os.environ.get("OMPI_COMM_WORLD_SIZE") or "1")
    metric = mmeval.Accuracy(dist_backend="mpi4py")
    metric.add(np.eye(4)[[rank % 4, 1]], np.array([rank % 4, 2]))
    if rank != size - 1:
        if how == "late":
            metric.compute()
        if how == "raise":
            metric.add(np.eye(4)[[0, 1]], np.array([0, 1, 2]))  # a MetricArgumentError: lengths differ
        elif how == "exit":
            sys.exit(3)
        elif how == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
        return
    c = Checker()
    if how == "late":
        c.check("the first compute() succeeds", bool(metric.compute()))
        time.sleep(1.0)  # the others have left by now
    start = time.monotonic()
    exc = c.raises("compute() raises", DistCommunicationError, metric.compute, "left after completing")
    c.info.update(error=f"{type(exc).__name__}: {exc}", seconds=time.monotonic() - start)
    report(rank, c)


if __name__ == "__main__":
    main()
