"""Hooks of every test run: what killed MPI ranks leave in /dev/shm is removed at the end (:mod:`shm_leaks`)."""

from __future__ import annotations

import os
import sys
from typing import Any, FrozenSet

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import shm_leaks

_BEFORE: FrozenSet[str] = frozenset()


def pytest_sessionstart(session: Any) -> None:
    global _BEFORE
    _BEFORE = shm_leaks.snapshot()


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    removed = shm_leaks.remove_leaked(_BEFORE)
    if removed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"removed {len(removed)} shared-memory file(s) that killed MPI ranks left in "
                                f"/dev/shm: {', '.join(sorted(removed)[:5])}{' ...' if len(removed) > 5 else ''}")
