"""MMEval 0.2.1's import path of ``OneFlowDist``: OneFlow is not supported here.

OneFlow cannot be built or tested here (the ``oneflow`` package on PyPI is a
placeholder without the framework), so no plugin of this repository provides
it. ``from mmeval.core.dist_backends.oneflow_dist import OneFlowDist`` raises
:class:`~mmeval.core.errors.BackendNotInstalledError` (an ``ImportError`` and a
``BackendNotFoundError``) with the registry's explanation for the name
``oneflow_cpu``, unless an installed third-party plugin provides
``oneflow_cpu`` (docs/writing-a-backend.md), whose class it then returns.
Importing this module imports nothing else.
"""

from __future__ import annotations

from typing import Any

from ._compat import resolve

__all__ = ["OneFlowDist"]  # noqa: F822 -- provided by __getattr__


def __getattr__(attr: str) -> Any:
    return resolve(__name__, attr, __all__)
