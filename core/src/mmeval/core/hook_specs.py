"""The hooks mmeval calls around every collective (their specs), the event they receive, the marker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar

__all__ = ["HOOK_GROUP", "PROJECT", "CollectiveEvent", "HookSpecs", "hookimpl"]

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


class HookSpecs:
    """The hooks mmeval calls. Implement any subset."""

    def mmeval_collective_start(self, op: str, backend: str, rank: int, world_size: int) -> None:
        """Called on each rank before a collective starts."""

    def mmeval_collective_end(self, event: CollectiveEvent) -> None:
        """Called on each rank after a collective, whether it succeeded or raised."""
