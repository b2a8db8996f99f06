"""Events around every collective, through pluggy hooks.

Hook implementations come from the entry-point group ``mmeval.hooks`` (value:
a module or an object with ``@hookimpl`` methods) or from
:func:`register_hooks`. pluggy is imported only when a hook is in use: with no
implementation anywhere, a collective pays one boolean test.

The built-in communication-stats reporter is one such implementation:
``MMEVAL_COMM_STATS=1`` in the environment (or :func:`enable_comm_stats`)
turns it on, and it prints a summary table when the process exits (or call
``get_comm_stats().report()``).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

__all__ = [
    "HOOK_GROUP",
    "PROJECT",
    "CollectiveEvent",
    "CommStats",
    "hookimpl",
    "register_hooks",
    "unregister_hooks",
    "enable_comm_stats",
    "get_comm_stats",
    "emit",
    "hooks_active",
]

HOOK_GROUP = "mmeval.hooks"
PROJECT = "mmeval"

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True)
class CollectiveEvent:
    """One collective as seen by one rank.

    ``outcome`` is ``'ok'`` or the name of the exception raised; ``root`` is the
    ``src`` / ``dst`` rank, or ``None`` for all-to-all operations.
    """

    op: str
    backend: str
    rank: int
    world_size: int
    root: Optional[int]
    seq: int
    bytes_sent: int
    bytes_received: int
    seconds: float
    outcome: str
    error: str = ""


def hookimpl(function: _F) -> _F:
    """Mark a method as an mmeval hook implementation (pluggy's ``HookimplMarker``)."""
    import pluggy

    return pluggy.HookimplMarker(PROJECT)(function)


class _HookSpecs:
    """The hooks mmeval calls. Implement any subset."""

    def mmeval_collective_start(self, op: str, backend: str, rank: int, world_size: int) -> None:
        """Called on each rank before a collective starts."""

    def mmeval_collective_end(self, event: CollectiveEvent) -> None:
        """Called on each rank after a collective, whether it succeeded or raised."""


_lock = threading.Lock()
_manager: Optional["pluggy.PluginManager"] = None
_active: Optional[bool] = None  # None: not decided yet
_stats: Optional["CommStats"] = None


def _get_manager() -> "pluggy.PluginManager":
    global _manager
    if _manager is None:
        import pluggy

        spec = pluggy.HookspecMarker(PROJECT)
        specs = type(
            "MMEvalHookSpecs",
            (),
            {
                "mmeval_collective_start": spec(_HookSpecs.mmeval_collective_start),
                "mmeval_collective_end": spec(_HookSpecs.mmeval_collective_end),
            },
        )
        pm = pluggy.PluginManager(PROJECT)
        pm.add_hookspecs(specs)
        _manager = pm
    return _manager


def _decide() -> bool:
    """Look once for hook implementations; load them only if there are some."""
    global _active
    with _lock:
        if _active is not None:
            return _active
        from ._metadata import disabled_plugins, entry_points_in_group, is_disabled

        disabled = disabled_plugins()
        eps = [ep for ep in entry_points_in_group(HOOK_GROUP) if not is_disabled(ep, disabled)]
        stats_env = os.environ.get("MMEVAL_COMM_STATS", "").strip().lower() not in ("", "0", "false", "no")
        if eps or stats_env or _manager is not None:
            pm = _get_manager()
            for ep in eps:
                if pm.get_plugin(ep.name) is not None:
                    continue
                try:
                    pm.register(ep.load(), name=ep.name)
                except Exception as exc:  # a broken hook plugin must not break collectives
                    logging.getLogger("mmeval").warning(
                        "mmeval: hook plugin %r (entry point group %s) failed to load: %s: %s",
                        ep.name, HOOK_GROUP, type(exc).__name__, exc,
                    )
            _active = True
        else:
            _active = False
    if stats_env:
        enable_comm_stats()
    return bool(_active)


def hooks_active() -> bool:
    """Whether any hook implementation is in use (decided on first call)."""
    return _active if _active is not None else _decide()


def register_hooks(plugin: object, name: Optional[str] = None) -> None:
    """Register an object (or module) whose ``@hookimpl`` methods receive events."""
    global _active
    _decide()
    with _lock:
        _get_manager().register(plugin, name=name)
        _active = True


def unregister_hooks(plugin: object) -> None:
    """Remove an implementation registered with :func:`register_hooks`."""
    global _active
    with _lock:
        pm = _get_manager()
        pm.unregister(plugin)
        _active = bool(pm.get_plugins())


def emit_start(op: str, backend: str, rank: int, world_size: int) -> None:
    """Call ``mmeval_collective_start`` on every implementation (if any)."""
    if hooks_active():
        _get_manager().hook.mmeval_collective_start(op=op, backend=backend, rank=rank, world_size=world_size)


def emit(event: CollectiveEvent) -> None:
    """Call ``mmeval_collective_end`` on every implementation (if any)."""
    if hooks_active():
        _get_manager().hook.mmeval_collective_end(event=event)


# --------------------------------------------------------------------------
# communication stats
# --------------------------------------------------------------------------


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


def enable_comm_stats(print_at_exit: Optional[bool] = None) -> CommStats:
    """Switch the communication-stats reporter on and return its :class:`CommStats`.

    With ``print_at_exit`` (default: on when enabled from ``MMEVAL_COMM_STATS``)
    the table is printed to stderr when the interpreter exits.
    """
    global _stats
    if _stats is not None:
        return _stats
    import pluggy

    stats = CommStats()
    marker = pluggy.HookimplMarker(PROJECT)

    class _StatsPlugin:
        @marker
        def mmeval_collective_end(self, event: CollectiveEvent) -> None:
            stats.record(event)

    plugin = _StatsPlugin()
    _stats = stats
    register_hooks(plugin, name="mmeval-comm-stats")
    if print_at_exit is None:
        print_at_exit = os.environ.get("MMEVAL_COMM_STATS", "").strip().lower() not in ("", "0", "false", "no")
    if print_at_exit:
        atexit.register(lambda: stats.calls and print(stats.report(), file=sys.stderr))
    return stats


def get_comm_stats() -> Optional[CommStats]:
    """The reporter's :class:`CommStats`, or ``None`` when it is off."""
    hooks_active()
    return _stats
