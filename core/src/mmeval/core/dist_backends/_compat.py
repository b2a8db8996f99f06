"""MMEval 0.2.1's backend class names, resolved lazily to the installed plugins' classes.

MMEval shipped every backend inside one package
(``mmeval.core.dist_backends.torch_cpu.TorchCPUDist`` and so on). Here each
backend is a plugin found through the registry, so those import paths are thin
modules whose module-level ``__getattr__`` calls :func:`resolve`: the class is
looked up in the registry on access, never at import, so importing one of these
modules imports no framework and starts no MPI.

This package does not import the registry (the registry imports it): the registry
binds its class lookup here with :func:`bind_class_lookup` when :mod:`mmeval.core.dist`
is imported, which ``import mmeval.core`` always does first.

A class whose plugin is not installed raises
:class:`~mmeval.core.errors.BackendNotInstalledError` (an ``ImportError`` and a
``BackendNotFoundError``) carrying the registry's message and the install hint.
"""

from __future__ import annotations

from typing import Callable, Collection, Dict, Optional, Type

from ..errors import BackendNotFoundError, BackendNotInstalledError
from ..known_backends import KNOWN_BACKENDS
from .base_backend import BaseDistBackend

__all__ = ["LEGACY_BACKENDS", "resolve", "bind_class_lookup"]


#: MMEval's class names (and ``TorchHorovodDist``, which MMEval lacked) -> the registry names they resolve through
#: (from the records of :data:`~mmeval.core.known_backends.KNOWN_BACKENDS`). ``OneFlowDist`` resolves through
#: ``oneflow_cpu``, for which the registry explains that OneFlow is not supported here.
LEGACY_BACKENDS: Dict[str, str] = {r.legacy_class: name for name, r in KNOWN_BACKENDS.items() if r.legacy_class}

_LOOKUP: Dict[str, Callable[[str], Type[BaseDistBackend]]] = {}  # 'class' -> the registry's class lookup


def bind_class_lookup(lookup: Callable[[str], Type[BaseDistBackend]]) -> None:
    """Make :func:`resolve` look classes up with ``lookup`` (``mmeval.core.dist.get_dist_backend_class``)."""
    _LOOKUP["class"] = lookup


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
    try:
        return _LOOKUP["class"](backend)
    except BackendNotFoundError as exc:
        raise BackendNotInstalledError(
            f"cannot import {attr} from {module} (dist backend {backend!r}): {exc}", name=module
        ) from exc
