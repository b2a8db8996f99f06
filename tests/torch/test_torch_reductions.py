"""torch_cpu's native reductions (dist.all_reduce / dist.reduce on gloo) between spawned processes.

The conformance suite (reductions, reduction_mismatch) runs on a gloo group;
large arrays must take the native path (no byte gather), small ones ride in
the slot, and every rank gets the same bits.
"""

from __future__ import annotations

import os
from typing import Any, Dict

import numpy as np
import pytest

from mmeval.testing.ranks import free_port, run_ranks, values

pytest.importorskip("torch")


def _rank_program(rank: int, ws: int, port: int) -> Dict[str, Any]:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=ws)
    from mmeval.core import hooks
    from mmeval.testing.conformance import check_backend
    from mmeval_torch import TorchCPUDist

    backend = TorchCPUDist(timeout=60)
    out: Dict[str, Any] = {"checks": check_backend(backend)}
    byte_calls = []
    for attr in ("_all_gather_bytes", "_gather_bytes"):  # the default payload stage must not run
        original = getattr(backend, attr)
        setattr(backend, attr, lambda call, _o=original, _a=attr: byte_calls.append(_a) or _o(call))
    stats = hooks.enable_comm_stats(print_at_exit=False)
    stats.reset()
    big = np.arange(100_000, dtype=np.float64) / 7.0 + rank
    got = backend.all_reduce(big)
    red = backend.reduce(np.full((300, 10), rank, np.int64), op="max", dst=ws - 1)
    out["sum"] = got.tobytes()
    out["sum_close"] = bool(np.allclose(got, sum(np.arange(100_000) / 7.0 + r for r in range(ws))))
    out["max"] = None if red is None else red.tolist()
    out["byte_calls"] = byte_calls
    out["stats"] = stats.rows()
    sub = TorchCPUDist(dist.new_group(list(range(ws))), timeout=60)  # a process group other than the default
    out["subgroup"] = sub.all_reduce(np.full(1000, rank + 1, np.int32), op="min").tolist()[:3]
    dist.destroy_process_group()
    return out


@pytest.mark.parametrize("ws", [2, 3])
def test_torch_cpu_native_reductions(ws: int) -> None:
    results = dict(enumerate(values(run_ranks(_rank_program, ws, free_port(), timeout=300))))
    for rank, out in results.items():
        assert "reductions" in out["checks"] and "reduction_mismatch" in out["checks"], out["checks"]
        assert out["byte_calls"] == [], "a large reduction went through the byte gather, not dist.all_reduce"
        assert out["sum_close"] and out["sum"] == results[0]["sum"], "the float all-reduce differs across ranks"
        assert out["max"] == ([[ws - 1] * 10] * 300 if rank == ws - 1 else None)
        assert out["subgroup"] == [1, 1, 1]
        ops = {row["op"]: row for row in out["stats"]}
        assert ops["all_reduce"]["calls"] == 1 and ops["all_reduce"]["bytes_sent"] >= 800_000 * (ws - 1) // ws
