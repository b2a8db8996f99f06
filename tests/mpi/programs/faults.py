"""Faults on real MPI ranks; every rank still alive must raise a clear mmeval error, in bounded time.

``mpiexec [-disable-auto-cleanup] -n N python faults.py SCENARIO``:

* ``exit-before`` -- the last rank exits before a collective; the others
  raise a ``DistCommunicationError`` naming the operation and the backend
  within the timeout (``MMEVAL_MPI4PY_TIMEOUT``), and the communicator then
  refuses further collectives at once. At exit they call ``MPI_Abort``, so
  the job ends instead of waiting in ``MPI_Finalize`` for the dead rank. The
  dying rank's exit status is ``MMEVAL_TEST_EXIT_CODE`` (default 3): Open MPI's
  launcher ends the whole job at once on any non-zero status, even with
  ``--enable-recovery``, so under it the rank vanishes with status 0.
* ``exit-during`` -- the last rank exits in the middle of a collective: the
  headers were exchanged, its payload never comes.
* ``unpicklable`` -- one rank's object cannot be pickled: every rank raises
  ``RemoteSerializationError`` (all_gather, gather, broadcast), and the group
  stays usable.
* ``compute-error`` -- ``compute_metric`` raises on the computing rank: every
  rank raises the same type and message (or ``RemoteMetricError`` carrying
  them when the exception cannot be rebuilt).
* ``mismatch`` -- ranks call different collectives: ``CollectiveMismatchError``
  on every rank.
* ``recycled`` -- a communicator whose group failed is freed and a new one is
  duplicated (MPI hands out the freed handle again): the new group starts
  clean, neither poisoned nor with the old sequence.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from typing import Any, Dict

import numpy as np
from _harness import Checker, launcher_rank, report


class NeedsTwoArgs(Exception):
    """An exception whose class cannot be rebuilt from its pickled args."""

    def __init__(self, code: int, where: str) -> None:
        super().__init__(f"failed with code {code} in {where}")


def exits(c: Checker, during: bool) -> None:
    from mmeval.core.errors import CollectiveFailedError, DistCommunicationError
    from mmeval_mpi4py import MPI4PyDist

    b = MPI4PyDist()  # the timeout comes from MMEVAL_MPI4PY_TIMEOUT
    r, ws = b.rank, b.world_size
    b.barrier()  # everyone is here: the clocks below start together
    status = int(os.environ.get("MMEVAL_TEST_EXIT_CODE", "3"))
    if r == ws - 1:
        if not during:
            os._exit(status)

        def die_in_payload(*args: Any) -> Any:
            os._exit(status)  # the headers are exchanged; this rank's payload never comes

        b._all_gather_bytes = die_in_payload  # type: ignore[method-assign]
    start = time.monotonic()
    exc = c.raises(
        "survivors raise",
        DistCommunicationError,
        lambda: b.all_gather_object({"rank": r, "data": np.ones(8 * 2**20, np.uint8)}),
        "mpi4py",
        "all_gather_object",
    )
    elapsed = time.monotonic() - start
    c.info.update(error=f"{type(exc).__name__}: {exc}", seconds=elapsed, timeout=b.timeout)
    c.check("raised within the timeout", elapsed < b.timeout + 5, f"{elapsed:.1f}s for a {b.timeout:g}s timeout")
    start = time.monotonic()
    c.raises("the broken communicator is refused", CollectiveFailedError, b.barrier, "unusable", "barrier")
    c.check("refused at once", time.monotonic() - start < 1.0)


def unpicklable(c: Checker) -> None:
    from mmeval.core.errors import RemoteSerializationError
    from mmeval_mpi4py import MPI4PyDist

    b = MPI4PyDist(timeout=60)
    r, ws = b.rank, b.world_size
    bad = ws - 1

    def obj() -> Any:
        return {"lock": threading.Lock()} if r == bad else {"rank": r}

    c.raises(
        "all_gather",
        RemoteSerializationError,
        lambda: b.all_gather_object(obj()),
        "mpi4py",
        "all_gather_object",
        f"rank {bad}",
        "lock",
    )
    c.raises("gather", RemoteSerializationError, lambda: b.gather_object(obj(), dst=0), "gather_object", f"rank {bad}")
    c.raises(
        "broadcast",
        RemoteSerializationError,
        lambda: b.broadcast_object(obj(), src=bad),
        "broadcast_object",
        f"rank {bad}",
    )
    c.equal("usable afterwards", b.all_gather_object(r), list(range(ws)))


def compute_error(c: Checker) -> None:
    from mmeval.core import BaseMetric, RemoteMetricError

    class Failing(BaseMetric):
        def __init__(self, error: BaseException, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.error = error

        def add(self, x: Any) -> None:  # type: ignore[override]
            self._results.append(x)

        def compute_metric(self, results: Any) -> Dict[str, Any]:
            raise self.error

    rank = launcher_rank()
    plain = Failing(ValueError("boom: 42 samples are odd"), dist_backend="mpi4py")
    plain.add(rank)
    c.raises("ValueError on every rank", ValueError, plain.compute, "boom: 42 samples are odd")
    odd = Failing(NeedsTwoArgs(7, "compute_metric"), dist_backend="mpi4py")
    odd.add(rank)
    expect = NeedsTwoArgs if rank == 0 else RemoteMetricError
    exc = c.raises("unrebuildable exception", expect, odd.compute, "failed with code 7 in compute_metric")
    if rank != 0 and isinstance(exc, RemoteMetricError):
        c.check("remote type", exc.remote_type.endswith("NeedsTwoArgs"), exc.remote_type)
    ok = Failing(RuntimeError("unused"), dist_backend="mpi4py")
    c.equal("usable afterwards", ok.dist_comm.all_gather_object(rank), list(range(ok.dist_comm.world_size)))


def mismatch(c: Checker) -> None:
    from mmeval.core.errors import CollectiveMismatchError
    from mmeval_mpi4py import MPI4PyDist

    b = MPI4PyDist(timeout=60)
    r, ws = b.rank, b.world_size
    call = (lambda: b.barrier()) if r == 0 else (lambda: b.all_gather_object(np.ones(10**6)))
    c.raises("different collectives", CollectiveMismatchError, call, "mpi4py", "barrier", "all_gather_object")
    src = 0 if r == 0 else ws - 1
    c.raises(
        "different roots",
        CollectiveMismatchError,
        lambda: b.broadcast_object("x", src=src),
        "broadcast_object",
        "src=0",
        f"src={ws - 1}",
    )
    c.equal("usable afterwards", b.all_gather_object(r), list(range(ws)))


def recycled(c: Checker) -> None:
    from mpi4py import MPI

    from mmeval.core.errors import DistCommunicationError
    from mmeval_mpi4py import MPI4PyDist

    handles = []
    for round_ in range(3):
        comm = MPI.COMM_WORLD.Dup()
        handles.append(int(comm.py2f()))
        b = MPI4PyDist(comm, timeout=60)
        ws = b.world_size
        if round_ == 0:

            def boom(call: Any) -> Any:
                raise MemoryError("no room for the payload here")  # every rank, before any transfer starts

            b._all_gather_bytes = boom  # type: ignore[method-assign]
            c.raises(
                "the first group fails",
                DistCommunicationError,
                functools.partial(b.all_gather_object, b"x" * 10_000),
                "no room",
            )
            c.check("and is poisoned", bool(b.poisoned), str(b.poisoned))
        else:
            c.check(f"round {round_}: born clean", b.poisoned is None, str(b.poisoned))
            c.equal(f"round {round_}: usable", b.all_gather_object(round_), [round_] * ws)
        del b
        comm.Free()
    c.info["handles"] = handles


def main() -> None:
    scenario = sys.argv[1]
    c = Checker()
    c.info["scenario"] = scenario
    rank = launcher_rank()
    run = {
        "exit-before": lambda: exits(c, during=False),
        "exit-during": lambda: exits(c, during=True),
        "unpicklable": lambda: unpicklable(c),
        "compute-error": lambda: compute_error(c),
        "mismatch": lambda: mismatch(c),
        "recycled": lambda: recycled(c),
    }[scenario]
    c.guard(scenario, run)
    report(rank, c)
    if scenario.startswith("exit"):
        # Let every survivor report before the first one's exit aborts the job.
        time.sleep(float(os.environ.get("MMEVAL_TEST_GRACE", "4")))


if __name__ == "__main__":
    main()
