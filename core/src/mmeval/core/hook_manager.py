"""The process's hook manager: finds hook implementations, registers them, emits events.

Its state lives on one :class:`HookManager` instance, :data:`HOOKS` (as the
registry's lives on one ``BackendRegistry``). Hook implementations come from
the entry-point group ``mmeval.hooks`` (value: a module or an object with
``@hookimpl`` methods), from :func:`register_hooks`, or from the core's own
plugin modules (:data:`CORE_PLUGINS`), which the manager loads by name as it
loads entry points; each such module has ``plugin_from_environment()`` and
decides itself whether it is on (the comm-stats reporter reads
``MMEVAL_COMM_STATS`` there, and only there). pluggy is imported only when a
hook is in use: with no implementation anywhere, a collective pays one
boolean test.
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING, List, Optional

from ._metadata import disabled_plugins, entry_points_in_group, is_disabled
from .hook_specs import HOOK_GROUP, PROJECT, CollectiveEvent, HookSpecs
from .settings import logger

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

__all__ = [
    "HookManager",
    "HOOKS",
    "CORE_PLUGINS",
    "hooks_active",
    "register_hooks",
    "unregister_hooks",
    "emit_start",
    "emit",
]

#: The core's own hook plugins, loaded by module name like entry points: each module's
#: ``plugin_from_environment()`` registers its plugin when the environment asks for it.
CORE_PLUGINS = ("mmeval.core.comm_stats",)


class HookManager:
    """The hook implementations in use and the pluggy manager that calls them (made on first need)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._pm: Optional["pluggy.PluginManager"] = None
        self._active: Optional[bool] = None  # None: not decided yet

    def manager(self) -> "pluggy.PluginManager":
        """The pluggy manager with mmeval's hook specs (imports pluggy on first call)."""
        with self._lock:
            if self._pm is None:
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
                self._pm = pm
            return self._pm

    def decide(self) -> bool:
        """Look once for hook implementations (entry points, the core's plugins); load them only if there are some."""
        with self._lock:
            if self._active is not None:
                return self._active
            disabled = disabled_plugins()
            eps = [ep for ep in entry_points_in_group(HOOK_GROUP) if not is_disabled(ep, disabled)]
            if eps or self._pm is not None:
                pm = self.manager()
                for ep in eps:
                    if pm.get_plugin(ep.name) is not None:
                        continue
                    try:
                        pm.register(ep.load(), name=ep.name)
                    except Exception as exc:  # a broken hook plugin must not break collectives
                        logger().warning(
                            "mmeval: hook plugin %r (entry point group %s) failed to load: %s: %s",
                            ep.name,
                            HOOK_GROUP,
                            type(exc).__name__,
                            exc,
                        )
                self._active = True
            else:
                self._active = False
            for name in CORE_PLUGINS:  # each registers itself (through register()) when its variable says so
                importlib.import_module(name).plugin_from_environment()
            return self._active

    def active(self) -> bool:
        """Whether any hook implementation is in use (decided on first call)."""
        return self._active if self._active is not None else self.decide()

    def register(self, plugin: object, name: Optional[str] = None) -> None:
        """Register an object (or module) whose ``@hookimpl`` methods receive events."""
        self.decide()
        with self._lock:
            self.manager().register(plugin, name=name)
            self._active = True

    def unregister(self, plugin: object) -> None:
        """Remove an implementation registered with :meth:`register`."""
        with self._lock:
            pm = self.manager()
            pm.unregister(plugin)
            self._active = bool(pm.get_plugins())

    def plugins(self) -> List[object]:
        """The registered implementations."""
        return list(self.manager().get_plugins()) if self._pm is not None else []

    def emit_start(self, op: str, backend: str, rank: int, world_size: int) -> None:
        """Call ``mmeval_collective_start`` on every implementation (if any)."""
        if self.active():
            self.manager().hook.mmeval_collective_start(op=op, backend=backend, rank=rank, world_size=world_size)

    def emit(self, event: CollectiveEvent) -> None:
        """Call ``mmeval_collective_end`` on every implementation (if any)."""
        if self.active():
            self.manager().hook.mmeval_collective_end(event=event)


#: The process's one hook manager.
HOOKS = HookManager()

hooks_active = HOOKS.active
register_hooks = HOOKS.register
unregister_hooks = HOOKS.unregister
emit_start = HOOKS.emit_start
emit = HOOKS.emit
