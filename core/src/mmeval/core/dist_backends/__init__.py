"""Distributed communication backends.

The interfaces (:class:`BaseDistBackend`, :class:`TensorBaseDistBackend`,
:class:`FramedDistBackend`) and the built-in :class:`NonDist` live here.
MMEval's class names of the plugin backends (``TorchCPUDist``,
``MPI4PyDist``, ``TFHorovodDist``, ``PaddleDist``, ...) resolve lazily to the
installed plugin's class, here and under MMEval's module paths
(``mmeval.core.dist_backends.torch_cpu.TorchCPUDist``, ...); a missing plugin
raises :class:`~mmeval.core.errors.BackendNotInstalledError` (an
``ImportError``) that names the distribution to install. See :mod:`._compat`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List

from ._compat import LEGACY_BACKENDS, resolve
from .base_backend import BaseDistBackend, TensorBaseDistBackend
from .non_dist import NonDist

if TYPE_CHECKING:  # pragma: no cover
    from .framed_backend import DEFAULT_TIMEOUT, FramedDistBackend

__all__ = [
    "BaseDistBackend",
    "TensorBaseDistBackend",
    "FramedDistBackend",
    "NonDist",
    "DEFAULT_TIMEOUT",
    "TorchCPUDist",
    "TorchCUDADist",
    "MPI4PyDist",
    "TFHorovodDist",
    "TorchHorovodDist",
    "PaddleDist",
    "OneFlowDist",
]

#: MMEval's class names of plugin backends -> registry names.
LEGACY_CLASS_NAMES: Dict[str, str] = LEGACY_BACKENDS


#: Loaded on first use: the framed protocol pulls in the serialization module, which listing
#: backends (the registry imports this package) does not need.
_FRAMED = ("FramedDistBackend", "DEFAULT_TIMEOUT")


def __getattr__(attr: str) -> Any:
    if attr in _FRAMED:
        from . import framed_backend

        value = getattr(framed_backend, attr)
        globals()[attr] = value
        return value
    return resolve(__name__, attr)


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(LEGACY_CLASS_NAMES) | set(_FRAMED))
