"""Every metric of the shared table whose state has a float statistic gives one process's bits at world sizes 1-4
under every sharding (issue 32 item 6), on real ranks (the hub backend).

Before the ``exact_sum`` state these differed from one process by 1-3 ulp (MSE, SSIM, SAD, EPE, NIQE, ROUGE,
Perplexity, ...: a float64 sum's rounding follows the partition and the order of its additions). The runs and
the bit comparison are ``tools/bitwise_table.py``'s (which writes docs/bitwise.md): padded, uneven, contiguous,
shuffled with duplicates through ``indices=``, and a shuffled ``DistributedSampler``; one launch per world size.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Dict

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

TESTS = os.path.join(ROOT, "tests")
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

import metric_cases_image  # noqa: E402

#: the table's cases whose metric keeps a float64 statistic (checked against the table below): every image case
FLOAT_STATE_CASES = metric_cases_image.CASE_NAMES + (
    "KeypointEndPointError",
    "KeypointNME",
    "KeypointNME-keypoint_distance",
    "ROUGE-avg",
    "ROUGE-best-L",
    "Perplexity",
)
WORLD_SIZES = (1, 2, 3, 4)
_runs: Dict[int, Dict[str, float]] = {}


def _tool() -> Any:
    """tools/bitwise_table.py, importable by name here and in the spawned ranks (which unpickle its function)."""
    tools = os.path.join(ROOT, "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    return importlib.import_module("bitwise_table")


@pytest.fixture(scope="module")
def payload() -> Dict[str, Dict[str, Any]]:
    """The float-state cases' data and one process's results."""
    pytest.importorskip("scipy")  # ConnectivityError's extra
    pytest.importorskip("sklearn")  # the table's data
    everything = _tool().metric_cases.build_payload()
    return {name: case for name, case in everything.items() if name in FLOAT_STATE_CASES}


def test_the_list_is_every_case_with_a_float_state(payload: Dict[str, Dict[str, Any]]) -> None:
    """A new metric with a float statistic joins the list (and so this test)."""
    table = _tool().metric_cases
    floats = []
    for name, case in table.all_cases().items():
        metric = table.metric_class(case["metric"])(**case["kwargs"], dist_backend="non_dist")
        table.feed(metric, case["inputs"], range(min(case["n"], 3)))
        if any(spec.dtype == "float64" for spec in metric._state_specs):
            floats.append(name)
    assert sorted(floats) == sorted(FLOAT_STATE_CASES)
    assert sorted(payload) == sorted(FLOAT_STATE_CASES)


@pytest.mark.parametrize("case", FLOAT_STATE_CASES)
@pytest.mark.parametrize("world_size", WORLD_SIZES, ids=lambda n: f"ws{n}")
def test_float_state_metric_has_one_process_bits(world_size: int, case: str, payload: Dict[str, Any]) -> None:
    tool = _tool()
    if world_size not in _runs:
        _runs[world_size] = tool.run_world(world_size, payload, timeout=300)
    got = {s: _runs[world_size][f"{case}/{s}"] for s in tool.SHARDINGS}
    assert all(d == 0 for d in got.values()), f"{case} at {world_size} ranks, distance in ulp (-1: raised): {got}"
