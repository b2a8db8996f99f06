"""One rank under ``mpiexec -n N``: torchmetrics metrics synced through mmeval's mpi4py backend.

Usage: ``mpiexec -n N python torchmetrics_program.py OUT_DIR``. torch.distributed is never initialised:
torchmetrics' own sync would see one process; with ``sync_kwargs("mpi4py")`` every state goes through
MPI. Uneven shards (rank r holds every N-th sample from r). Each rank writes ``OUT_DIR/rank<R>.json``:
the synced values, the one-process values over the whole dataset, what moved (comm stats).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict

import torch
import torch.distributed
from torchmetrics import MeanMetric
from torchmetrics.classification import BinaryAUROC, MulticlassAccuracy

from mmeval.core.dist import get_dist_backend
from mmeval.core.hooks import enable_comm_stats
from mmeval.integrations.torchmetrics import sync_kwargs

N, C = 23, 5


def metrics(**kwargs: Any) -> Dict[str, Any]:
    return {
        "accuracy": MulticlassAccuracy(num_classes=C, average="macro", **kwargs),  # sum states
        "auroc": BinaryAUROC(thresholds=None, **kwargs),  # list states: each rank's own length
        "mean_bf16": MeanMetric(**kwargs).to(torch.bfloat16),  # a bfloat16 state, moved bit for bit
    }


def feed(named: Dict[str, Any], rows: Any, data: Any) -> Dict[str, float]:
    preds, target, probs, binary, values = data
    for _ in range(2):  # two updates: list states hold two tensors each
        named["accuracy"].update(preds[rows], target[rows])
        named["auroc"].update(probs[rows], binary[rows])
        named["mean_bf16"].update(values[rows])
    return {name: float(m.compute()) for name, m in named.items()}


def main(out_dir: str) -> None:
    backend = get_dist_backend("mpi4py")
    rank, ws = backend.rank, backend.world_size
    gen = torch.Generator().manual_seed(35)
    data = (
        torch.randn(N, C, generator=gen),
        torch.randint(0, C, (N,), generator=gen),
        torch.rand(N, generator=gen),
        torch.randint(0, 2, (N,), generator=gen),
        torch.randn(N, generator=gen).to(torch.bfloat16),
    )
    stats = enable_comm_stats(print_at_exit=False)
    synced = feed(metrics(**sync_kwargs("mpi4py")), torch.arange(rank, N, ws), data)
    report = {
        "world": [rank, ws],
        "torch_distributed": torch.distributed.is_initialized(),
        "synced": synced,
        "alone": feed(metrics(), torch.arange(N), data),
        "collectives": stats.rows(),
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
