"""mmeval: distributed evaluation metrics with pluggable communication backends.

``import mmeval`` is cheap: submodules (and numpy) load on first use of
``mmeval.Accuracy``, ``mmeval.core``, ``mmeval.metrics``, ...
``dir(mmeval)`` lists the public API only (:data:`__all__`). ``__version__`` is
mmeval-core's own version, ``MMEVAL_API_VERSION`` the MMEval release whose API
it implements (see :mod:`mmeval.version`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .version import MMEVAL_API_VERSION, __version__

if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, List

    from . import core, metrics
    from .collection import MetricCollection
    from .core import BaseMetric
    from .metrics import Accuracy, AveragePrecision, MeanIoU, MultiLabelMetric, SingleLabelMetric, VOCMeanAP

__all__ = [
    "__version__",
    "MMEVAL_API_VERSION",
    "core",
    "metrics",
    "BaseMetric",
    "MetricCollection",
    "Accuracy",
    "MeanIoU",
    "VOCMeanAP",
    "SingleLabelMetric",
    "MultiLabelMetric",
    "AveragePrecision",
]

_LAZY = {
    "core": ("mmeval.core", None),
    "metrics": ("mmeval.metrics", None),
    "BaseMetric": ("mmeval.core.base_metric", "BaseMetric"),
    "MetricCollection": ("mmeval.collection", "MetricCollection"),
    "Accuracy": ("mmeval.metrics.accuracy", "Accuracy"),
    "MeanIoU": ("mmeval.metrics.mean_iou", "MeanIoU"),
    "SingleLabelMetric": ("mmeval.metrics.single_label", "SingleLabelMetric"),
    "MultiLabelMetric": ("mmeval.metrics.multi_label", "MultiLabelMetric"),
    "AveragePrecision": ("mmeval.metrics.average_precision", "AveragePrecision"),
    "VOCMeanAP": ("mmeval.metrics.voc_map", "VOCMeanAP"),
}


def __getattr__(name: str) -> Any:
    """Import ``core``, ``metrics``, ``BaseMetric`` and the metrics of :mod:`mmeval.metrics` on first access."""
    import importlib

    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        # every metric of mmeval.metrics is also mmeval.<Name> (as in MMEval 0.2.1: ``from mmeval import SSIM``)
        if name[:1].isupper():
            metrics = importlib.import_module("mmeval.metrics")
            if name in metrics.__all__:
                globals()[name] = value = getattr(metrics, name)
                return value
            if name in metrics.__deprecated_metric_names__:  # MMEval's deprecated aliases: warn at every use
                return getattr(metrics, name)
        raise AttributeError(f"module 'mmeval' has no attribute {name!r}") from None

    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    """The public API: :data:`__all__` (not the helpers this module imports)."""
    return sorted(__all__)


del TYPE_CHECKING, annotations
