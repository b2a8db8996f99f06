"""Every metric's mpi4py result equals the single-process one (issue 15 item 6), under ``mpiexec -n 2`` and ``-n 3``.

The cases, shardings and comparison are tests/metric_cases.py's (shared with the torch_cpu and
Horovod tests). The single-process results are computed here, pickled with the data, and the ranks
of programs/metrics.py compare their results with them; one launch per world size runs every case,
and each case is then one test item, asserted on every rank.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from mpi_runner import run_program

TESTS = str(Path(__file__).resolve().parent.parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

import metric_cases  # noqa: E402

WORLD_SIZES = (2, 3)
_reports: Dict[int, List[Dict[str, Any]]] = {}


@pytest.fixture(scope="module")
def payload_file(tmp_path_factory: Any) -> str:
    """The pickled cases: data and single-process results."""
    path = str(tmp_path_factory.mktemp("mpi-metrics") / "payload.pkl")
    metric_cases.write_payload(path)
    return path


def reports(mpiexec: str, world_size: int, payload_file: str) -> List[Dict[str, Any]]:
    """Every rank's report of the one launch at ``world_size`` (launched on first use)."""
    if world_size not in _reports:
        run = run_program(mpiexec, "metrics.py", world_size, os.path.abspath(payload_file), timeout=300)
        missing = sorted(set(range(world_size)) - set(run.results))
        assert not missing and run.returncode == 0, f"ranks {missing} did not report\n{run.describe()}"
        for rank in range(world_size):
            assert "report" in run.results[rank]["info"], f"rank {rank}: {run.results[rank]['failures']}"
        _reports[world_size] = [run.results[r]["info"]["report"] for r in range(world_size)]
    return _reports[world_size]


@pytest.mark.parametrize("case", metric_cases.CASE_NAMES)
@pytest.mark.parametrize("world_size", WORLD_SIZES, ids=lambda n: f"np{n}")
def test_distributed_equals_single_process(mpiexec: str, world_size: int, case: str, payload_file: str) -> None:
    problems = metric_cases.case_failures(reports(mpiexec, world_size, payload_file), case)
    assert not problems, f"mpi4py, {world_size} ranks:\n" + "\n".join(problems)
