"""The registry of distributed communication backends: the public functions.

Backends come from three places:

* built in: ``non_dist`` (:class:`~mmeval.core.dist_backends.NonDist`);
* installed distributions, through the entry-point group
  :data:`ENTRY_POINT_GROUP` (``mmeval.dist_backends``): ``name = module:Class``,
  where ``name`` matches ``[a-z][a-z0-9_]*`` and ``Class`` subclasses
  :class:`~mmeval.core.dist_backends.BaseDistBackend`;
* :func:`register_dist_backend`, for backends that are not packaged.

Listing reads entry-point metadata only: no plugin module is imported until a
backend is used. A name claimed by two different distributions is listed once,
marked as a conflict, and refuses to load (never first-on-``sys.path``-wins).

The default backend is, in order: the name given to
:func:`set_default_dist_backend`, the environment variable
``MMEVAL_DIST_BACKEND`` (checked when the default is first read: a bad value
raises naming the variable), or ``'auto'``. ``'auto'`` is resolved at each use
(the first collective of ``compute()``): among the available backends whose
``detect()`` says their runtime is active, the one with the highest
:attr:`~mmeval.core.dist_backends.BaseDistBackend.priority` (ties: the first
name alphabetically), else ``non_dist``. A plugin that fails to import (even
with ``SystemExit``) is skipped with a logged warning; a plugin whose import or
first ``detect()`` takes longer than ``MMEVAL_AUTO_SELECT_TIMEOUT`` seconds
(default 30) is skipped for the rest of the process (see :mod:`.auto_select`).

When the environment says this process is one of several (the variables of
torchrun, MPI launchers, SLURM or Horovod) and the backend in use is
``non_dist``, a :class:`DistributedLaunchWarning` says so, once per process,
naming the variables and what it found of each backend that would serve them
(see :mod:`.launch`). ``MMEVAL_DISABLE_PLUGINS`` (comma-separated backend or
distribution names) keeps named plugins from being listed or loaded.

Every function here delegates to one :class:`~mmeval.core.registry.BackendRegistry`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, List, Mapping, Optional, Tuple, Type

from .dist_backends import _compat
from .entry_points import (  # noqa: F401 -- DEFAULT_ENV, DISABLE_ENV and NAME_RE stay importable from here
    AUTO,
    DEFAULT_ENV,
    DISABLE_ENV,
    ENTRY_POINT_GROUP,
    NAME_RE,
    BackendInfo,
)
from .errors import DistributedLaunchWarning
from .known_backends import KNOWN_BACKENDS, install_hint
from .launch import LAUNCHER_VARIABLES, launcher_environment
from .registry import BackendRegistry

if TYPE_CHECKING:  # pragma: no cover
    from .dist_backends.base_backend import BaseDistBackend

__all__ = [
    "ENTRY_POINT_GROUP",
    "AUTO",
    "KNOWN_DISTRIBUTIONS",
    "SOURCE_CHECKOUT_PATHS",
    "UNSUPPORTED_BACKENDS",
    "LAUNCHER_VARIABLES",
    "DistributedLaunchWarning",
    "BackendInfo",
    "list_all_backends",
    "backend_infos",
    "refresh_backends",
    "register_dist_backend",
    "unregister_dist_backend",
    "get_dist_backend",
    "get_dist_backend_class",
    "set_default_dist_backend",
    "get_default_dist_backend",
    "resolve_backend_name",
    "validate_backend_name",
    "get_rank_and_world_size",
    "running_dist_backend",
    "install_hint",
    "launcher_environment",
]

#: Install hints only: which distribution (with its extra) provides each in-tree backend (read-only view of
#: :data:`~mmeval.core.known_backends.KNOWN_BACKENDS`).
KNOWN_DISTRIBUTIONS: Mapping[str, str] = MappingProxyType(
    {name: r.requirement for name, r in KNOWN_BACKENDS.items() if r.requirement is not None}
)

#: Where each distribution of :data:`KNOWN_DISTRIBUTIONS` lies in a checkout of this repository (read-only).
SOURCE_CHECKOUT_PATHS: Mapping[str, str] = MappingProxyType(
    {r.distribution: r.checkout for r in KNOWN_BACKENDS.values() if r.distribution and r.checkout}
)

#: Backends MMEval 0.2.1 had that mmeval does not provide, with the reason (read-only).
UNSUPPORTED_BACKENDS: Mapping[str, str] = MappingProxyType(
    {name: r.unsupported for name, r in KNOWN_BACKENDS.items() if r.unsupported is not None}
)

#: The one registry behind every function of this module (tests swap in a fresh ``BackendRegistry()``).
_registry = BackendRegistry()


def list_all_backends(refresh: bool = False) -> List[str]:
    """Sorted names of every usable backend: built-in, installed and registered.

    Imports no plugin module. Conflicting names are listed (using them
    raises); disabled and malformed entry points are not. ``refresh=True``
    rescans installed distributions first.
    """
    if refresh:
        _registry.refresh()
    return _registry.names()


def backend_infos(refresh: bool = False) -> List[BackendInfo]:
    """A :class:`BackendInfo` for every name: usable, conflicting, invalid or disabled."""
    if refresh:
        _registry.refresh()
    return _registry.infos()


def refresh_backends() -> None:
    """Forget the entry-point scan and the failed loads; the next call rescans.

    Use it after ``pip install`` of a backend inside a running interpreter
    (Jupyter). Backends already loaded and their instances are kept.
    """
    _registry.refresh()


def register_dist_backend(name: str, cls: Type[BaseDistBackend], *, override: bool = False) -> None:
    """Register ``cls`` under ``name`` for a backend that is not packaged.

    A name already taken (built in, installed or registered) is refused with
    :class:`~mmeval.core.errors.BackendAlreadyRegisteredError` unless
    ``override=True``, which makes ``cls`` win over the installed one.
    """
    _registry.register(name, cls, override=override)


def unregister_dist_backend(name: str) -> None:
    """Remove a backend registered with :func:`register_dist_backend` (installed ones stay)."""
    _registry.unregister(name)


def get_dist_backend_class(name: str) -> Type[BaseDistBackend]:
    """Load (once) and return the backend class registered or installed as ``name``.

    A plugin whose import raises anything but ``KeyboardInterrupt``
    (``SystemExit`` included) raises :class:`~mmeval.core.errors.BackendLoadError`;
    a name not matching ``[a-z][a-z0-9_]*`` raises
    :class:`~mmeval.core.errors.InvalidBackendNameError`, a well-formed name no
    backend has :class:`~mmeval.core.errors.BackendNotFoundError` (both are
    also ``AssertionError``, as in MMEval 0.2.1).
    """
    return _registry.get_class(name)


def get_dist_backend(name: Optional[str] = None) -> BaseDistBackend:
    """Return the (cached) backend instance for ``name``.

    ``None`` means the default (see :func:`set_default_dist_backend`);
    ``'auto'`` picks the backend whose runtime is active now. The instance is
    created with no arguments on first use; one instance per name. A backend
    whose :meth:`~mmeval.core.dist_backends.BaseDistBackend.availability`
    says it cannot run here (``torch_cuda`` without CUDA, ...) raises
    :class:`~mmeval.core.errors.BackendLoadError` with the reason, on every
    rank, before any collective. When a launcher started several processes
    and the backend is ``non_dist``, a :class:`DistributedLaunchWarning` is
    issued (once per process). Names are checked as in
    :func:`get_dist_backend_class`.
    """
    return _registry.get(name)


def running_dist_backend(name: Optional[str] = None) -> Optional[BaseDistBackend]:
    """The backend instance already in use for ``name`` whose runtime is active, else ``None``.

    Imports no plugin, creates no instance and runs no auto-selection
    (``None`` / ``'auto'``: any distributed instance created so far).
    """
    return _registry.running(name)


def get_rank_and_world_size(backend: Optional[str] = None) -> Tuple[int, int]:
    """This process's rank and the number of processes, whatever the backend: for a sampler.

    The named backend's (``None``: the default, auto-selected when not set)
    ``rank`` and ``world_size`` once its runtime is active, else ``(0, 1)``::

        from torch.utils.data import DataLoader, DistributedSampler
        from mmeval.core.dist import get_rank_and_world_size

        rank, world_size = get_rank_and_world_size()
        sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False)
        loader = DataLoader(dataset, batch_size=64, sampler=sampler)

    Unknown names raise as :func:`get_dist_backend` does.
    """
    return _registry.rank_and_world_size(backend)


def set_default_dist_backend(name: str) -> None:
    """Set the backend used by metrics that name none (``'auto'`` restores auto-selection).

    Validated against the installed names without importing anything: an
    unknown name raises :class:`~mmeval.core.errors.BackendNotFoundError`
    (with the closest known name, or the install command).
    """
    _registry.set_default(name)


def get_default_dist_backend() -> str:
    """The default backend name: set explicitly, else ``$MMEVAL_DIST_BACKEND``, else ``'auto'``.

    A ``$MMEVAL_DIST_BACKEND`` naming no usable backend raises here, the first
    time the default is read (a metric built with no ``dist_backend``), with
    a message naming the variable; the check reads entry-point metadata only.
    """
    return _registry.default()


def validate_backend_name(name: str) -> None:
    """Raise unless ``name`` names a usable backend; reads entry-point metadata only (imports no plugin).

    :class:`~mmeval.core.errors.InvalidBackendNameError` for a malformed name,
    :class:`~mmeval.core.errors.BackendNotFoundError` for an unknown or
    disabled one, :class:`~mmeval.core.errors.BackendConflictError` for a name
    two distributions claim. The messages give the closest name (``'Torch-CPU'``:
    did you mean ``'torch_cpu'``?) or the install command.
    """
    _registry.validate(name)


def resolve_backend_name(name: Optional[str] = None) -> str:
    """Turn ``None`` / ``'auto'`` into a concrete backend name (see the module doc)."""
    return _registry.resolve(name)


_compat.bind_class_lookup(get_dist_backend_class)


def _reset_for_tests() -> None:
    """A fresh registry (for test directories that do not build their own)."""
    global _registry
    _registry = BackendRegistry()
