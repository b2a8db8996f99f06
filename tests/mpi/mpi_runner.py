"""Running the MPI test programs (tests/mpi/programs) under ``mpiexec``, bounded.

Every run has a hard wall-clock limit: the launcher is started in its own
session and, past the limit, the whole process group (``mpiexec``, the Hydra
proxies, every rank) is killed with SIGKILL. The ranks print one
``MMEVAL-RESULT {json}`` line each, parsed into :class:`MPIRun.results`.

``mpiexec`` is looked up next to the running Python first (the ``mpich``
wheel installs it in the virtual environment's ``bin``), then on ``PATH``.
Without mpi4py, the plugin or ``mpiexec`` the tests are skipped -- unless
``MMEVAL_REQUIRE_MPI=1`` (set by ``tox -e mpi``), which makes that a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
RESULT_TAG = "MMEVAL-RESULT "
REQUIRE_MPI = os.environ.get("MMEVAL_REQUIRE_MPI", "") == "1"

#: Variables of an outer launcher that must not leak into the runs (pytest
#: itself might run under mpiexec or srun).
_LAUNCHER_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "HYDI_", "HYDRA_", "MPI_LOCAL", "MV2_", "MPIRUN_", "SLURM_")
_MMEVAL_SETTINGS = ("MMEVAL_DIST_BACKEND", "MMEVAL_TIMEOUT", "MMEVAL_CODEC", "MMEVAL_DISABLE_PLUGINS")


def find_mpiexec() -> Optional[str]:
    """``mpiexec`` of this Python's environment, else the first on ``PATH``."""
    bindirs = [os.path.dirname(sys.executable), os.path.join(sys.prefix, "Scripts" if os.name == "nt" else "bin")]
    return shutil.which("mpiexec", path=os.pathsep.join([*bindirs, os.environ.get("PATH", "")]))


def _missing() -> Optional[str]:
    for module in ("mpi4py", "mmeval_mpi4py", "numpy"):
        if importlib.util.find_spec(module) is None:  # finds, does not import (no MPI_Init here)
            return f"{module} is not installed"
    if find_mpiexec() is None:
        return "mpiexec not found next to this Python or on PATH (pip install mpich)"
    return None


@pytest.fixture(scope="session")
def mpiexec() -> str:
    """Path of ``mpiexec``; skips (or fails under MMEVAL_REQUIRE_MPI=1) when MPI is not available."""
    why = _missing()
    if why is not None:
        if REQUIRE_MPI:
            pytest.fail(f"MMEVAL_REQUIRE_MPI=1 but {why}")
        pytest.skip(why)
    path = find_mpiexec()
    assert path is not None
    return path


@dataclass
class MPIRun:
    """One finished (or killed) run."""

    cmd: List[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    results: Dict[int, dict] = field(default_factory=dict)

    def describe(self) -> str:
        tail = lambda s: s[-4000:]  # noqa: E731
        return (
            f"$ {' '.join(self.cmd)}\nrc={self.returncode} after {self.seconds:.1f}s\n"
            f"--- stdout ---\n{tail(self.stdout)}\n--- stderr ---\n{tail(self.stderr)}"
        )

    def expect_ranks(self, ranks: Sequence[int]) -> None:
        """Every rank in ``ranks`` reported, with no failed check."""
        missing = sorted(set(ranks) - set(self.results))
        assert not missing, f"ranks {missing} did not report\n{self.describe()}"
        for r in ranks:
            res = self.results[r]
            assert res["checks"] > 0, f"rank {r} ran no check\n{self.describe()}"
            assert not res["failures"], f"rank {r} failed: {res['failures']}\n{self.describe()}"

    def expect_success(self, n: int) -> None:
        """Every one of ``n`` ranks reported with no failure, and the launcher exited 0."""
        self.expect_ranks(range(n))
        assert self.returncode == 0, f"exit code {self.returncode}\n{self.describe()}"


def child_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """A clean environment for a run: no outer launcher, no mmeval settings, a 120 s collective timeout."""
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(_LAUNCHER_PREFIXES) and k not in _MMEVAL_SETTINGS and not k.startswith("MMEVAL_MPI4PY_")
    }
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["MMEVAL_MPI4PY_TIMEOUT"] = "120"  # a bug fails in 2 minutes, not 30
    env.update(extra or {})
    return env


def run_program(
    mpiexec: Optional[str],
    program: str,
    n: Optional[int],
    *args: str,
    timeout: float = 240,
    env: Optional[Dict[str, str]] = None,
    launcher_args: Sequence[str] = (),
    count_flag: str = "-n",
) -> MPIRun:
    """Run ``programs/<program>`` on ``n`` ranks (``n=None``: plain ``python``, no launcher), at most ``timeout`` s.

    ``mpiexec`` is the launcher to use (``mpiexec`` or ``mpirun``); ``count_flag`` its
    process-count option.
    """
    script = str(PROGRAMS / program)
    cmd = [sys.executable, script, *args]
    if n is not None:
        assert mpiexec is not None
        cmd = [mpiexec, *launcher_args, count_flag, str(n), *cmd]
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=str(PROGRAMS), env=child_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        run = MPIRun(cmd, -9, out, err, time.monotonic() - start)
        pytest.fail(f"run exceeded its {timeout:g}s limit and was killed\n{run.describe()}")
    finally:
        _kill_group(proc)  # nothing of the run outlives it (a rank left behind by an abort, ...)
    run = MPIRun(cmd, proc.returncode, out, err, time.monotonic() - start)
    for line in out.splitlines():
        if line.startswith(RESULT_TAG):
            res = json.loads(line[len(RESULT_TAG) :])
            run.results[int(res["rank"])] = res
    return run


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the run's whole session (its process group), whatever is left of it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
