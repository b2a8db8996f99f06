"""A large gather to one rank as rounds of small equal blocks, each peer's bytes landing in a buffer of its own.

For transports whose gather moves equal blocks only (paddle's gloo
``ProcessGroup.gather``) or has no gather to one rank at all (JAX: an
all-gather kept on the root): one padded block of the largest frame per rank
would make the root hold every peer's whole payload -- and, where the
transport receives into a temporary of its own, that twice -- before the
per-sample path copies a single row out, and its own padded block beside it.
:func:`gather_in_rounds` moves the frames ``round_bytes`` at a time instead:
in round ``k`` every rank sends bytes ``k * step ..`` of its frame (zeros past
its end) and the root leaves each peer's share straight in that peer's own
receive buffer, exactly its frame's size, 64-byte aligned and marked
:func:`~mmeval.core.wire.release.releasable`; the per-sample path gives those
pages back as it copies the rows out. The root then holds about its peers'
frames once, plus a few blocks of ``round_bytes`` a round. The transport
supplies one round (:data:`RoundGather`); the rounds, the buffers and the
copies are here, once.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ..settings import mebibytes, read_setting
from ..wire import ALIGN
from ..wire.release import releasable
from .transport import Call

__all__ = ["ROUND_BYTES", "RoundGather", "aligned_empty", "gather_in_rounds", "round_bytes_setting"]

#: Bytes each rank sends in one round of :func:`gather_in_rounds` unless the backend's setting says otherwise.
ROUND_BYTES = 4 << 20

#: One round: ``gather_round(send, into)`` gathers every rank's equal-sized ``send`` block to the root, where
#: ``into`` lists one array of the same size per rank (``into[root]`` is ``send`` itself) that the transport
#: leaves rank ``r``'s block in; ``into`` is ``None`` elsewhere. It waits through the call (e.g.
#: ``run_on_thread``) and raises what the transport raised.
RoundGather = Callable[[np.ndarray, Optional[List[np.ndarray]]], None]


def aligned_empty(nbytes: int) -> np.ndarray:
    """An uninitialized ``uint8`` array of ``nbytes`` whose first byte is :data:`~mmeval.core.wire.ALIGN`-aligned.

    Out-of-band buffers lie at 64-byte offsets inside a frame, so in such a
    buffer every array decoded over it is aligned too.
    """
    raw = np.empty(int(nbytes) + ALIGN, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start : start + int(nbytes)]


def round_bytes_setting(backend: str) -> int:
    """The bytes per round for ``backend``: ``MMEVAL_<BACKEND>_GATHER_ROUND_MIB`` (or ``MMEVAL_GATHER_ROUND_MIB``).

    :data:`ROUND_BYTES` when unset; ``0`` means no limit (one round of the
    largest frame); else rounded down to a multiple of
    :data:`~mmeval.core.wire.ALIGN`, at least one.
    """
    value = read_setting(backend, "GATHER_ROUND_MIB", mebibytes, ROUND_BYTES, "a number of MiB (0: one round)")
    return 0 if value == 0 else max(ALIGN, value // ALIGN * ALIGN)


def gather_in_rounds(
    call: Call,
    gather_round: RoundGather,
    round_bytes: int = ROUND_BYTES,
    block_size: Optional[Callable[[int], int]] = None,
) -> Optional[Sequence[memoryview]]:
    """Gather every rank's ``call.frame`` to ``call.root`` in rounds; on the root one view per rank, else ``None``.

    Each round moves one block of ``step`` bytes per rank, ``step`` being
    ``block_size(largest frame)`` (default: rounded up to ALIGN) or ``round_bytes`` if that is smaller and
    not 0 (a
    transport that compiles a program per block size passes its own
    ``block_size`` and a ``round_bytes`` it maps to itself). Every rank derives
    the same rounds from ``call.sizes``, so every rank makes the same number
    of ``gather_round`` calls. On the root, view ``r`` is exactly
    ``call.sizes[r]`` bytes: the root's own frame, and each peer's bytes in a
    releasable buffer of its own (a round's last, partial block of a peer
    arrives in a spare block and is copied to its place). A sender holds one
    block of its frame at a time.
    """
    sizes = [int(n) for n in call.sizes]
    rank, root = call.rank, call.root
    largest = max(sizes, default=0)
    if largest == 0:
        return [memoryview(b"") for _ in sizes] if rank == root else None
    frame = call.frame
    if frame is None:
        raise RuntimeError(f"{call.backend}: {call.op} on rank {rank} has no frame to send")
    step = int(block_size(largest)) if block_size is not None else -(-largest // ALIGN) * ALIGN
    if round_bytes > 0:
        step = min(step, max(ALIGN, int(round_bytes)))
    send = aligned_empty(step)
    own = sizes[rank]
    received: List[np.ndarray] = []
    spare: Dict[int, np.ndarray] = {}
    if rank == root:
        received = [aligned_empty(n) for n in sizes]
        for r, n in enumerate(sizes):
            if r != rank and n:
                releasable(received[r])  # the per-sample path gives its pages back as it copies them out
        frame.write_into(received[rank].data)
    call.keep(send, received, spare)  # the transport may still write into them after an abandoned wait
    for lo in range(0, largest, step):
        mine = min(max(own - lo, 0), step)
        if mine:
            frame.write_range(send.data[:mine], lo)
        if mine < step:
            send[mine:] = 0  # no stale memory is ever sent
        into: Optional[List[np.ndarray]] = None
        if rank == root:
            into = []
            for r, n in enumerate(sizes):
                if r == rank:
                    into.append(send)
                elif lo + step <= n:
                    into.append(received[r][lo : lo + step])
                else:
                    into.append(spare.setdefault(r, aligned_empty(step)))
        gather_round(send, into)
        if into is not None:
            for r, n in enumerate(sizes):
                if r != rank and lo < n < lo + step:
                    received[r][lo:n] = into[r][: n - lo]
        del into
    return [received[r].data[:n] for r, n in enumerate(sizes)] if rank == root else None
