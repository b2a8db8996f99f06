"""Run a function on N ranks as real processes, bounded, and collect what each rank did.

The multi-rank test harness every test directory (and the benchmarks) share:
:func:`free_port` for a rendezvous port, :func:`run_ranks` to run
``target(rank, world_size, *args)`` in ``world_size`` spawned processes and
return one :class:`RankOutcome` per rank. It imports no framework: a target
that needs torch or jax imports it in the rank.

Guarantees of :func:`run_ranks`: it returns (or raises) within ``timeout``
seconds plus the time to kill and reap the ranks; every process it started has
exited and been reaped when it returns, whatever happened (a rank past the
bound is SIGKILLed and reported ``"timed out"``; an exception or Ctrl-C in the
parent kills them too); on Linux a rank also gets SIGKILL when the process that
started it dies, so a killed test run leaves no orphan ranks behind.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["RankOutcome", "RanksFailed", "free_port", "raise_for_failures", "run_ranks", "values"]

#: The values of :attr:`RankOutcome.status`.
STATUSES = ("ok", "raised", "died", "timed out")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago (the OS picks it; another process may take it later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class RankOutcome:
    """What one rank did.

    ``status`` is ``"ok"`` (``target`` returned ``value``), ``"raised"`` (it
    raised: ``error_type`` is the exception's qualified class name, ``message``
    its text, ``traceback`` the formatted traceback), ``"died"`` (the process
    ended without reporting: ``exitcode`` says how, negative for a signal) or
    ``"timed out"`` (still running at the bound, then killed). ``elapsed`` is
    the seconds from the start of the ranks to this rank's report or end.
    """

    rank: int
    status: str
    value: Any = None
    error_type: str = ""
    message: str = ""
    traceback: str = ""
    exitcode: Optional[int] = None
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether ``target`` returned on this rank."""
        return self.status == "ok"

    def __str__(self) -> str:
        head = f"rank {self.rank}: {self.status} after {self.elapsed:.1f}s"
        if self.status == "ok":
            return f"{head}: {self.value!r}"[:2000]
        if self.status == "raised":
            return f"{head}: {self.error_type}: {self.message}\n{self.traceback}"
        return f"{head} (exit code {self.exitcode})"


class RanksFailed(AssertionError):
    """Some rank did not return; ``outcomes`` holds every rank's :class:`RankOutcome`."""

    def __init__(self, outcomes: Sequence[RankOutcome]) -> None:
        self.outcomes = list(outcomes)
        bad = [o for o in self.outcomes if not o.ok]
        super().__init__(f"{len(bad)} of {len(self.outcomes)} ranks failed:\n" + "\n".join(map(str, bad)))


def raise_for_failures(outcomes: Sequence[RankOutcome]) -> None:
    """Raise :class:`RanksFailed`, describing each failed rank, unless every rank returned."""
    if not all(o.ok for o in outcomes):
        raise RanksFailed(outcomes)


def values(outcomes: Sequence[RankOutcome]) -> List[Any]:
    """Each rank's return value in rank order; :class:`RanksFailed` unless every rank returned."""
    raise_for_failures(outcomes)
    return [o.value for o in outcomes]


def _die_with_parent() -> None:
    """Linux: ask for SIGKILL when the parent process dies (no orphan rank); elsewhere nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        pass


def _rank_main(
    target: Callable[..., Any],
    rank: int,
    world_size: int,
    args: Tuple[Any, ...],
    env: Mapping[str, Optional[str]],
    conn: Connection,
    parent_pid: int,
) -> None:
    """A rank's body: run ``target`` and send ``(status, payload)`` to the parent once."""
    _die_with_parent()
    if parent_pid and os.getppid() != parent_pid:  # the parent died before the request above
        os._exit(1)
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        try:
            result: Tuple[str, Any] = ("ok", target(rank, world_size, *args))
            conn.send(result)
        except BaseException as exc:  # everything is reported, KeyboardInterrupt and SystemExit too
            kind = type(exc)
            conn.send(("raised", (f"{kind.__module__}.{kind.__qualname__}", str(exc), traceback.format_exc())))
    finally:
        conn.close()


def _receive(rank: int, reader: Connection, reports: Dict[int, Tuple[str, Any, float]], start: float) -> None:
    """Read rank ``rank``'s report if one is there (none: it ended without one), then close its pipe."""
    try:
        if reader.poll(0):
            status, payload = reader.recv()
            reports[rank] = (status, payload, time.monotonic() - start)
    except (EOFError, OSError):  # the rank ended without a report
        pass
    except Exception as exc:  # a value the parent cannot unpickle
        reports[rank] = (
            "raised",
            (type(exc).__qualname__, f"its result could not be received: {exc}", traceback.format_exc()),
            time.monotonic() - start,
        )
    finally:
        reader.close()


def run_ranks(
    target: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout: float = 120.0,
    per_rank_args: Optional[Sequence[Sequence[Any]]] = None,
    env: Optional[Mapping[str, Optional[str]]] = None,
    start_method: str = "spawn",
) -> List[RankOutcome]:
    """Run ``target(rank, world_size, *args)`` on ranks ``0 .. world_size-1``, one process each.

    ``target`` must be importable by name in a new process (a module-level
    function; ``sys.path`` is passed on by the spawn start method), and its
    arguments and return value picklable. ``per_rank_args[r]`` replaces
    ``args`` on rank r. ``env`` is set in each rank's ``os.environ`` before
    ``target`` runs, a ``None`` value removing the variable (set variables a
    framework reads at import there, and import the framework in ``target``).

    Returns one :class:`RankOutcome` per rank, in rank order, after every rank
    has reported and exited, or at ``timeout`` seconds, when the ranks still
    running are killed (``"timed out"``). It never raises for a rank's
    failure: :func:`values` or :func:`raise_for_failures` turn failures into
    an assertion naming each failed rank.
    """
    if world_size < 1:
        raise ValueError(f"run_ranks: world_size must be >= 1, got {world_size}")
    if per_rank_args is not None and len(per_rank_args) != world_size:
        raise ValueError(f"run_ranks: per_rank_args has {len(per_rank_args)} entries for {world_size} ranks")
    ctx: Any = multiprocessing.get_context(start_method)  # typeshed's BaseContext lacks .Process
    # a forkserver's children are not ours: their parent-death check is skipped
    parent_pid = 0 if start_method == "forkserver" else os.getpid()
    start = time.monotonic()
    deadline = start + timeout
    procs: List[Any] = []
    readers: Dict[int, Connection] = {}
    reports: Dict[int, Tuple[str, Any, float]] = {}
    ended: Dict[int, float] = {}
    try:
        for rank in range(world_size):
            reader, writer = ctx.Pipe(duplex=False)
            rank_args = tuple(per_rank_args[rank]) if per_rank_args is not None else args
            proc = ctx.Process(
                target=_rank_main,
                name=f"mmeval-rank{rank}",
                args=(target, rank, world_size, rank_args, dict(env or {}), writer, parent_pid),
            )
            proc.start()
            writer.close()
            procs.append(proc)
            readers[rank] = reader
        sentinels = {proc.sentinel: rank for rank, proc in enumerate(procs)}
        while len(ended) < world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            waiting: List[Any] = list(readers.values()) + [s for s, r in sentinels.items() if r not in ended]
            for ready in wait(waiting, timeout=left):
                if isinstance(ready, Connection):
                    rank = next(r for r, c in readers.items() if c is ready)
                    _receive(rank, readers.pop(rank), reports, start)
                else:
                    rank = sentinels[ready]
                    if rank in readers:  # it ended: what it sent is in the pipe already, else nothing will come
                        _receive(rank, readers.pop(rank), reports, start)
                    ended[rank] = time.monotonic() - start
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        for proc in procs:
            proc.join()
        for reader in readers.values():
            reader.close()
    outcomes = []
    for rank, proc in enumerate(procs):
        code = proc.exitcode
        if rank in reports:
            status, payload, when = reports[rank]
            if status == "ok":
                outcomes.append(RankOutcome(rank, "ok", value=payload, exitcode=code, elapsed=when))
            else:
                kind, message, tb = payload
                outcomes.append(
                    RankOutcome(
                        rank, "raised", error_type=kind, message=message, traceback=tb, exitcode=code, elapsed=when
                    )
                )
        elif rank in ended:
            outcomes.append(RankOutcome(rank, "died", exitcode=code, elapsed=ended[rank]))
        else:
            outcomes.append(RankOutcome(rank, "timed out", exitcode=code, elapsed=time.monotonic() - start))
    return outcomes
