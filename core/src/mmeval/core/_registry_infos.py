"""The rows of ``backend_infos()`` and ``mmeval backends``: one :class:`~mmeval.core.registry.BackendInfo` per name.

Built from the registry's entry-point scan, its registered classes and its failed loads;
reads metadata only (imports no plugin).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple, Type

from . import _metadata
from .dist_backends.base_backend import BaseDistBackend
from .registry import BUILTINS, DISABLE_ENV, BackendInfo, _conflict_message, _Scan

__all__ = ["build_infos"]


def _provider(ep: Any) -> Tuple[str, str, str]:
    return _metadata.distribution_name(ep) or "<unknown distribution>", _metadata.distribution_version(ep), ep.value


def build_infos(
    scan: _Scan, registered: Mapping[str, Type[BaseDistBackend]], load_errors: Mapping[str, BaseException]
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
            status, error = "conflict", _conflict_message(name, eps)
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
