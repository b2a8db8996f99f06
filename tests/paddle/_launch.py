"""Run :mod:`paddle_program` under paddle's own launcher and collect what each rank recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "paddle_program.py")

#: Environment of the launched ranks: gloo on the CPU, one thread each, quiet C++ logging, no default backend.
RANK_ENV = {
    "PADDLE_DISTRI_BACKEND": "gloo",
    "OMP_NUM_THREADS": "1",
    "GLOG_minloglevel": "2",
    "MMEVAL_DIST_BACKEND": "",
    "PYTHONWARNINGS": "ignore",
}


@dataclass
class Run:
    """One launch: the launcher's exit code, its output, seconds, and each rank's recorded checks."""

    returncode: int
    output: str
    seconds: float
    ranks: Dict[int, Dict[str, Any]]
    world_size: int
    output_path: str = ""

    def describe(self) -> str:
        logs = []
        log_dir = os.path.join(os.path.dirname(self.output_path), "log")
        for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else []:
            if name.startswith("workerlog"):
                with open(os.path.join(log_dir, name), errors="replace") as f:
                    logs.append(f"--- {name}\n{f.read()[-3000:]}")
        return f"launcher rc={self.returncode}\n{self.output[-3000:]}\n" + "\n".join(logs)


def launch(world_size: int, scenario: str, tmp: str, timeout: float = 240.0) -> Run:
    """``python -m paddle.distributed.launch --nproc_per_node WS paddle_program.py SCENARIO OUT`` (logs under ``tmp``)."""
    out = os.path.join(tmp, "out")
    os.makedirs(out, exist_ok=True)
    env = {**os.environ, **RANK_ENV}
    cmd = [
        sys.executable,
        "-m",
        "paddle.distributed.launch",
        "--log_dir",
        os.path.join(tmp, "log"),
        "--max_restart",
        "0",
        "--nproc_per_node",
        str(world_size),
        PROGRAM,
        scenario,
        out,
    ]
    start = time.monotonic()
    proc = subprocess.run(
        cmd,
        cwd=tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        timeout=timeout,
    )
    seconds = time.monotonic() - start
    ranks = {}
    for r in range(world_size):
        path = os.path.join(out, f"rank{r}.json")
        if os.path.exists(path):
            with open(path) as f:
                ranks[r] = json.load(f)
    return Run(proc.returncode, proc.stdout, seconds, ranks, world_size, output_path=out)
