"""mpi4py's native reductions: Iallreduce / Ireduce for arrays too large for the slot, the same bits on every rank.

Run as ``mpiexec -n N python reductions.py``.
"""

from __future__ import annotations

from _harness import Checker, launcher_rank, report


def main() -> None:
    checker = Checker()
    rank = launcher_rank()

    def run() -> None:
        import numpy as np
        from mpi4py import MPI

        from mmeval.testing.conformance import check_backend
        from mmeval_mpi4py import MPI4PyDist

        backend = MPI4PyDist(timeout=120)
        ws, me = backend.world_size, backend.rank
        done = check_backend(backend, faults=True)
        checker.check("reductions in the conformance suite", {"reductions", "reduction_mismatch"} <= set(done), done)
        byte_calls = []
        for attr in ("_all_gather_bytes", "_gather_bytes"):  # the default payload stage must not run
            original = getattr(backend, attr)
            setattr(backend, attr, lambda call, _o=original, _a=attr: byte_calls.append(_a) or _o(call))
        big = np.arange(100_000, dtype=np.float64) / 7.0 + me
        got = backend.all_reduce(big)
        want = sum(np.arange(100_000) / 7.0 + r for r in range(ws))
        checker.check("float sum close to the exact one", bool(np.allclose(got, want)))
        everyone = MPI.COMM_WORLD.allgather(got.tobytes())
        checker.check("same bits on every rank", all(b == everyone[0] for b in everyone))
        red = backend.reduce(np.full((300, 10), me, np.int64), op="min", dst=ws - 1)
        checker.equal(
            "reduce to the last rank", None if red is None else red.tolist(), [[0] * 10] * 300 if me == ws - 1 else None
        )
        sub = MPI4PyDist(MPI.COMM_WORLD.Split(me % 2, me), timeout=60)
        out = sub.all_reduce(np.full(1000, me, np.int32), op="max")
        checker.equal("a split communicator", int(out[0]), max(r for r in range(ws) if r % 2 == me % 2))
        checker.equal("native path, no byte gather", byte_calls, [])
        backend.barrier()

    checker.guard("reductions", run)
    report(rank, checker)


if __name__ == "__main__":
    main()
