"""The group guarantees, kept once for every framed backend.

:class:`GroupGuard` runs one collective of a backend: the group's state
(looked up by the backend's ``_sequence_key()``), the sequence number, one
call at a time, poisoning after a failure, the deadline (a :class:`Call`),
error translation and the single point where hook events are emitted. The
collectives themselves (:mod:`.framed_backend`, :mod:`.reduction`) run inside
:meth:`GroupGuard.run` and wrap every transport step in
:meth:`GroupGuard.transport_step`.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from typing import Any, Callable, ClassVar, Dict, Hashable, List, Optional, Protocol, Sequence, Tuple

from ..errors import (
    CollectiveFailedError,
    ConcurrentCollectiveError,
    DistCommunicationError,
    GroupPoisonedError,
)
from ..hook_manager import HOOKS
from ..hook_specs import CollectiveEvent
from ..wire import DEADLINE_SKEW, Op, SlotHeader
from .transport import Call, PeerLost

__all__ = ["GroupGuard", "GuardedBackend", "GroupState", "group_state", "late_ranks"]


class GuardedBackend(Protocol):
    """What a :class:`GroupGuard` reads of its backend (a ``FramedDistBackend``).

    ``_sequence_key()`` is the extension point a transport overrides to say which
    communicator its collectives run on: backend objects over one communicator
    share one :class:`GroupState` (sequence numbers, poisoning).
    """

    name: ClassVar[str]
    new_group_hint: ClassVar[str]
    timeout: float

    @property
    def rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    def _sequence_key(self) -> Hashable: ...


class GroupState:
    """What the ranks' collectives on one group share in this process."""

    __slots__ = ("lock", "seq", "poisoned", "running", "interfered")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seq = 0
        #: the first failure's message once the group is unusable
        self.poisoned: Optional[str] = None
        #: (thread name, op name, seq) of the collective running now
        self.running: Optional[tuple] = None  # type: ignore[type-arg]
        #: set by a refused concurrent call: the running call must fail too
        self.interfered: Optional[str] = None

    def poison(self, message: str) -> None:
        """Mark the group unusable (the first failure is kept)."""
        if self.poisoned is None:
            self.poisoned = message


_states_lock = threading.Lock()
#: states of keys that are objects (a backend, a group token): gone with the object, so a new object
#: born at a freed one's address starts clean (keying by ``id()`` handed it the old fate and sequence)
_object_states: "weakref.WeakKeyDictionary[Any, GroupState]" = weakref.WeakKeyDictionary()
#: states of value keys (tuples naming a communicator); such a key must never name two communicators
_value_states: Dict[Hashable, GroupState] = {}


def group_state(key: Hashable) -> GroupState:
    """The state of the group ``key`` names (a weak-referenceable object, or a value such as a tuple)."""
    with _states_lock:
        state: Optional[GroupState]
        try:
            table: Any = _object_states
            state = table.get(key)
        except TypeError:  # not weak-referenceable: a value key
            table = _value_states
            state = table.get(key)
        if state is None:
            state = table[key] = GroupState()
        return state


#: words of a transport error that mean a peer is gone
_LOST_PEER_WORDS = (
    "connection closed",
    "connection reset",
    "broken pipe",
    "closed by peer",
    "peer closed",
    "connection refused",
    "end of file",
    "process failed",
    "proc_failed",
    "eof",
)


def _lost_peer(exc: BaseException) -> bool:
    if isinstance(exc, PeerLost):
        return True
    text = str(exc).lower()
    return any(w in text for w in _LOST_PEER_WORDS)


class GroupGuard:
    """Runs a backend's collectives with every group guarantee (one guard per backend object)."""

    def __init__(self, backend: GuardedBackend) -> None:
        self.backend = backend

    @property
    def label(self) -> str:
        return self.backend.name or type(self.backend).__name__

    @property
    def state(self) -> GroupState:
        return group_state(self.backend._sequence_key())

    def run(self, op: int, root: int, body: Callable[[Call, List[int]], Any]) -> Any:
        """Run ``body(call, counters)`` as collective ``op`` of this group; ``counters``: [bytes sent, received].

        Refuses at once on a poisoned group and from a second thread (poisoning
        the group: the running call fails too); numbers the call, emits the
        hook events around it.
        """
        b, name, op_name = self.backend, self.label, Op.NAMES[op]
        rank, ws = b.rank, b.world_size
        state = self.state
        if state.poisoned is not None:
            raise GroupPoisonedError(
                f"{name}: {op_name} refused on rank {rank}: this group is unusable since an earlier collective "
                f"failed ({state.poisoned}). Build a new group ({b.new_group_hint}) and a new backend over it "
                "to go on."
            )
        thread = threading.current_thread().name
        if not state.lock.acquire(blocking=False):
            other = state.running or ("another thread", "a collective", 0)
            message = (
                f"{name}: {op_name} called by thread {thread!r} on rank {rank} while thread {other[0]!r} was in "
                f"{other[1]} (collective #{other[2]}) on the same group. One collective at a time per group: "
                "call collectives from one thread, or give each thread its own group."
            )
            state.interfered = message
            state.poison(f"concurrent collectives from two threads: {message}")
            raise ConcurrentCollectiveError(message)
        try:
            state.seq += 1
            seq = state.seq
            state.running = (thread, op_name, seq)
            emit = HOOKS.active()
            if emit:
                HOOKS.emit_start(op_name, name, rank, ws)
            start = time.monotonic()
            call = Call(name, op_name, seq, rank, ws, root, b.timeout)
            counters = [0, 0]
            try:
                result = body(call, counters)
                if state.interfered is not None:
                    raise ConcurrentCollectiveError(
                        f"{name}: {op_name} (collective #{seq}) cannot be trusted: {state.interfered}"
                    )
            except BaseException as exc:
                if emit:
                    self._emit(call, counters, start, type(exc).__name__, str(exc))
                raise
            if emit:
                self._emit(call, counters, start, "ok", "")
            return result
        finally:
            state.running = None
            state.interfered = None
            state.lock.release()

    def _emit(self, call: Call, counters: List[int], start: float, outcome: str, error: str) -> None:
        HOOKS.emit(
            CollectiveEvent(
                op=call.op,
                backend=call.backend,
                rank=call.rank,
                world_size=call.world_size,
                root=None if call.root < 0 else call.root,
                seq=call.seq,
                bytes_sent=counters[0],
                bytes_received=counters[1],
                seconds=time.monotonic() - start,
                outcome=outcome,
                error=error,
            )
        )

    def transport_step(self, call: Call, what: str, step: Callable[[], Any]) -> Any:
        """Run one transport step; on failure keep its buffers, poison the group and raise the translated error."""
        call.stage, call.detail = what, ""
        try:
            return step()
        except BaseException as exc:
            call.abandon()
            error = self.translate(call, exc)
            self.state.poison(f"{call.op} (collective #{call.seq}) on rank {call.rank}: {error}")
            if error is exc:
                raise
            raise error from exc

    def fail(self, call: Call, error: BaseException) -> BaseException:
        """A failure the core found between transport steps (bad slots, a stale peer): poison the group, return it."""
        call.abandon()
        error = self.translate(call, error)
        self.state.poison(f"{call.op} (collective #{call.seq}) on rank {call.rank}: {error}")
        return error

    def check_windows(self, call: Call, headers: List[SlotHeader]) -> None:
        """Fail the call on every rank when the ranks' call windows do not overlap (see :func:`late_ranks`).

        A rank that began its call more than :data:`DEADLINE_SKEW` s after a
        peer's deadline paired with a call that peer had given up (timed out,
        poisoned): it must not complete. The verdict reads the headers alone,
        which every rank receives alike (the slot exchange is an all-gather in
        every collective), so every rank decides the same: a host clock behind
        by more than the timeout plus the skew fails the call everywhere, never
        on one host while the other answers.
        """
        found = late_ranks(headers)
        if found is None:
            return
        late, ended = found
        last = max(late, key=lambda r: headers[r].start)
        first = min(ended, key=lambda r: headers[r].deadline)
        gap = headers[last].start - headers[first].deadline
        began, gone = _ranks(late), _ranks(ended)
        raise self.fail(
            call,
            CollectiveFailedError(
                f"{call.backend}: {call.op} (collective #{call.seq} on rank {call.rank} of {call.world_size}) fails "
                f"on every rank that exchanged these headers: {began} began this call after the deadline of {gone} "
                f"(rank {last}'s window {_window(headers[last])}, {gap:.1f} s after rank {first}'s "
                f"{_window(headers[first])}, each on its host's wall clock). Either {gone} gave this collective up "
                f"(timed out) before {began} called, and the call paired with an abandoned operation, or the host "
                f"clock (time.time()) of {gone} is behind that of {began} by more than the timeout plus "
                f"{DEADLINE_SKEW:g} s: keep the hosts' clocks synchronised (NTP, chrony). The group cannot be used "
                f"for further collectives; every rank must call it within the timeout (timeout=..., "
                f"MMEVAL_{call.backend.upper()}_TIMEOUT / MMEVAL_TIMEOUT)."
            ),
        )

    def translate(self, call: Call, exc: BaseException) -> BaseException:
        """The error to raise for ``exc`` raised by a transport step."""
        if isinstance(exc, DistCommunicationError) and not isinstance(exc, PeerLost):
            return exc
        if isinstance(exc, TimeoutError):
            return call.timeout_error()
        if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: raised as they are
            return exc
        where = f"{call.backend}: {call.op} (collective #{call.seq} on rank {call.rank} of {call.world_size})"
        if getattr(exc, "departed", False):  # a peer said it left, and why (a transport's leave notice)
            return CollectiveFailedError(
                f"{where} failed while {call.doing}: {exc}. The group cannot be used for further collectives."
            )
        if _lost_peer(exc):
            return CollectiveFailedError(
                f"{where} failed while {call.doing}: a peer rank has probably died or closed its connection "
                f"({type(exc).__name__}: {exc}). The group cannot be used for further collectives."
            )
        return CollectiveFailedError(
            f"{where} failed while {call.doing}: {type(exc).__name__}: {exc}. "
            "The group cannot be used for further collectives."
        )


def late_ranks(headers: Sequence[SlotHeader]) -> Optional[Tuple[List[int], List[int]]]:
    """``(late, ended)`` when the call windows in ``headers`` do not overlap within :data:`DEADLINE_SKEW`, else ``None``.

    Each header carries its sender's window, ``[start, deadline]`` on its own
    wall clock. The windows overlap when the latest start is at most the
    earliest deadline plus the skew; otherwise ``late`` are the ranks that
    began after the earliest deadline plus the skew, and ``ended`` the ranks
    whose deadline plus the skew came before the latest start. A function of
    the headers alone: every rank that holds the same headers gets the same answer.
    """
    latest = max(h.start for h in headers)
    earliest = min(h.deadline or math.inf for h in headers)
    if latest <= earliest + DEADLINE_SKEW:
        return None
    late = [r for r, h in enumerate(headers) if h.start > earliest + DEADLINE_SKEW]
    ended = [r for r, h in enumerate(headers) if h.deadline and h.deadline + DEADLINE_SKEW < latest]
    return late, ended


def _ranks(ranks: List[int]) -> str:
    shown = ", ".join(map(str, ranks[:8])) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
    return f"rank{'s' if len(ranks) > 1 else ''} {shown}"


def _window(header: SlotHeader) -> str:
    """``[start, deadline]`` as UTC times of day (hundredths of a second)."""

    def at(t: float) -> str:
        return time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int(t * 100) % 100:02d}"

    return f"[{at(header.start)}, {at(header.deadline) if header.deadline else 'no deadline'}] UTC"
