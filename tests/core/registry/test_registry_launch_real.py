"""The launch warning under real launchers (issue 23, item 3): it describes what it saw.

``torchrun`` with the torch process group initialised and a metric that names ``non_dist`` on purpose;
``mpiexec`` with mpi4py importable. Each needs its runtime (torch with mmeval-torch; mpi4py, mmeval-mpi4py and
an ``mpiexec``) and is skipped where it is absent, as in the core env (tests/core/registry/test_registry_launcher.py
simulates the same launches with the launchers' environment variables there).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List

import pytest

SCRIPT = textwrap.dedent("""
    import json, os, sys, warnings
    import numpy as np
    if sys.argv[1] == "torch":
        import torch.distributed as td
        td.init_process_group("gloo")
    from mmeval import Accuracy

    acc = Accuracy(dist_backend=sys.argv[2] if sys.argv[2] != "-" else None)
    acc.add(np.array([1, 0]), np.array([1, 1]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        acc.compute()
    found = [str(w.message) for w in caught if w.category.__name__ == "DistributedLaunchWarning"]
    with open(f"{sys.argv[3]}/{os.getpid()}.json", "w") as out:  # one file per rank: launchers mix stdout lines
        json.dump(found, out)
    if sys.argv[1] == "torch":
        td.destroy_process_group()
""")


def _have(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def _env(**extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    env.update(
        {
            "MMEVAL_DISABLE_PLUGINS": "mmeval-fixture-plugin,mmeval-fixture-rival",
            "OMP_NUM_THREADS": "1",
            "GLOO_SOCKET_IFNAME": "lo",
            "MASTER_ADDR": "127.0.0.1",
        }
    )
    env.update(extra)
    return env


def _warnings(proc: subprocess.CompletedProcess, out: Path) -> List[List[str]]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads(path.read_text()) for path in sorted(out.glob("*.json"))]


@pytest.mark.skipif(not _have("torch", "mmeval_torch"), reason="needs torch and mmeval-torch")
def test_torchrun_with_the_group_initialised_and_non_dist_named(tmp_path: Path):
    script = tmp_path / "eval.py"
    script.write_text(SCRIPT)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            str(script),
            "torch",
            "non_dist",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    per_rank = _warnings(proc, tmp_path)
    assert len(per_rank) == 2
    for msgs in per_rank:
        assert len(msgs) == 1, msgs
        msg = msgs[0]
        assert "'non_dist' was asked for by name while the runtime of torch_cpu is active" in msg, msg
        assert "torch_cpu: its runtime is active in this process" in msg
        assert "not active" not in msg and "not initialised" not in msg and "init_process_group" not in msg, msg


@pytest.mark.skipif(
    not (
        _have("mpi4py", "mmeval_mpi4py")
        and shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    ),
    reason="needs mpi4py, mmeval-mpi4py and mpiexec",
)
@pytest.mark.parametrize("case", ["non_dist named", "plugin disabled"])
def test_mpiexec_with_mpi4py_importable(tmp_path: Path, case: str):
    script = tmp_path / "eval.py"
    script.write_text(SCRIPT)
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    extra = (
        {"MMEVAL_DISABLE_PLUGINS": "mmeval-fixture-plugin,mmeval-fixture-rival,mmeval-mpi4py"}
        if case == "plugin disabled"
        else {}
    )
    backend = "non_dist" if case == "non_dist named" else "-"
    proc = subprocess.run(
        [str(mpiexec), "-n", "2", sys.executable, str(script), "mpi", backend, str(tmp_path)],
        capture_output=True,
        text=True,
        env=_env(**extra),
        timeout=300,
    )
    per_rank = _warnings(proc, tmp_path)
    assert len(per_rank) == 2
    for msgs in per_rank:
        assert len(msgs) == 1, msgs
        msg = msgs[0]
        assert "install mpi4py built for" not in msg and "reinstall" not in msg.lower(), msg
        if case == "non_dist named":
            assert "mpi4py: its runtime is active in this process" in msg, msg
        else:
            assert "mpi4py is installed, but disabled by MMEVAL_DISABLE_PLUGINS" in msg, msg
            assert "the mpi4py module is installed here (found, not imported by this process)" in msg, msg
