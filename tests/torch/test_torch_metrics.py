"""Every metric's torch_cpu result equals the single-process one (issue 15 item 6), on 2 and 3 gloo ranks.

The cases, shardings and comparison are tests/metric_cases.py's (shared with the mpi4py and
Horovod tests): padded DistributedSampler shards with ``compute(size=n)``, uneven round-robin
shards, contiguous uneven blocks (``'cat'``), and shuffled shards with duplicates passed with
``indices=`` and no ``size``. One spawn per world size runs every case; each case is then one test
item, asserted on every rank.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TESTS not in sys.path:  # metric_cases (the spawned ranks inherit sys.path)
    sys.path.insert(0, TESTS)

import metric_cases  # noqa: E402
from _metric_workers import run_world  # noqa: E402

WORLD_SIZES = (2, 3)
_reports: Dict[int, List[Dict[str, Any]]] = {}


@pytest.fixture(scope="module")
def payload() -> Dict[str, Dict[str, Any]]:
    """Every case's data and single-process result."""
    return metric_cases.build_payload()


def reports(world_size: int, payload: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Every rank's report of the one launch at ``world_size`` (launched on first use)."""
    if world_size not in _reports:
        outcomes = run_world(world_size, payload)
        bad = [str(o) for o in outcomes if o.status != "ok"]
        assert not bad, f"torch_cpu launch of {world_size} ranks failed:\n" + "\n".join(bad)
        _reports[world_size] = [o.value for o in outcomes]
    return _reports[world_size]


def test_cases_are_the_ones_listed(payload: Dict[str, Dict[str, Any]]) -> None:
    assert tuple(payload) == metric_cases.CASE_NAMES


@pytest.mark.parametrize("case", metric_cases.CASE_NAMES)
@pytest.mark.parametrize("world_size", WORLD_SIZES, ids=lambda n: f"ws{n}")
def test_distributed_equals_single_process(world_size: int, case: str, payload: Dict[str, Dict[str, Any]]) -> None:
    problems = metric_cases.case_failures(reports(world_size, payload), case)
    assert not problems, f"torch_cpu, {world_size} ranks:\n" + "\n".join(problems)
