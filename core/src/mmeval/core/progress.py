"""Progress of a long ``compute()``: each collective as it starts and ends, and a heartbeat while one waits.

``with reporting():`` around ``compute()`` (on any rank, or every rank)
reports, through the collective hooks (:mod:`mmeval.core.hooks`), every
collective this process enters and leaves, and every ``every`` seconds
while one has not returned -- which shows where a long evaluation spends
its time or waits for a slow rank. Nothing is reported, and nothing costs,
outside the ``with`` block; the ranks need not agree (it is not part of the
question). The default report is a line on the ``mmeval`` logger at INFO;
``callback`` receives each :class:`ProgressEvent` instead.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Tuple

from .hook_manager import register_hooks, unregister_hooks
from .hook_specs import CollectiveEvent, hookimpl
from .settings import logger as mmeval_logger

__all__ = ["ProgressEvent", "reporting"]

logger = mmeval_logger()


@dataclass(frozen=True)
class ProgressEvent:
    """One report: ``kind`` is ``'start'``, ``'waiting'`` (the heartbeat) or ``'end'``.

    ``elapsed``: seconds since this collective started; ``since``: seconds since
    the ``reporting()`` block began; ``bytes_sent`` / ``bytes_received`` and
    ``outcome`` (``'ok'`` or the exception's name) are known at ``'end'``.
    """

    kind: str
    op: str
    rank: int
    world_size: int
    elapsed: float
    since: float
    bytes_sent: int = 0
    bytes_received: int = 0
    outcome: str = ""


def log_event(event: ProgressEvent) -> None:
    """The default report: one INFO line on the ``mmeval`` logger."""
    where = f"rank {event.rank}/{event.world_size}"
    if event.kind == "start":
        logger.info("mmeval progress (%s, %.1fs): %s started", where, event.since, event.op)
    elif event.kind == "waiting":
        logger.info("mmeval progress (%s, %.1fs): still in %s after %.1fs", where, event.since, event.op, event.elapsed)
    else:
        logger.info(
            "mmeval progress (%s, %.1fs): %s %s in %.3fs (%d bytes sent, %d received)",
            where,
            event.since,
            event.op,
            "done" if event.outcome == "ok" else f"raised {event.outcome}",
            event.elapsed,
            event.bytes_sent,
            event.bytes_received,
        )


class _Reporter:
    """The hook implementation: tracks the collective in flight and reports through ``callback``."""

    def __init__(self, callback: Callable[[ProgressEvent], None], every: float) -> None:
        self.callback, self.every = callback, every
        self.began = time.monotonic()
        self.lock = threading.Lock()
        self.current: Optional[Tuple[str, int, int, float]] = None  # (op, rank, world_size, started)
        self.stop = threading.Event()

    def _send(self, event: ProgressEvent) -> None:
        try:
            self.callback(event)
        except Exception:  # a broken callback must not break an evaluation
            logger.exception("mmeval progress: the callback raised")

    @hookimpl
    def mmeval_collective_start(self, op: str, backend: str, rank: int, world_size: int) -> None:
        now = time.monotonic()
        with self.lock:
            self.current = (op, rank, world_size, now)
        self._send(ProgressEvent("start", op, rank, world_size, 0.0, now - self.began))

    @hookimpl
    def mmeval_collective_end(self, event: CollectiveEvent) -> None:
        with self.lock:
            self.current = None
        self._send(
            ProgressEvent(
                "end",
                event.op,
                event.rank,
                event.world_size,
                event.seconds,
                time.monotonic() - self.began,
                event.bytes_sent,
                event.bytes_received,
                event.outcome,
            )
        )

    def heartbeat(self) -> None:
        while not self.stop.wait(self.every):
            with self.lock:
                current = self.current
            if current is not None:
                op, rank, ws, started = current
                now = time.monotonic()
                self._send(ProgressEvent("waiting", op, rank, ws, now - started, now - self.began))


@contextmanager
def reporting(callback: Optional[Callable[[ProgressEvent], None]] = None, every: float = 10.0) -> Iterator[None]:
    """Report the collectives of the ``compute()`` calls in this block (see the module docstring).

    ``callback``: receives each :class:`ProgressEvent` (default: :func:`log_event`);
    ``every``: seconds between heartbeats while a collective waits (> 0).
    """
    if not every > 0:
        raise ValueError(f"reporting(every={every!r}): the heartbeat period must be a number of seconds > 0")
    reporter = _Reporter(callback or log_event, float(every))
    register_hooks(reporter, name=f"mmeval-progress-{id(reporter)}")
    beat = threading.Thread(target=reporter.heartbeat, name="mmeval-progress", daemon=True)
    beat.start()
    try:
        yield
    finally:
        reporter.stop.set()
        beat.join()
        unregister_hooks(reporter)
