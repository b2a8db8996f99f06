"""The coverage report (issue 35, item 4) on torch_cpu: gloo ranks, the owner array's two rows and the sparse gather.

Each rank adds a deal with gaps, repeats within a rank and repeats across ranks; every rank's report must be
the world's truth, counted here from the whole deal (tests/core/sync/test_coverage.py runs the same over the
core's test backend).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Dict, List

import numpy as np
from _torch_workers import WORKER_ENV

from mmeval.testing.ranks import free_port, run_ranks

N = 61


def _deal(rank: int, ws: int, stride: int) -> List[int]:
    mine = [i for i in range(rank, N, ws) if i % 9 != 4] + ([0, 0] if rank == 0 else []) + ([1] if rank else [])
    return [i * stride for i in mine]


def rank_main(rank: int, world_size: int, port: int) -> Dict[str, Any]:
    import torch.distributed as dist

    from mmeval import Accuracy
    from mmeval_torch import TorchCPUDist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, timeout=timedelta(seconds=120)
    )
    try:
        out = {}
        for stride in (1, 1000):
            acc = Accuracy(thrs=None, dist_backend=TorchCPUDist(timeout=120))
            acc.coverage = True
            ids = _deal(rank, world_size, stride)
            acc.add(np.eye(2)[[i % 2 for i in ids]], np.array([i % 2 for i in ids]), indices=ids)
            acc.compute(size=N * stride)
            r = acc.coverage_report
            out[stride] = (r.samples, r.seen, r.repeated.tolist(), r.never_seen_count, r.never_seen[:20].tolist())
        return out
    finally:
        dist.destroy_process_group()


def test_every_rank_reports_the_worlds_coverage():
    ws = 3
    env = {k: v or None for k, v in WORKER_ENV.items()}
    outcomes = run_ranks(rank_main, ws, free_port(), timeout=240, env=env)
    assert all(o.ok for o in outcomes), [str(o) for o in outcomes]
    for stride in (1, 1000):
        every = np.concatenate([_deal(r, ws, stride) for r in range(ws)])
        values, counts = np.unique(every, return_counts=True)
        never = sorted(set(range(0, N * stride, stride)) - set(values.tolist()))
        for o in outcomes:
            samples, seen, repeated, never_count, never_first = o.value[stride]
            assert (samples, seen, repeated) == (every.size, values.size, values[counts > 1].tolist())
            assert repeated == [
                0,
                stride,
            ]  # 0: three times on rank 0; 1: in rank 1's shard, added again by ranks 1 and 2
            assert never_count == N * stride - values.size
            if stride == 1:
                assert never_first == never[:20]
