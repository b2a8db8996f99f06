"""One rank of the Horovod fault tests: the last rank SIGKILLs itself inside a collective.

    horovodrun -np 3 --gloo ... python tests/horovod/hvd_kill_program.py torch|tensorflow OUT_DIR OP

Every rank joins, runs a barrier, then calls ``OP`` (``all_gather_object``,
``gather_object`` to rank 0, or ``broadcast_object`` from the victim) on a
1 MiB object. The last rank, the victim, has passed the header exchange when
it sends ``SIGKILL`` to itself in the payload transfer, after writing the
time to ``OUT_DIR/rank<R>.json``. The others write the error they raised --
or, if their part of the operation was complete, the error of their next
collective (a barrier) -- with its time, at once.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

import numpy as np

FLAVOUR, OUT_DIR, OP = sys.argv[1], sys.argv[2], sys.argv[3]
#: the backend's collective timeout
TIMEOUT = 10.0

if FLAVOUR == "torch":
    import horovod.torch as hvd

    from mmeval_horovod import TorchHorovodDist as Backend
elif FLAVOUR == "tensorflow":
    import horovod.tensorflow as hvd

    from mmeval_horovod import TFHorovodDist as Backend
else:
    raise SystemExit(f"unknown flavour {FLAVOUR!r}: use torch or tensorflow")

PRIMITIVE = {
    "all_gather_object": "_all_gather_bytes",
    "gather_object": "_gather_bytes",
    "broadcast_object": "_broadcast_bytes",
}


def main() -> None:
    hvd.init()
    b = Backend(timeout=TIMEOUT)
    rank, victim = b.rank, b.world_size - 1

    def write(**fields: Any) -> None:
        with open(os.path.join(OUT_DIR, f"rank{rank}.json"), "w") as f:
            json.dump({"pid": os.getpid(), **fields}, f)

    b.barrier()
    obj = {"rank": rank, "data": np.full(1 << 20, rank, dtype=np.uint8)}  # 1 MiB: not inline in the header
    if rank == victim:

        def die(*args: Any, **kwargs: Any) -> Any:
            write(killed_at=time.monotonic())
            os.kill(os.getpid(), signal.SIGKILL)

        setattr(b, PRIMITIVE[OP], die)

    def call(name: str) -> None:
        if name == "all_gather_object":
            b.all_gather_object(obj)
        elif name == "gather_object":
            b.gather_object(obj, dst=0)
        elif name == "broadcast_object":
            b.broadcast_object(obj if rank == victim else None, src=victim)
        else:
            b.barrier()

    for name in (OP, "barrier"):
        try:
            call(name)
        except Exception as exc:
            write(
                raised_in=name,
                type=type(exc).__name__,
                mro=[c.__name__ for c in type(exc).__mro__],
                message=str(exc),
                raised_at=time.monotonic(),
            )
            break
    else:
        write(raised_in=None)
    time.sleep(3)  # let the other survivors report before this process ends


if __name__ == "__main__":
    main()
