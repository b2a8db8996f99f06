"""Auto-selection: which backend's runtime is active, without trusting a plugin to behave.

Of the loadable backends (but ``non_dist``) whose ``detect()`` is true, the one with the
highest ``priority`` wins (ties: the first name alphabetically). A plugin whose import
raises anything but ``KeyboardInterrupt`` (``SystemExit`` included) is skipped with a
logged warning naming its entry point and distribution; a plugin's import and its first
``detect()`` run on a daemon thread bounded by :func:`auto_select_timeout` seconds
(``MMEVAL_AUTO_SELECT_TIMEOUT``, default 30), and a plugin over the bound is skipped for the
rest of the process (its thread goes on, as a daemon). Later ``detect()`` calls of a plugin
that answered in time run directly.
"""

from __future__ import annotations

import math
import os
import threading
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Set, Tuple, Type

from .settings import logger

if TYPE_CHECKING:  # pragma: no cover
    from .dist_backends.base_backend import BaseDistBackend
    from .registry import BackendRegistry

__all__ = ["AUTO_TIMEOUT_ENV", "AUTO_TIMEOUT_DEFAULT", "auto_select_timeout", "call_bounded", "AutoSelector"]

AUTO_TIMEOUT_ENV = "MMEVAL_AUTO_SELECT_TIMEOUT"
AUTO_TIMEOUT_DEFAULT = 30.0


def auto_select_timeout() -> float:
    """Seconds a plugin's import, and its first ``detect()``, may take during auto-selection.

    ``$MMEVAL_AUTO_SELECT_TIMEOUT`` (a finite number > 0), default 30; a bad
    value raises ``ValueError`` naming the variable.
    """
    raw = os.environ.get(AUTO_TIMEOUT_ENV, "").strip()
    if not raw:
        return AUTO_TIMEOUT_DEFAULT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"{AUTO_TIMEOUT_ENV}={raw!r}: expected a finite number of seconds > 0 (default {AUTO_TIMEOUT_DEFAULT:g})"
        )
    return value


def call_bounded(fn: Callable[[], Any], timeout: float) -> Tuple[str, Any]:
    """Run ``fn`` on a daemon thread for at most ``timeout`` s: ``('ok', value)``, ``('raised', exc)`` or ``('timeout', None)``.

    Any ``BaseException`` of ``fn`` (``SystemExit`` included) is returned, not
    raised; a thread over the bound is left running (it is a daemon).
    """
    box: List[Tuple[str, Any]] = []

    def target() -> None:
        try:
            box.append(("ok", fn()))
        except BaseException as exc:
            box.append(("raised", exc))

    worker = threading.Thread(target=target, name="mmeval-plugin-probe", daemon=True)
    worker.start()
    worker.join(timeout)
    return box[0] if box else ("timeout", None)


class AutoSelector:
    """The auto-selection state of one registry: plugins skipped, plugins vetted, notes already logged."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._notes: Set[str] = set()  # logged once per registry: 'auto:x', 'skip:x', 'prio:x'
        self._skipped: Dict[str, str] = {}  # plugins over the bound, and why
        self._vetted: Set[str] = set()  # classes whose detect() returned within the bound once

    def forget(self, name: str) -> None:
        """Judge ``name`` afresh (a class was registered under it)."""
        with self._lock:
            self._skipped.pop(name, None)
            self._vetted.discard(name)

    def note(self, key: str, level: str, fmt: str, *args: Any) -> None:
        """Log ``fmt % args`` at ``level`` once for ``key``."""
        with self._lock:
            if key in self._notes:
                return
            self._notes.add(key)
        getattr(logger(), level)(fmt, *args)

    def candidates(self, registry: "BackendRegistry") -> List[Tuple[int, str, "Type[BaseDistBackend]"]]:
        """``(priority, name, class)`` of every loadable backend but ``non_dist``, best first (imports bounded)."""
        ranked: List[Tuple[int, str, Type[BaseDistBackend]]] = []
        for name in registry.names():
            if name == "non_dist" or name in self._skipped:
                continue
            cls = registry.loaded_class(name)
            if cls is None:
                cls = self._probe(registry, name, "its import", partial(registry.get_class, name))
                if cls is None:
                    continue
            priority = getattr(cls, "priority", 0)
            if isinstance(priority, bool) or not isinstance(priority, int):
                self.note(
                    "prio:" + name,
                    "warning",
                    "mmeval: dist backend %r has a non-int priority %r; ranked as 0",
                    name,
                    priority,
                )
                priority = 0
            ranked.append((priority, name, cls))
        ranked.sort(key=lambda item: (-item[0], item[1]))
        return ranked

    def active(self, registry: "BackendRegistry", first_only: bool = False) -> List[str]:
        """Backends (but ``non_dist``) whose ``detect()`` says their runtime is active, best first."""
        found: List[str] = []
        for _priority, name, cls in self.candidates(registry):
            if name in self._vetted:
                try:
                    active = bool(cls.detect())
                except Exception as exc:
                    logger().warning("mmeval: %s.detect() raised %s: %s", cls.__qualname__, type(exc).__name__, exc)
                    active = False
            else:
                active = bool(self._probe(registry, name, "its detect()", cls.detect))
                if name not in self._skipped:
                    with self._lock:
                        self._vetted.add(name)
            if active:
                found.append(name)
                if first_only:
                    break
        return found

    def _probe(self, registry: "BackendRegistry", name: str, what: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` within the bound; a failure or a timeout skips the plugin (warned once) and gives None."""
        bound = auto_select_timeout()
        outcome, value = call_bounded(fn, bound)
        if outcome == "ok":
            return value
        if outcome == "timeout":
            reason = (
                f"{what} did not finish within {bound:g}s ({AUTO_TIMEOUT_ENV}; it goes on in a daemon thread, "
                "and the backend is skipped for the rest of this process)"
            )
            with self._lock:
                self._skipped[name] = reason
            if what == "its import":  # naming it later must not wait on the import lock its thread holds
                registry.fail(name, f"dist backend {name!r} ({registry.describe(name)}): {reason}")
        elif what == "its import":  # the registry's error already names the entry point and distribution
            self.note(
                "skip:" + name, "warning", "mmeval: skipping dist backend %r during auto-selection: %s", name, value
            )
            return None
        else:
            reason = f"{what} raised {type(value).__name__}: {value}"
        self.note(
            "skip:" + name,
            "warning",
            "mmeval: skipping dist backend %r (%s) during auto-selection: %s",
            name,
            registry.describe(name),
            reason,
        )
        return None
