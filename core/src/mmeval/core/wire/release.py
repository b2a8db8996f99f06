"""Receive buffers whose pages go back to the system as their contents are consumed.

A transport that receives a peer's block into a buffer of its own, which
nothing reads after the block's contents were copied out, marks it
:func:`releasable`. The per-sample path copies every received array into the
output in chunks and calls :func:`release` on each chunk it has copied: the
whole pages of it go back to the system (``madvise(MADV_DONTNEED)``), so rank
0 holds about the output plus what it has not copied yet, not the output plus
every received block (docs/benchmarks.md). Released pages read as zeros.

Anything that is not inside a buffer marked releasable (a rank's own results,
a pooled buffer, a memory-mapped file) is never touched. Where ``madvise`` is
not available (not Linux) :func:`release` does nothing.
"""

from __future__ import annotations

import mmap
import sys
import threading
import weakref
from typing import Any, Dict, Optional, Tuple

import numpy as np

__all__ = ["releasable", "release"]

_MADV_DONTNEED = 4
_PAGE = mmap.PAGESIZE
_lock = threading.Lock()
#: id of a marked buffer -> (first address, end address, weak reference to it)
_marked: Dict[int, Tuple[int, int, "weakref.ref[np.ndarray]"]] = {}
_madvise: Optional[Any] = None


def _libc_madvise() -> Optional[Any]:
    global _madvise
    if _madvise is None and sys.platform.startswith("linux"):
        import ctypes
        import ctypes.util

        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fn = libc.madvise
            fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
            fn.restype = ctypes.c_int
            _madvise = fn
        except (OSError, AttributeError):
            _madvise = False
    return _madvise or None


def releasable(buffer: np.ndarray) -> np.ndarray:
    """Mark ``buffer`` (a transport's own receive buffer, C-contiguous) as one whose consumed pages may go back.

    The caller promises that once a range of it was copied out and passed to
    :func:`release`, nothing reads that range again. Returns ``buffer``.
    """
    start = int(buffer.ctypes.data)
    key = id(buffer)

    def forget(_: Any) -> None:
        with _lock:
            _marked.pop(key, None)

    with _lock:
        _marked[key] = (start, start + int(buffer.nbytes), weakref.ref(buffer, forget))
    return buffer


def release(view: np.ndarray) -> int:
    """Give back the whole pages of ``view``'s memory if it lies inside a buffer marked :func:`releasable`.

    ``view`` must be C-contiguous (else nothing happens). Returns the bytes released (0 when none).
    """
    if not _marked or not view.flags.c_contiguous or view.nbytes < _PAGE:
        return 0
    lo = int(view.ctypes.data)
    hi = lo + int(view.nbytes)
    with _lock:
        inside = any(start <= lo and hi <= end and ref() is not None for start, end, ref in _marked.values())
    if not inside:
        return 0
    first = -(-lo // _PAGE) * _PAGE
    last = hi // _PAGE * _PAGE
    madvise = _libc_madvise()
    if madvise is None or last <= first:
        return 0
    return last - first if madvise(first, last - first, _MADV_DONTNEED) == 0 else 0
