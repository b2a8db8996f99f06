"""The registry of distributed communication backends.

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
name alphabetically), else ``non_dist``. The order comes from the backend
classes, so a third-party backend can outrank the in-tree ones.

When the environment says this process is one of several (the variables of
torchrun, MPI launchers, SLURM or Horovod) and the backend in use is
``non_dist``, a :class:`DistributedLaunchWarning` says so, once per process,
naming the variables and what to install or initialise.

``MMEVAL_DISABLE_PLUGINS`` (comma-separated backend or distribution names)
keeps named plugins from being listed or loaded.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
from typing import Any, Dict, FrozenSet, List, NamedTuple, Optional, Set, Tuple, Type

from . import _metadata
from .dist_backends.base_backend import BaseDistBackend
from .dist_backends.non_dist import NonDist
from .errors import (
    BackendAlreadyRegisteredError,
    BackendConflictError,
    BackendLoadError,
    BackendNotFoundError,
    BackendTypeError,
    DistributedLaunchWarning,
    InvalidBackendNameError,
)

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
    "install_hint",
    "launcher_environment",
]



def _logger() -> Any:
    """The ``mmeval`` logger; :mod:`logging` is imported when something is first logged (not to list backends)."""
    import logging

    return logging.getLogger("mmeval")


ENTRY_POINT_GROUP = "mmeval.dist_backends"
AUTO = "auto"
DEFAULT_ENV = "MMEVAL_DIST_BACKEND"
DISABLE_ENV = _metadata.DISABLE_ENV
NAME_RE = re.compile(r"[a-z][a-z0-9_]*\Z")

#: Install hints only, for backend names that are *not installed*: which
#: distribution (with its extra) provides each backend of this repository.
#: Auto-selection never reads it (the order is each class's ``priority``).
KNOWN_DISTRIBUTIONS: Dict[str, str] = {
    "torch_cpu": "mmeval-torch",
    "torch_cuda": "mmeval-torch",
    "mpi4py": "mmeval-mpi4py",
    "tf_horovod": "mmeval-horovod[tensorflow]",
    "torch_horovod": "mmeval-horovod[torch]",
    "paddle_dist": "mmeval-paddle",
    "jax": "mmeval-jax",
}

#: Where each distribution of :data:`KNOWN_DISTRIBUTIONS` lies in a checkout of
#: this repository (the plugins are not on PyPI yet: ``pip install <path>``).
SOURCE_CHECKOUT_PATHS: Dict[str, str] = {
    "mmeval-torch": "./plugins/torch_backend",
    "mmeval-mpi4py": "./plugins/mpi_backend",
    "mmeval-horovod": "./plugins/horovod_backend",
    "mmeval-paddle": "./plugins/paddle_backend",
    "mmeval-jax": "./plugins/jax_backend",
}

#: Backends MMEval 0.2.1 had that mmeval does not provide, with the reason.
UNSUPPORTED_BACKENDS: Dict[str, str] = {
    "oneflow_cpu": "the 'oneflow' package on PyPI is a placeholder without the OneFlow framework, so a "
                   "OneFlow backend can be neither built nor tested here",
    "oneflow_cuda": "the 'oneflow' package on PyPI is a placeholder without the OneFlow framework, so a "
                    "OneFlow backend can be neither built nor tested here",
    "npu": "NPU collectives need Ascend hardware and its software stack, which mmeval cannot test",
}

#: Environment variables by which launchers tell a process it is one of several:
#: ``(variable, launcher, kind)``; a ``'size'`` variable above 1 or a ``'rank'``
#: variable above 0 means several processes.
LAUNCHER_VARIABLES: Tuple[Tuple[str, str, str], ...] = (
    ("WORLD_SIZE", "torchrun", "size"),
    ("RANK", "torchrun", "rank"),
    ("LOCAL_RANK", "torchrun", "rank"),
    ("OMPI_COMM_WORLD_SIZE", "mpi", "size"),
    ("OMPI_COMM_WORLD_RANK", "mpi", "rank"),
    ("PMI_SIZE", "mpi", "size"),
    ("PMI_RANK", "mpi", "rank"),
    ("PMIX_RANK", "mpi", "rank"),
    ("MPI_LOCALNRANKS", "mpi", "size"),
    ("SLURM_NTASKS", "slurm", "size"),
    ("HOROVOD_SIZE", "horovod", "size"),
    ("HOROVOD_RANK", "horovod", "rank"),
)

#: What to install or initialise, by launcher, when one is seen without a distributed backend.
_LAUNCHER_ADVICE: Dict[str, Tuple[Tuple[str, ...], str]] = {
    "torchrun": (("torch_cpu", "torch_cuda"),
                 "call torch.distributed.init_process_group(...) before compute()"),
    "mpi": (("mpi4py",), "install mpi4py built for the MPI library of your mpiexec"),
    "horovod": (("torch_horovod", "tf_horovod"), "call hvd.init() before compute()"),
    "slurm": (("torch_cpu", "torch_cuda", "mpi4py"),
              "start the tasks' runtime (torch.distributed.init_process_group, or MPI through mpi4py); "
              "ignore this if one process per allocation is intended"),
}


_BUILTINS: Dict[str, Type[BaseDistBackend]] = {"non_dist": NonDist}


class BackendInfo:
    """What the registry knows of one backend name (for listings and the CLI).

    ``status`` is ``'ok'``, ``'conflict'`` (two distributions claim the name),
    ``'invalid'`` (a malformed entry point), ``'disabled'`` (by
    ``MMEVAL_DISABLE_PLUGINS``) or ``'failed'`` (it was loaded and failed).
    ``source`` is ``'builtin'``, ``'entry_point'`` or ``'registered'``.

    A plain class rather than a dataclass: :mod:`dataclasses` (and
    :mod:`inspect` with it) would add ~10 ms to every ``list_all_backends()``
    in a fresh process.
    """

    __slots__ = ("name", "source", "value", "distribution", "version", "core_requirement", "status", "error",
                 "providers")

    def __init__(self, name: str, source: str, value: str, distribution: Optional[str] = None,
                 version: Optional[str] = None, core_requirement: Optional[str] = None, status: str = "ok",
                 error: str = "", providers: Optional[List[Tuple[str, str, str]]] = None) -> None:
        self.name = name
        self.source = source
        self.value = value
        self.distribution = distribution
        self.version = version
        self.core_requirement = core_requirement
        self.status = status
        self.error = error
        self.providers: List[Tuple[str, str, str]] = [] if providers is None else providers

    def as_dict(self) -> Dict[str, Any]:
        """The fields as a dict (``providers`` as a list of lists: JSON-ready)."""
        out = {k: getattr(self, k) for k in self.__slots__}
        out["providers"] = [list(p) for p in self.providers]
        return out

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaces

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"BackendInfo({fields})"


class _EntryPoints(NamedTuple):
    by_name: Dict[str, List[Any]]
    invalid: Dict[str, Any]
    shadowed: Dict[str, List[Any]]  # entry points claiming a built-in name (ignored)


_lock = threading.RLock()
_scan: Optional[_EntryPoints] = None
_registered: Dict[str, Type[BaseDistBackend]] = {}
_classes: Dict[str, Type[BaseDistBackend]] = {}
_instances: Dict[str, BaseDistBackend] = {}
_load_errors: Dict[str, BaseException] = {}
_default: Optional[str] = None
_auto_logged: Set[str] = set()
_auto_warned: Set[str] = set()
_launch_warned = False
_env_checked: Optional[str] = None


# --------------------------------------------------------------------------
# discovery
# --------------------------------------------------------------------------


def _disabled() -> FrozenSet[str]:
    return _metadata.disabled_plugins()


def _entry_points() -> _EntryPoints:
    global _scan
    with _lock:
        if _scan is None:
            by_name: Dict[str, List[Any]] = {}
            invalid: Dict[str, Any] = {}
            shadowed: Dict[str, List[Any]] = {}
            for ep in _metadata.entry_points_in_group(ENTRY_POINT_GROUP):
                if not NAME_RE.match(ep.name) or ":" not in ep.value:
                    invalid[ep.name] = ep
                elif ep.name in _BUILTINS:
                    shadowed.setdefault(ep.name, []).append(ep)
                else:
                    by_name.setdefault(ep.name, []).append(ep)
            _scan = _EntryPoints(by_name, invalid, shadowed)
        return _scan


def _dist_name(ep: Any) -> str:
    return _metadata.distribution_name(ep) or "<unknown distribution>"


def _dist_version(ep: Any) -> str:
    dist = _metadata.distribution_of(ep)
    return str(dist.version) if dist is not None else "?"


def _live(eps: List[Any], disabled: FrozenSet[str]) -> List[Any]:
    """The entry points not disabled by name or by distribution name (see :func:`_metadata.is_disabled`)."""
    if not disabled:
        return eps
    return [ep for ep in eps if not _metadata.is_disabled(ep, disabled)]


def refresh_backends() -> None:
    """Forget the entry-point scan and the failed loads; the next call rescans.

    Use it after ``pip install`` of a backend inside a running interpreter
    (Jupyter). Backends already loaded and their instances are kept.
    """
    global _scan, _env_checked
    importlib.invalidate_caches()
    with _lock:
        _scan = None
        _env_checked = None
        _load_errors.clear()


def list_all_backends(refresh: bool = False) -> List[str]:
    """Sorted names of every usable backend: built-in, installed and registered.

    Imports no plugin module. Conflicting names are listed (using them
    raises); disabled and malformed entry points are not. ``refresh=True``
    rescans installed distributions first.
    """
    if refresh:
        refresh_backends()
    scan = _entry_points()
    disabled = _disabled()
    names = set(_BUILTINS) | set(_registered)
    for name, eps in scan.by_name.items():
        if _live(eps, disabled):
            names.add(name)
    return sorted(names)


def _core_requirement(ep: Any) -> Optional[str]:
    dist = _metadata.distribution_of(ep)
    if dist is None:
        return None
    for req in dist.requires or ():
        if re.match(r"mmeval[-_.]core\b", req, re.IGNORECASE) and "extra ==" not in req:
            return str(req).split(";")[0].strip()
    return None


def backend_infos(refresh: bool = False) -> List[BackendInfo]:
    """A :class:`BackendInfo` for every name: usable, conflicting, invalid or disabled."""
    if refresh:
        refresh_backends()
    scan = _entry_points()
    disabled = _disabled()
    infos: Dict[str, BackendInfo] = {}
    for name, cls in _BUILTINS.items():
        infos[name] = BackendInfo(name, "builtin", f"{cls.__module__}:{cls.__qualname__}", "mmeval-core", _core_version())
        claimed = _live(scan.shadowed.get(name, []), disabled)
        if claimed:
            claims = "; ".join(f"{_dist_name(ep)} {_dist_version(ep)} ({name} = {ep.value})" for ep in claimed)
            infos[name].error = f"also claimed by {claims}: ignored, the built-in backend is used"
            infos[name].providers = [(_dist_name(ep), _dist_version(ep), ep.value) for ep in claimed]
    for name, all_eps in scan.by_name.items():
        eps = _live(all_eps, disabled) or all_eps
        first = eps[0]
        info = BackendInfo(
            name,
            "entry_point",
            first.value,
            _dist_name(first),
            _dist_version(first),
            _core_requirement(first),
            providers=[(_dist_name(ep), _dist_version(ep), ep.value) for ep in eps],
        )
        if not _live(all_eps, disabled):
            info.status = "disabled"
            info.error = f"disabled by {DISABLE_ENV}"
        elif len(eps) > 1:
            info.status = "conflict"
            info.error = _conflict_message(name, eps)
        elif name in _load_errors:
            info.status = "failed"
            info.error = str(_load_errors[name])
        elif info.core_requirement and not _satisfies(_core_version(), info.core_requirement):
            info.status = "incompatible"
            info.error = f"needs {info.core_requirement}, mmeval-core {_core_version()} is installed"
        infos[name] = info
    for name, ep in scan.invalid.items():
        live = bool(_live([ep], disabled))
        infos[name] = BackendInfo(
            name, "entry_point", ep.value, _dist_name(ep), _dist_version(ep),
            status="invalid" if live else "disabled",
            error="entry point must be 'name = module:Class' with name matching [a-z][a-z0-9_]*"
            if live else f"disabled by {DISABLE_ENV}",
        )
    for name, cls in _registered.items():
        infos[name] = BackendInfo(name, "registered", f"{cls.__module__}:{cls.__qualname__}")
    return [infos[k] for k in sorted(infos)]


def _core_version() -> str:
    from ..version import __version__

    return __version__


def _satisfies(version: str, requirement: str) -> bool:
    """Whether ``version`` of mmeval-core meets ``requirement`` (``'mmeval-core>=0.1,<0.2'``), by PEP 440.

    Uses :mod:`packaging`. Pre-releases count as the versions they are
    (``0.1.0rc1`` comes before ``0.1``, so ``>=0.1`` rejects it). A requirement
    that does not parse is not held against the plugin (True).
    """
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    try:
        spec = Requirement(requirement).specifier
        have = Version(version)
    except (InvalidRequirement, InvalidVersion):
        return True
    return spec.contains(have, prereleases=True)


# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------


def _conflict_message(name: str, eps: List[Any]) -> str:
    who = " and ".join(f"{_dist_name(ep)} {_dist_version(ep)} ({name} = {ep.value})" for ep in eps)
    return (
        f"dist backend {name!r} is provided by more than one distribution in entry-point group "
        f"{ENTRY_POINT_GROUP!r}: {who}. Uninstall all but one (pip uninstall ...), or choose a class "
        f"with register_dist_backend({name!r}, cls, override=True)."
    )


def install_hint(name: str) -> Optional[str]:
    """How to install the distribution providing backend ``name`` (one of :data:`KNOWN_DISTRIBUTIONS`), else None.

    Gives the PyPI command and, as the plugins are not published yet, the
    command for a checkout of this repository.
    """
    requirement = KNOWN_DISTRIBUTIONS.get(name)
    if requirement is None:
        return None
    project, _, extra = requirement.partition("[")
    hint = f"run `pip install '{requirement}'`" if extra else f"run `pip install {requirement}`"
    path = SOURCE_CHECKOUT_PATHS.get(project)
    if path is not None:
        local = f"'{path}[{extra}'" if extra else path
        hint += (
            f" once it is published on PyPI; until then, from the root of a checkout of the mmeval "
            f"repository, run `pip install {local}`"
        )
    if project == "mmeval-horovod":
        hint += " (Horovod itself is built against the framework: see plugins/horovod_backend/README.md)"
    return hint


def _unsupported(name: str) -> BackendNotFoundError:
    return BackendNotFoundError(
        f"dist backend {name!r} is not supported by mmeval: {UNSUPPORTED_BACKENDS[name]}. MMEval 0.2.1 had it; "
        f"here it is left to a third-party backend, which docs/writing-a-backend.md shows how to write "
        f"(and `mmeval.testing.conformance` how to test). Installed backends: {', '.join(list_all_backends())}."
    )


def _did_you_mean(name: str) -> str:
    """`` Did you mean 'x'?`` for the closest installed or known backend name, or ``''``."""
    import difflib

    candidates = set(list_all_backends()) | set(KNOWN_DISTRIBUTIONS) | {AUTO}
    candidates.discard(name)
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def _not_found(name: str, why: str = "") -> BackendNotFoundError:
    if not why and name in UNSUPPORTED_BACKENDS:
        return _unsupported(name)
    installed = ", ".join(list_all_backends())
    msg = f"unknown dist backend {name!r}"
    if why:
        msg += f" ({why})"
    hint = install_hint(name)
    if hint is not None:
        msg += f": it is provided by the distribution {KNOWN_DISTRIBUTIONS[name]}, which is not installed; {hint}"
    else:
        msg += (
            f": no installed distribution declares it in entry-point group {ENTRY_POINT_GROUP!r} and it was "
            "not registered with register_dist_backend()"
        )
    msg += "."
    if hint is None:
        msg += _did_you_mean(name)
    msg += f" Installed backends: {installed}."
    if hint is None:
        hints = ", ".join(f"{k} ({v})" for k, v in KNOWN_DISTRIBUTIONS.items())
        msg += f" Backends mmeval knows of: {hints}."
    return BackendNotFoundError(msg)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise InvalidBackendNameError(f"invalid dist backend name {name!r}: names match [a-z][a-z0-9_]*")


# --------------------------------------------------------------------------
# registration and loading
# --------------------------------------------------------------------------


def register_dist_backend(name: str, cls: Type[BaseDistBackend], *, override: bool = False) -> None:
    """Register ``cls`` under ``name`` for a backend that is not packaged.

    A name already taken (built in, installed or registered) is refused with
    :class:`~mmeval.core.errors.BackendAlreadyRegisteredError` unless
    ``override=True``, which makes ``cls`` win over the installed one.
    """
    _check_name(name)
    if not (isinstance(cls, type) and issubclass(cls, BaseDistBackend)):
        raise BackendTypeError(
            f"register_dist_backend({name!r}, ...): {cls!r} is not a subclass of "
            "mmeval.core.dist_backends.BaseDistBackend"
        )
    with _lock:
        taken = name in _BUILTINS or name in _registered or name in _entry_points().by_name
        if taken and not override:
            where = "built in" if name in _BUILTINS else (
                "registered" if name in _registered else
                f"installed by {', '.join(_dist_name(ep) for ep in _entry_points().by_name[name])}"
            )
            raise BackendAlreadyRegisteredError(
                f"dist backend {name!r} is already {where}; pass override=True to replace it"
            )
        _registered[name] = cls
        _classes.pop(name, None)
        _instances.pop(name, None)
        _load_errors.pop(name, None)


def unregister_dist_backend(name: str) -> None:
    """Remove a backend registered with :func:`register_dist_backend` (installed ones stay)."""
    with _lock:
        if name not in _registered:
            raise _not_found(name, "it was not registered with register_dist_backend()")
        del _registered[name]
        _classes.pop(name, None)
        _instances.pop(name, None)
        global _default
        if _default == name:
            _default = None


def get_dist_backend_class(name: str) -> Type[BaseDistBackend]:
    """Load (once) and return the backend class registered or installed as ``name``."""
    with _lock:
        cls = _classes.get(name)
        if cls is not None:
            return cls
        if name in _registered:
            cls = _registered[name]
        elif name in _BUILTINS:
            cls = _BUILTINS[name]
        else:
            cls = _load_entry_point(name)
        _classes[name] = cls
        return cls


def _load_entry_point(name: str) -> Type[BaseDistBackend]:
    scan = _entry_points()
    all_eps = scan.by_name.get(name, [])
    eps = _live(all_eps, _disabled())
    if all_eps and not eps:
        raise _not_found(name, f"its entry point in group {ENTRY_POINT_GROUP!r} is disabled by {DISABLE_ENV}")
    if not eps:
        if name in scan.invalid:
            ep = scan.invalid[name]
            raise BackendLoadError(
                f"dist backend {name!r}: the entry point '{ep.name} = {ep.value}' of {_dist_name(ep)} is malformed; "
                "entry points of group mmeval.dist_backends must read 'name = module:Class'"
            )
        raise _not_found(name)
    if len(eps) > 1:
        raise BackendConflictError(_conflict_message(name, eps))
    ep = eps[0]
    where = f"entry point '{name} = {ep.value}' in group {ENTRY_POINT_GROUP!r}, distribution {_dist_name(ep)} {_dist_version(ep)}"
    if name in _load_errors:
        err = _load_errors[name]
        raise type(err)(str(err)) from err.__cause__
    try:
        obj = ep.load()
    except Exception as exc:
        load_err = BackendLoadError(
            f"dist backend {name!r} ({where}) failed to import: {type(exc).__name__}: {exc}. "
            f"Reinstall {_dist_name(ep)} or install what it needs."
        )
        load_err.__cause__ = exc
        _load_errors[name] = load_err
        raise load_err from exc
    if not (isinstance(obj, type) and issubclass(obj, BaseDistBackend)):
        type_err = BackendTypeError(
            f"dist backend {name!r} ({where}) resolves to {obj!r}, which is not a subclass of "
            f"mmeval.core.dist_backends.BaseDistBackend; fix the entry point of {_dist_name(ep)}"
        )
        _load_errors[name] = type_err
        raise type_err
    req = _core_requirement(ep)
    if req and not _satisfies(_core_version(), req):
        _logger().warning(
            "dist backend %r (%s) requires %s but mmeval-core %s is installed; it may not work",
            name, _dist_name(ep), req, _core_version(),
        )
    return obj


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
    issued (once per process).
    """
    resolved = resolve_backend_name(name)
    if resolved == "non_dist":
        _warn_if_launched(name)
    with _lock:
        inst = _instances.get(resolved)
        if inst is None:
            cls = get_dist_backend_class(resolved)
            reason = cls.availability()
            if reason is not None:
                raise BackendLoadError(
                    f"dist backend {resolved!r} ({cls.__module__}.{cls.__qualname__}) is installed but cannot run "
                    f"on this machine: {reason}"
                )
            try:
                inst = cls()
            except Exception as exc:
                raise BackendLoadError(
                    f"dist backend {resolved!r}: {cls.__module__}.{cls.__qualname__}() failed: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            _instances[resolved] = inst
        return inst


def set_default_dist_backend(name: str) -> None:
    """Set the backend used by metrics that name none (``'auto'`` restores auto-selection).

    Validated against the installed names without importing anything: an
    unknown name raises :class:`~mmeval.core.errors.BackendNotFoundError`
    (with the closest known name, or the install command).
    """
    global _default
    if name != AUTO:
        _validate_name(name)
    with _lock:
        _default = name


def get_default_dist_backend() -> str:
    """The default backend name: set explicitly, else ``$MMEVAL_DIST_BACKEND``, else ``'auto'``.

    A ``$MMEVAL_DIST_BACKEND`` naming no usable backend raises here, the first
    time the default is read (a metric built with no ``dist_backend``), with
    a message naming the variable; the check reads entry-point metadata only.
    """
    global _env_checked
    if _default is not None:
        return _default
    env = os.environ.get(DEFAULT_ENV, "").strip()
    if not env or env == AUTO:
        return AUTO
    if env != _env_checked:
        try:
            _validate_name(env)
        except (BackendNotFoundError, BackendConflictError, InvalidBackendNameError) as exc:
            raise type(exc)(
                f"the environment variable {DEFAULT_ENV}={env!r} names no usable dist backend: {exc} "
                f"Set {DEFAULT_ENV} to one of the installed backends, or unset it for auto-selection."
            ) from None
        _env_checked = env
    return env


def _validate_name(name: str) -> None:
    _check_name(name)
    if name in _BUILTINS or name in _registered:
        return
    all_eps = _entry_points().by_name.get(name, [])
    eps = _live(all_eps, _disabled())
    if all_eps and not eps:
        raise _not_found(name, f"disabled by {DISABLE_ENV}")
    if not eps:
        raise _not_found(name)
    if len(eps) > 1:
        raise BackendConflictError(_conflict_message(name, eps))


def resolve_backend_name(name: Optional[str] = None) -> str:
    """Turn ``None`` / ``'auto'`` into a concrete backend name (see the module doc)."""
    if name is None:
        name = get_default_dist_backend()
    if name != AUTO:
        return name
    chosen = _auto_select()
    if chosen not in _auto_logged:
        _auto_logged.add(chosen)
        _logger().info("mmeval: auto-selected dist backend %r", chosen)
    return chosen


def _auto_candidates() -> List[Tuple[int, str, Type[BaseDistBackend]]]:
    """``(priority, name, class)`` of every loadable backend but ``non_dist``, best first."""
    ranked: List[Tuple[int, str, Type[BaseDistBackend]]] = []
    for name in list_all_backends():
        if name == "non_dist":
            continue
        try:
            cls = get_dist_backend_class(name)
        except Exception as exc:  # a broken plugin must not break the others
            if name not in _auto_warned:
                _auto_warned.add(name)
                _logger().warning("mmeval: skipping dist backend %r during auto-selection: %s", name, exc)
            continue
        priority = getattr(cls, "priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            if name not in _auto_warned:
                _auto_warned.add(name)
                _logger().warning("mmeval: dist backend %r has a non-int priority %r; ranked as 0", name, priority)
            priority = 0
        ranked.append((priority, name, cls))
    ranked.sort(key=lambda item: (-item[0], item[1]))
    return ranked


def _auto_select() -> str:
    for _priority, name, cls in _auto_candidates():
        try:
            if cls.detect():
                return name
        except Exception as exc:
            _logger().warning("mmeval: %s.detect() raised %s: %s", cls.__qualname__, type(exc).__name__, exc)
    return "non_dist"


# --------------------------------------------------------------------------
# a launcher without a distributed backend
# --------------------------------------------------------------------------


def launcher_environment() -> Dict[str, str]:
    """The launcher variables of this process that say it is one of several (see :data:`LAUNCHER_VARIABLES`).

    ``{variable: value}``; empty when no launcher started several processes.
    """
    seen: Dict[str, str] = {}
    for var, _launcher, kind in LAUNCHER_VARIABLES:
        value = os.environ.get(var, "").strip()
        try:
            number = int(value)
        except ValueError:
            continue
        if (kind == "size" and number > 1) or (kind == "rank" and number > 0):
            seen[var] = value
    return seen


def _launch_advice(launchers: List[str]) -> List[str]:
    """One line per launcher seen: which backends would serve it and what is missing for them."""
    installed = set(list_all_backends())
    all_eps = _entry_points().by_name
    lines: List[str] = []
    for launcher in launchers:
        names, step = _LAUNCHER_ADVICE[launcher]
        grouped: Dict[str, List[str]] = {}  # what to do -> the backends it serves (one line per distribution)
        for backend in names:
            if backend in installed:
                todo = f"installed, but its runtime is not active in this process: {step}"
            elif backend in all_eps:
                todo = f"installed, but disabled by {DISABLE_ENV}={os.environ.get(DISABLE_ENV, '')!r}"
            else:
                hint = install_hint(backend) or f"install the distribution providing {backend}"
                todo = f"not installed: {hint}; then {step}"
            grouped.setdefault(todo, []).append(backend)
        parts = [f"{' / '.join(backends)} {'is' if len(backends) == 1 else 'are'} {todo}"
                 for todo, backends in grouped.items()]
        lines.append(f"  - {launcher}: " + "; ".join(parts))
    return lines


def _warn_if_launched(asked: Optional[str]) -> None:
    """Issue :class:`DistributedLaunchWarning` once per process when a launcher is seen and non_dist is in use."""
    global _launch_warned
    if _launch_warned:
        return
    seen = launcher_environment()
    if not seen:
        return
    _launch_warned = True
    launchers: List[str] = []
    for var, launcher, _kind in LAUNCHER_VARIABLES:
        if var in seen and launcher not in launchers:
            launchers.append(launcher)
    how = "was asked for by name" if asked not in (None, AUTO) else "was auto-selected (no distributed runtime detected)"
    if asked is None and _default is None and os.environ.get(DEFAULT_ENV, "").strip() == "non_dist":
        how = f"is set by {DEFAULT_ENV}=non_dist"
    variables = ", ".join(f"{k}={v}" for k, v in seen.items())
    msg = (
        f"mmeval: this process is one of several started by a launcher ({variables}), but the dist backend "
        f"'non_dist' {how}: every rank will compute the metric over its own shard only, and the results will "
        f"differ from the whole dataset's. To evaluate across the processes:\n" + "\n".join(_launch_advice(launchers))
        + "\nIf per-rank results are what you want, silence this with warnings.filterwarnings('ignore', "
        "category=mmeval.core.dist.DistributedLaunchWarning)."
    )
    import warnings

    warnings.warn(msg, DistributedLaunchWarning, stacklevel=4)


def _reset_for_tests() -> None:
    """Forget registrations, defaults, loaded classes and instances (test helper)."""
    global _default, _scan, _env_checked, _launch_warned
    with _lock:
        _registered.clear()
        _classes.clear()
        _instances.clear()
        _load_errors.clear()
        _auto_logged.clear()
        _auto_warned.clear()
        _default = None
        _scan = None
        _env_checked = None
        _launch_warned = False
