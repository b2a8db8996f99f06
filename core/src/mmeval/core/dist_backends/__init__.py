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


# -- the plugin API: the one import a backend plugin needs (with mmeval.core.errors) ------------
# Loaded on first use, like _FRAMED: listing backends imports none of these modules.
_PLUGIN_API: Dict[str, str] = {
    **dict.fromkeys(("FramedDistBackend", "DEFAULT_TIMEOUT", "resolve_setting"), ".framed_backend"),
    **dict.fromkeys(("Call", "PeerLost", "keep_forever", "asking"), ".transport"),
    **dict.fromkeys(("SLOT_SIZE", "Frame", "ALIGN"), "..wire"),
    "REDUCE_OPS": "._reduce",
    "PickleCodec": "..codecs",
    **{name: ".plugin_kit" for name in (
        "logger", "align_up", "padded_block_size", "packed_offsets", "split_blocks", "blocks_at", "write_block",
        "slot_frame", "sent_frame", "seconds_left", "run_on_thread", "keep_until_exit", "GroupToken",
        "GroupTokens", "not_a_member", "read_setting", "choice", "flag", "mebibytes", "start_up_watchdog")},
}
__all__ += [name for name in _PLUGIN_API if name not in __all__]
_getattr_before_plugin_api = __getattr__
_dir_before_plugin_api = __dir__


def __getattr__(attr: str) -> Any:  # type: ignore[no-redef]  # extends the lookup above
    module = _PLUGIN_API.get(attr)
    if module is None:
        return _getattr_before_plugin_api(attr)
    import importlib

    value = getattr(importlib.import_module(module, __name__), attr)
    globals()[attr] = value
    return value


def __dir__() -> List[str]:  # type: ignore[no-redef]
    return sorted(set(_dir_before_plugin_api()) | set(_PLUGIN_API))
