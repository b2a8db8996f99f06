"""Distributed communication backends.

The interfaces (:class:`BaseDistBackend`, :class:`TensorBaseDistBackend`,
:class:`FramedDistBackend`) and the built-in :class:`NonDist` live here.
MMEval's class names of the plugin backends (``TorchCPUDist``,
``MPI4PyDist``, ``TFHorovodDist``, ...) resolve lazily to the installed
plugin's class; a missing plugin raises an ``ImportError`` that names the
distribution to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List

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
]

#: MMEval's class names of plugin backends -> registry names.
LEGACY_CLASS_NAMES: Dict[str, str] = {
    "TorchCPUDist": "torch_cpu",
    "TorchCUDADist": "torch_cuda",
    "MPI4PyDist": "mpi4py",
    "TFHorovodDist": "tf_horovod",
    "TorchHorovodDist": "torch_horovod",
}


#: Loaded on first use: the framed protocol pulls in the serialization module, which listing
#: backends (the registry imports this package) does not need.
_FRAMED = ("FramedDistBackend", "DEFAULT_TIMEOUT")


def __getattr__(attr: str) -> Any:
    if attr in _FRAMED:
        from . import framed_backend

        value = getattr(framed_backend, attr)
        globals()[attr] = value
        return value
    name = LEGACY_CLASS_NAMES.get(attr)
    if name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
    from ..dist import KNOWN_DISTRIBUTIONS, get_dist_backend_class
    from ..errors import BackendLoadError, BackendNotFoundError

    try:
        return get_dist_backend_class(name)
    except BackendNotFoundError as exc:
        dist = KNOWN_DISTRIBUTIONS[name]
        err = BackendLoadError(
            f"cannot import {attr} (dist backend {name!r}): it is provided by the distribution "
            f"{dist}; run `pip install {dist}`. ({exc})",
            name=f"{__name__}.{attr}",
        )
        raise err from exc


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(LEGACY_CLASS_NAMES) | set(_FRAMED))
