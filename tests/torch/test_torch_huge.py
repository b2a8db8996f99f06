"""An object over 2 GiB between two real processes (opt-in: it needs about 7 GB of memory).

The size arithmetic over 2 and 4 GiB is always tested (test_torch_plugin.py);
this moves the bytes for real: ``MMEVAL_TEST_HUGE=1 tox -e torch``.
"""

from __future__ import annotations

import os

import pytest
from _torch_workers import Ranks, values

GiB = 1 << 30


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("MMEVAL_TEST_HUGE") != "1",
    reason="set MMEVAL_TEST_HUGE=1 to move 2 GiB + 4 KiB between two processes (~7 GB of memory)",
)
def test_broadcast_object_over_2gib() -> None:
    nbytes = 2 * GiB + 4097
    with Ranks(2, "torch_cpu") as ranks:
        reports = values(ranks.run("huge_broadcast", nbytes, timeout=900))
    assert all(r == {"received": nbytes} for r in reports)
