"""End-to-end distributed evaluation: Accuracy.compute over real ranks equals the single-process result.

The dataset length (101) divides by none of the world sizes 2, 3, 4, so the
DistributedSampler pads, and the unpadded shards are uneven.
"""

from __future__ import annotations

import os
import pickle
import time
from typing import Any

import pytest
import torch
from _torch_workers import free_port, reference_accuracy, tutorial_eval_fn, values

N = 101


@pytest.mark.parametrize("shuffle", [False, True], ids=["in-order", "shuffled"])
def test_distributed_sampler_with_padding(ranks: Any, shuffle: bool) -> None:
    results = values(ranks.run("eval_distributed_sampler", N, shuffle))
    want = reference_accuracy(N, seed=1)
    assert set(want) == {"top1", "top3"}
    assert all(r == want for r in results)


def test_uneven_shards_without_padding(ranks: Any) -> None:
    reports = values(ranks.run("eval_uneven_shards", N))
    want = reference_accuracy(N, seed=2)
    assert sum(r["shard"] for r in reports) == N
    for report in reports:
        assert report["unzip"] == report["unzip_size"] == report["cat"] == want


def test_metric_built_before_init_auto_selects_the_torch_backend(ranks: Any) -> None:
    reports = values(ranks.run("eval_auto_selected", N))
    for report in reports:
        assert report["pre_init"] == "non_dist"
        assert report["chosen"] == ranks.kind
        assert report["result"] == reference_accuracy(N, seed=4)


def test_seed_tutorial_spawn_gloo_torch_cpu(tmp_path: Any) -> None:
    """The seed tutorial's program shape: torch.multiprocessing.spawn, gloo, dist_backend='torch_cpu'."""
    process_num, n = 3, 50
    ctx = torch.multiprocessing.spawn(
        tutorial_eval_fn, args=(process_num, free_port(), str(tmp_path), n), nprocs=process_num, join=False
    )
    deadline = time.monotonic() + 180
    try:
        while not ctx.join(timeout=1):
            assert time.monotonic() < deadline, "the tutorial's processes did not finish in 180 s"
    finally:
        for proc in ctx.processes:
            if proc.is_alive():
                proc.kill()
    outputs = []
    for rank in range(process_num):
        with open(os.path.join(tmp_path, f"rank{rank}.pkl"), "rb") as f:
            outputs.append(pickle.load(f))
    for out in outputs:
        assert set(out["result"]) == {"top1", "top3"}
        assert out["result"] == out["single"] == outputs[0]["single"]
