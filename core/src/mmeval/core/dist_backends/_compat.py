"""MMEval 0.2.1's backend class names, resolved lazily to the installed plugins' classes.

MMEval shipped every backend inside one package
(``mmeval.core.dist_backends.torch_cpu.TorchCPUDist`` and so on). Here each
backend is a plugin found through the registry, so those import paths are thin
modules whose module-level ``__getattr__`` calls :func:`resolve`: the class is
looked up in the registry (:func:`mmeval.core.dist.get_dist_backend_class`) on
access, never at import, so importing one of these modules imports no
framework and starts no MPI.

A class whose plugin is not installed raises
:class:`~mmeval.core.errors.BackendNotInstalledError` (an ``ImportError`` and a
``BackendNotFoundError``) carrying the registry's message and the install hint.
"""

from __future__ import annotations

from typing import Collection, Dict, Optional, Type

from ..errors import BackendNotFoundError, BackendNotInstalledError
from .base_backend import BaseDistBackend

__all__ = ["LEGACY_BACKENDS", "resolve"]


#: MMEval's class names (and ``TorchHorovodDist``, which MMEval lacked) -> the registry names they resolve through.
#: ``OneFlowDist`` resolves through ``oneflow_cpu``, for which the registry explains that OneFlow is not supported here.
LEGACY_BACKENDS: Dict[str, str] = {
    "TorchCPUDist": "torch_cpu",
    "TorchCUDADist": "torch_cuda",
    "MPI4PyDist": "mpi4py",
    "TFHorovodDist": "tf_horovod",
    "TorchHorovodDist": "torch_horovod",
    "PaddleDist": "paddle_dist",
    "OneFlowDist": "oneflow_cpu",
}


def resolve(module: str, attr: str, names: Optional[Collection[str]] = None) -> Type[BaseDistBackend]:
    """Return the class MMEval exposed as ``module.attr``, from the installed plugin.

    ``names`` restricts the classes ``module`` offers (its ``__all__``; the
    default is every class in :data:`LEGACY_BACKENDS`).
    Raises ``AttributeError`` for any other name (so ``hasattr``
    and ``from module import name`` behave as for any module), and
    :class:`~mmeval.core.errors.BackendNotInstalledError` when no installed
    plugin provides the backend, carrying the registry's message for that
    name (which says what to install, or why it is not supported here).
    Errors of an installed plugin that fails to load propagate unchanged.
    """
    backend = LEGACY_BACKENDS.get(attr) if names is None or attr in names else None
    if backend is None:
        raise AttributeError(f"module {module!r} has no attribute {attr!r}")
    from ..dist import get_dist_backend_class

    try:
        return get_dist_backend_class(backend)
    except BackendNotFoundError as exc:
        raise BackendNotInstalledError(
            f"cannot import {attr} from {module} (dist backend {backend!r}): {exc}", name=module
        ) from exc
