"""Distributed communication backends, and the one import a backend plugin needs.

A plugin imports everything it uses from here (and its errors from
:mod:`mmeval.core.errors`): :class:`FramedDistBackend`, :class:`BaseDistBackend`,
:class:`NonDist`, ``Call``, ``PeerLost``, ``DEFAULT_TIMEOUT``, ``SLOT_SIZE``,
``Frame``, ``ALIGN``, ``resolve_setting``, ``keep_forever``, ``asking``,
``REDUCE_OPS`` (and ``native_pairs`` to declare native reductions). The framed protocol's names load on first use, so listing
backends does not import it.

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
from ._reduce import REDUCE_OPS, native_pairs
from .base_backend import BaseDistBackend, TensorBaseDistBackend
from .leave import install as _install_leave_hooks
from .non_dist import NonDist

if TYPE_CHECKING:  # pragma: no cover
    from ..errors import PeerLost
    from ..wire import ALIGN, SLOT_SIZE, Frame
    from .framed_backend import DEFAULT_TIMEOUT, FramedDistBackend, resolve_setting
    from .transport import Call, asking, keep_forever

__all__ = [
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


#: Loaded on first use (name -> module): the framed protocol pulls in the codecs, which listing
#: backends (the registry imports this package) does not need.
_LAZY: Dict[str, str] = {
    "FramedDistBackend": ".framed_backend",
    "DEFAULT_TIMEOUT": ".framed_backend",
    "resolve_setting": ".framed_backend",
    "Call": ".transport",
    "asking": ".transport",
    "keep_forever": ".transport",
    "group_state": ".guard",
    "on_leave": ".leave",
    "PeerLost": "..errors",
    "SLOT_SIZE": "..wire",
    "Frame": "..wire",
    "ALIGN": "..wire",
    "PickleCodec": "..codecs",
    # what the plugins share (mmeval.core.dist_backends.plugin_kit)
    **{
        name: ".plugin_kit"
        for name in (
            "logger",
            "align_up",
            "padded_block_size",
            "packed_offsets",
            "split_blocks",
            "blocks_at",
            "write_block",
            "slot_frame",
            "sent_frame",
            "seconds_left",
            "run_on_thread",
            "keep_until_exit",
            "GroupToken",
            "GroupTokens",
            "not_a_member",
            "read_setting",
            "choice",
            "flag",
            "mebibytes",
            "start_up_watchdog",
        )
    },
}
__all__ += [name for name in _LAZY if name not in __all__]


def __getattr__(attr: str) -> Any:
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
