"""all_gather of a 64 MB numpy payload at world size 2: mmeval's mpi4py backend vs mpi4py vs raw MPI.

Run (it relaunches itself under the ``mpiexec`` next to this Python when not
started by a launcher)::

    MALLOC_MMAP_THRESHOLD_=65536 mpiexec -n 2 python benchmarks/bench_mpi_allgather.py
    python benchmarks/bench_mpi_allgather.py            # same, launches mpiexec -n 2 itself

Methods, interleaved in one run (each iteration runs every method once, in a
rotating order), each preceded by a barrier:

* ``mmeval MPI4PyDist.all_gather_object`` -- ``{"data": array, "rank": r}``;
* ``mpi4py comm.allgather`` -- the same dict, mpi4py's pickle-based allgather;
* ``raw Allgatherv (prealloc)`` -- the array's bytes, into a receive buffer
  allocated once (the floor: no serialization, no allocation);
* ``raw Allgatherv (alloc)`` -- the same, allocating the receive buffer each time;
* ``raw Iallgatherv + Test loop (prealloc)`` -- the non-blocking call this
  backend uses, polled in a tight loop (MPICH picks other algorithms for the
  blocking and the non-blocking call, so both floors are shown).

A time is the slowest rank's (MAX over ranks) per iteration; the table shows
medians and ratios to ``raw Allgatherv (prealloc)``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List

import numpy as np

MB = 2**20


def _relaunch(argv: List[str]) -> int:
    """Start this script under ``mpiexec -n 2`` with the allocator pinned; return its exit code."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MMEVAL_BENCH_CHILD="1")
    bindir = os.path.dirname(sys.executable)
    mpiexec = shutil.which("mpiexec", path=bindir + os.pathsep + env.get("PATH", ""))
    if mpiexec is None:
        print("mpiexec not found next to this Python or on PATH (pip install mpich)", file=sys.stderr)
        return 2
    cmd = [mpiexec, "-n", "2", sys.executable, os.path.abspath(__file__), *argv]
    print("$ MALLOC_MMAP_THRESHOLD_=65536 " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, env=env, timeout=1800).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="payload size in MiB (default 64)")
    parser.add_argument("--iters", type=int, default=21, help="timed iterations per method")
    parser.add_argument("--warmup", type=int, default=3)
    args, _ = parser.parse_known_args()

    if "PMI_SIZE" not in os.environ and "OMPI_COMM_WORLD_SIZE" not in os.environ and not os.environ.get(
        "MMEVAL_BENCH_CHILD"
    ):
        return _relaunch(sys.argv[1:])

    from mpi4py import MPI

    from mmeval_mpi4py import MPI4PyDist

    comm = MPI.COMM_WORLD
    rank, ws = comm.Get_rank(), comm.Get_size()
    nbytes = args.mb * MB
    data = np.random.default_rng(rank).integers(0, 255, nbytes, dtype=np.uint8)
    payload = {"data": data, "rank": rank}
    backend = MPI4PyDist(comm, timeout=600)
    counts = [nbytes] * ws
    displs = [r * nbytes for r in range(ws)]
    prealloc = np.empty(nbytes * ws, dtype=np.uint8)

    def ours() -> Any:
        return backend.all_gather_object(payload)

    def plain() -> Any:
        return comm.allgather(payload)

    def raw_prealloc() -> Any:
        comm.Allgatherv([data, MPI.BYTE], [prealloc, (counts, displs), MPI.BYTE])
        return prealloc

    def raw_nonblocking() -> Any:
        req = comm.Iallgatherv([data, MPI.BYTE], [prealloc, (counts, displs), MPI.BYTE])
        while not req.Test():
            pass
        return prealloc

    def raw_alloc() -> Any:
        recv = np.empty(nbytes * ws, dtype=np.uint8)
        comm.Allgatherv([data, MPI.BYTE], [recv, (counts, displs), MPI.BYTE])
        return recv

    methods: Dict[str, Callable[[], Any]] = {
        "mmeval MPI4PyDist.all_gather_object": ours,
        "mpi4py comm.allgather": plain,
        "raw Allgatherv (prealloc)": raw_prealloc,
        "raw Allgatherv (alloc)": raw_alloc,
        "raw Iallgatherv + Test loop (prealloc)": raw_nonblocking,
    }
    names = list(methods)

    # correctness first
    expect = [np.random.default_rng(r).integers(0, 255, nbytes, dtype=np.uint8) for r in range(ws)]
    for name in ("mmeval MPI4PyDist.all_gather_object", "mpi4py comm.allgather"):
        got = methods[name]()
        assert [g["rank"] for g in got] == list(range(ws)), name
        assert all(np.array_equal(g["data"], e) for g, e in zip(got, expect)), name
        del got
    del expect

    times: Dict[str, List[float]] = {n: [] for n in names}
    for it in range(args.warmup + args.iters):
        order = names[it % len(names) :] + names[: it % len(names)]
        for name in order:
            comm.Barrier()
            t0 = time.perf_counter()
            out = methods[name]()
            dt = time.perf_counter() - t0
            del out
            worst = comm.allreduce(dt, op=MPI.MAX)
            if it >= args.warmup:
                times[name].append(worst)

    if rank == 0:
        base = float(np.median(times["raw Allgatherv (prealloc)"]))
        nb = float(np.median(times["raw Iallgatherv + Test loop (prealloc)"]))
        print(
            f"\nall_gather of a {args.mb} MiB numpy payload, world size {ws}, {args.iters} iterations "
            f"(median of per-iteration max over ranks); {MPI.Get_library_version().splitlines()[0].strip()}, "
            f"mpi4py {__import__('mpi4py').__version__}, MALLOC_MMAP_THRESHOLD_="
            f"{os.environ.get('MALLOC_MMAP_THRESHOLD_', 'unset')}\n"
        )
        print("| method | median ms | min ms | vs raw Allgatherv (prealloc) | vs raw Iallgatherv (prealloc) |")
        print("|---|---|---|---|---|")
        for name in names:
            med = float(np.median(times[name]))
            print(f"| {name} | {med * 1e3:.1f} | {min(times[name]) * 1e3:.1f} | {med / base:.2f}x | {med / nb:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
