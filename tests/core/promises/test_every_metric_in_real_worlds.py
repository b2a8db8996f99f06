"""The shared adversarial suite over the metric case table (tests/metric_cases*.py), in real multi-rank worlds.

Every metric with a case in the table -- the next one added included -- gets, without writing a test:

* world sizes 1-4 under five shardings (DistributedSampler padded, uneven, contiguous ``'cat'``, shuffled
  ``indices=`` with duplicates, a shuffled DistributedSampler with ``compute(size=n)``) compared **bit for bit**
  with one process. The float sums of the state metrics are exact (``exact_sum``) and equal scores are
  ranked by what the sample is (never by arrival), so every case is held to it, with no exception;
* a refused ``add()`` on the last rank: every rank's ``compute()`` raises, naming that rank and the metric;
* an empty last rank (``indices=`` on the others): the one-process answer.

Cost: one launch per world size (2, 3, 4) over the hub test backend, each running every case (~46) seven
times; about 2-4 minutes on an idle 2-core machine (the table's size decides it).
"""

from __future__ import annotations

from typing import Any, Dict

import pytest
import suite
from hub_backend import run_ranks
from metric_helpers import same

metric_cases = suite.metric_cases
WORLD_SIZES = (1, 2, 3, 4)
_runs: Dict[int, Dict[int, Any]] = {}


def _world(ws: int) -> Dict[int, Any]:
    if ws not in _runs:
        cases = suite.payload()
        if ws == 1:
            from hub_backend import HubDist

            _runs[1] = {0: suite.run_promises(HubDist(0, 1, ("127.0.0.1", 0)), cases)}
        else:
            out = run_ranks(suite.run_promises, ws, cases, timeout=900, backend_kwargs={"timeout": 60.0})
            bad = {r: v for r, (status, v) in out.items() if status != "ok"}
            assert not bad, bad
            _runs[ws] = {r: v for r, (_, v) in out.items()}
    return _runs[ws]


@pytest.mark.parametrize("case_name", metric_cases.CASE_NAMES)
@pytest.mark.parametrize("ws", WORLD_SIZES, ids=lambda n: f"ws{n}")
def test_every_sharding_gives_the_one_process_answer_bit_for_bit(ws, case_name):
    want = suite.payload()[case_name]["want"]
    differ = {}
    for rank, results in _world(ws).items():
        for sharding in suite.SHARDINGS:
            status, value = results[case_name][sharding]
            assert status == "ok", (rank, sharding, value)
            if not same(value, want):
                close = metric_cases.difference(value, want) is None
                differ[f"rank {rank} {sharding}"] = "last bits" if close else f"{value!r} != {want!r}"
    assert not differ, differ


@pytest.mark.parametrize("case_name", metric_cases.CASE_NAMES)
@pytest.mark.parametrize("ws", (2, 3), ids=lambda n: f"ws{n}")
def test_a_refusal_on_one_rank_reaches_every_rank_naming_it(ws, case_name):
    cls_name = suite.make(suite.payload()[case_name]).name
    for rank, results in _world(ws).items():
        status, text = results[case_name]["refusal"]
        assert status != "ok", (rank, "compute() answered without the refused batch")
        assert f"rank {ws - 1}" in text and cls_name in text, (rank, text)


@pytest.mark.parametrize("case_name", metric_cases.CASE_NAMES)
@pytest.mark.parametrize("ws", (2, 3), ids=lambda n: f"ws{n}")
def test_a_rank_that_added_nothing_gives_the_one_process_answer(ws, case_name):
    want = suite.payload()[case_name]["want"]
    for rank, results in _world(ws).items():
        status, value = results[case_name]["empty_rank"]
        assert status == "ok", (rank, value)
        assert metric_cases.difference(value, want) is None, (rank, metric_cases.difference(value, want))
