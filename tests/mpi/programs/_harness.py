"""What every MPI test program shares: checks that collect failures, and one JSON line per rank.

A program runs under ``mpiexec -n N`` (or alone); each rank prints exactly one
line ``MMEVAL-RESULT {json}`` with its rank, the number of checks, and the
failures, which the pytest side (``tests/mpi/conftest.py``) parses.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, Callable, List, Optional, Type

RESULT_TAG = "MMEVAL-RESULT "


def launcher_rank() -> int:
    """This process's rank according to the launcher (0 without one); reads the environment only."""
    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        if var in os.environ:
            return int(os.environ[var])
    return 0


class Checker:
    """Collects named checks; a failing check is recorded, not raised, so one rank reports all of them."""

    def __init__(self) -> None:
        self.count = 0
        self.failures: List[str] = []
        self.info: dict = {}

    def check(self, name: str, cond: bool, detail: Any = "") -> bool:
        self.count += 1
        if not cond:
            self.failures.append(f"{name}: {detail}" if detail != "" else name)
        return bool(cond)

    def equal(self, name: str, got: Any, want: Any) -> bool:
        return self.check(name, got == want, f"got {got!r}, want {want!r}")

    def raises(
        self, name: str, exc_type: Type[BaseException], fn: Callable[[], Any], *contains: str
    ) -> Optional[BaseException]:
        """``fn()`` must raise ``exc_type`` whose message contains every string of ``contains``."""
        try:
            fn()
        except exc_type as exc:
            text = str(exc)
            missing = [c for c in contains if c not in text]
            self.check(name, not missing, f"message lacks {missing}: {text!r}")
            return exc
        except BaseException as exc:  # reported, not swallowed
            self.check(name, False, f"raised {type(exc).__name__}: {exc} instead of {exc_type.__name__}")
            return exc
        self.check(name, False, f"did not raise {exc_type.__name__}")
        return None

    def guard(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run a block of checks; an unexpected exception becomes one failure."""
        try:
            return fn()
        except BaseException:
            self.check(name, False, traceback.format_exc(limit=6))
            return None


def report(rank: int, checker: Checker, **extra: Any) -> None:
    """Print this rank's result line (flushed at once)."""
    payload = {"rank": rank, "checks": checker.count, "failures": checker.failures, "info": checker.info, **extra}
    sys.stdout.write(RESULT_TAG + json.dumps(payload, default=repr) + "\n")
    sys.stdout.flush()
