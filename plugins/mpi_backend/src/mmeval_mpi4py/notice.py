"""Leave notices: a rank whose part ends tells its peers, which raise naming it instead of waiting out the timeout.

MPI does not tell a rank that a peer has left: a rank that raised outside a
collective exits through ``MPI_Finalize``, which waits for the others, while
they wait in their next collective until ``MMEVAL_TIMEOUT``. So, when this
process's part ends -- an uncaught exception, the end of the script or
``sys.exit``, ``SIGTERM`` / ``SIGHUP`` (see :mod:`mmeval.core.dist_backends.leave`)
-- and MPI is running, it sends each peer of every communicator a backend
used (and ``COMM_WORLD``) one small point-to-point message with tag
:data:`NOTICE_TAG`: its rank, how many collectives it completed on that
communicator, and why it leaves. It waits at most :data:`SEND_WAIT` s for the
sends to complete.

A rank waiting in a collective probes for such a message every
:data:`PROBE_EVERY` s (``MPI_Iprobe``; a collective that completes sooner
never probes). A notice from a rank that completed fewer collectives than the
one being waited for fails the collective at once, naming that rank and its
reason; any other notice (the rank finished every collective before it left)
is kept and fails only a later collective that rank will never join.

Point-to-point messages never match a collective, so the notices do not
disturb the collectives on the same communicator; the tag is reserved on the
communicators given to the backend. A rank killed without a word (SIGKILL, a
lost host) sends nothing: its peers learn it from the MPI library (MPICH and
Open MPI end the job when they see the loss) or at the timeout.
``MMEVAL_MPI4PY_LEAVE_NOTICE=0`` turns the notices off.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from mmeval.core.dist_backends import on_leave
from mmeval.core.dist_backends.plugin_kit import flag, read_setting
from mmeval.core.errors import PeerLost

__all__ = ["NOTICE_TAG", "watch", "send_notices", "Listener", "SEND_WAIT", "PROBE_EVERY"]

#: The point-to-point tag of a leave notice (``'MM'``; MPI guarantees tags up to 32767).
NOTICE_TAG = 0x4D4D
#: Longest a leaving rank waits for its notices to be sent (seconds).
SEND_WAIT = 2.0
#: Longest a leaving rank waits for its peers' notices before it goes on to ``MPI_Finalize`` (seconds).
LINGER = 10.0
#: Seconds between two probes for notices while a collective waits.
PROBE_EVERY = 0.02
#: Longest reason carried (characters).
WHY_MAX = 2000

_lock = threading.Lock()
#: communicators the backends used, by handle (strong references: a notice goes to every one of them)
_comms: Dict[int, Any] = {}
#: set when this process will call ``MPI_Abort`` at exit (a collective failed): no lingering then
aborting = False
#: communicators this rank has sent its notice on (one notice per communicator)
_told: Set[int] = set()
_state_of: Optional[Callable[[Any], Tuple[int, Dict[int, Any]]]] = None


def watch(comm: Any, state_of: Callable[[Any], Tuple[int, Dict[int, Any]]]) -> None:
    """Send a notice on ``comm`` (``None``: ``COMM_WORLD``) when this process leaves.

    ``state_of(comm)`` says how many collectives this rank finished on a
    communicator, and holds the notices already read from it (see
    :class:`Listener`). Cheap: imports nothing of MPI; the hooks are installed once.
    """
    global _state_of
    with _lock:
        _state_of = state_of
        if comm is not None:
            try:
                _comms.setdefault(int(comm.py2f()), comm)
            except Exception:  # a communicator already freed
                return
    on_leave(send_notices)


def _running() -> Any:
    mpi = sys.modules.get("mpi4py.MPI")
    try:
        if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
            return mpi
    except Exception:
        pass
    return None


def send_notices(why: str, linger: bool = True, comm: Any = None) -> None:
    """Send every peer of every watched communicator this rank's notice; then, with ``linger``, read theirs.

    The sends are waited for at most :data:`SEND_WAIT` s. Then, unless the
    process must end now (a signal), it reads its peers' notices on those
    communicators for at most :data:`LINGER` s, until every peer's has come:
    a notice must not arrive at a rank that has already finalized MPI (MPICH
    then ended the job with a SIGKILL, about 1 run in 7). Normally every rank
    leaves at about the same time and this takes milliseconds; ``MPI_Finalize``,
    which comes next, waits for the peers anyway.

    ``comm``: send on that communicator only (a collective on it failed on
    this rank). One notice at most per communicator: a later call skips the
    communicators already told.
    """
    mpi = _running()
    if mpi is None or not read_setting("mpi4py", "LEAVE_NOTICE", flag, True, "1 or 0"):
        return
    with _lock:
        comms = list(_comms.values()) if comm is None else [comm]
        state_of = _state_of
    world = mpi.COMM_WORLD
    if comm is None and all(c != world for c in comms):
        comms.append(world)
    every = comms
    with _lock:
        comms = [c for c in comms if _handle(c) not in _told]
        _told.update(_handle(c) for c in comms)
    requests: List[Any] = []
    keep: List[Any] = []
    host = socket.gethostname()
    for comm in comms:
        try:
            if comm == mpi.COMM_NULL:
                continue
            rank, size = comm.Get_rank(), comm.Get_size()
            done = state_of(comm)[0] if state_of is not None else 0
            text = json.dumps({"rank": rank, "done": done, "why": why[:WHY_MAX], "host": host, "pid": os.getpid()})
            buf = bytearray(text.encode())
            keep.append(buf)
            requests += [comm.Isend([buf, mpi.BYTE], dest=peer, tag=NOTICE_TAG) for peer in range(size) if peer != rank]
        except Exception:  # a freed or broken communicator: the others still get theirs
            continue
    deadline = time.monotonic() + SEND_WAIT
    while requests and time.monotonic() < deadline:
        requests = [r for r in requests if not r.Test()]
        if requests:
            time.sleep(0.001)
    if requests:  # a peer that is gone: the request stays pending; its buffer must outlive it
        from mmeval.core.dist_backends import keep_forever

        keep_forever((requests, keep))
    if linger and not aborting:  # MPI_Abort at exit ends every rank: no notice can reach a finalized one
        _linger(every, state_of, time.monotonic() + LINGER)


def _handle(comm: Any) -> int:
    try:
        return int(comm.py2f())
    except Exception:
        return -1


def _linger(comms: List[Any], state_of: Any, deadline: float) -> None:
    """Read the peers' notices on ``comms`` until each peer's has come or ``deadline`` passes."""
    for comm in comms:
        try:
            departed = state_of(comm)[1] if state_of is not None else {}
            listener = Listener(comm, 0, departed)
            others = comm.Get_size() - 1
            while True:
                listener.receive()
                if len(departed) - (comm.Get_rank() in departed) >= others or time.monotonic() > deadline:
                    break
                time.sleep(0.002)
        except Exception:  # a freed or broken communicator
            continue


class Listener:
    """Probes ``comm`` for leave notices while one collective waits; raises :class:`PeerLost` for a rank that left.

    ``departed`` maps a rank to its notice and is shared by every collective on
    the communicator (the group token's state), so a notice read during one
    collective still fails a later one that rank will not join.
    """

    __slots__ = ("comm", "seq", "departed", "last")

    def __init__(self, comm: Any, seq: int, departed: Dict[int, Tuple[int, str, str]]) -> None:
        self.comm = comm
        self.seq = seq
        self.departed = departed
        self.last = time.monotonic()

    def __call__(self) -> bool:
        """Probe now and then; ``False``, or :class:`PeerLost` when a rank that left will not join this collective."""
        now = time.monotonic()
        if now - self.last < PROBE_EVERY:
            return False
        self.last = now
        self.receive()
        self.check()
        return False

    def receive(self) -> None:
        """Read every notice that has arrived into :attr:`departed`."""
        mpi = sys.modules["mpi4py.MPI"]
        status = mpi.Status()
        while self.comm.Iprobe(source=mpi.ANY_SOURCE, tag=NOTICE_TAG, status=status):
            buf = bytearray(status.Get_count(mpi.BYTE))
            self.comm.Recv([buf, mpi.BYTE], source=status.Get_source(), tag=NOTICE_TAG)
            try:
                notice = json.loads(bytes(buf).decode())
                rank, done = int(notice["rank"]), int(notice["done"])
                why = str(notice.get("why", ""))
                where = f"host {notice.get('host', '?')}, pid {notice.get('pid', '?')}"
            except (ValueError, KeyError, TypeError):
                rank, done, why, where = status.Get_source(), 0, f"an unreadable notice {bytes(buf[:200])!r}", "?"
            self.departed[rank] = (done, why, where)

    def check(self) -> None:
        """Raise :class:`PeerLost` when a rank that left completed fewer collectives than this one's number."""
        for rank in sorted(self.departed):
            done, why, where = self.departed[rank]
            if done < self.seq:
                error = PeerLost(
                    f"rank {rank} ({where}) left after completing {done} collective(s) on this communicator, "
                    f"so it will never join collective #{self.seq}: {why}"
                )
                error.departed = True  # type: ignore[attr-defined]
                raise error
