"""One rank of a real ``accelerate launch``: mmeval metrics over accelerate's prepared DataLoader.

Usage: ``accelerate launch --cpu --num_processes N accelerate_program.py OUT_DIR``. Accelerate deals
whole batches round-robin and pads the last round by wrapping to the dataset's start, so ``size=``
cannot drop the padding exactly; ``indices=`` can. Each rank writes ``OUT_DIR/rank<R>.json``: the
metrics computed with ``indices=`` (Accuracy on the state path, AveragePrecision per sample), Accuracy
computed with ``size=`` and the ShardingWarnings it raised, the backend picked, the same two metrics
in one ``MetricCollection`` (each fed its own inputs, one exchange), and the single-process results over
the whole dataset. The indices come from the accelerate adapter's ``IndexedDataset``.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any, Dict

import numpy as np
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

from mmeval import Accuracy, AveragePrecision, MetricCollection
from mmeval.core.hooks import enable_comm_stats
from mmeval.core.sample_index import ShardingWarning
from mmeval.integrations.accelerate import IndexedDataset, backend_for

N = 1003


def main(out_dir: str) -> None:
    # accelerate's shuffled sampler draws from torch's global generator, which rank 0 seeds from the
    # clock unless seeded here: a fixed order makes the wrapped padding the same samples on every run
    # (with a clock-seeded order, some runs padded 5 samples whose hits equal those of the 5 that size=
    # drops, and the "size alone is wrong" check failed by coincidence)
    torch.manual_seed(1003)
    accelerator = Accelerator(cpu=True)
    rng = np.random.default_rng(11)
    scores = rng.random((N, 5)).astype(np.float32)
    labels = rng.integers(0, 5, N)
    ml_scores = rng.random((N, 4)).astype(np.float32)
    ml_labels = (rng.random((N, 4)) < 0.3).astype(np.int64)
    ml_labels[np.arange(N), rng.integers(0, 4, N)] = 1  # every sample has a positive label
    data = TensorDataset(
        torch.from_numpy(scores),
        torch.from_numpy(labels),
        torch.from_numpy(ml_scores),
        torch.from_numpy(ml_labels),
    )
    loader = accelerator.prepare(DataLoader(IndexedDataset(data), batch_size=16, shuffle=True))

    acc, ap, acc_sized = Accuracy(topk=(1, 3)), AveragePrecision(), Accuracy(topk=(1, 3))
    backend = backend_for(accelerator)
    both = MetricCollection(
        {"acc": Accuracy(topk=(1, 3), dist_backend=backend), "ap": AveragePrecision(dist_backend=backend)}
    )
    seen = 0
    for idx, (s, lab, ms, ml) in loader:
        acc.add(s, lab, indices=idx)
        ap.add(ms, ml, indices=idx)
        acc_sized.add(s, lab)
        both["acc"].add(s, lab, indices=idx)
        both["ap"].add(ms, ml, indices=idx)
        seen += len(idx)
    stats = enable_comm_stats(print_at_exit=False)
    stats.reset()
    together = both.compute()
    collection_calls = stats.calls
    # batch sharding repeats whole batches: size= alone cannot say which samples count, and the ranks hold more
    # samples than size= can explain -- refused on every rank, naming indices= (never a number)
    sized: Any = None
    sized_error = ""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        try:
            sized = acc_sized.compute(size=N)
        except ValueError as exc:
            sized_error = str(exc)
    report: Dict[str, Any] = {
        "world_size": accelerator.num_processes,
        "backend": acc.dist_comm.name,
        "seen": seen,
        "accuracy": acc.compute(),
        "average_precision": ap.compute(),
        "accuracy_sized": sized,
        "accuracy_sized_error": sized_error,
        "collection": together,
        "collection_calls": collection_calls,
        "sharding_warnings": [str(w.message) for w in record if issubclass(w.category, ShardingWarning)],
        "expected": {
            "accuracy": Accuracy(topk=(1, 3))(scores, labels),
            "average_precision": AveragePrecision()(ml_scores, ml_labels),
        },
    }
    with open(os.path.join(out_dir, f"rank{accelerator.process_index}.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
