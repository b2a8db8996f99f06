"""Distributed communication backends, and the plugin API: what a third-party backend imports.

The surface (everything a backend needs; its errors come from
:mod:`mmeval.core.errors`):

* the interfaces -- :class:`BaseDistBackend` (five members), :class:`TensorBaseDistBackend`,
  :class:`FramedDistBackend` (one primitive, ``_all_gather_bytes``) -- and the built-in :class:`NonDist`;
* what a primitive receives and raises -- ``Call``, ``PeerLost``, ``Frame``, ``SLOT_SIZE``, ``ALIGN``;
* settings and lifetimes -- ``DEFAULT_TIMEOUT``, ``resolve_setting``, ``keep_forever``, ``asking``;
* reductions -- ``REDUCE_OPS`` and ``native_pairs`` (to declare native reductions);
* a tensor codec's base -- ``PickleCodec``.

The in-tree plugins' shared helpers (block layout, helper threads, group
tokens, settings parsers, the ``mmeval`` logger) are not part of it: a plugin
that wants them imports them explicitly from
:mod:`mmeval.core.dist_backends.plugin_kit`. The framed protocol's names load
on first use, so listing backends does not import it.

MMEval's class names of the plugin backends (``TorchCPUDist``,
``MPI4PyDist``, ``TFHorovodDist``, ``PaddleDist``, ...) resolve lazily to the
installed plugin's class, here and under MMEval's module paths
(``mmeval.core.dist_backends.torch_cpu.TorchCPUDist``, ...); a missing plugin
raises :class:`~mmeval.core.errors.BackendNotInstalledError` (an
``ImportError``) that names the distribution to install. See :mod:`._compat`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List

from ..errors import BackendNotInstalledError

# the names below are this package's API: __all__ is computed at run time (_star_names), hence the noqa: F401
from ._compat import LEGACY_BACKENDS, resolve
from .base_backend import BaseDistBackend, TensorBaseDistBackend  # noqa: F401
from .leave import install as _install_leave_hooks
from .non_dist import NonDist  # noqa: F401
from .reduction import REDUCE_OPS, native_pairs  # noqa: F401

if TYPE_CHECKING:  # pragma: no cover
    from ..errors import PeerLost  # noqa: F401
    from ..wire import ALIGN, SLOT_SIZE, Frame  # noqa: F401
    from .framed_backend import DEFAULT_TIMEOUT, FramedDistBackend, resolve_setting  # noqa: F401
    from .transport import Call, asking, keep_forever  # noqa: F401

_SURFACE: List[str] = [
    "BaseDistBackend",
    "TensorBaseDistBackend",
    "FramedDistBackend",
    "NonDist",
    "Call",
    "PeerLost",
    "DEFAULT_TIMEOUT",
    "SLOT_SIZE",
    "Frame",
    "ALIGN",
    "resolve_setting",
    "keep_forever",
    "asking",
    "REDUCE_OPS",
    "native_pairs",
]

#: MMEval's class names of plugin backends -> registry names.
LEGACY_CLASS_NAMES: Dict[str, str] = LEGACY_BACKENDS


#: Loaded on first use (name -> module): the framed protocol pulls in the codecs, which listing
#: backends (the registry imports this package) does not need.
_LAZY: Dict[str, str] = {
    "FramedDistBackend": ".framed_backend",
    "DEFAULT_TIMEOUT": ".framed_backend",
    "resolve_setting": "..settings",
    "Call": ".transport",
    "asking": ".transport",
    "keep_forever": ".transport",
    "group_state": ".guard",
    "on_leave": ".leave",
    "PeerLost": "..errors",
    "SLOT_SIZE": "..wire",
    "Frame": "..wire",
    "ALIGN": "..wire",
    "PickleCodec": "..wire.codecs",
}
_SURFACE += [name for name in _LAZY if name not in _SURFACE]

if TYPE_CHECKING:  # pragma: no cover -- what static tools see; at run time __getattr__ answers (below)
    __all__ = _SURFACE + list(LEGACY_CLASS_NAMES)


def _star_names() -> List[str]:
    """``__all__`` at run time: the plugin API and the MMEval class names whose plugin is installed.

    MMEval 0.2.1's ``from mmeval.core.dist_backends import *`` worked; a static
    ``__all__`` naming every class would raise for the first plugin not installed
    (``OneFlowDist`` always). A plugin that is installed but fails to load still raises.
    """
    names = list(_SURFACE)
    for cls_name in LEGACY_CLASS_NAMES:
        try:
            resolve(__name__, cls_name)
        except BackendNotInstalledError:
            continue
        names.append(cls_name)
    return names


def __getattr__(attr: str) -> Any:
    if attr == "__all__":
        return _star_names()
    if attr in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[attr], __name__), attr)
        globals()[attr] = value
        return value
    return resolve(__name__, attr)


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(LEGACY_CLASS_NAMES) | set(_LAZY))


# a rank that leaves tells its peers where a plugin can (mmeval.core.dist_backends.leave)
_install_leave_hooks()
