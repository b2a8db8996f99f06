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
``MMEVAL_DIST_BACKEND``, or ``'auto'``. ``'auto'`` is resolved at each use
(the first collective of ``compute()``): the first backend in
:data:`AUTO_PRIORITY` (then any other installed backend, alphabetically) whose
``detect()`` says its runtime is active, else ``non_dist``.

``MMEVAL_DISABLE_PLUGINS`` (comma-separated backend or distribution names)
keeps named plugins from being listed or loaded.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple, Type

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

__all__ = [
    "ENTRY_POINT_GROUP",
    "AUTO",
    "AUTO_PRIORITY",
    "KNOWN_DISTRIBUTIONS",
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
]



def _logger() -> Any:
    """The ``mmeval`` logger; :mod:`logging` is imported when something is first logged (not to list backends)."""
    import logging

    return logging.getLogger("mmeval")


ENTRY_POINT_GROUP = "mmeval.dist_backends"
AUTO = "auto"
DEFAULT_ENV = "MMEVAL_DIST_BACKEND"
DISABLE_ENV = "MMEVAL_DISABLE_PLUGINS"
NAME_RE = re.compile(r"[a-z][a-z0-9_]*\Z")

#: Auto-selection order among backends whose ``detect()`` is true. CUDA before
#: CPU (torch_cuda only detects an NCCL process group); an initialized
#: torch.distributed before Horovod before MPI (Horovod and torch may run
#: under an MPI launcher without using MPI for evaluation).
AUTO_PRIORITY: Tuple[str, ...] = ("torch_cuda", "torch_cpu", "torch_horovod", "tf_horovod", "mpi4py")

#: Which distribution provides each well-known backend (for install hints).
KNOWN_DISTRIBUTIONS: Dict[str, str] = {
    "torch_cpu": "mmeval-torch",
    "torch_cuda": "mmeval-torch",
    "mpi4py": "mmeval-mpi4py",
    "tf_horovod": "mmeval-horovod[tensorflow]",
    "torch_horovod": "mmeval-horovod[torch]",
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


# --------------------------------------------------------------------------
# discovery
# --------------------------------------------------------------------------


def _disabled() -> Set[str]:
    raw = os.environ.get(DISABLE_ENV, "")
    return {part.strip().lower() for part in raw.split(",") if part.strip()}


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
    dist = _metadata.distribution_of(ep)
    if dist is None:
        return "<unknown distribution>"
    return str(dist.metadata["Name"] or dist.name)


def _dist_version(ep: Any) -> str:
    dist = _metadata.distribution_of(ep)
    return str(dist.version) if dist is not None else "?"


def _live(eps: List[Any], disabled: Set[str]) -> List[Any]:
    """The entry points not disabled by name or by distribution name (``-``, ``_`` and ``.`` alike, as pip has it)."""
    if not disabled:
        return eps
    dists = {re.sub(r"[-_.]+", "-", name) for name in disabled}
    return [
        ep for ep in eps
        if ep.name not in disabled and re.sub(r"[-_.]+", "-", _dist_name(ep).lower()) not in dists
    ]


def refresh_backends() -> None:
    """Forget the entry-point scan and the failed loads; the next call rescans.

    Use it after ``pip install`` of a backend inside a running interpreter
    (Jupyter). Backends already loaded and their instances are kept.
    """
    global _scan
    importlib.invalidate_caches()
    with _lock:
        _scan = None
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
    """A small PEP 440 check for the specifiers plugins use (>=, <, <=, >, ==, !=, ~=)."""
    spec = re.sub(r"^mmeval[-_.]core\s*", "", requirement, flags=re.IGNORECASE).strip("() ")
    if not spec:
        return True

    def parse(v: str) -> Tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", v.split("+")[0])[:4])

    have = parse(version)
    for clause in spec.split(","):
        m = re.match(r"\s*(~=|==|!=|>=|<=|>|<)\s*([\w.*+!-]+)\s*$", clause)
        if not m:
            continue  # unknown form: do not block on it
        opr, want = m.group(1), m.group(2)
        if want.endswith(".*"):
            prefix = parse(want[:-2])
            match = have[: len(prefix)] == prefix
            if (opr == "==") != match:
                return False
            continue
        w = parse(want)
        n = max(len(have), len(w))
        h_, w_ = have + (0,) * (n - len(have)), w + (0,) * (n - len(w))
        ok = {
            ">=": h_ >= w_, "<=": h_ <= w_, ">": h_ > w_, "<": h_ < w_,
            "==": h_ == w_, "!=": h_ != w_,
            "~=": h_ >= w_ and have[: len(w) - 1] == w[: len(w) - 1],
        }[opr]
        if not ok:
            return False
    return True


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


def _not_found(name: str, why: str = "") -> BackendNotFoundError:
    installed = ", ".join(list_all_backends())
    msg = f"unknown dist backend {name!r}"
    if why:
        msg += f" ({why})"
    if name in KNOWN_DISTRIBUTIONS:
        dist = KNOWN_DISTRIBUTIONS[name]
        msg += f": it is provided by the distribution {dist}, which is not installed; run `pip install {dist}`"
    else:
        msg += (
            f": no installed distribution declares it in entry-point group {ENTRY_POINT_GROUP!r} and it was "
            "not registered with register_dist_backend()"
        )
    msg += f". Installed backends: {installed}."
    if name not in KNOWN_DISTRIBUTIONS:
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
    created with no arguments on first use; one instance per name.
    """
    resolved = resolve_backend_name(name)
    with _lock:
        inst = _instances.get(resolved)
        if inst is None:
            cls = get_dist_backend_class(resolved)
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

    Validated against the installed names without importing anything.
    """
    global _default
    if name != AUTO:
        _validate_name(name)
    with _lock:
        _default = name


def get_default_dist_backend() -> str:
    """The default backend name: set explicitly, else ``$MMEVAL_DIST_BACKEND``, else ``'auto'``."""
    if _default is not None:
        return _default
    env = os.environ.get(DEFAULT_ENV, "").strip()
    return env or AUTO


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
        if _default is None and name != AUTO:
            try:
                _validate_name(name)
            except (BackendNotFoundError, InvalidBackendNameError) as exc:
                raise type(exc)(f"{DEFAULT_ENV}={name!r}: {exc}") from None
    if name != AUTO:
        return name
    chosen = _auto_select()
    if chosen not in _auto_logged:
        _auto_logged.add(chosen)
        _logger().info("mmeval: auto-selected dist backend %r", chosen)
    return chosen


def _auto_select() -> str:
    names = [n for n in list_all_backends() if n != "non_dist"]
    order = [n for n in AUTO_PRIORITY if n in names] + sorted(n for n in names if n not in AUTO_PRIORITY)
    for name in order:
        try:
            cls = get_dist_backend_class(name)
        except Exception as exc:  # a broken plugin must not break the others
            if name not in _auto_warned:
                _auto_warned.add(name)
                _logger().warning("mmeval: skipping dist backend %r during auto-selection: %s", name, exc)
            continue
        try:
            if cls.detect():
                return name
        except Exception as exc:
            _logger().warning("mmeval: %s.detect() raised %s: %s", cls.__qualname__, type(exc).__name__, exc)
    return "non_dist"


def _reset_for_tests() -> None:
    """Forget registrations, defaults, loaded classes and instances (test helper)."""
    global _default, _scan
    with _lock:
        _registered.clear()
        _classes.clear()
        _instances.clear()
        _load_errors.clear()
        _auto_logged.clear()
        _auto_warned.clear()
        _default = None
        _scan = None
