"""Issue 33: a torch_cpu rank that leaves outside a collective is named by its peers, with why it left.

Two real processes (``python leave_program.py``, env:// rendezvous on a free
port, no launcher that kills the survivors): rank 1 leaves while rank 0 waits
in ``compute()``. Rank 0 must raise within a few seconds naming rank 1 and
the reason: the exception's type and message, the exit, or the signal (its
leave notice in the process group's store, mmeval_torch.leave). Before, gloo
reported a closed connection and nothing of why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest
from _torch_workers import free_port

HERE = Path(__file__).resolve().parent
#: seconds from rank 1 leaving to rank 0 raising, at most (a loaded machine; measured 0.1-0.3 s)
LIMIT = 5.0

WHY = {
    "raise": ["ValueError", "boom on rank 1 outside any collective"],
    "exit": ["the process exited"],
    "normal": ["the process exited"],
    "sigterm": ["signal SIGTERM"],
}


def _run(fault: str) -> Dict[int, Dict[str, Any]]:
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": "2",
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
        "MMEVAL_TORCH_CPU_TIMEOUT": "60",
        "PYTHONWARNINGS": "ignore",
    }
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "leave_program.py"), fault],
            env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    reports: Dict[int, Dict[str, Any]] = {}
    outputs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, err = p.communicate()
        outputs.append(f"rc={p.returncode}\n{out}\n{err[-3000:]}")
        for line in out.splitlines():
            if line.startswith("LEAVE-REPORT "):
                rep = json.loads(line[len("LEAVE-REPORT ") :])
                reports[int(rep["rank"])] = rep
    assert set(reports) == {0, 1}, "\n---\n".join(outputs)
    reports[0]["_outputs"] = outputs
    return reports


@pytest.mark.parametrize("fault", ["raise", "exit", "normal", "sigterm"])
def test_rank0_names_the_rank_that_left_and_why(fault: str) -> None:
    reports = _run(fault)
    got = reports[0]
    assert got["type"] == "CollectiveFailedError", got
    message = got["message"]
    assert "rank 1" in message and "left" in message, message
    for words in WHY[fault]:
        assert words in message, message
    after = got["raised"] - max(reports[1]["left"], got["start"])
    print(f"{fault}: rank 0 raised {after:.2f}s after rank 1 left: {message}")
    assert after < LIMIT, f"rank 0 raised {after:.1f}s after rank 1 left (limit {LIMIT}s): {message}"
