"""Progress of a long compute() (issue 35, item 4): each collective's start and end, and heartbeats while one waits.

Real hub ranks: rank 1 arrives late, so rank 0's first collective waits and its heartbeats say so; the
events are this process's collectives, as the comm-stats hook counts them; outside the block nothing is reported.
"""

from __future__ import annotations

import logging
import time
from typing import Any, List

import numpy as np
import pytest
from hub_backend import run_ranks

from mmeval import Accuracy
from mmeval.core.progress import ProgressEvent, log_event, reporting


def _worker(backend: Any) -> Any:
    from mmeval.core.hooks import enable_comm_stats

    events: List[ProgressEvent] = []
    acc = Accuracy(dist_backend=backend)
    acc.add(np.eye(3), np.arange(3))
    stats = enable_comm_stats(print_at_exit=False)
    if backend.rank == 1:
        time.sleep(2.0)  # the slow rank: rank 0 waits for it in the first collective
    stats.reset()
    with reporting(events.append, every=0.25):
        result = acc.compute(size=6)
    calls = sum(row["calls"] for row in stats.rows())
    acc.reset()
    acc.add(np.eye(3), np.arange(3))
    acc.compute(size=6)  # outside the block: no event
    return result, [(e.kind, e.op, e.rank, e.elapsed, e.outcome, e.bytes_sent) for e in events], calls


def test_a_slow_rank_shows_as_heartbeats_and_every_collective_starts_and_ends():
    out = run_ranks(_worker, 2, timeout=120)
    for rank in range(2):
        status, got = out[rank]
        assert status == "ok", got
        result, events, calls = got
        assert result == {"top1": 1.0}
        starts = [e for e in events if e[0] == "start"]
        ends = [e for e in events if e[0] == "end"]
        assert len(starts) == len(ends) == calls >= 1, events  # every collective of compute(), no more
        assert all(e[2] == rank for e in events) and all(e[4] == "ok" for e in ends)
        assert [e[1] for e in starts] == [e[1] for e in ends]
        waiting = [e for e in events if e[0] == "waiting"]
        if rank == 0:  # it waited ~2 s for rank 1: heartbeats every 0.25 s, naming the collective it is in
            assert len(waiting) >= 3 and waiting[0][1] == starts[0][1], events
            assert max(e[3] for e in waiting) >= 1.0
            assert sum(e[5] for e in ends) > 0


def test_the_default_report_logs_and_a_bad_period_is_refused(caplog):
    with caplog.at_level(logging.INFO, logger="mmeval"):
        log_event(ProgressEvent("waiting", "all_reduce", 0, 4, 12.5, 30.0))
        log_event(ProgressEvent("end", "all_reduce", 0, 4, 13.0, 30.5, 4096, 4096, "ok"))
    assert "still in all_reduce after 12.5s" in caplog.text and "all_reduce done in 13.000s" in caplog.text
    with pytest.raises(ValueError, match="every=0"):
        with reporting(every=0):
            pass
