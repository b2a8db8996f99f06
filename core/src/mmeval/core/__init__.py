"""The core of mmeval: backend interfaces, the backend registry and the metric base class.

``BaseMetric`` (and numpy with it) is loaded on first use, so the registry can
be used without paying for numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List

from . import dist, errors
from .dist import (
    get_dist_backend,
    list_all_backends,
    refresh_backends,
    register_dist_backend,
    set_default_dist_backend,
)

if TYPE_CHECKING:  # pragma: no cover
    from . import dist_backends, hooks, serialization
    from .base_metric import ArrayResults, BaseMetric, MetricState, RemoteMetricError, ShardingWarning

__all__ = [
    "ArrayResults",
    "BaseMetric",
    "MetricState",
    "RemoteMetricError",
    "ShardingWarning",
    "dist",
    "dist_backends",
    "errors",
    "hooks",
    "serialization",
    "get_dist_backend",
    "list_all_backends",
    "refresh_backends",
    "register_dist_backend",
    "set_default_dist_backend",
]

_LAZY = ("ArrayResults", "BaseMetric", "MetricState", "RemoteMetricError", "ShardingWarning")
#: Submodules loaded on first attribute access (``import mmeval.core.hooks`` works as ever).
_LAZY_MODULES = ("dist_backends", "hooks", "serialization")


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        import importlib

        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    if name in _LAZY:
        from . import base_metric

        value = getattr(base_metric, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mmeval.core' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_LAZY_MODULES))
