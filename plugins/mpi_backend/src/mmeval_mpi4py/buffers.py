"""64-byte aligned ``uint8`` buffers, and a small cache of large ones reused between collectives.

A fresh buffer of 100+ MB can cost more than the transfer into it: every page
is faulted in (and zeroed by the kernel) on first touch (docs/benchmarks.md).
:class:`BufferPool` keeps large buffers after a collective and hands one out
again once nothing refers to it any more.

"Nothing refers to it" is exact in CPython: every view of a pooled buffer --
the aligned array handed out, ``memoryview`` slices of it, numpy arrays
unpickled over those slices, an MPI request kept after a timeout -- holds a
reference to the buffer's base array, so its reference count is back at the
pool's own when the last of them is gone. Where reference counts do not exist
(PyPy) the pool is off and every buffer is fresh.
"""

from __future__ import annotations

import itertools
import sys
import threading
from typing import List, Optional

import numpy as np

from mmeval.core.dist_backends import ALIGN

__all__ = ["aligned_empty", "BufferPool", "POOL_MIN_BYTES", "DEFAULT_CACHE_BYTES"]

#: Buffers smaller than this are always fresh (their page faults cost little).
POOL_MIN_BYTES = 1 << 20
#: Default bytes a pool may keep (``MMEVAL_MPI4PY_BUFFER_CACHE_MB`` sets it per backend).
DEFAULT_CACHE_BYTES = 256 << 20
_GRAIN = 1 << 20  # pooled capacities are whole MiB, so slightly different sizes share buffers


def aligned_empty(nbytes: int) -> np.ndarray:
    """An uninitialized ``uint8`` array of ``nbytes`` (at least 1) whose first byte is 64-byte aligned.

    Block offsets inside a transport buffer are multiples of 64, so every block
    -- and every out-of-band buffer inside a frame -- lands on a 64-byte
    boundary in memory.
    """
    size = max(nbytes, 1)
    raw = np.empty(size + ALIGN, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start : start + size]


class _Entry:
    __slots__ = ("base", "offset", "capacity", "used")

    def __init__(self, capacity: int) -> None:
        self.base = np.empty(capacity + ALIGN, dtype=np.uint8)  # the only reference the pool holds
        self.offset = -self.base.ctypes.data % ALIGN
        self.capacity = capacity
        self.used = 0


def _refs(entry: _Entry) -> int:
    return sys.getrefcount(entry.base)


#: The reference count of a pooled base array that nothing else refers to, measured
#: through the very call the pool uses (interpreters differ in argument borrowing).
_FREE_REFS: Optional[int] = _refs(_Entry(0)) if hasattr(sys, "getrefcount") else None


class BufferPool:
    """Large aligned buffers kept between collectives; thread-safe.

    :meth:`get` returns a free pooled buffer of at least ``nbytes`` (and at
    most twice that), else allocates one and keeps it if the pool's total
    stays within ``cache_bytes`` -- dropping the least recently used buffers
    otherwise (one still in use is merely forgotten: its users keep it alive).
    """

    def __init__(self) -> None:
        self._entries: List[_Entry] = []
        self._lock = threading.Lock()
        self._clock = itertools.count(1)

    @property
    def nbytes(self) -> int:
        """Bytes the pool keeps now (free or in use)."""
        with self._lock:
            return sum(e.capacity for e in self._entries)

    def clear(self) -> None:
        """Forget every pooled buffer (those in use live on with their users)."""
        with self._lock:
            self._entries.clear()

    def get(self, nbytes: int, cache_bytes: int) -> np.ndarray:
        """An aligned, uninitialized buffer of exactly ``nbytes`` (at least 1) bytes."""
        if nbytes < POOL_MIN_BYTES or _FREE_REFS is None:
            return aligned_empty(nbytes)
        capacity = -(-nbytes // _GRAIN) * _GRAIN
        if capacity > cache_bytes:
            return aligned_empty(nbytes)
        with self._lock:
            best: Optional[_Entry] = None
            for entry in self._entries:
                if nbytes <= entry.capacity <= 2 * capacity and _refs(entry) <= _FREE_REFS:
                    if best is None or entry.capacity < best.capacity:
                        best = entry
            if best is None:
                best = _Entry(capacity)
                self._entries.append(best)
                self._trim(cache_bytes, keep=best)
            best.used = next(self._clock)
            return best.base[best.offset : best.offset + nbytes]  # the view holds the base: in use now

    def _trim(self, cache_bytes: int, keep: _Entry) -> None:
        total = sum(e.capacity for e in self._entries)
        free_refs = _FREE_REFS if _FREE_REFS is not None else 0
        for entry in sorted(self._entries, key=lambda e: (_refs(e) > free_refs, e.used)):  # free, oldest first
            if total <= cache_bytes:
                break
            if entry is not keep:
                self._entries.remove(entry)
                total -= entry.capacity
