"""The core of mmeval: backend interfaces, the backend registry and the metric base class.

``BaseMetric`` (and numpy with it) is loaded on first use, so the registry can
be used without paying for numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List

from . import dist, dist_backends, errors, hooks, serialization
from .dist import (
    get_dist_backend,
    list_all_backends,
    refresh_backends,
    register_dist_backend,
    set_default_dist_backend,
)

if TYPE_CHECKING:  # pragma: no cover
    from .base_metric import ArrayResults, BaseMetric, RemoteMetricError

__all__ = [
    "ArrayResults",
    "BaseMetric",
    "RemoteMetricError",
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

_LAZY = ("ArrayResults", "BaseMetric", "RemoteMetricError")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import base_metric

        value = getattr(base_metric, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mmeval.core' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY))
