"""One rank of tests/torch/test_torch_leave_notice.py: ``python leave_program.py FAULT`` (env:// rendezvous).

Every rank adds its samples to an Accuracy. Rank 0 then calls ``compute()``;
rank 1 leaves instead, by ``FAULT``: ``raise`` (an uncaught ValueError outside
any collective), ``exit`` (``sys.exit(3)``), ``normal`` (the end of the
script, no ``compute()``) or ``sigterm`` (a SIGTERM to itself). Each rank
prints one ``LEAVE-REPORT {json}`` line: rank 0 what ``compute()`` raised and
when (wall clock), rank 1 when it left.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import numpy as np
import torch.distributed as dist


def say(**fields: object) -> None:
    sys.stdout.write("LEAVE-REPORT " + json.dumps(fields) + "\n")
    sys.stdout.flush()


def main() -> None:
    from mmeval import Accuracy

    fault = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    metric = Accuracy(dist_backend="torch_cpu")
    metric.add(np.eye(4)[[0, 1, 2, 3]], np.array([0, 1, 2, 2]))
    if rank == 1:
        time.sleep(0.5)  # rank 0 is waiting in compute() by now
        say(rank=1, left=time.time())
        if fault == "raise":
            raise ValueError("boom on rank 1 outside any collective")
        if fault == "exit":
            sys.exit(3)
        if fault == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
        return  # "normal": the end of the script without compute()
    start = time.time()
    try:
        metric.compute(size=8)
    except Exception as exc:
        say(rank=0, raised=time.time(), start=start, type=type(exc).__name__, message=str(exc))
    else:
        say(rank=0, raised=None, start=start, type=None, message="compute() returned")


if __name__ == "__main__":
    main()
