"""The backend registry: one :class:`BackendRegistry` holds every piece of its state.

:mod:`mmeval.core.dist` is the public facade over one instance; a test builds a fresh
``BackendRegistry()`` instead of resetting globals. The rules (where backends come from,
the default, auto-selection, conflicts) are described in :mod:`mmeval.core.dist`.

A plugin is not trusted to behave while auto-selection loads it: an import raising
anything but ``KeyboardInterrupt`` (``SystemExit`` included) is a broken plugin, and a
plugin's import and its first ``detect()`` run on a daemon thread bounded by
:func:`auto_select_timeout` seconds (``MMEVAL_AUTO_SELECT_TIMEOUT``, default 30); a plugin
over the bound is skipped for the rest of the process, with a logged warning.
"""

from __future__ import annotations

import importlib
import math
import os
import re
import threading
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Set, Tuple, Type

from . import _metadata
from .dist_backends.base_backend import BaseDistBackend
from .dist_backends.non_dist import NonDist
from .errors import (
    BackendAlreadyRegisteredError,
    BackendConflictError,
    BackendLoadError,
    BackendNotFoundError,
    BackendTypeError,
    InvalidBackendNameError,
)
from .known_backends import KNOWN_BACKENDS, did_you_mean, install_hint, unsupported_message

__all__ = ["BackendInfo", "BackendRegistry", "auto_select_timeout", "ENTRY_POINT_GROUP", "AUTO", "NAME_RE"]

ENTRY_POINT_GROUP = "mmeval.dist_backends"
AUTO = "auto"
DEFAULT_ENV = "MMEVAL_DIST_BACKEND"
AUTO_TIMEOUT_ENV = "MMEVAL_AUTO_SELECT_TIMEOUT"
AUTO_TIMEOUT_DEFAULT = 30.0
DISABLE_ENV = _metadata.DISABLE_ENV
NAME_RE = re.compile(r"[a-z][a-z0-9_]*\Z")
BUILTINS: Dict[str, Type[BaseDistBackend]] = {"non_dist": NonDist}


def _logger() -> Any:
    """The ``mmeval`` logger; :mod:`logging` is imported when something is first logged (not to list backends)."""
    import logging

    return logging.getLogger("mmeval")


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
        raise ValueError(f"{AUTO_TIMEOUT_ENV}={raw!r}: expected a finite number of seconds > 0 "
                         f"(default {AUTO_TIMEOUT_DEFAULT:g})")
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


class BackendInfo(NamedTuple):
    """What the registry knows of one backend name (for listings and the CLI).

    ``status`` is ``'ok'``, ``'conflict'`` (two distributions claim the name),
    ``'invalid'`` (a malformed entry point), ``'disabled'`` (by
    ``MMEVAL_DISABLE_PLUGINS``), ``'incompatible'`` (its required mmeval-core
    range excludes this one) or ``'failed'`` (it was loaded and failed).
    ``source`` is ``'builtin'``, ``'entry_point'`` or ``'registered'``;
    ``providers`` holds ``(distribution, version, entry point)`` of each claim.
    """

    name: str
    source: str
    value: str
    distribution: Optional[str] = None
    version: Optional[str] = None
    core_requirement: Optional[str] = None
    status: str = "ok"
    error: str = ""
    providers: Tuple[Tuple[str, str, str], ...] = ()

    def as_dict(self) -> Dict[str, Any]:
        """The fields as a dict (``providers`` as a list of lists: JSON-ready)."""
        out = self._asdict()
        out["providers"] = [list(p) for p in self.providers]
        return out


class _Scan(NamedTuple):
    by_name: Dict[str, List[Any]]
    invalid: Dict[str, Any]
    shadowed: Dict[str, List[Any]]  # entry points claiming a built-in name (ignored)


def _scan_entry_points() -> _Scan:
    by_name: Dict[str, List[Any]] = {}
    invalid: Dict[str, Any] = {}
    shadowed: Dict[str, List[Any]] = {}
    for ep in _metadata.entry_points_in_group(ENTRY_POINT_GROUP):
        if not NAME_RE.match(ep.name) or ":" not in ep.value:
            invalid[ep.name] = ep
        elif ep.name in BUILTINS:
            shadowed.setdefault(ep.name, []).append(ep)
        else:
            by_name.setdefault(ep.name, []).append(ep)
    return _Scan(by_name, invalid, shadowed)


def _where(name: str, ep: Any) -> str:
    return (f"entry point '{name} = {ep.value}' in group {ENTRY_POINT_GROUP!r}, distribution "
            f"{_metadata.distribution_label(ep)}")


def _conflict_message(name: str, eps: List[Any]) -> str:
    who = " and ".join(f"{_metadata.distribution_label(ep)} ({name} = {ep.value})" for ep in eps)
    return (
        f"dist backend {name!r} is provided by more than one distribution in entry-point group "
        f"{ENTRY_POINT_GROUP!r}: {who}. Uninstall all but one (pip uninstall ...), or choose a class "
        f"with register_dist_backend({name!r}, cls, override=True)."
    )


def _load_entry_point(name: str, ep: Any) -> Type[BaseDistBackend]:
    """Import entry point ``ep`` of backend ``name`` and check what it gives; any failure as a registry error."""
    where = _where(name, ep)
    dist = _metadata.distribution_name(ep) or "<unknown distribution>"
    try:
        obj = ep.load()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        load_err = BackendLoadError(
            f"dist backend {name!r} ({where}) failed to import: {type(exc).__name__}: {exc}. "
            f"Reinstall {dist} or install what it needs."
        )
        load_err.__cause__ = exc
        raise load_err from exc
    if not (isinstance(obj, type) and issubclass(obj, BaseDistBackend)):
        raise BackendTypeError(
            f"dist backend {name!r} ({where}) resolves to {obj!r}, which is not a subclass of "
            f"mmeval.core.dist_backends.BaseDistBackend; fix the entry point of {dist}"
        )
    req = _metadata.core_requirement(ep)
    if req and not _metadata.satisfies(_metadata.core_version(), req):
        _logger().warning("dist backend %r (%s) requires %s but mmeval-core %s is installed; it may not work",
                          name, dist, req, _metadata.core_version())
    return obj


class BackendRegistry:
    """Backends by name: built in, installed (entry points) and registered; the default; auto-selection.

    Thread-safe; a plugin is never imported while the registry's lock is held
    (a hanging import cannot block the registry).
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._scan: Optional[_Scan] = None
        self._registered: Dict[str, Type[BaseDistBackend]] = {}
        self._classes: Dict[str, Type[BaseDistBackend]] = {}
        self._instances: Dict[str, BaseDistBackend] = {}
        self._load_errors: Dict[str, BaseException] = {}
        self._default: Optional[str] = None
        self._env_checked: Optional[str] = None
        self._warned: Set[str] = set()  # auto-selection notes given once per process: 'auto:x', 'skip:x', ...
        self._skipped: Dict[str, str] = {}  # plugins over the auto-selection bound, and why
        self._vetted: Set[str] = set()  # classes whose detect() returned within the bound once
        self.launch_warned = False

    # -- discovery ------------------------------------------------------------------------------------

    def scan(self) -> _Scan:
        """The entry points of group ``mmeval.dist_backends`` (read once, until :meth:`refresh`)."""
        with self._lock:
            if self._scan is None:
                self._scan = _scan_entry_points()
            return self._scan

    def refresh(self) -> None:
        """Forget the scan and the failed loads (a plugin installed meanwhile shows up); loaded ones stay."""
        importlib.invalidate_caches()
        with self._lock:
            self._scan = None
            self._env_checked = None
            self._load_errors.clear()

    def live_entry_points(self, name: str) -> Tuple[List[Any], List[Any]]:
        """``(all, not disabled)`` entry points claiming ``name``."""
        all_eps = self.scan().by_name.get(name, [])
        disabled = _metadata.disabled_plugins()
        return all_eps, [ep for ep in all_eps if not _metadata.is_disabled(ep, disabled)]

    def names(self) -> List[str]:
        """Sorted names of every usable backend (imports no plugin); conflicts listed, disabled ones not."""
        names = set(BUILTINS) | set(self._registered)
        names.update(name for name in self.scan().by_name if self.live_entry_points(name)[1])
        return sorted(names)

    def infos(self) -> List[BackendInfo]:
        """A :class:`BackendInfo` for every name: usable, conflicting, invalid or disabled."""
        from ._registry_infos import build_infos

        return build_infos(self.scan(), self._registered, dict(self._load_errors))

    # -- names and messages ---------------------------------------------------------------------------

    def not_found(self, name: str, why: str = "") -> BackendNotFoundError:
        """The error for a name no usable backend has: the install command, the closest name, the list."""
        installed = self.names()
        unsupported = None if why else unsupported_message(name, installed)
        if unsupported is not None:
            return BackendNotFoundError(unsupported)
        msg = f"unknown dist backend {name!r}" + (f" ({why})" if why else "")
        hint = install_hint(name)
        if hint is not None:
            msg += (f": it is provided by the distribution {KNOWN_BACKENDS[name].requirement}, which is not "
                    f"installed; {hint}.")
        else:
            msg += (f": no installed distribution declares it in entry-point group {ENTRY_POINT_GROUP!r} and it "
                    f"was not registered with register_dist_backend()." + self.did_you_mean(name))
        msg += f" Installed backends: {', '.join(installed)}."
        if hint is None:
            known = ", ".join(f"{k} ({r.requirement})" for k, r in KNOWN_BACKENDS.items() if r.requirement)
            msg += f" Backends mmeval knows of: {known}."
        return BackendNotFoundError(msg)

    def did_you_mean(self, name: str) -> str:
        return did_you_mean(name, set(self.names()) | {k for k, r in KNOWN_BACKENDS.items() if r.requirement} | {AUTO})

    def validate(self, name: str) -> None:
        """Raise unless ``name`` is a usable backend name; reads metadata only (imports no plugin)."""
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise InvalidBackendNameError(f"invalid dist backend name {name!r}: names match [a-z][a-z0-9_]*."
                                          + (self.did_you_mean(name) if isinstance(name, str) else ""))
        if name in BUILTINS or name in self._registered:
            return
        all_eps, eps = self.live_entry_points(name)
        if all_eps and not eps:
            raise self.not_found(name, f"disabled by {DISABLE_ENV}")
        if not eps:
            raise self.not_found(name)
        if len(eps) > 1:
            raise BackendConflictError(_conflict_message(name, eps))

    # -- registration and loading ---------------------------------------------------------------------

    def register(self, name: str, cls: Type[BaseDistBackend], *, override: bool = False) -> None:
        """See :func:`mmeval.core.dist.register_dist_backend`."""
        if not isinstance(name, str) or not NAME_RE.match(name):
            self.validate(name)  # raises InvalidBackendNameError
        if not (isinstance(cls, type) and issubclass(cls, BaseDistBackend)):
            raise BackendTypeError(f"register_dist_backend({name!r}, ...): {cls!r} is not a subclass of "
                                   "mmeval.core.dist_backends.BaseDistBackend")
        with self._lock:
            installed = self.scan().by_name.get(name)
            if not override and (name in BUILTINS or name in self._registered or installed):
                where = "built in" if name in BUILTINS else "registered" if name in self._registered else (
                    f"installed by {', '.join(_metadata.distribution_name(ep) or '?' for ep in installed or ())}")
                raise BackendAlreadyRegisteredError(
                    f"dist backend {name!r} is already {where}; pass override=True to replace it")
            self._registered[name] = cls
            for table in (self._classes, self._instances, self._load_errors, self._skipped):
                table.pop(name, None)

    def unregister(self, name: str) -> None:
        """See :func:`mmeval.core.dist.unregister_dist_backend`."""
        with self._lock:
            if name not in self._registered:
                raise self.not_found(name, "it was not registered with register_dist_backend()")
            del self._registered[name]
            self._classes.pop(name, None)
            self._instances.pop(name, None)
            if self._default == name:
                self._default = None

    def get_class(self, name: str) -> Type[BaseDistBackend]:
        """Load (once) the class of backend ``name``; the import runs outside the lock."""
        with self._lock:
            cls = self._classes.get(name) or self._registered.get(name) or BUILTINS.get(name)
            err = self._load_errors.get(name)
        if cls is None:
            if err is not None:
                raise type(err)(str(err)) from err.__cause__
            ep = self._entry_point(name)
            try:
                cls = _load_entry_point(name, ep)
            except (BackendLoadError, BackendTypeError) as exc:
                with self._lock:
                    self._load_errors[name] = exc
                raise
        with self._lock:
            return self._classes.setdefault(name, cls)

    def _entry_point(self, name: str) -> Any:
        all_eps, eps = self.live_entry_points(name)
        if all_eps and not eps:
            raise self.not_found(name, f"its entry point in group {ENTRY_POINT_GROUP!r} is disabled by {DISABLE_ENV}")
        if not eps:
            invalid = self.scan().invalid.get(name)
            if invalid is not None:
                raise BackendLoadError(
                    f"dist backend {name!r}: the entry point '{invalid.name} = {invalid.value}' of "
                    f"{_metadata.distribution_name(invalid)} is malformed; entry points of group "
                    f"{ENTRY_POINT_GROUP} must read 'name = module:Class'")
            raise self.not_found(name)
        if len(eps) > 1:
            raise BackendConflictError(_conflict_message(name, eps))
        return eps[0]

    def describe(self, name: str) -> str:
        """Where backend ``name`` comes from, for messages: its entry point and distribution, or its class."""
        cls = self._registered.get(name) or BUILTINS.get(name)
        if cls is not None:
            return f"class {cls.__module__}:{cls.__qualname__}"
        eps = self.live_entry_points(name)[1]
        return _where(name, eps[0]) if eps else "not installed"

    def get(self, name: Optional[str] = None) -> BaseDistBackend:
        """See :func:`mmeval.core.dist.get_dist_backend`."""
        resolved = self.resolve(name)
        if resolved == "non_dist":
            from .launch import warn_if_launched

            warn_if_launched(self, name)
        with self._lock:
            inst = self._instances.get(resolved)
        if inst is not None:
            return inst
        cls = self.get_class(resolved)
        reason = cls.availability()
        if reason is not None:
            raise BackendLoadError(f"dist backend {resolved!r} ({cls.__module__}.{cls.__qualname__}) is installed "
                                   f"but cannot run on this machine: {reason}")
        with self._lock:
            inst = self._instances.get(resolved)
            if inst is None:
                try:
                    inst = cls()
                except Exception as exc:
                    raise BackendLoadError(f"dist backend {resolved!r}: {cls.__module__}.{cls.__qualname__}() "
                                           f"failed: {type(exc).__name__}: {exc}") from exc
                self._instances[resolved] = inst
            return inst

    # -- the default and auto-selection ---------------------------------------------------------------

    def set_default(self, name: str) -> None:
        if name != AUTO:
            self.validate(name)
        with self._lock:
            self._default = name

    @property
    def explicit_default(self) -> Optional[str]:
        """The name given to :meth:`set_default`, if any."""
        return self._default

    def default(self) -> str:
        """See :func:`mmeval.core.dist.get_default_dist_backend`."""
        if self._default is not None:
            return self._default
        env = os.environ.get(DEFAULT_ENV, "").strip()
        if not env or env == AUTO:
            return AUTO
        if env != self._env_checked:
            try:
                self.validate(env)
            except (BackendNotFoundError, BackendConflictError, InvalidBackendNameError) as exc:
                raise type(exc)(
                    f"the environment variable {DEFAULT_ENV}={env!r} names no usable dist backend: {exc} "
                    f"Set {DEFAULT_ENV} to one of the installed backends, or unset it for auto-selection."
                ) from None
            self._env_checked = env
        return env

    def resolve(self, name: Optional[str] = None) -> str:
        """``None`` / ``'auto'`` as a concrete backend name (see :mod:`mmeval.core.dist`)."""
        if name is None:
            name = self.default()
        if name != AUTO:
            return name
        chosen = self.active_names(first_only=True)
        pick = chosen[0] if chosen else "non_dist"
        self._note("auto:" + pick, "info", "mmeval: auto-selected dist backend %r", pick)
        return pick

    def _note(self, key: str, level: str, fmt: str, *args: Any) -> None:
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        getattr(_logger(), level)(fmt, *args)

    def auto_candidates(self) -> List[Tuple[int, str, Type[BaseDistBackend]]]:
        """``(priority, name, class)`` of every loadable backend but ``non_dist``, best first (imports are bounded)."""
        ranked: List[Tuple[int, str, Type[BaseDistBackend]]] = []
        for name in self.names():
            if name == "non_dist" or name in self._skipped:
                continue
            with self._lock:
                cls = self._classes.get(name) or self._registered.get(name)
            if cls is None:
                cls = self._probe(name, "its import", lambda name=name: self.get_class(name))  # type: ignore[misc]
                if cls is None:
                    continue
            priority = getattr(cls, "priority", 0)
            if isinstance(priority, bool) or not isinstance(priority, int):
                self._note("prio:" + name, "warning", "mmeval: dist backend %r has a non-int priority %r; ranked as 0",
                           name, priority)
                priority = 0
            ranked.append((priority, name, cls))
        ranked.sort(key=lambda item: (-item[0], item[1]))
        return ranked

    def active_names(self, first_only: bool = False) -> List[str]:
        """Backends (but ``non_dist``) whose ``detect()`` says their runtime is active, best first."""
        active: List[str] = []
        for _priority, name, cls in self.auto_candidates():
            if name in self._vetted:
                try:
                    found = bool(cls.detect())
                except Exception as exc:
                    _logger().warning("mmeval: %s.detect() raised %s: %s", cls.__qualname__, type(exc).__name__, exc)
                    found = False
            else:
                found = bool(self._probe(name, "its detect()", cls.detect))
                if name not in self._skipped:
                    self._vetted.add(name)
            if found:
                active.append(name)
                if first_only:
                    break
        return active

    def _probe(self, name: str, what: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` within the auto-selection bound; a failure or a timeout skips the plugin (warned once), None."""
        bound = auto_select_timeout()
        outcome, value = call_bounded(fn, bound)
        if outcome == "ok":
            return value
        if outcome == "timeout":
            reason = (f"{what} did not finish within {bound:g}s ({AUTO_TIMEOUT_ENV}; it goes on in a daemon thread, "
                      "and the backend is skipped for the rest of this process)")
            with self._lock:
                self._skipped[name] = reason
        elif what == "its import":  # the registry's error already names the entry point and distribution
            self._note("skip:" + name, "warning", "mmeval: skipping dist backend %r during auto-selection: %s",
                       name, value)
            return None
        else:
            reason = f"{what} raised {type(value).__name__}: {value}"
        self._note("skip:" + name, "warning", "mmeval: skipping dist backend %r (%s) during auto-selection: %s",
                   name, self.describe(name), reason)
        return None

    def rank_and_world_size(self, name: Optional[str] = None) -> Tuple[int, int]:
        """See :func:`mmeval.core.dist.get_rank_and_world_size`."""
        backend = self.get(name)
        if not backend.is_initialized:
            return 0, 1
        return int(backend.rank), int(backend.world_size)
