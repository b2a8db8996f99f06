"""A LightningModule logging mmeval metrics with ``self.log``, under Lightning's own 2-process DDP on CPU (gloo).

Usage: ``python lightning_program.py OUT_DIR DEVICES``. Lightning starts the other processes itself
(``strategy="ddp"`` re-runs this script) and deals the validation set with its padded
``DistributedSampler`` (``N`` not a multiple of the world). Two metrics are logged each epoch:
Accuracy with ``size=len(dataset)`` and AveragePrecision with ``indices=``. Each rank writes
``OUT_DIR/rank<R>.json``: the logged values of both epochs, and the same metrics in one process.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from mmeval import Accuracy, AveragePrecision
from mmeval.integrations.lightning import LightningMetric

N, C = 45, 4


def data() -> TensorDataset:
    gen = torch.Generator().manual_seed(35)
    x = torch.randn(N, C, generator=gen)
    y = torch.randint(0, C, (N,), generator=gen)
    x[torch.arange(N), y] += 0.8
    return TensorDataset(torch.arange(N), x, y)


class Model(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(1))
        self.top1 = LightningMetric(Accuracy(topk=1, thrs=None), key="top1", size=N)
        self.map = LightningMetric(AveragePrecision(), key="mAP")
        self.epochs: List[Dict[str, float]] = []
        self.seen = 0

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        idx, x, y = batch
        scores = torch.softmax(x * self.scale, dim=1)
        self.top1.update(scores, y)
        self.map.update(scores, torch.nn.functional.one_hot(y, C), indices=idx)
        self.seen += len(idx)
        self.log("val/top1", self.top1, on_epoch=True)
        self.log("val/mAP", self.map, on_epoch=True)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.0)


def main(out_dir: str, devices: int) -> None:
    model = Model()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=devices,
        strategy="ddp" if devices > 1 else "auto",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    loader = DataLoader(data(), batch_size=4)
    epochs = []
    for _ in range(2):  # the second epoch must count its own samples only (Lightning resets the metric)
        trainer.validate(model, loader, verbose=False)
        epochs.append({k: float(v) for k, v in trainer.callback_metrics.items()})
    _, x, y = data().tensors
    scores = torch.softmax(x, dim=1).numpy()
    alone = {
        "val/top1": Accuracy(topk=1, thrs=None)(scores, y.numpy())["top1"],
        "val/mAP": AveragePrecision()(scores, np.eye(C, dtype=np.int64)[y.numpy()])["mAP"],
    }
    report = {
        "world": [trainer.global_rank, trainer.world_size],
        "backend": model.top1.metric.dist_comm.name,
        "seen": model.seen,
        "epochs": epochs,
        "alone": alone,
    }
    with open(os.path.join(out_dir, f"rank{trainer.global_rank}.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
