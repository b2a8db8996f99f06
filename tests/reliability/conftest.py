"""Fixtures of the reliability campaign: scratch directories, the figures every test records, MPI and namespaces.

The figures (time for each fault to surface, soak payloads and RSS, hypothesis
examples) are printed at the end of the run and written as JSON to
``$MMEVAL_RELIABILITY_FIGURES`` when that is set (``tox -e reliability`` sets
it to ``.tox/reliability/figures.json``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
sys.path.append(os.path.join(os.path.dirname(HERE), "mpi"))  # for shm_leaks; appended: this directory's come first

import netns  # noqa: E402
from reliability_harness import find_mpiexec  # noqa: E402
from shm_leaks import session_fixture  # noqa: E402

#: tests/mpi's cleanup of what killed MPI ranks leave in /dev/shm, when the run ends
_remove_leaked_shm = session_fixture()

#: A missing mpi4py / mpiexec / torch fails the tests when set (tox -e reliability sets it); else they skip.
REQUIRE_ALL = os.environ.get("MMEVAL_RELIABILITY_REQUIRE", "") == "1"

_FIGURES: Dict[str, List[Dict[str, Any]]] = {}


def record(section: str, **row: Any) -> None:
    """Add one row of figures to ``section`` (printed and saved at the end of the session)."""
    _FIGURES.setdefault(section, []).append(row)


@pytest.fixture
def figures() -> Any:
    """The :func:`record` function."""
    return record


def _require(what: str, why: str) -> None:
    if REQUIRE_ALL:
        pytest.fail(f"MMEVAL_RELIABILITY_REQUIRE=1 but {why}")
    pytest.skip(why)


@pytest.fixture(scope="session")
def torch_available() -> None:
    """Skips (or fails under MMEVAL_RELIABILITY_REQUIRE=1) without torch and mmeval-torch."""
    for module in ("torch", "mmeval_torch"):
        if importlib.util.find_spec(module) is None:
            _require("torch", f"{module} is not installed")


@pytest.fixture(scope="session")
def mpi_available() -> None:
    """Skips (or fails under MMEVAL_RELIABILITY_REQUIRE=1) without mpi4py, mmeval-mpi4py and mpiexec."""
    for module in ("mpi4py", "mmeval_mpi4py"):
        if importlib.util.find_spec(module) is None:  # finds, does not import: no MPI_Init here
            _require("mpi", f"{module} is not installed")
    if find_mpiexec() is None:
        _require("mpi", "mpiexec not found next to this Python or on PATH (pip install mpich)")


@pytest.fixture(params=["torch_cpu", "mpi4py"])
def backend(request: Any) -> str:
    """Each backend in turn (its test is skipped, or failed under MMEVAL_RELIABILITY_REQUIRE=1, where it is missing)."""
    request.getfixturevalue("torch_available" if request.param == "torch_cpu" else "mpi_available")
    return str(request.param)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A per-test directory the ranks write their event files into."""
    return tmp_path


@pytest.fixture
def two_hosts() -> Iterator[netns.TwoHosts]:
    """Two network namespaces joined by a veth pair, torn down afterwards (skipped without root or iproute2)."""
    why = netns.unavailable()
    if why is not None:  # not skippable in CI: it runs as root with iproute2
        pytest.skip(why)
    with netns.TwoHosts() as hosts:
        yield hosts


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FIGURES:
        return
    tr = terminalreporter
    tr.section("mmeval reliability figures")
    for section, rows in _FIGURES.items():
        tr.write_line(f"[{section}]")
        for row in rows:
            tr.write_line("  " + ", ".join(f"{k}={_fmt(v)}" for k, v in row.items()))
    path = os.environ.get("MMEVAL_RELIABILITY_FIGURES")
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(_FIGURES, indent=1, default=repr))
        tr.write_line(f"(written to {path})")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)
