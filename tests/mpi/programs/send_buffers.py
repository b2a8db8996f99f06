"""Issue 20 item 10: a large send-only buffer is not kept in the buffer pool once its collective is done.

``mpiexec -n 2 python send_buffers.py``: every rank gathers, then broadcasts
from rank 1, an object of two 40 MiB arrays (its frame spans two segments, so
the sender copies it whole into one staging buffer). Afterwards a rank that
only sent holds no pooled buffer (``SEND_KEEP_MAX``), and neither does the
root: a large gather receives each block into a buffer of its own (issue 33).
"""

from __future__ import annotations

import gc

import numpy as np
from _harness import Checker, report


def main() -> None:
    import mmeval_mpi4py.backend as backend
    from mmeval_mpi4py import MPI4PyDist

    c = Checker()
    b = MPI4PyDist()
    rank = b.rank
    obj = {"a": np.full(40 << 20, rank, np.uint8), "b": np.full(40 << 20, 7, np.uint8)}
    got = b.gather_object(obj, dst=0)
    if rank == 0:
        assert got is not None
        c.check("gathered", [int(o["a"][-1]) for o in got] == [0, 1])
        # a large gather receives each peer's block into a buffer of its own, freed with what was decoded
        # over it (issue 33 item 5): nothing pooled on the root either
        c.equal("root keeps no large gather buffer pooled", backend._POOL.nbytes, 0)
    else:
        c.equal("sender keeps nothing pooled after the gather", backend._POOL.nbytes, 0)
    del got
    gc.collect()
    backend._POOL.clear()
    out = b.broadcast_object(obj if rank == 1 else None, src=1)
    c.check("broadcast", int(out["a"][0]) == 1)
    if rank == 1:
        c.equal("broadcast root keeps nothing pooled", backend._POOL.nbytes, 0)
    report(rank, c)


if __name__ == "__main__":
    main()
