"""The process's hook manager: finds hook implementations, registers them, emits events.

Hook implementations come from the entry-point group ``mmeval.hooks`` (value:
a module or an object with ``@hookimpl`` methods) or from
:func:`register_hooks`. pluggy is imported only when a hook is in use: with no
implementation anywhere, a collective pays one boolean test.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Optional

from .hook_specs import HOOK_GROUP, PROJECT, CollectiveEvent, HookSpecs

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

__all__ = ["hooks_active", "register_hooks", "unregister_hooks", "emit_start", "emit"]

_lock = threading.Lock()
_manager: Optional["pluggy.PluginManager"] = None
_active: Optional[bool] = None  # None: not decided yet


def _get_manager() -> "pluggy.PluginManager":
    global _manager
    if _manager is None:
        import pluggy

        spec = pluggy.HookspecMarker(PROJECT)
        specs = type(
            "MMEvalHookSpecs",
            (),
            {
                "mmeval_collective_start": spec(HookSpecs.mmeval_collective_start),
                "mmeval_collective_end": spec(HookSpecs.mmeval_collective_end),
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
                        ep.name,
                        HOOK_GROUP,
                        type(exc).__name__,
                        exc,
                    )
            _active = True
        else:
            _active = False
    if stats_env:
        from .comm_stats import enable_comm_stats

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
