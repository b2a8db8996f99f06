"""The backend registry: one :class:`BackendRegistry` holds every piece of its state.

:mod:`mmeval.core.dist` is the public facade over one instance; a test builds a fresh
``BackendRegistry()`` instead of resetting globals. The rules (where backends come from,
the default, auto-selection, conflicts) are described in :mod:`mmeval.core.dist`.

A plugin import raising anything but ``KeyboardInterrupt`` (``SystemExit`` included) is a
broken plugin (:class:`~mmeval.core.errors.BackendLoadError`); a plugin is never imported
while the registry's lock is held. Auto-selection, bounded in time, is in :mod:`.auto_select`; the
default backend (the name set, the environment's, ``'auto'`` resolved) in :mod:`.default_backend`.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, Dict, List, Optional, Tuple, Type

from . import _metadata
from .auto_select import AutoSelector
from .default_backend import DefaultChoice
from .dist_backends.base_backend import BaseDistBackend
from .entry_points import (
    AUTO,
    BUILTINS,
    DISABLE_ENV,
    ENTRY_POINT_GROUP,
    NAME_RE,
    BackendInfo,
    Scan,
    build_infos,
    conflict_message,
    entry_point_where,
    scan_entry_points,
)
from .errors import (
    BackendAlreadyRegisteredError,
    BackendConflictError,
    BackendLoadError,
    BackendNotFoundError,
    BackendTypeError,
    InvalidBackendNameError,
)
from .known_backends import did_you_mean, not_found_message
from .launch import warn_if_launched
from .settings import logger

__all__ = ["BackendInfo", "BackendRegistry", "ENTRY_POINT_GROUP", "AUTO", "NAME_RE"]


def _load_entry_point(name: str, ep: Any) -> Type[BaseDistBackend]:
    """Import entry point ``ep`` of backend ``name`` and check what it gives; any failure as a registry error."""
    where = entry_point_where(name, ep)
    dist = _metadata.distribution_name(ep) or "<unknown distribution>"
    try:
        obj = ep.load()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit from a plugin's import is a broken plugin, not an exit
        raise BackendLoadError(
            f"dist backend {name!r} ({where}) failed to import: {type(exc).__name__}: {exc}. "
            f"Reinstall {dist} or install what it needs."
        ) from exc
    if not (isinstance(obj, type) and issubclass(obj, BaseDistBackend)):
        raise BackendTypeError(
            f"dist backend {name!r} ({where}) resolves to {obj!r}, which is not a subclass of "
            f"mmeval.core.dist_backends.BaseDistBackend; fix the entry point of {dist}"
        )
    req = _metadata.core_requirement(ep)
    if req and not _metadata.satisfies(_metadata.core_version(), req):
        logger().warning(
            "dist backend %r (%s) requires %s but mmeval-core %s is installed; it may not work",
            name,
            dist,
            req,
            _metadata.core_version(),
        )
    return obj


class BackendRegistry:
    """Backends by name: built in, installed (entry points) and registered; the default; auto-selection.

    Thread-safe; a plugin is never imported while the registry's lock is held
    (a hanging import cannot block the registry).
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._scan: Optional[Scan] = None
        self._registered: Dict[str, Type[BaseDistBackend]] = {}
        self._classes: Dict[str, Type[BaseDistBackend]] = {}
        self._instances: Dict[str, BaseDistBackend] = {}
        self._load_errors: Dict[str, BaseException] = {}
        self.default_choice = DefaultChoice()
        self.auto = AutoSelector()
        self.launch_warned = False

    # -- discovery ------------------------------------------------------------------------------------

    def scan(self) -> Scan:
        """The entry points of group ``mmeval.dist_backends`` (read once, until :meth:`refresh`)."""
        with self._lock:
            if self._scan is None:
                self._scan = scan_entry_points()
            return self._scan

    def refresh(self) -> None:
        """Forget the scan and the failed loads (a plugin installed meanwhile shows up); loaded ones stay."""
        importlib.invalidate_caches()
        with self._lock:
            self._scan = None
            self.default_choice.refresh()
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
        return build_infos(self.scan(), self._registered, dict(self._load_errors))

    # -- names and messages ---------------------------------------------------------------------------

    def not_found(self, name: str, why: str = "") -> BackendNotFoundError:
        """The error for a name no usable backend has: the install command, the closest name, the list."""
        return BackendNotFoundError(not_found_message(name, self.names(), why))

    def validate(self, name: str) -> None:
        """Raise unless ``name`` is a usable backend name; reads metadata only (imports no plugin)."""
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise InvalidBackendNameError(
                f"invalid dist backend name {name!r}: names match [a-z][a-z0-9_]*."
                + (did_you_mean(name, self.names()) if isinstance(name, str) else "")
            )
        if name in BUILTINS or name in self._registered:
            return
        all_eps, eps = self.live_entry_points(name)
        if all_eps and not eps:
            raise self.not_found(name, f"disabled by {DISABLE_ENV}")
        if not eps:
            raise self.not_found(name)
        if len(eps) > 1:
            raise BackendConflictError(conflict_message(name, eps))

    # -- registration and loading ---------------------------------------------------------------------

    def register(self, name: str, cls: Type[BaseDistBackend], *, override: bool = False) -> None:
        """See :func:`mmeval.core.dist.register_dist_backend`."""
        if not isinstance(name, str) or not NAME_RE.match(name):
            self.validate(name)  # raises InvalidBackendNameError
        if not (isinstance(cls, type) and issubclass(cls, BaseDistBackend)):
            raise BackendTypeError(
                f"register_dist_backend({name!r}, ...): {cls!r} is not a subclass of "
                "mmeval.core.dist_backends.BaseDistBackend"
            )
        with self._lock:
            installed = self.scan().by_name.get(name)
            if not override and (name in BUILTINS or name in self._registered or installed):
                where = (
                    "built in"
                    if name in BUILTINS
                    else "registered"
                    if name in self._registered
                    else (f"installed by {', '.join(_metadata.distribution_name(ep) or '?' for ep in installed or ())}")
                )
                raise BackendAlreadyRegisteredError(
                    f"dist backend {name!r} is already {where}; pass override=True to replace it"
                )
            self._registered[name] = cls
            for table in (self._classes, self._instances, self._load_errors):
                table.pop(name, None)
            self.auto.forget(name)

    def unregister(self, name: str) -> None:
        """See :func:`mmeval.core.dist.unregister_dist_backend`."""
        with self._lock:
            if name not in self._registered:
                raise self.not_found(name, "it was not registered with register_dist_backend()")
            del self._registered[name]
            self._classes.pop(name, None)
            self._instances.pop(name, None)
            self.default_choice.forget(name)

    def get_class(self, name: str) -> Type[BaseDistBackend]:
        """Load (once) the class of backend ``name``; the import runs outside the lock.

        A name that is no backend name at all raises :class:`InvalidBackendNameError` (as
        :meth:`validate` does), not :class:`BackendNotFoundError`.
        """
        if not isinstance(name, str) or not NAME_RE.match(name):
            self.validate(name)  # raises InvalidBackendNameError
        cls = self.loaded_class(name)
        with self._lock:
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

    def fail(self, name: str, message: str) -> None:
        """Make loading ``name`` raise :class:`BackendLoadError` with ``message`` (until :meth:`refresh`)."""
        with self._lock:
            self._load_errors[name] = BackendLoadError(message)

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
                    f"{ENTRY_POINT_GROUP} must read 'name = module:Class'"
                )
            raise self.not_found(name)
        if len(eps) > 1:
            raise BackendConflictError(conflict_message(name, eps))
        return eps[0]

    def describe(self, name: str) -> str:
        """Where backend ``name`` comes from, for messages: its entry point and distribution, or its class."""
        cls = self._registered.get(name) or BUILTINS.get(name)
        if cls is not None:
            return f"class {cls.__module__}:{cls.__qualname__}"
        eps = self.live_entry_points(name)[1]
        return entry_point_where(name, eps[0]) if eps else "not installed"

    def running(self, name: Optional[str] = None) -> Optional[BaseDistBackend]:
        """The instance already created for ``name`` whose runtime is active, else ``None``; loads and starts nothing.

        ``None`` / ``'auto'`` stand for any distributed instance created so far.
        Unlike :meth:`get`, no plugin is imported, no instance is created and
        no auto-selection runs (a metric's ``add()`` asks this).
        """
        with self._lock:
            if name is None or name == AUTO:
                candidates = [inst for key, inst in self._instances.items() if key != "non_dist"]
            else:
                candidates = [self._instances[name]] if name in self._instances else []
        for inst in candidates:
            try:
                if inst.is_initialized:
                    return inst
            except Exception:  # a backend that cannot say is not running
                continue
        return None

    def get(self, name: Optional[str] = None) -> BaseDistBackend:
        """See :func:`mmeval.core.dist.get_dist_backend`."""
        resolved = self.resolve(name)
        if resolved == "non_dist":
            warn_if_launched(self, name)
        with self._lock:
            inst = self._instances.get(resolved)
        if inst is not None:
            return inst
        cls = self.get_class(resolved)
        reason = cls.availability()
        if reason is not None:
            raise BackendLoadError(
                f"dist backend {resolved!r} ({cls.__module__}.{cls.__qualname__}) is installed "
                f"but cannot run on this machine: {reason}"
            )
        with self._lock:
            inst = self._instances.get(resolved)
            if inst is None:
                try:
                    inst = cls()
                except Exception as exc:
                    raise BackendLoadError(
                        f"dist backend {resolved!r}: {cls.__module__}.{cls.__qualname__}() "
                        f"failed: {type(exc).__name__}: {exc}"
                    ) from exc
                self._instances[resolved] = inst
            return inst

    # -- the default and auto-selection (:mod:`.default_backend`) -----------------------------------

    def set_default(self, name: str) -> None:
        """See :func:`mmeval.core.dist.set_default_dist_backend`."""
        self.default_choice.set(self, name)

    @property
    def explicit_default(self) -> Optional[str]:
        """The name given to :meth:`set_default`, if any."""
        return self.default_choice.explicit

    def default(self) -> str:
        """See :func:`mmeval.core.dist.get_default_dist_backend`."""
        return self.default_choice.name(self)

    def resolve(self, name: Optional[str] = None) -> str:
        """``None`` / ``'auto'`` as a concrete backend name (see :mod:`mmeval.core.dist`)."""
        return self.default_choice.resolve(self, name)

    def loaded_class(self, name: str) -> Optional[Type[BaseDistBackend]]:
        """The class of ``name`` if it needs no import (loaded, registered or built in), else None."""
        with self._lock:
            return self._classes.get(name) or self._registered.get(name) or BUILTINS.get(name)

    def rank_and_world_size(self, name: Optional[str] = None) -> Tuple[int, int]:
        """See :func:`mmeval.core.dist.get_rank_and_world_size`."""
        backend = self.get(name)
        if not backend.is_initialized:
            return 0, 1
        return int(backend.rank), int(backend.world_size)
