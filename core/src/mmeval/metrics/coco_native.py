"""COCODetection's optional C kernels (the ``mmeval-coco-native`` distribution, native/coco/).

When that distribution is installed, :mod:`.coco_matching` and :mod:`.coco_accumulate`
hand their inner loops to it: the greedy matching with the box IoU, and the
accumulation of ranked states. The numbers are the pure numpy path's, bit for
bit (tests/core/metrics/test_coco_native.py). ``MMEVAL_COCO_NATIVE=0`` in the
environment keeps the pure path; mmeval-core itself never needs a compiler.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Optional

__all__ = ["kernels", "release_pooled"]

_UNSET: Any = object()
_module: Any = _UNSET


def kernels() -> Optional[Any]:
    """The ``mmeval_coco_native`` module, or None when it is not installed or ``MMEVAL_COCO_NATIVE=0``."""
    global _module
    if os.environ.get("MMEVAL_COCO_NATIVE", "1") == "0":
        return None
    if _module is _UNSET:
        try:
            _module = importlib.import_module("mmeval_coco_native")
        except ImportError:
            _module = None
    return _module


def release_pooled() -> None:
    """Frees the memory the kernels keep for reuse (the pool of their mask-runs blocks, at most 32 MiB), where
    the loaded kernels have one; blocks still in use are not touched. COCODetection calls it at ``reset()``:
    an evaluation's pool is refilled by its own first batches."""
    native = _module if _module is not _UNSET else None  # never imports the kernels only to free nothing
    if native is not None and hasattr(native, "blocks_clear"):
        native.blocks_clear()
