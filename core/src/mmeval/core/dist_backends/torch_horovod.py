"""MMEval 0.2.1's import path of ``TorchHorovodDist``.

It is now the ``torch_horovod`` backend of the mmeval-horovod plugin (extra ``torch``).
``from mmeval.core.dist_backends.torch_horovod import TorchHorovodDist`` returns the installed
plugin's class, looked up in the registry on access: importing this module imports no framework.
Without the plugin, the access raises :class:`~mmeval.core.errors.BackendNotInstalledError` (an
``ImportError``) that says what to install. (MMEval 0.2.1 had no such module; it is here for
symmetry with ``tf_horovod``.)
"""

from __future__ import annotations

from typing import Any

from ._compat import resolve

__all__ = ["TorchHorovodDist"]  # noqa: F822 -- provided by __getattr__


def __getattr__(attr: str) -> Any:
    return resolve(__name__, attr, __all__)
