"""The registry's view of installed plugins: the entry-point group, its scan, and the rows of ``mmeval backends``.

Everything here reads metadata only (imports no plugin): the names and
variables of the registry (:data:`ENTRY_POINT_GROUP`, :data:`AUTO`,
:data:`DEFAULT_ENV`, :data:`NAME_RE`), the built-in backends, the scan of the
group (:func:`scan_entry_points`), the conflict message, and
:func:`build_infos`: one :class:`BackendInfo` per name for ``backend_infos()``
and the CLI, built from the scan, the registered classes and the failed loads.
:mod:`mmeval.core.registry` (the state and the loading) sits above it.
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple, Type

from . import _metadata
from .dist_backends.base_backend import BaseDistBackend
from .dist_backends.non_dist import NonDist

__all__ = [
    "ENTRY_POINT_GROUP",
    "AUTO",
    "DEFAULT_ENV",
    "DISABLE_ENV",
    "NAME_RE",
    "BUILTINS",
    "BackendInfo",
    "Scan",
    "scan_entry_points",
    "entry_point_where",
    "conflict_message",
    "build_infos",
]

ENTRY_POINT_GROUP = "mmeval.dist_backends"
AUTO = "auto"
DEFAULT_ENV = "MMEVAL_DIST_BACKEND"
DISABLE_ENV = _metadata.DISABLE_ENV
NAME_RE = re.compile(r"[a-z][a-z0-9_]*\Z")
BUILTINS: Mapping[str, Type[BaseDistBackend]] = MappingProxyType({"non_dist": NonDist})


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


class Scan(NamedTuple):
    """The entry points of the group, by what they claim."""

    by_name: Dict[str, List[Any]]
    invalid: Dict[str, Any]
    shadowed: Dict[str, List[Any]]  # entry points claiming a built-in name (ignored)


def scan_entry_points() -> Scan:
    """Every entry point of the group, sorted into usable names, malformed ones and claims on built-in names."""
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
    return Scan(by_name, invalid, shadowed)


def entry_point_where(name: str, ep: Any) -> str:
    """Where backend ``name``'s entry point ``ep`` comes from, for messages."""
    return (
        f"entry point '{name} = {ep.value}' in group {ENTRY_POINT_GROUP!r}, distribution "
        f"{_metadata.distribution_label(ep)}"
    )


def conflict_message(name: str, eps: List[Any]) -> str:
    """Why ``name`` cannot be used: every distribution claiming it, and what to do."""
    who = " and ".join(f"{_metadata.distribution_label(ep)} ({name} = {ep.value})" for ep in eps)
    return (
        f"dist backend {name!r} is provided by more than one distribution in entry-point group "
        f"{ENTRY_POINT_GROUP!r}: {who}. Uninstall all but one (pip uninstall ...), or choose a class "
        f"with register_dist_backend({name!r}, cls, override=True)."
    )


def _provider(ep: Any) -> Tuple[str, str, str]:
    return _metadata.distribution_name(ep) or "<unknown distribution>", _metadata.distribution_version(ep), ep.value


def build_infos(
    scan: Scan, registered: Mapping[str, Type[BaseDistBackend]], load_errors: Mapping[str, BaseException]
) -> List[BackendInfo]:
    """A :class:`BackendInfo` for every name of ``scan`` and ``registered`` and the built-in ones, sorted by name."""
    disabled = _metadata.disabled_plugins()

    def live(eps: List[Any]) -> List[Any]:
        return [ep for ep in eps if not _metadata.is_disabled(ep, disabled)]

    version = _metadata.core_version()
    infos: Dict[str, BackendInfo] = {}
    for name, cls in BUILTINS.items():
        claimed = live(scan.shadowed.get(name, []))
        claims = "; ".join(f"{_metadata.distribution_label(ep)} ({name} = {ep.value})" for ep in claimed)
        infos[name] = BackendInfo(
            name,
            "builtin",
            f"{cls.__module__}:{cls.__qualname__}",
            "mmeval-core",
            version,
            error=f"also claimed by {claims}: ignored, the built-in backend is used" if claimed else "",
            providers=tuple(_provider(ep) for ep in claimed),
        )
    for name, all_eps in scan.by_name.items():
        eps = live(all_eps) or all_eps
        dist, dist_version, value = _provider(eps[0])
        requirement = _metadata.core_requirement(eps[0])
        status, error = "ok", ""
        if not live(all_eps):
            status, error = "disabled", f"disabled by {DISABLE_ENV}"
        elif len(eps) > 1:
            status, error = "conflict", conflict_message(name, eps)
        elif name in load_errors:
            status, error = "failed", str(load_errors[name])
        elif requirement and not _metadata.satisfies(version, requirement):
            status, error = "incompatible", f"needs {requirement}, mmeval-core {version} is installed"
        infos[name] = BackendInfo(
            name,
            "entry_point",
            value,
            dist,
            dist_version,
            requirement,
            status,
            error,
            tuple(_provider(ep) for ep in eps),
        )
    for name, ep in scan.invalid.items():
        is_live = bool(live([ep]))
        dist, dist_version, value = _provider(ep)
        infos[name] = BackendInfo(
            name,
            "entry_point",
            value,
            dist,
            dist_version,
            status="invalid" if is_live else "disabled",
            error="entry point must be 'name = module:Class' with name matching [a-z][a-z0-9_]*"
            if is_live
            else f"disabled by {DISABLE_ENV}",
        )
    for name, cls in registered.items():
        infos[name] = BackendInfo(name, "registered", f"{cls.__module__}:{cls.__qualname__}")
    return [infos[k] for k in sorted(infos)]
