"""MMEval 0.2.1's import path of ``PaddleDist``.

It is now the ``paddle_dist`` backend (paddle.distributed) of the mmeval-paddle plugin.
``from mmeval.core.dist_backends.paddle_dist import PaddleDist`` returns the installed plugin's
class, looked up in the registry on access: importing this module imports no framework. Without the
plugin, the access raises :class:`~mmeval.core.errors.BackendNotInstalledError` (an ``ImportError``)
that says what to install.
"""

from __future__ import annotations

from typing import Any

from ._compat import resolve

__all__ = ["PaddleDist"]  # noqa: F822 -- provided by __getattr__


def __getattr__(attr: str) -> Any:
    return resolve(__name__, attr, __all__)
