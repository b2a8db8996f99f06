"""Every metric case of tests/metric_cases.py on mpi4py: run as ``mpiexec -n N python metrics.py PAYLOAD``.

``PAYLOAD`` is the pickle that tests/mpi/test_mpi_metrics.py wrote with
:func:`metric_cases.write_payload` (each case's data and single-process result). Every rank runs
:func:`metric_cases.run_all` on an ``MPI4PyDist`` over ``COMM_WORLD`` and prints its
``MMEVAL-RESULT`` line: one check per case and sharding (a difference is a failure), and the whole
report under ``info["report"]``.
"""

from __future__ import annotations

import os
import sys

from _harness import Checker, launcher_rank, report

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))


def main() -> None:
    import metric_cases

    from mmeval_mpi4py import MPI4PyDist

    checker = Checker()
    backend = MPI4PyDist(timeout=120.0)

    def run() -> None:
        results = metric_cases.run_all(backend, metric_cases.read_payload(sys.argv[1]))
        for key, problem in results.items():
            checker.check(key, problem is None, problem or "")
        checker.info["report"] = results

    checker.guard("metric cases", run)
    report(backend.rank if backend.world_size > 1 else launcher_rank(), checker)


if __name__ == "__main__":
    main()
