"""A real ``accelerate launch`` of 3 processes: metrics over accelerate's prepared DataLoader.

Accelerate shards a DataLoader by whole batches dealt round-robin and pads the last round by wrapping
to the dataset's start (1003 samples in batches of 16 on 3 ranks: 1008 seen). With ``indices=`` every
metric must equal the single-process result (Accuracy on the state path, AveragePrecision per sample);
with ``size=`` only, the answer is wrong and every rank must get a ShardingWarning saying so. The indices
come from mmeval.integrations.accelerate's IndexedDataset; the two metrics in one MetricCollection give
the same results in one exchange.

``--multi_gpu`` is accelerate's launcher over ``torch.distributed.run`` (its ``--cpu`` flag starts one
process unless MPI is configured); the program's ``Accelerator(cpu=True)`` keeps the ranks on the CPU,
where accelerate initializes torch.distributed with gloo.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from _torch_workers import free_port

HERE = Path(__file__).resolve().parent
N, WS = 1003, 3


@pytest.fixture(scope="module")
def reports(tmp_path_factory: Any) -> List[Dict[str, Any]]:
    out = tmp_path_factory.mktemp("accelerate")
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
        "MMEVAL_DIST_BACKEND": "",
        "PYTHONWARNINGS": "ignore",
    }
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        str(WS),
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
        str(HERE / "accelerate_program.py"),
        str(out),
    ]
    proc = subprocess.run(
        cmd, cwd=out, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(WS)]


def test_accelerate_pads_by_whole_batches(reports: List[Dict[str, Any]]) -> None:
    assert [r["world_size"] for r in reports] == [WS] * WS
    assert [r["backend"] for r in reports] == ["torch_cpu"] * WS  # auto-selected over accelerate's group
    assert sum(r["seen"] for r in reports) == 1008  # 63 batches dealt as 21 rounds: 5 samples repeated


def test_indices_give_the_single_process_result(reports: List[Dict[str, Any]]) -> None:
    for r in reports:
        assert r["accuracy"] == r["expected"]["accuracy"]
        assert r["average_precision"] == r["expected"]["average_precision"]


def test_a_collection_fed_by_index_gives_each_result_in_one_exchange(reports: List[Dict[str, Any]]) -> None:
    for r in reports:
        want = {f"acc/{k}": v for k, v in r["expected"]["accuracy"].items()}
        want.update({f"ap/{k}": v for k, v in r["expected"]["average_precision"].items()})
        assert r["collection"] == want
        # the layouts, one deduplication of the shared indices, the state's reduction, the gather, the reply
        assert r["collection_calls"] == 5


def test_size_alone_is_refused_on_every_rank_naming_indices(reports: List[Dict[str, Any]]) -> None:
    # accelerate pads by whole batches: 1008 samples for 1000, more than size= and a sampler's padding explain
    for r in reports:
        assert r["accuracy_sized"] is None, "compute(size=) answered for samples it cannot tell apart"
        message = r["accuracy_sized_error"]
        assert "1008 samples were added" in message and "indices=" in message and "reset()" in message, message
