"""The transport contract: what a framed backend's primitives receive, and how they wait.

A backend built on :class:`~mmeval.core.dist_backends.FramedDistBackend`
implements one primitive that moves bytes (``_all_gather_bytes``) and may
override the others for speed. Each receives a :class:`Call`: the operation,
its phase, its sequence number, its deadline, this rank's frame, the per-rank
frame sizes and the root. A primitive must:

* start its transfers, then wait for them **only** through :meth:`Call.wait`
  (a transport with a timed wait: ``wait(lambda s: work.wait(s))``) or
  :meth:`Call.wait_until` (a transport with a completion test:
  ``wait_until(request.Test)``), or run a call that has no usable timed wait
  through :meth:`Call.run_blocking`. They wait in slices of at most
  :data:`WAIT_SLICE` seconds, so Ctrl-C (``KeyboardInterrupt``) surfaces within
  a second, and raise :class:`~mmeval.core.errors.CollectiveTimeoutError` at
  the deadline;
* hand every buffer a transfer may still write into or read from after an
  abandoned wait to :meth:`Call.keep` (kept alive for the life of the process
  if the call fails);
* raise :class:`PeerLost` when the transport reports that a peer is gone
  (closed connection, failed process), and let any other error propagate.

The core does the rest, for every backend: sequence numbers, the header
exchange and agreement, deadlines, error translation, poisoning of the group
after a failure, refusing a second concurrent collective on one group.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import time
from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence

from ..errors import CollectiveTimeoutError, PeerLost
from ..wire import Frame, encode_question

__all__ = ["Call", "PeerLost", "WAIT_SLICE", "asking", "keep_forever"]

#: Longest a primitive blocks in one go (seconds): bounds how late Ctrl-C is noticed.
WAIT_SLICE = 0.1

_yield: Callable[[], Any] = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))

# buffers of abandoned transfers: a late peer may still write into them
_kept: List[Any] = []


def keep_forever(obj: Any) -> None:
    """Keep ``obj`` alive until the process exits (buffers of a transfer that was given up)."""
    _kept.append(obj)


# -- the question: what every rank must agree on, carried in the header ---------------

_QUESTION: "contextvars.ContextVar[Optional[Mapping[str, Any]]]" = contextvars.ContextVar(
    "mmeval_question", default=None
)


@contextlib.contextmanager
def asking(question: Mapping[str, Any]) -> Iterator[None]:
    """Collectives started in this block carry ``question`` in their header; ranks that differ raise.

    ``question`` maps field names to any values: they are compared by their
    canonical encoding (:func:`mmeval.core.wire.canonical_question`), whatever
    their size or type, and a differing field is named with each rank's value.
    :meth:`BaseMetric.compute` uses it for the metric's class, configuration,
    collect mode and ``size``. Costs no extra collective: the question rides in
    the slot every collective exchanges anyway (:data:`~mmeval.core.wire.QUESTION_MAX` bytes).
    """
    token = _QUESTION.set(question)
    try:
        yield
    finally:
        _QUESTION.reset(token)


def question_bytes() -> bytes:
    """The question of the collective starting now, as the slot carries it (the calling thread's name included)."""
    return encode_question(_QUESTION.get(), threading.current_thread().name)


class Call:
    """One collective as a primitive sees it (built by the core; read-only for the primitive).

    Attributes:
        backend: the backend's registry name (for messages).
        op: the operation's name (``'all_gather_object'``, ...).
        seq: its sequence number on this group (the same on every rank).
        rank, world_size: this rank and the group's size.
        root: ``dst`` of a gather / ``src`` of a broadcast; ``-1`` for all-gathers.
        phase: ``'header'`` while the slots are exchanged (through
            ``_all_gather_bytes`` when the backend does not override
            ``_exchange_slots``), ``'payload'`` afterwards.
        deadline: ``time.monotonic()`` value past which the call has failed.
        wall_start, wall_deadline: when the call began and its deadline as
            ``time.time()`` (the call's window, sent in the slot header).
        timeout: the backend's timeout in seconds (for messages).
        frame: this rank's encoded object (``None`` where it sends nothing).
        sizes: per-rank frame sizes for the payload stage (for a broadcast,
            ``sizes[root]`` is the frame's size).
    """

    __slots__ = (
        "backend",
        "op",
        "seq",
        "rank",
        "world_size",
        "root",
        "deadline",
        "wall_start",
        "wall_deadline",
        "timeout",
        "frame",
        "sizes",
        "phase",
        "stage",
        "detail",
        "_kept",
    )

    def __init__(
        self,
        backend: str,
        op: str,
        seq: int,
        rank: int,
        world_size: int,
        root: int,
        timeout: float,
        frame: Optional[Frame] = None,
    ) -> None:
        self.backend = backend
        self.op = op
        self.seq = seq
        self.rank = rank
        self.world_size = world_size
        self.root = root
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.wall_start = time.time()
        self.wall_deadline = self.wall_start + timeout
        self.phase = "header"
        self.frame = frame
        self.sizes: Sequence[int] = ()
        #: what the call is doing now (``'exchanging headers'``, ...), for messages
        self.stage = "starting"
        #: what the primitive is waiting for, in the transport's words (set by :meth:`wait`)
        self.detail = ""
        self._kept: List[Any] = []

    # -- frames -----------------------------------------------------------------

    @property
    def size(self) -> int:
        """This rank's frame size (0 when it sends nothing)."""
        return self.frame.nbytes if self.frame is not None else 0

    def fill(self, out: memoryview) -> None:
        """Write this rank's whole frame into ``out`` (the transport's send buffer)."""
        if self.frame is not None:
            self.frame.write_into(out)

    # -- waiting ------------------------------------------------------------------

    def remaining(self) -> float:
        """Seconds left before the deadline; raises :class:`CollectiveTimeoutError` when none are."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.timeout_error()
        return left

    def wait(self, block: Callable[[float], Any], what: str = "") -> None:
        """Wait with a transport's own timed wait, in slices: ``block(seconds)`` returns truthy when done.

        ``block`` may also raise the transport's timeout error for an
        unfinished slice (it is told apart by :meth:`remaining`): any exception
        raised while time is left and that does not look like a slice timeout
        is the transport's failure and propagates.
        """
        if what:
            self.detail = what
        while True:
            left = self.remaining()
            step = min(left, WAIT_SLICE)
            try:
                if block(step):
                    return
            except Exception as exc:
                if not _is_slice_timeout(exc):
                    raise
            # back in Python between slices: a pending SIGINT raises KeyboardInterrupt here
            time.sleep(0)

    def wait_until(
        self,
        done: Callable[[], Any],
        what: str = "",
        busy: float = 100e-6,
        spin: float = 0.002,
        min_sleep: float = 20e-6,
        max_sleep: float = 0.001,
    ) -> None:
        """Poll ``done()`` until it is truthy: busy for ``busy`` s, yielding until ``spin`` s, then sleeping.

        The sleeps grow from ``min_sleep`` to ``max_sleep`` so that
        oversubscribed ranks leave their cores to the peers doing work; every
        sleep returns to Python (Ctrl-C is noticed at once).
        """
        if what:
            self.detail = what
        if done():
            return
        start = time.monotonic()
        pause = min_sleep
        while True:
            if done():
                return
            now = time.monotonic()
            if now >= self.deadline:
                raise self.timeout_error()
            waited = now - start
            if waited < busy:
                continue
            if waited < spin:
                _yield()
                continue
            time.sleep(pause)
            pause = min(pause * 2, max_sleep)

    def run_blocking(self, blocking: Callable[[], Any], what: str = "") -> Any:
        """Run ``blocking()`` -- a transport call with no usable timed wait -- on a daemon thread; return its result.

        The caller waits for the thread through :meth:`wait` (slices: Ctrl-C
        and the deadline are honoured); past the deadline the thread is left
        blocked (it is kept, and the core poisons the group). What ``blocking``
        raised is raised here. For transports whose wait finalizes or cancels
        the operation when it times out (gloo's point-to-point works), or that
        have no wait with a timeout at all.
        """
        outcome: List[Any] = []

        def run() -> None:
            try:
                outcome.append((True, blocking()))
            except BaseException as exc:  # handed to the waiting thread
                outcome.append((False, exc))

        worker = threading.Thread(target=run, name=f"mmeval-{self.backend}-{self.op}-wait", daemon=True)
        self.keep(worker)
        worker.start()

        def joined(seconds: float) -> bool:
            worker.join(seconds)
            return not worker.is_alive()

        self.wait(joined, what)
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    def keep(self, *objs: Any) -> None:
        """Keep ``objs`` (buffers, requests) alive for the life of the process if this call fails."""
        self._kept.extend(objs)

    def abandon(self) -> None:
        """Called by the core when the call failed: what :meth:`keep` holds is kept forever."""
        if self._kept:
            keep_forever(tuple(self._kept))
            self._kept = []

    @property
    def doing(self) -> str:
        """What the call was doing, for messages: the core's stage and the transport's detail."""
        return f"{self.stage} ({self.detail})" if self.detail else self.stage

    def timeout_error(self) -> CollectiveTimeoutError:
        return CollectiveTimeoutError(
            f"{self.backend}: {self.op} (collective #{self.seq} on rank {self.rank} of {self.world_size}) did not "
            f"complete within {self.timeout:g}s while {self.doing}: a peer rank died, hung, or never called it. "
            f"Set the limit with timeout=... or MMEVAL_{self.backend.upper()}_TIMEOUT / MMEVAL_TIMEOUT."
        )


def _is_slice_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TimeoutError):
        return True
    text = str(exc).lower()
    return "timed out" in text or "timeout" in text
