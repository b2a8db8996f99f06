"""Issue 33 item 5: rank 0's peak extra memory in a per-sample compute() (its first, in a fresh process).

``mpiexec -n 3 python rank0_memory.py ROWS MODE``: every rank runs
:func:`mmeval.testing.rank0_memory.measure_rank0_memory` (ROWS rows of 88 bytes
per rank, rank 0's ``VmHWM`` over ``compute()``, the result checked against the
same rows put in MODE's order there). Rank 0 must hold about one output plus
what it has not copied yet: at most :data:`LIMIT` times the world's results (it
held every received block and the output at once: 1 + (ws-1)/ws, 1.67x on 3
ranks, plus a pooled receive buffer, before).
"""

from __future__ import annotations

import sys

from _harness import Checker, report

#: rank 0's peak extra memory in compute() / the world's results
LIMIT = 1.35


def main() -> None:
    from mmeval.testing.rank0_memory import measure_rank0_memory
    from mmeval_mpi4py import MPI4PyDist

    rows, mode = int(sys.argv[1]), sys.argv[2]
    c = Checker()
    b = MPI4PyDist()
    seen = measure_rank0_memory(b, rows, mode)
    c.check("the results, in dataset order", seen["result_ok"], f"compute() on rank {seen['rank']} in mode {mode!r}")
    if seen["rank"] == 0:
        ratio = seen["ratio"]
        c.info["ratio"] = ratio
        c.check(f"rank 0's peak extra memory <= {LIMIT}x the world's results", ratio <= LIMIT, f"{ratio:.2f}x")
    report(seen["rank"], c)


if __name__ == "__main__":
    main()
