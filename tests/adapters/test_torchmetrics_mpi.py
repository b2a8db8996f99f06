"""torchmetrics metrics synced over MPI through mmeval's mpi4py backend, under a real ``mpiexec -n 2``.

No torch.distributed anywhere: torchmetrics' ``dist_sync_fn`` and ``distributed_available_fn`` are
mmeval's (mmeval.integrations.torchmetrics). Every rank must get the one-process value: a sum state
(MulticlassAccuracy), list states of uneven lengths (BinaryAUROC), a bfloat16 state (MeanMetric).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from adapter_launch import launch

pytest.importorskip("torchmetrics", reason="the adapters env installs torchmetrics")
pytest.importorskip("mpi4py", reason="the adapters env installs mpi4py")

WS = 2
HERE = Path(__file__).resolve().parent


def mpiexec() -> str:
    """The mpiexec beside this Python (the mpich wheel's), else the one on PATH."""
    found = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if found is None:
        pytest.fail("mpiexec not found: the adapters env installs mpich, which brings it")
    return found


@pytest.fixture(scope="module")
def reports(tmp_path_factory: Any) -> List[Dict[str, Any]]:
    out = Path(tmp_path_factory.mktemp("torchmetrics"))
    cmd = [mpiexec(), "-n", str(WS), sys.executable, str(HERE / "torchmetrics_program.py"), str(out)]
    return launch(cmd, out, WS)


def test_every_rank_gets_the_one_process_value(reports: List[Dict[str, Any]]) -> None:
    for rank, r in enumerate(reports):
        assert r["world"] == [rank, WS]
        assert r["torch_distributed"] is False  # torchmetrics alone would not sync here
        assert r["synced"] == r["alone"], (rank, r["synced"], r["alone"])


def test_the_states_moved_over_mpi(reports: List[Dict[str, Any]]) -> None:
    for r in reports:
        rows = [row for row in r["collectives"] if row["backend"] == "mpi4py" and row["op"] == "all_gather_object"]
        assert rows and rows[0]["calls"] >= 3, r["collectives"]  # one per state tensor per compute()
