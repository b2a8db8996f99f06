"""Shared by the adapter tests: each runs a real framework's launcher over real processes (imported by name, so
that tests/core's conftest, collected in the same run, does not shadow it)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(cmd: Sequence[str], out: Path, ranks: int, timeout: float = 300, **env: str) -> List[Dict[str, Any]]:
    """Run ``cmd`` (a launcher and a program writing ``out/rank<R>.json``) and read every rank's report."""
    full_env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
        "MMEVAL_DIST_BACKEND": "",
        "PYTHONWARNINGS": "ignore",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        **env,
    }
    proc = subprocess.run(
        list(cmd), cwd=out, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stdout[-6000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(ranks)]


def torchrun(program: str, out: Path, ranks: int, *args: str) -> List[Dict[str, Any]]:
    """``torchrun --nproc-per-node ranks program out *args`` on this machine."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(ranks),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        str(HERE / program),
        str(out),
        *args,
    ]
    return launch(cmd, out, ranks)
