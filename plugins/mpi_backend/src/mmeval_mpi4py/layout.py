"""Where each rank's bytes go in a receive buffer, and in what MPI units they are counted.

MPI counts and displacements are C ``int``: at most :data:`INT_MAX` elements.
Blocks larger than that travel one of two ways:

* **big count** -- the MPI library implements MPI-4's large-count routines
  (``MPI_Iallgatherv_c``, ...; MPICH >= 4 does) and mpi4py >= 4 calls them
  whenever a count does not fit in an ``int``: counts are plain byte counts
  (``unit == 1``) of any size;
* **derived datatype** -- otherwise bytes are counted in units of a
  contiguous datatype of ``unit = 2**k`` bytes (``MPI.BYTE.Create_contiguous``),
  the smallest power of two that brings every count and displacement under
  the limit. Each block is padded up to a whole number of units; the padding
  is zeroed by the sender and never shown to the caller.

Every block starts at a multiple of ``max(ALIGN, unit)`` bytes, so
out-of-band buffers inside a frame (aligned to ``ALIGN`` within the frame) stay
aligned in memory on the receiving side. The functions here are pure
arithmetic, tested on their own without MPI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple

from mmeval.core.dist_backends import ALIGN
from mmeval.core.dist_backends.plugin_kit import align_up

__all__ = ["INT_MAX", "MAX_UNIT", "Layout", "plan_blocks", "plan_block", "align_up"]

#: Largest count or displacement an MPI ``int`` argument holds.
INT_MAX = 2**31 - 1
#: Largest unit tried (1 GiB): beyond, even 2**31 units of it would not fit in memory.
MAX_UNIT = 2**30


@dataclass(frozen=True)
class Layout:
    """How the blocks of one collective are laid out.

    Attributes:
        unit: bytes per MPI element (1: ``MPI.BYTE``; else a contiguous type).
        sizes: the true byte size of each rank's block.
        counts: MPI elements per block, ``ceil(sizes[r] / unit)``.
        displs: MPI element displacement of each block in the receive buffer.
        offsets: byte offset of each block (``displs[r] * unit``).
        nbytes: bytes the receive buffer needs.
    """

    unit: int
    sizes: Tuple[int, ...]
    counts: Tuple[int, ...]
    displs: Tuple[int, ...]
    offsets: Tuple[int, ...]
    nbytes: int

    def padded(self, rank: int) -> int:
        """Bytes rank ``rank`` sends: its size rounded up to whole units."""
        return self.counts[rank] * self.unit


def _layout(sizes: Sequence[int], unit: int, alignment: int) -> Layout:
    align = max(alignment, unit)
    counts, displs, offsets = [], [], []
    pos = 0
    for size in sizes:
        count = -(-size // unit)
        offsets.append(pos)
        displs.append(pos // unit)
        counts.append(count)
        pos = align_up(pos + count * unit, align)
    return Layout(unit, tuple(sizes), tuple(counts), tuple(displs), tuple(offsets), max(pos, 1))


def plan_blocks(sizes: Sequence[int], *, big_count: bool, max_count: int = INT_MAX, alignment: int = ALIGN) -> Layout:
    """Lay out one block per rank (``sizes[r]`` bytes) for a v-collective.

    With ``big_count`` the unit is always one byte (the MPI library takes
    64-bit counts). Otherwise the unit is the smallest power of two for which
    every count and displacement is at most ``max_count``. Every rank computes
    the same layout from the same sizes, so units always match.

    Raises:
        ValueError: a negative size.
        OverflowError: no unit up to :data:`MAX_UNIT` makes the counts fit.
    """
    if any(s < 0 for s in sizes):
        raise ValueError(f"block sizes must be >= 0, got {list(sizes)}")
    if big_count:
        return _layout(sizes, 1, alignment)
    unit = 1
    while unit <= MAX_UNIT:
        lay = _layout(sizes, unit, alignment)
        if max(lay.counts, default=0) <= max_count and max(lay.displs, default=0) <= max_count:
            return lay
        unit *= 2
    raise OverflowError(f"blocks of {list(sizes)} bytes cannot be counted in MPI ints with any unit up to {MAX_UNIT}")


def plan_block(size: int, *, big_count: bool, max_count: int = INT_MAX) -> Tuple[int, int]:
    """``(unit, count)`` for one block of ``size`` bytes (a broadcast); see :func:`plan_blocks`."""
    lay = plan_blocks([size], big_count=big_count, max_count=max_count, alignment=1)
    return lay.unit, lay.counts[0]
