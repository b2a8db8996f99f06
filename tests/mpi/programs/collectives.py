"""Every object collective of MPI4PyDist on real MPI ranks, with results checked on every rank.

Run as ``mpiexec -n N python collectives.py [--big]`` (N >= 2): rank/size,
all_gather / gather / broadcast / barrier of nested objects with numpy arrays,
empty and 64 MB payloads, uneven sizes, the derived-datatype path for blocks
over the MPI count limit (forced with a tiny limit), zero-copy and alignment of
received arrays, a communicator shared by two backend objects, and a
``COMM_WORLD.Split`` group.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict

import numpy as np
from _harness import Checker, report

MB = 2**20


def obj_of(rank: int) -> Dict[str, Any]:
    """A nested object, different on every rank (some ranks carry an empty array)."""
    return {
        "rank": rank,
        "arr": np.arange(rank * 1000, dtype=np.float32).reshape(-1, 10) if rank else np.empty((0, 10), np.float32),
        "nested": [(rank, "x" * rank), {"k": np.full((2, 3), rank, dtype=np.int64)}, None],
        "blob": bytes(range(rank % 256)) * 100,
    }


def same(a: Any, b: Any) -> bool:
    """Deep equality for the objects above (numpy arrays compared by dtype, shape and values)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(np.array_equal(a, b))
        )
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def big_of(rank: int, nbytes: int) -> np.ndarray:
    arr = np.empty(nbytes, dtype=np.uint8)
    arr[:] = (np.arange(nbytes, dtype=np.int64) * (rank + 3) % 251).astype(np.uint8)
    return arr


def main() -> None:

    from mpi4py import MPI

    from mmeval.core.errors import CollectiveMismatchError
    from mmeval_mpi4py import MPI4PyDist

    c = Checker()
    world = MPI.COMM_WORLD
    r, ws = world.Get_rank(), world.Get_size()
    b = MPI4PyDist()
    c.info["mpi"] = MPI.Get_library_version().splitlines()[0].strip()

    # rank / size
    c.equal("rank", b.rank, r)
    c.equal("world_size", b.world_size, ws)
    c.equal("launcher rank", b.rank, int(os.environ.get("PMI_RANK", r)))
    c.check("is_initialized", b.is_initialized)
    c.check("detect", MPI4PyDist.detect())
    c.equal("timeout from env", b.timeout, float(os.environ.get("MMEVAL_MPI4PY_TIMEOUT", "1800")))

    def objects() -> None:
        got = b.all_gather_object(obj_of(r))
        c.equal("all_gather length", len(got), ws)
        c.check("all_gather values", all(same(got[i], obj_of(i)) for i in range(ws)))
        for src in range(ws):
            mine = obj_of(r) if r == src else None
            out = b.broadcast_object(mine, src=src)
            c.check(f"broadcast from {src}", same(out, obj_of(src)))
            if r == src:
                c.check(f"broadcast from {src}: source gets its object back", out is mine)
        for dst in range(ws):
            out = b.gather_object(obj_of(r), dst=dst)
            if r == dst:
                c.check(f"gather to {dst}", out is not None and all(same(out[i], obj_of(i)) for i in range(ws)))
            else:
                c.check(f"gather to {dst}: None elsewhere", out is None, repr(out)[:80])
        b.barrier()
        c.check("barrier returns None", b.barrier() is None)

    def empty() -> None:
        for value in (None, [], {}, b"", "", np.empty(0, np.uint8), np.empty((0, 3), np.float64)):
            got = b.all_gather_object(value)
            c.check(f"all_gather {value!r}", len(got) == ws and all(same(g, value) for g in got))
            c.check(f"broadcast {value!r}", same(b.broadcast_object(value if r == 0 else None, src=0), value))
            out = b.gather_object(value, dst=ws - 1)
            c.check(f"gather {value!r}", (out is None) if r != ws - 1 else all(same(g, value) for g in out or [1]))

    def large() -> None:
        n = 64 * MB
        mine = {"rank": r, "data": big_of(r, n)}
        got = b.all_gather_object(mine)
        c.check(
            "64MB all_gather",
            all(g["rank"] == i and np.array_equal(g["data"], big_of(i, n)) for i, g in enumerate(got)),
        )
        data = got[(r + 1) % ws]["data"]
        c.check("received arrays are views of the receive buffer", not data.flags.owndata)
        c.equal("received arrays are 64-byte aligned", data.ctypes.data % 64, 0)
        del got, data
        out = b.gather_object(mine, dst=0)
        if r == 0:
            c.check(
                "64MB gather",
                out is not None and all(np.array_equal(g["data"], big_of(i, n)) for i, g in enumerate(out)),
            )
        del out
        out = b.broadcast_object(mine if r == ws - 1 else None, src=ws - 1)
        c.check("64MB broadcast", np.array_equal(out["data"], big_of(ws - 1, n)))
        del out, mine
        # Large broadcasts and gathers go in two parts; the second is sent from the caller's array only when one
        # segment of the frame holds it: also frames of two arrays, of in-band bytes, of a big pickle stream.
        shapes = {
            "two arrays": [big_of(1, 3 * MB), big_of(2, 2 * MB)],
            "in-band bytes": {"blob": bytes(big_of(3, 2 * MB))},
            "columns": list(range(300_000)),
            "pickle stream": [f"s{i}" for i in range(200_000)],
            "non-contiguous": big_of(4, 4 * MB)[::2],
            "exactly 1 MiB + 64 KiB": big_of(5, MB + 64 * 1024 - 200),
        }
        for label, value in shapes.items():
            out = b.broadcast_object(value if r == 0 else None, src=0)
            c.check(f"split broadcast, {label}", same(out, value))
            # gathers split the same way; rank 0 sends a small frame (its whole block fits in the first part)
            out = b.gather_object(value if r else "small", dst=ws - 1)
            if r == ws - 1:
                c.check(
                    f"split gather, {label}",
                    out is not None and out[0] == "small" and all(same(g, value) for g in out[1:]),
                )
        del out
        # Results still held must survive later collectives (buffers are reused only when free).
        held = b.all_gather_object({"data": big_of(r, 8 * MB)})
        held_b = b.broadcast_object(big_of(0, 4 * MB) if r == 0 else None, src=0)
        for k in range(3):
            again = b.all_gather_object({"data": big_of(r + 10 + k, 8 * MB)})
            c.check(
                f"fresh result {k}",
                all(np.array_equal(g["data"], big_of(i + 10 + k, 8 * MB)) for i, g in enumerate(again)),
            )
            b.broadcast_object(big_of(9, 4 * MB) if r == 0 else None, src=0)
            del again
        c.check(
            "held all_gather result intact",
            all(np.array_equal(g["data"], big_of(i, 8 * MB)) for i, g in enumerate(held)),
        )
        c.check("held broadcast result intact", np.array_equal(held_b, big_of(0, 4 * MB)))
        del held, held_b
        # uneven: rank 0 stays inline (small), the others grow
        sizes = [100 + 1_000_003 * i for i in range(ws)]
        got = b.all_gather_object(big_of(r, sizes[r]))
        c.check("uneven all_gather", all(np.array_equal(g, big_of(i, sizes[i])) for i, g in enumerate(got)))
        out = b.gather_object(big_of(r, sizes[r]), dst=ws - 1)
        if r == ws - 1:
            c.check("uneven gather", all(np.array_equal(g, big_of(i, sizes[i])) for i, g in enumerate(out or [])))

    def datatype_path() -> None:
        # Blocks over the MPI count limit, counted in a contiguous derived datatype.
        os.environ["MMEVAL_MPI4PY_LARGE_COUNT"] = "datatype"
        try:
            d = MPI4PyDist(timeout=b.timeout)
        finally:
            del os.environ["MMEVAL_MPI4PY_LARGE_COUNT"]
        d.max_count = 5000  # blocks of ~1 MB need units of 256 bytes
        sizes = [4097 + 333_333 * (i + 1) for i in range(ws)]
        got = d.all_gather_object(big_of(r, sizes[r]))
        c.check("datatype all_gather", all(np.array_equal(g, big_of(i, sizes[i])) for i, g in enumerate(got)))
        out = d.gather_object(big_of(r, sizes[r]), dst=1)
        if r == 1:
            c.check("datatype gather", all(np.array_equal(g, big_of(i, sizes[i])) for i, g in enumerate(out or [])))
        out = d.broadcast_object(big_of(r, sizes[r]) if r == 0 else None, src=0)
        c.check("datatype broadcast", np.array_equal(out, big_of(0, sizes[0])))
        c.check("a derived datatype was used", any(unit > 1 for unit in d._types), sorted(d._types))

    def shared_sequence() -> None:
        # Two backend objects over one communicator count collectives together:
        # rank 0 alternates objects, the others use one, and the headers agree.
        other = MPI4PyDist(world)
        first = b.all_gather_object(r)
        second = (other if r == 0 else b).all_gather_object(r * 10)
        c.equal("shared sequence", (first, second), (list(range(ws)), [10 * i for i in range(ws)]))

    def split() -> None:
        color = r % 2
        sub = world.Split(color, key=-r)  # reversed order: sub ranks differ from world ranks
        members = [i for i in range(ws) if i % 2 == color]
        g = MPI4PyDist(sub, timeout=b.timeout)
        c.equal("split rank", g.rank, sorted(members, reverse=True).index(r))
        c.equal("split size", g.world_size, len(members))
        got = g.all_gather_object(r)
        c.equal("split all_gather", got, sorted(members, reverse=True))
        out = g.broadcast_object(f"from {r}" if g.rank == 0 else None, src=0)
        c.equal("split broadcast", out, f"from {max(members)}")
        c.equal("world still in step", b.all_gather_object(r), list(range(ws)))
        sub.Free()
        # a rank left out of a split gets COMM_NULL: refused with a clear error
        only_zero = world.Split(0 if r == 0 else MPI.UNDEFINED, key=0)
        if r == 0:
            c.equal("single-member group", MPI4PyDist(only_zero).all_gather_object("solo"), ["solo"])
            only_zero.Free()
        else:
            c.raises("COMM_NULL refused", ValueError, lambda: MPI4PyDist(only_zero), "COMM_NULL")
        # an intercommunicator is refused: the collectives assume one group
        local = world.Split(r % 2, key=r)
        inter = local.Create_intercomm(0, world, 1 - r % 2, tag=7)
        c.raises("intercommunicator refused", TypeError, lambda: MPI4PyDist(inter), "intracommunicator")
        inter.Free()
        local.Free()

    def mismatch() -> None:
        # Different collectives on different ranks: every rank raises, and the group stays usable.
        if r == 0:
            c.raises(
                "mismatch",
                CollectiveMismatchError,
                lambda: b.broadcast_object("x", src=0),
                "mpi4py",
                "broadcast_object",
                "all_gather_object",
            )
        else:
            c.raises(
                "mismatch",
                CollectiveMismatchError,
                lambda: b.all_gather_object("x"),
                "mpi4py",
                "broadcast_object",
                "all_gather_object",
            )
        c.raises(
            "dst mismatch",
            CollectiveMismatchError,
            lambda: b.gather_object(r, dst=0 if r == 0 else 1),
            "gather_object",
            "dst=0",
            "dst=1",
        )
        c.equal("usable after a mismatch", b.all_gather_object(r), list(range(ws)))

    for name, fn in [
        ("objects", objects),
        ("empty", empty),
        ("large", large),
        ("datatype", datatype_path),
        ("shared sequence", shared_sequence),
        ("split", split),
        ("mismatch", mismatch),
    ]:
        c.guard(name, fn)
    if "--big" in sys.argv:
        c.guard("over 2 GiB", lambda: over_2gib(b, c, r, ws))
    report(r, c, world_size=ws)


def over_2gib(b: Any, c: Checker, r: int, ws: int) -> None:
    """A real transfer of a block over 2**31 bytes (opt-in: needs ~3 * 2.1 GB per rank)."""
    n = 2**31 + 4099
    arr = np.full(n, r + 1, dtype=np.uint8) if r == 0 else None
    out = b.broadcast_object(arr, src=0)
    c.check("2 GiB broadcast", out.nbytes == n and int(out[0]) == 1 and int(out[-1]) == 1)
    del out, arr
    got = b.gather_object(np.full(n if r == 1 else 10, r + 1, dtype=np.uint8), dst=0)
    if r == 0:
        c.check("2 GiB gather", got is not None and got[1].nbytes == n and int(got[1][-1]) == 2)
    c.info["large_count"] = {"mode": b.large_count, "big_count": b._uses_big_count(), "units": sorted(b._types)}
    if b.large_count == "datatype":
        c.check("a derived datatype carried the 2 GiB block", 2 in b._types, sorted(b._types))


if __name__ == "__main__":
    main()
