"""Parent side of the reliability campaign: launch ranks of ``rank_main.py``, watch their files, kill, clean up.

Every wait here has a deadline; a launch that misses one fails the test with
every rank's events and output, and :meth:`Launch.close` SIGKILLs whatever
the launch started (each launch runs in its own session), so nothing outlives
a test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from mmeval.testing.ranks import free_port

HERE = Path(__file__).resolve().parent
RANK_MAIN = HERE / "rank_main.py"

#: Variables of an outer launcher or an mmeval setting that must not leak into the ranks.
_DROP_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "HYDI_", "HYDRA_", "MPI_LOCAL", "MV2_", "MPIRUN_", "SLURM_", "MMEVAL_")


def worker_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """A clean environment for ranks: no outer launcher, no mmeval settings, one thread, no bytecode files."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP_PREFIXES)}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update(PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", TORCH_CPP_LOG_LEVEL="ERROR")
    env.update(extra or {})
    return env


def find_mpiexec() -> Optional[str]:
    """``mpiexec`` next to this Python (the mpich wheel puts it there), else on ``PATH``."""
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    return shutil.which("mpiexec", path=path)


def rank_args(
    backend: str,
    out: Path,
    scenarios: Sequence[str],
    timeout: Optional[float],
    params: Optional[Dict[str, Any]] = None,
    codec: str = "",
    grace: float = 0.0,
) -> List[str]:
    """The ``rank_main.py`` arguments shared by every rank of a launch."""
    args = [sys.executable, str(RANK_MAIN), "--backend", backend, "--out", str(out), "--scenarios", ",".join(scenarios)]
    if timeout is not None:
        args += ["--timeout", str(timeout)]
    if codec:
        args += ["--codec", codec]
    if grace:
        args += ["--grace", str(grace)]
    for key, value in (params or {}).items():
        args += ["--param", f"{key}={json.dumps(value)}"]
    return args


class LaunchFailure(AssertionError):
    """A launch missed a deadline or a rank reported a failure."""


class Launch:
    """Processes started for one test (one or more sessions), and the per-rank event files they write."""

    def __init__(self, out: Path, world_size: int) -> None:
        self.out = out
        self.world_size = world_size
        self.procs: List[subprocess.Popen] = []
        self.extra_pids: List[int] = []  # processes found in our network namespaces
        out.mkdir(parents=True, exist_ok=True)

    def start(self, cmd: List[str], env: Dict[str, str], label: str) -> subprocess.Popen:
        """Start ``cmd`` in its own session, its output to ``<out>/<label>.log``."""
        log = open(self.out / f"{label}.log", "wb")
        try:
            proc = subprocess.Popen(
                cmd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=str(HERE),
            )
        finally:
            log.close()
        self.procs.append(proc)
        return proc

    # -- events ----------------------------------------------------------------

    def events(self, rank: int) -> List[Dict[str, Any]]:
        """Every complete event rank ``rank`` has written so far."""
        path = self.out / f"rank{rank}.jsonl"
        if not path.exists():
            return []
        out = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:  # a line being written
                pass
        return out

    def find(self, rank: int, event: str, **match: Any) -> Optional[Dict[str, Any]]:
        for e in self.events(rank):
            if e["event"] == event and all(e.get(k) == v for k, v in match.items()):
                return e
        return None

    def wait_event(self, ranks: Sequence[int], event: str, timeout: float, **match: Any) -> Dict[int, Dict[str, Any]]:
        """Wait until every rank of ``ranks`` wrote ``event`` (with fields ``match``); fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        found: Dict[int, Dict[str, Any]] = {}
        while True:
            for r in ranks:
                if r not in found:
                    e = self.find(r, event, **match)
                    if e is not None:
                        found[r] = e
            if len(found) == len(ranks):
                return found
            if time.monotonic() > deadline:
                missing = sorted(set(ranks) - set(found))
                raise LaunchFailure(
                    f"ranks {missing} did not write {event!r} {match or ''} within {timeout:g}s\n" + self.describe()
                )
            if self.procs and all(p.poll() is not None for p in self.procs) and not self.extra_pids:
                # everything exited: one last read, then fail
                for r in ranks:
                    if r not in found and self.find(r, event, **match) is not None:
                        found[r] = self.find(r, event, **match)  # type: ignore[assignment]
                if len(found) == len(ranks):
                    return found
                raise LaunchFailure(
                    f"the launch exited before ranks {sorted(set(ranks) - set(found))} wrote "
                    f"{event!r}\n" + self.describe()
                )
            time.sleep(0.05)

    def results(self, ranks: Sequence[int], scenario: str, timeout: float) -> Dict[int, Dict[str, Any]]:
        """The ``info`` of ``scenario`` on every rank of ``ranks``; fails on a rank that recorded failures."""
        found = self.wait_event(ranks, "result", timeout, scenario=scenario)
        bad = {r: e["info"].get("failures") for r, e in found.items() if not e["ok"]}
        if bad:
            raise LaunchFailure(
                f"{scenario} failed on ranks {sorted(bad)}: {json.dumps(bad, indent=1)[:6000]}\n" + self.describe()
            )
        return {r: e["info"] for r, e in found.items()}

    # -- control ---------------------------------------------------------------

    def kill_rank(self, rank: int) -> float:
        """SIGKILL rank ``rank`` (its pid from its ``ready`` event); return the monotonic time of the kill."""
        ready = self.find(rank, "ready")
        assert ready is not None, f"rank {rank} never got ready\n{self.describe()}"
        when = time.monotonic()
        os.kill(int(ready["pid"]), signal.SIGKILL)
        return when

    def describe(self) -> str:
        parts = []
        for r in range(self.world_size):
            lines = [json.dumps(e)[:600] for e in self.events(r)]
            parts.append(f"--- rank {r} events ---\n" + "\n".join(lines[-15:]))
        for log in sorted(self.out.glob("*.log")):
            text = log.read_text(errors="replace")
            parts.append(f"--- {log.name} (last 3000 chars) ---\n{text[-3000:]}")
        return "\n".join(parts)

    def close(self) -> None:
        """SIGKILL every session this launch started and every process found in its namespaces."""
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in self.extra_pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a process stuck in the kernel
                pass

    def __enter__(self) -> "Launch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def launch_torch(
    out: Path,
    world_size: int,
    scenarios: Sequence[str],
    timeout: Optional[float] = 10.0,
    params: Optional[Dict[str, Any]] = None,
    codec: str = "",
    env: Optional[Dict[str, str]] = None,
    prefix: Optional[Sequence[Sequence[str]]] = None,
    addr: str = "127.0.0.1",
    ifname: str = "lo",
) -> Launch:
    """Start ``world_size`` torch_cpu ranks (gloo over TCP), one process each.

    ``prefix[r]`` is put before rank r's command (``ip netns exec NS``).
    """
    launch = Launch(out, world_size)
    port = free_port()
    base = rank_args("torch_cpu", out, scenarios, timeout, params, codec)
    try:
        for r in range(world_size):
            cmd = [
                *(prefix[r] if prefix else ()),
                *base,
                "--rank",
                str(r),
                "--world-size",
                str(world_size),
                "--addr",
                addr,
                "--port",
                str(port),
                "--ifname",
                ifname,
            ]
            launch.start(cmd, worker_env(env), f"torch-rank{r}")
    except BaseException:
        launch.close()
        raise
    return launch


def launch_mpi(
    out: Path,
    n: int,
    scenarios: Sequence[str],
    timeout: Optional[float] = 10.0,
    params: Optional[Dict[str, Any]] = None,
    codec: str = "",
    env: Optional[Dict[str, str]] = None,
    launcher_args: Sequence[str] = (),
    prefix: Sequence[str] = (),
    grace: float = 0.0,
    shell_parent: bool = False,
) -> Launch:
    """Start ``mpiexec [launcher_args] -n N python rank_main.py --backend mpi4py ...`` (``prefix`` before it).

    ``shell_parent``: each rank's Python runs as the child of a shell, which
    exits normally (status 137) when the rank is SIGKILLed. Hydra's proxy
    (MPICH 5) SIGKILLs every rank of the job as soon as one of *its* children
    dies by a signal, ``-disable-auto-cleanup`` or not; and when one exits, it
    sends SIGUSR1 (MPICH's process-failure notice) to the others' process
    groups, which the ranks' MPI handles but a plain shell would die of -- so
    the shell traps it. With the shell in between, the surviving ranks live on
    and what they do about the dead peer is mmeval's behaviour, not the
    launcher's.
    """
    mpiexec = find_mpiexec()
    assert mpiexec is not None, "mpiexec not found next to this Python or on PATH (pip install mpich)"
    launch = Launch(out, n)
    parent = ["sh", "-c", 'trap : USR1; "$@"; exit $?', "sh"] if shell_parent else []
    cmd = [
        *prefix,
        mpiexec,
        *launcher_args,
        "-n",
        str(n),
        *parent,
        *rank_args("mpi4py", out, scenarios, timeout, params, codec, grace),
    ]
    launch.start(cmd, worker_env(env), "mpiexec")
    return launch


def launch_backend(
    backend: str,
    out: Path,
    world_size: int,
    scenarios: Sequence[str],
    timeout: Optional[float] = 10.0,
    params: Optional[Dict[str, Any]] = None,
    codec: str = "",
    env: Optional[Dict[str, str]] = None,
    faults: bool = False,
) -> Launch:
    """``world_size`` ranks of ``backend`` (``torch_cpu`` or ``mpi4py``) on this host.

    ``faults=True`` prepares an MPI job for ranks that die or time out: Hydra
    keeps the others running (``-disable-auto-cleanup``, a shell parent per
    rank), and the ranks stay alive 4 s after their last scenario, so that
    every rank reports before the first one's ``MPI_Abort`` at exit ends the job.
    """
    if backend == "torch_cpu":
        return launch_torch(out, world_size, scenarios, timeout, params, codec, env)
    if backend == "mpi4py":
        return launch_mpi(
            out,
            world_size,
            scenarios,
            timeout,
            params,
            codec,
            env,
            launcher_args=["-disable-auto-cleanup"] if faults else [],
            grace=4.0 if faults else 0.0,
            shell_parent=faults,
        )
    raise ValueError(f"unknown backend {backend!r}")
