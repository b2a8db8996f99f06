"""The communication-stats reporter: a hook implementation counting what each rank sent and received.

``MMEVAL_COMM_STATS=1`` in the environment (or :func:`enable_comm_stats`) turns
it on, and it prints a summary table when the process exits (or call
``get_comm_stats().report()``). The reporter registers itself with the hook
manager: the manager loads this module as one of its core plugins and calls
:func:`plugin_from_environment`, the one place that reads ``MMEVAL_COMM_STATS``.
"""

from __future__ import annotations

import atexit
import sys
import threading
from collections import defaultdict
from typing import Any, Dict, List, Optional, Tuple

from .hook_manager import HOOKS
from .hook_specs import PROJECT, CollectiveEvent
from .settings import env_flag

__all__ = ["STATS_ENV", "CommStats", "enable_comm_stats", "get_comm_stats", "plugin_from_environment"]

#: The variable that turns the reporter on (and its table at exit).
STATS_ENV = "MMEVAL_COMM_STATS"


class CommStats:
    """Aggregates collective events: counts, bytes and time per backend, operation and peer.

    ``peer`` is ``'all'`` for all-to-all operations, ``'to N'`` for a gather to
    rank N and ``'from N'`` for a broadcast from rank N.
    """

    def __init__(self) -> None:
        self._rows: Dict[Tuple[str, str, str], List[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0])
        self._lock = threading.Lock()
        self.rank = 0

    @property
    def total_bytes(self) -> int:
        """Bytes sent plus received by this rank over all recorded collectives."""
        return int(sum(r[1] + r[2] for r in self._rows.values()))

    @property
    def calls(self) -> int:
        return int(sum(r[0] for r in self._rows.values()))

    def reset(self) -> None:
        with self._lock:
            self._rows.clear()

    def record(self, event: CollectiveEvent) -> None:
        if event.root is None:
            peer = "all"
        elif event.op == "broadcast_object":
            peer = f"from {event.root}"
        else:
            peer = f"to {event.root}"
        with self._lock:
            row = self._rows[(event.backend, event.op, peer)]
            row[0] += 1
            row[1] += event.bytes_sent
            row[2] += event.bytes_received
            row[3] += event.seconds
            row[4] += event.outcome != "ok"
            self.rank = event.rank

    def rows(self) -> List[Dict[str, Any]]:
        """The table as dictionaries (for ``--json`` style consumers)."""
        with self._lock:
            return [
                {
                    "backend": b,
                    "op": op,
                    "peer": peer,
                    "calls": int(r[0]),
                    "bytes_sent": int(r[1]),
                    "bytes_received": int(r[2]),
                    "seconds": r[3],
                    "failures": int(r[4]),
                }
                for (b, op, peer), r in sorted(self._rows.items())
            ]

    def report(self) -> str:
        """A plain-text table of what this rank sent and received."""
        head = ("backend", "operation", "peer", "calls", "sent", "received", "seconds", "failed")
        lines = [head]
        for r in self.rows():
            lines.append(
                (
                    r["backend"],
                    r["op"],
                    r["peer"],
                    str(r["calls"]),
                    _fmt_bytes(r["bytes_sent"]),
                    _fmt_bytes(r["bytes_received"]),
                    f"{r['seconds']:.4f}",
                    str(r["failures"]),
                )
            )
        widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
        out = [f"mmeval communication stats (rank {self.rank})"]
        for i, row in enumerate(lines):
            out.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
            if i == 0:
                out.append("  ".join("-" * w for w in widths))
        return "\n".join(out)


def _fmt_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


class _Reporter:
    """The process's one reporter: its :class:`CommStats` once switched on."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stats: Optional[CommStats] = None

    def enable(self, print_at_exit: Optional[bool]) -> CommStats:
        with self.lock:
            if self.stats is not None:
                return self.stats
            import pluggy

            stats = CommStats()
            marker = pluggy.HookimplMarker(PROJECT)

            class _StatsPlugin:
                @marker
                def mmeval_collective_end(self, event: CollectiveEvent) -> None:
                    stats.record(event)

            self.stats = stats
        HOOKS.register(_StatsPlugin(), name="mmeval-comm-stats")
        if print_at_exit is None:
            print_at_exit = env_flag(STATS_ENV)
        if print_at_exit:
            atexit.register(lambda: stats.calls and print(stats.report(), file=sys.stderr))
        return stats


_REPORTER = _Reporter()


def enable_comm_stats(print_at_exit: Optional[bool] = None) -> CommStats:
    """Switch the communication-stats reporter on and return its :class:`CommStats`.

    With ``print_at_exit`` (default: on when enabled from ``MMEVAL_COMM_STATS``)
    the table is printed to stderr when the interpreter exits.
    """
    return _REPORTER.enable(print_at_exit)


def plugin_from_environment() -> None:
    """Switch the reporter on when ``MMEVAL_COMM_STATS`` asks for it (the hook manager calls this once)."""
    if env_flag(STATS_ENV):
        _REPORTER.enable(None)


def get_comm_stats() -> Optional[CommStats]:
    """The reporter's :class:`CommStats`, or ``None`` when it is off."""
    HOOKS.active()
    return _REPORTER.stats
