"""mmeval: distributed evaluation metrics with pluggable communication backends.

``import mmeval`` is cheap: submodules (and numpy) load on first use of
``mmeval.Accuracy``, ``mmeval.core``, ``mmeval.metrics``, ...
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, List

from .version import PLUGIN_API_VERSION, __version__

if TYPE_CHECKING:  # pragma: no cover
    from . import core, metrics
    from .core import BaseMetric
    from .metrics import Accuracy

__all__ = ["__version__", "PLUGIN_API_VERSION", "core", "metrics", "BaseMetric", "Accuracy"]

_LAZY = {
    "core": ("mmeval.core", None),
    "metrics": ("mmeval.metrics", None),
    "BaseMetric": ("mmeval.core.base_metric", "BaseMetric"),
    "Accuracy": ("mmeval.metrics.accuracy", "Accuracy"),
}


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'mmeval' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY))
