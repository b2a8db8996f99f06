"""mmeval's conformance suite over MPI, with the terminal checks (poisoning, two threads, Ctrl-C).

Run as ``mpiexec -n N python conformance.py``. Each terminal check runs on a
backend over ``COMM_WORLD.Dup()``: a communicator of its own, left poisoned.
"""

from __future__ import annotations

from _harness import Checker, launcher_rank, report


def main() -> None:
    checker = Checker()
    rank = launcher_rank()

    def run() -> None:
        from mpi4py import MPI

        from mmeval.testing.conformance import check_backend
        from mmeval_mpi4py import MPI4PyDist

        rank_ = MPI.COMM_WORLD.Get_rank()
        backend = MPI4PyDist(timeout=120)
        done = check_backend(
            backend, faults=True, fresh=lambda timeout: MPI4PyDist(MPI.COMM_WORLD.Dup(), timeout=timeout)
        )
        checker.info["checks"] = done
        checker.info["rank"] = rank_
        checker.check("conformance suite passed", bool(done))
        # every rank reports before any exits: a poisoned communicator makes its process MPI_Abort at exit
        backend.barrier()

    checker.guard("conformance", run)
    report(rank, checker)


if __name__ == "__main__":
    main()
