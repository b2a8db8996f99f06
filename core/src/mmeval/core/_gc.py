"""Pausing the cyclic garbage collector while a decoder builds many objects."""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

__all__ = ["gc_paused", "GC_PAUSE_MIN"]

#: Pickle streams shorter than this are decoded without pausing the garbage collector.
GC_PAUSE_MIN = 1 << 16


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while many container objects are built.

    Rebuilding 100,000 tuples (or unpickling them) otherwise triggers ~140
    young-generation collections and a few full ones, each walking every
    object of the process (a framework's import alone leaves ~10^5).
    Nothing collectable is created meanwhile; the collector is restored as it was (left off if the caller had turned it off).

    On the way out the new objects are moved to the oldest generation
    (``gc.freeze()`` then ``gc.unfreeze()``: two list splices, O(1)) instead of
    being walked by the young-generation pass that re-enabling would trigger.
    They stay collectable: the next full collection sees them. Skipped whenever objects are frozen already
    (``gc.get_freeze_count() > 0``: the program's own ``gc.freeze()``, or
    Python 3.12, which starts with a few hundred frozen), since ``unfreeze``
    would undo that freeze.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()
