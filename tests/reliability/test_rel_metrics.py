"""Bad input to a metric in a distributed run: a ValueError naming the argument, state unchanged, compute() right.

Three ranks evaluate Accuracy on padded DistributedSampler shards. Between
its good batches the last rank makes every bad call -- wrong shapes,
mismatched lengths, NaN scores, an empty batch, labels out of range (too
large, negative, non-integral), topk larger than the number of classes --
and rank 0 one of them; each must raise a ValueError naming the argument
and leave the rank's results exactly as they were. Then the last rank calls
``compute(size=-1)`` alone (a ValueError before any collective), and
``compute(size=N)`` on every rank must still equal the single-process
result, twice: the bad calls desynchronized nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import rank_main
from reliability_harness import launch_backend

WS = 3


def test_bad_input_in_a_distributed_run(backend: str, scratch: Path, figures: Any) -> None:
    with launch_backend(backend, scratch, WS, ["bad_input"], timeout=60) as launch:
        infos = launch.results(range(WS), "bad_input", 180)
    want = rank_main.single_process_accuracy()
    for r, info in infos.items():
        assert info["got"] == want, (r, info["got"], want)
    assert len(infos[WS - 1]["bad_calls"]) == 9 and infos[0]["bad_calls"] == ["NaN scores"]
    assert infos[1]["bad_calls"] == []
    figures(
        "bad input to metrics",
        backend=backend,
        bad_calls_refused=sum(len(i["bad_calls"]) for i in infos.values()),
        compute_after="== single process",
    )
