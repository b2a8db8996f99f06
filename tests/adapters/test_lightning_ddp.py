"""A LightningModule logging mmeval metrics via ``self.log`` under a real 2-process DDP run on CPU (gloo).

Lightning starts the second process itself and pads the validation shards (45 samples, 2 ranks: 46
seen). Each epoch's logged values must equal the one-process values, on both ranks, epoch after epoch.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from adapter_launch import HERE, free_port, launch

pytest.importorskip("lightning", reason="the adapters env installs Lightning")

WS = 2


@pytest.fixture(scope="module")
def reports(tmp_path_factory: Any) -> List[Dict[str, Any]]:
    out = Path(tmp_path_factory.mktemp("lightning"))
    cmd = [sys.executable, str(HERE / "lightning_program.py"), str(out), str(WS)]
    return launch(cmd, out, WS, MASTER_PORT=str(free_port()))


def test_ddp_runs_two_ranks_on_torch_cpu(reports: List[Dict[str, Any]]) -> None:
    assert [r["world"] for r in reports] == [[0, WS], [1, WS]]
    assert [r["backend"] for r in reports] == ["torch_cpu"] * WS  # auto-selected over Lightning's group
    assert sum(r["seen"] for r in reports) == 2 * 46  # two epochs of 45 samples padded to 46


def test_each_logged_value_equals_one_process(reports: List[Dict[str, Any]]) -> None:
    for r in reports:
        first, second = r["epochs"]
        assert first == r["alone"], (first, r["alone"])
        assert second == first
