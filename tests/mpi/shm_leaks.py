"""Shared-memory files that killed MPI ranks leave in ``/dev/shm``, found and removed after a test run.

The MPI and reliability tests kill ranks on purpose (SIGKILL, aborts, timeouts); the MPI library of
a killed rank cannot unlink its shared-memory segments, and ``/dev/shm`` is RAM: Open MPI leaves
16 MiB ``sm_segment.*`` files, MPICH ``mpich_shm_*``, Intel MPI ``Intel_MPI_*``, run after run.
:func:`leaked` lists what a run left: files of those names that were not there when the run started,
that no live process has mapped or open, and that are older than a few seconds (a job starting at
that moment in another test environment has its new segment mapped within milliseconds).
:func:`session_fixture` makes the session fixture of tests/mpi's conftest and tests/reliability's
(which appends this directory to ``sys.path``). (Not a conftest in ``tests/`` itself: pytest would put ``tests/`` on
``sys.path``, and ``import torch`` would find the ``tests/torch`` directory where torch is not
installed.)
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, FrozenSet, Iterator, List, Set

import pytest

SHM = Path("/dev/shm")
#: names of the MPI implementations' shared-memory files
MPI_PREFIXES = ("sm_segment.", "vader_segment.", "mpich_shm_", "Intel_MPI_", "psm2_shm.")
#: a file younger than this is left alone (its job may not have mapped it yet)
MIN_AGE_S = 5.0


def snapshot(shm: Path = SHM) -> FrozenSet[str]:
    """The names in ``shm`` now (empty where there is no such directory)."""
    try:
        return frozenset(os.listdir(shm))
    except OSError:
        return frozenset()


def in_use(shm: Path = SHM) -> Set[str]:
    """Names of files under ``shm`` that a live process has mapped or open (``/proc/*/maps``, ``/proc/*/fd``)."""
    prefix = str(shm).rstrip("/") + "/"
    used: Set[str] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as fh:
                for line in fh:
                    at = line.find(prefix)
                    if at >= 0:
                        used.add(line[at + len(prefix) :].split()[0])
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(prefix):
                    used.add(target[len(prefix) :].split()[0])
        except OSError:  # the process ended, or is not ours to read
            continue
    return used


def leaked(before: FrozenSet[str], shm: Path = SHM, now: float = 0.0) -> List[Path]:
    """MPI shared-memory files in ``shm`` that were not in ``before``, unused, and at least
    :data:`MIN_AGE_S` old, this user's."""
    now = now or time.time()
    candidates = [name for name in snapshot(shm) - before if name.startswith(MPI_PREFIXES)]
    if not candidates:
        return []
    used = in_use(shm)
    out = []
    for name in candidates:
        path = shm / name
        try:
            st = path.lstat()
        except OSError:
            continue
        if name not in used and st.st_uid == os.getuid() and now - st.st_mtime >= MIN_AGE_S:
            out.append(path)
    return out


def remove_leaked(before: FrozenSet[str], shm: Path = SHM) -> List[str]:
    """Remove :func:`leaked` files; return their names."""
    removed = []
    for path in leaked(before, shm):
        try:
            path.unlink()
            removed.append(path.name)
        except OSError:
            pass
    return removed


def session_fixture() -> Callable[..., Any]:
    """An autouse session fixture: a snapshot when the first test that sees it starts, and the leaks
    removed (and named on the terminal) when the run ends."""

    @pytest.fixture(scope="session", autouse=True)
    def _remove_leaked_shm(request: Any) -> Iterator[None]:
        before = snapshot()
        yield
        removed = remove_leaked(before)
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        if removed and reporter is not None:
            names = ", ".join(sorted(removed)[:5]) + (" ..." if len(removed) > 5 else "")
            reporter.write_line(
                f"removed {len(removed)} shared-memory file(s) that killed MPI ranks left in /dev/shm: {names}"
            )

    return _remove_leaked_shm
