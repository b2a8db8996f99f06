"""Leave notices over the process group's store: a rank whose part ends tells its peers *why*.

gloo tells a waiting rank that a peer's connection closed, not why the peer
left. So, when this process's part ends -- an uncaught exception, the end of
the script or ``sys.exit``, ``SIGTERM`` / ``SIGHUP`` (see
:mod:`mmeval.core.dist_backends.leave`) -- and torch.distributed is
initialized, it writes one key to the default group's store (the
``TCPStore`` every rank of ``init_process_group`` shares): its global rank,
how many collectives it completed on each process group a backend used, and
why it leaves; then it adds 1 to the counter :data:`COUNT_KEY`.

A rank waiting in a collective reads that counter every :data:`POLL_EVERY` s
(one store round trip; a collective that completes sooner never asks), and
when the transport reports a failure (a closed connection) it reads the
notices at once. A notice from a member of the group that completed fewer
collectives on it than the one being waited for fails the collective, naming
the rank and why it left (:class:`~mmeval.core.errors.PeerLost`, raised by
the core as ``CollectiveFailedError``); the others are kept for a later
collective that rank will not join.

The store lives in the process of global rank 0 (``MASTER_ADDR``): when rank
0 itself leaves, it waits up to :data:`HOST_LINGER` s (not after a signal)
for every peer to have read its notice or left, since its store goes with it.
A rank killed without a word (``SIGKILL``, a lost host) writes nothing: its
peers learn it from gloo (a closed connection) or at the timeout.
``MMEVAL_TORCH_LEAVE_NOTICE=0`` turns the notices off.

No store call ever holds a wait or an exit: a store round trip blocks as long
as the link to the store's host is silent (a cut link sends no reset), so a
waiting collective reads the notices on a helper thread and only looks at what
it read -- its own deadline is checked as without notices -- and a leaving
rank writes its notice on a helper thread it waits for at most
:data:`WRITE_WAIT` s (plus :data:`HOST_LINGER` on the store's host).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from mmeval.core.dist_backends import group_state, on_leave
from mmeval.core.dist_backends.plugin_kit import GroupToken, flag, read_setting
from mmeval.core.errors import PeerLost

__all__ = [
    "COUNT_KEY",
    "POLL_EVERY",
    "HOST_LINGER",
    "register",
    "watch",
    "send_notice",
    "Listener",
    "WRITE_WAIT",
    "enabled",
    "listener_for",
]

#: The store key counting the notices written (each leaving rank adds 1 after writing its own).
COUNT_KEY = "mmeval/leave/count"
#: Seconds between two reads of the counter while a collective waits.
POLL_EVERY = 0.1
#: Longest the store's host (global rank 0) waits at its exit for its peers to read its notice (seconds).
HOST_LINGER = 5.0
#: Longest reason carried (characters).
WHY_MAX = 2000
#: Longest a leaving rank waits for its notice to be written, and a failed wait for the notices to be read (s).
WRITE_WAIT = 2.0


def _bounded(fn: Any, seconds: float) -> bool:
    """Run ``fn()`` on a daemon thread and wait for it at most ``seconds``; whether it finished. Where no thread
    can start (the interpreter is shutting down), ``fn()`` runs here."""
    thread = threading.Thread(target=fn, name="mmeval-torch-leave", daemon=True)
    try:
        thread.start()
    except RuntimeError:
        fn()
        return True
    thread.join(seconds)
    return not thread.is_alive()


class _Watched:
    """This process's part of the notices, on one instance (:data:`WATCHED`), as the core's leave state is: whether
    :func:`send_notice` is registered, and the groups a backend waited on, by name (their tokens hold the
    collective count; see :func:`watch`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.groups: Dict[str, GroupToken] = {}
        self.registered = False


#: the one instance of this process's notice state
WATCHED = _Watched()


def enabled() -> bool:
    """Whether leave notices are on (``MMEVAL_TORCH_LEAVE_NOTICE``, default 1)."""
    return bool(read_setting("torch", "LEAVE_NOTICE", flag, True, "1 or 0"))


def _notice_key(global_rank: int) -> str:
    return f"mmeval/leave/rank{global_rank}"


def _ack_key(global_rank: int) -> str:
    return f"mmeval/leave/read{global_rank}"


def _store(dist: Any) -> Any:
    """The default group's store, or ``None`` where this torch does not expose it."""
    getter = getattr(getattr(dist, "distributed_c10d", None), "_get_default_store", None)
    try:
        return getter() if getter is not None else None
    except Exception:  # torch.distributed torn down
        return None


def group_name(dist: Any, group: Any) -> str:
    """A name of ``group`` that every member shares (``"WORLD"`` for the default group)."""
    if group is None or group is getattr(getattr(dist, "group", None), "WORLD", None):
        return "WORLD"
    getter = getattr(getattr(dist, "distributed_c10d", None), "_get_process_group_name", None)
    try:
        return str(getter(group)) if getter is not None else str(group.group_name)
    except Exception:
        return "?"


def register() -> None:
    """Run :func:`send_notice` when this process leaves (when notices are on); idempotent. Called when a torch
    backend is built, so that the signal handlers are in place before the first collective."""
    if not enabled():
        return
    with WATCHED.lock:
        first = not WATCHED.registered
        WATCHED.registered = True
    if first:
        on_leave(send_notice)


def watch(name: str, token: GroupToken) -> None:
    """Report this rank's collectives on group ``name`` (counted on ``token``) when it leaves. Cheap."""
    with WATCHED.lock:
        WATCHED.groups[name] = token
    register()


def completed(token: GroupToken) -> int:
    """Collectives this process completed on ``token``'s group (a failed or unfinished one does not count)."""
    state = group_state(token)
    return int(state.seq - (1 if state.running is not None or state.poisoned is not None else 0))


def send_notice(why: str, linger: bool = True) -> None:
    """Write this rank's notice to the default store (see the module); bounded (a silent link to the store's
    host costs at most :data:`WRITE_WAIT` s, plus :data:`HOST_LINGER` on that host), never raises."""
    _bounded(lambda: _write_notice(why, linger), WRITE_WAIT + (HOST_LINGER if linger else 0.0))


def _write_notice(why: str, linger: bool) -> None:
    dist = sys.modules.get("torch.distributed")
    if dist is None or not enabled():
        return
    try:
        if not dist.is_initialized():
            return
        store = _store(dist)
        if store is None:
            return
        rank, size = int(dist.get_rank()), int(dist.get_world_size())
        with WATCHED.lock:
            groups = dict(WATCHED.groups)
        done = {name: completed(token) for name, token in groups.items()}
        text = json.dumps(
            {"rank": rank, "done": done, "why": why[:WHY_MAX], "host": socket.gethostname(), "pid": os.getpid()}
        )
        store.set(_notice_key(rank), text)
        store.add(COUNT_KEY, 1)
        if rank == 0 and linger:
            _linger(store, size, time.monotonic() + HOST_LINGER)
    except Exception:  # the store is gone (its host left first): the peers learn it from gloo
        return


def _linger(store: Any, size: int, deadline: float) -> None:
    """On the store's host: wait until every peer read this rank's notice or left itself, or ``deadline``."""
    waiting = list(range(1, size))
    while waiting and time.monotonic() < deadline:
        waiting = [r for r in waiting if not store.check([_ack_key(r)]) and not store.check([_notice_key(r)])]
        if waiting:
            time.sleep(0.02)


class Listener:
    """Reads the store's notices while one collective waits; raises :class:`PeerLost` for a member that left.

    ``members`` are the group's global ranks (group rank -> global rank);
    ``seq`` the collective's number on the group called ``name``;
    ``departed`` (global rank -> notice) is shared by every collective on the
    group (the group token's state).
    """

    __slots__ = ("store", "name", "seq", "members", "departed", "count", "last", "rank", "reader")

    def __init__(self, dist: Any, name: str, seq: int, members: List[int], departed: Dict[int, Any]) -> None:
        self.store = _store(dist)
        self.name = name
        self.seq = seq
        self.members = members
        self.departed = departed
        self.count = -1
        self.last = time.monotonic()
        self.rank = int(dist.get_rank())
        self.reader: Optional[threading.Thread] = None

    def __call__(self) -> bool:
        """Read the counter now and then; ``False``, or :class:`PeerLost` when a member that left will not join.

        The read runs on a helper thread (one at a time): a store call blocked on a silent link never keeps the
        caller from its own deadline."""
        if time.monotonic() - self.last >= POLL_EVERY:
            self.last = time.monotonic()
            if self.reader is None or not self.reader.is_alive():
                self.reader = threading.Thread(target=self.receive, name="mmeval-torch-leave-read", daemon=True)
                self.reader.start()
            self.check()
        return False

    def receive(self) -> None:
        """Read every member's notice written since the last read (nothing when the counter did not move)."""
        if self.store is None:
            return
        try:
            count = int(self.store.add(COUNT_KEY, 0))
            if count == self.count:
                return
            self.count = count
            for r in self.members:
                if r != self.rank and r not in self.departed and self.store.check([_notice_key(r)]):
                    self.departed[r] = _parse(self.store.get(_notice_key(r)), self.name)
                    self.store.set(_ack_key(self.rank), "1")
        except Exception:  # the store's host is gone: gloo reports it
            self.store = None

    def check(self) -> None:
        """Raise :class:`PeerLost` when a member that left completed fewer collectives than this one's number."""
        for r, (done, why, where) in sorted(self.departed.copy().items()):  # the reader thread may add to it
            if done < self.seq:
                group_rank = self.members.index(r)
                named = f"rank {group_rank}" + (f" (global rank {r})" if group_rank != r else "")
                error = PeerLost(
                    f"{named} ({where}) left after completing {done} collective(s) on this process group, so it "
                    f"will never join collective #{self.seq}: {why}"
                )
                error.departed = True  # type: ignore[attr-defined]
                raise error


def _parse(raw: Any, name: str) -> Tuple[int, str, str]:
    """(collectives completed on group ``name``, why, where) of a notice."""
    try:
        notice = json.loads(bytes(raw).decode())
        done = int(notice.get("done", {}).get(name, 0))
        return done, str(notice.get("why", "")), f"host {notice.get('host', '?')}, pid {notice.get('pid', '?')}"
    except (ValueError, TypeError, AttributeError):
        return 0, f"an unreadable notice {bytes(raw[:200])!r}", "?"


def listener_for(dist: Any, group: Any, token: GroupToken, seq: int) -> Optional[Listener]:
    """The listener of collective ``seq`` on ``group`` (``None``: the default group), after :func:`watch`;
    ``None`` when notices are off or the store cannot be reached. The group's name, members and the notices
    read on it are kept in ``token``'s state."""
    state = token.state
    if "leave_enabled" not in state:
        state["leave_enabled"] = enabled()
    if not state["leave_enabled"]:
        return None
    name = state.get("leave_name")
    if name is None:
        name = state["leave_name"] = group_name(dist, group)
        if group is None:
            state["leave_members"] = list(range(int(dist.get_world_size())))
        else:
            state["leave_members"] = [int(r) for r in dist.get_process_group_ranks(group)]
    watch(name, token)
    listener = Listener(dist, name, seq, state["leave_members"], state.setdefault("departed", {}))
    return listener if listener.store is not None else None


def explain(listener: Optional[Listener], exc: BaseException) -> None:
    """After the transport reported ``exc`` (a closed connection): raise :class:`PeerLost` with a member's reason
    if one left. One read: a leaving rank writes its notice (synchronously) before its connections close."""
    if listener is None:
        return
    if listener.reader is not None:
        listener.reader.join(WRITE_WAIT)
    listener.count = -1
    _bounded(listener.receive, WRITE_WAIT)
    try:
        listener.check()
    except PeerLost as lost:
        raise lost from exc
