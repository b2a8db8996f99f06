"""The default backend: which name ``None`` stands for, and what ``'auto'`` resolves to.

The order (see :mod:`mmeval.core.dist`): the name given to ``set_default_dist_backend()``, else
``$MMEVAL_DIST_BACKEND`` (checked to name a usable backend, once per value), else ``'auto'``:
the best backend whose runtime is active (:mod:`.auto_select`), else ``non_dist``. One
:class:`DefaultChoice` is held by each :class:`~mmeval.core.registry.BackendRegistry`.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Optional

from .entry_points import AUTO, DEFAULT_ENV
from .errors import BackendConflictError, BackendNotFoundError, InvalidBackendNameError

if TYPE_CHECKING:  # pragma: no cover
    from .registry import BackendRegistry

__all__ = ["DefaultChoice"]


class DefaultChoice:
    """The default backend of one registry: the name set, the environment's name once checked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._name: Optional[str] = None
        self._env_checked: Optional[str] = None

    @property
    def explicit(self) -> Optional[str]:
        """The name given to :meth:`set`, if any."""
        return self._name

    def set(self, registry: "BackendRegistry", name: str) -> None:
        """Make ``name`` (a usable backend name, or ``'auto'``) the default; raises as :meth:`BackendRegistry.validate`."""
        if name != AUTO:
            registry.validate(name)
        with self._lock:
            self._name = name

    def forget(self, name: str) -> None:
        """``name`` is no backend any more (unregistered): it is no longer the default."""
        with self._lock:
            if self._name == name:
                self._name = None

    def refresh(self) -> None:
        """Check the environment's name again at the next :meth:`name` (the installed backends changed)."""
        self._env_checked = None

    def name(self, registry: "BackendRegistry") -> str:
        """The default's name: the one set, else ``$MMEVAL_DIST_BACKEND`` (validated), else ``'auto'``."""
        if self._name is not None:
            return self._name
        env = os.environ.get(DEFAULT_ENV, "").strip()
        if not env or env == AUTO:
            return AUTO
        if env != self._env_checked:
            try:
                registry.validate(env)
            except (BackendNotFoundError, BackendConflictError, InvalidBackendNameError) as exc:
                raise type(exc)(
                    f"the environment variable {DEFAULT_ENV}={env!r} names no usable dist backend: {exc} "
                    f"Set {DEFAULT_ENV} to one of the installed backends, or unset it for auto-selection."
                ) from None
            self._env_checked = env
        return env

    def resolve(self, registry: "BackendRegistry", name: Optional[str]) -> str:
        """``name``, or for ``None`` the default, with ``'auto'`` as the backend auto-selection picks."""
        if name is None:
            name = self.name(registry)
        if name != AUTO:
            return name
        chosen = registry.auto.active(registry, first_only=True)
        pick = chosen[0] if chosen else "non_dist"
        registry.auto.note("auto:" + pick, "info", "mmeval: auto-selected dist backend %r", pick)
        return pick
