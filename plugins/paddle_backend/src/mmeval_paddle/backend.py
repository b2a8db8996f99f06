"""The ``paddle_dist`` backend: mmeval's object collectives over ``paddle.distributed``.

:class:`PaddleDist` implements the four transport primitives of
:class:`~mmeval.core.dist_backends.FramedDistBackend`; the core does the rest
(serialization, per-rank headers, error propagation, timeouts, hooks). The
bytes move as uint8 tensors through the group's ``ProcessGroup`` (gloo on CPU,
as ``PADDLE_DISTRI_BACKEND=gloo python -m paddle.distributed.launch`` sets up;
NCCL groups are not supported here):

* header exchange and all-gather: one ``all_gather_into_tensor`` of per-rank
  blocks padded to the largest frame (a 64-byte multiple), in place (this
  rank's block of the receive buffer is the send tensor);
* gather: one ``gather`` of the same padded blocks, straight into the
  destination's receive buffer (only the destination allocates);
* broadcast: ``broadcast`` of exactly the frame's bytes.

Buffers are numpy arrays shared with paddle through DLPack (no copy): the
frame is written once into the send buffer, and received objects are rebuilt
from views of the receive buffer. Zero-byte tensors are never handed to gloo
(paddle 3.3's gloo all-gather dies of SIGFPE on them).

Paddle's gloo collectives block the calling thread (``sync_op=False`` returns
a task that is already complete) until gloo's own timeout (``PADDLE_PG_TIMEOUT``
milliseconds, 1800 s by default), so each one runs on a daemon thread and the
calling thread waits for that thread through the core's
:meth:`~mmeval.core.dist_backends.transport.Call.wait` (in slices: Ctrl-C
surfaces within a second; the deadline is the core's). A peer that died makes
gloo raise at once (reported by the core as ``CollectiveFailedError``); a peer
that hangs is reported as ``CollectiveTimeoutError`` at the deadline. An
abandoned gloo call stays blocked on its thread; its buffers are handed to
``call.keep`` and the core poisons the group: recover with a new group
(:func:`mmeval_paddle.new_group`: paddle's own ``dist.new_group`` races in its
gloo rendezvous when called repeatedly) and a new backend over it.

This module does not import paddle; the methods do.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, ClassVar, Hashable, List, Optional, Sequence

from mmeval.core.dist_backends.framed_backend import FramedDistBackend
from mmeval.core.dist_backends.transport import Call
from mmeval.core.wire import SLOT_SIZE

__all__ = ["PaddleDist", "BLOCK_ALIGN", "padded_block_size"]

#: Writes this rank's bytes into a send buffer (``Call.fill``, or a copy of the header slot).
Fill = Callable[[memoryview], None]

#: Per-rank blocks of a padded all-gather are a multiple of this many bytes.
BLOCK_ALIGN = 64


def padded_block_size(sizes: Sequence[int]) -> int:
    """The largest of ``sizes`` rounded up to :data:`BLOCK_ALIGN` (Python ints: no 2 GiB overflow)."""
    largest = max((int(s) for s in sizes), default=0)
    if largest < 0:
        raise ValueError(f"negative block size in {list(sizes)!r}")
    return -(-largest // BLOCK_ALIGN) * BLOCK_ALIGN


def _array(nbytes: int) -> Any:
    """A fresh, uninitialized uint8 numpy array of ``nbytes``."""
    import numpy as np

    return np.empty(nbytes, dtype=np.uint8)


def _tensor(array: Any) -> Any:
    """A paddle CPU tensor over ``array``'s memory (DLPack: no copy; the tensor keeps the array alive)."""
    import paddle

    return paddle.utils.dlpack.from_dlpack(array)


def _fill_block(block: memoryview, size: int, fill: Fill) -> None:
    """Write the frame into ``block[:size]`` and zero the rest (no stale memory on the wire)."""
    fill(block[:size])
    block[size:] = bytes(block.nbytes - size)


def _run_on_thread(call: Call, blocking: Callable[[], Any], what: str) -> None:
    """Run the blocking paddle call ``blocking`` on a helper thread through :meth:`Call.run_blocking`.

    Past the call's deadline the core raises ``CollectiveTimeoutError`` and the
    gloo call stays blocked on its thread. What the call raised (gloo's error
    when a peer died) is re-raised here.
    """
    task = call.run_blocking(blocking, what)
    if task is not None and hasattr(task, "wait"):
        task.wait()  # an already completed gloo task: returns at once; raises its error if it has one


class PaddleDist(FramedDistBackend):
    """mmeval backend over ``paddle.distributed`` process groups (gloo, CPU tensors).

    Args:
        group: a ``paddle.distributed`` group (``mmeval_paddle.new_group([...])``) to
            run on; ``None`` (default) is the global group. :attr:`rank` and
            :attr:`world_size` are then the group's, and ``src`` / ``dst`` of
            the collectives are ranks *in the group*. Every member must make
            the same calls; processes outside the group must not use the
            backend (``rank`` raises).
        timeout: seconds a collective may take before every waiting rank
            raises (else ``MMEVAL_PADDLE_DIST_TIMEOUT``, ``MMEVAL_TIMEOUT``,
            or 1800 s).
        codec: ``'pickle'`` (default) or ``'safe'`` (see
            :class:`~mmeval.core.dist_backends.FramedDistBackend`).

    :meth:`detect` is true when ``paddle.distributed`` is already imported and
    its parallel environment is initialized (``dist.init_parallel_env()``).
    """

    name = "paddle_dist"
    #: Auto-selection order: below ``torch_cpu``, so a process running both picks torch.
    priority: ClassVar[int] = 10
    #: gloo ends an operation at its group's own timeout (``PADDLE_PG_TIMEOUT``): no waiting without a limit.
    max_timeout: ClassVar[float] = 1e9
    new_group_hint: ClassVar[str] = "mmeval_paddle.new_group() on every rank"

    def __init__(self, group: Any = None, *, timeout: Optional[float] = None, codec: Optional[str] = None) -> None:
        super().__init__(timeout=timeout, codec=codec)
        #: The paddle group the collectives run on (``None``: the global group).
        self.group = group

    # -- runtime -------------------------------------------------------------

    @classmethod
    def detect(cls) -> bool:
        """Whether ``paddle.distributed`` is imported and initialized (never imports paddle)."""
        return _paddle_initialized()

    @property
    def is_initialized(self) -> bool:
        """True once ``paddle.distributed`` is imported and ``init_parallel_env()`` has run."""
        return _paddle_initialized()

    def _group(self) -> Any:
        """The group, or the global group; ``None`` for a single process without a parallel environment.

        ``init_parallel_env()`` initializes nothing in a world of one process
        (a launch with ``--nproc_per_node 1``): the backend is then rank 0 of 1
        (also over ``dist.new_group([0])``), and its collectives return their
        own object. Raises a RuntimeError
        naming the backend in a larger world that was not initialized.
        """
        import paddle.distributed as dist

        if not dist.is_initialized():
            if int(dist.get_world_size()) == 1 and (self.group is None or list(self.group.ranks) == [0]):
                return None  # one process; dist.new_group([0]) there has rank -1 and no process group
            raise RuntimeError(
                f"{self.name}: paddle.distributed is not initialized; call paddle.distributed.init_parallel_env() "
                "in every process (started by python -m paddle.distributed.launch) before using this backend"
            )
        if self.group is not None:
            return self.group
        from paddle.distributed.communication.group import _get_global_group

        return _get_global_group()

    @property
    def rank(self) -> int:
        """This process's rank in :attr:`group`."""
        group = self._group()
        if group is None:
            return 0
        rank = int(group.rank)
        if rank < 0:
            raise self._not_member()
        return rank

    @property
    def world_size(self) -> int:
        """The number of processes in :attr:`group`."""
        group = self._group()
        if group is None:
            return 1
        if int(group.rank) < 0:
            raise self._not_member()
        return int(group.nranks)

    def _not_member(self) -> RuntimeError:
        import paddle.distributed as dist

        return RuntimeError(
            f"{self.name}: this process (global rank {dist.get_rank()}) is not a member of the group given to the "
            "backend; only the group's members may use it"
        )

    def _sequence_key(self) -> Hashable:
        """One key per paddle group: backends over the same group share a collective sequence."""
        group = self._group()
        return ("paddle_dist", 0 if group is None else int(group.id))

    def _process_group(self) -> Any:
        group = self._group()
        process_group = None if group is None else group.process_group
        if process_group is None:
            raise RuntimeError(f"{self.name}: the paddle group has no process group (static-graph mode?)")
        return process_group

    # -- transport primitives --------------------------------------------------

    def _all_gather_blocks(self, call: Call, block: int, sizes: Sequence[int], fill: Fill,
                           what: str) -> List[memoryview]:
        """All-gather one ``block``-byte buffer per rank; views of the first ``sizes[r]`` bytes of each.

        In place: the frame is written into this rank's block of the receive
        buffer, and that block is the send tensor (gloo copies a block onto
        itself), so no separate send buffer is allocated and filled.
        """
        rank, ws = call.rank, call.world_size
        size = int(sizes[rank])
        array = _array(block * ws)
        recv, recv_view = _tensor(array), memoryview(array)
        send = _tensor(array[rank * block : (rank + 1) * block])
        _fill_block(recv_view[rank * block : (rank + 1) * block], size, fill)
        pg = self._process_group()
        call.keep(array, recv, send)  # gloo may still write into them after an abandoned wait
        _run_on_thread(call, lambda: pg.all_gather_into_tensor(recv, send, True), what)
        return [recv_view[r * block : r * block + int(n)] for r, n in enumerate(sizes)]

    def _exchange_slots(self, call: Call, slot: memoryview) -> Sequence[memoryview]:
        """All-gather ``SLOT_SIZE`` bytes per rank (the headers of a collective)."""

        def fill(out: memoryview) -> None:
            out[: slot.nbytes] = slot

        return self._all_gather_blocks(call, SLOT_SIZE, [SLOT_SIZE] * call.world_size, fill,
                                       "the header all-gather")

    def _all_gather_bytes(self, call: Call) -> Sequence[memoryview]:
        """All-gather blocks padded to :func:`padded_block_size`; views of exactly ``call.sizes[r]`` bytes."""
        sizes = call.sizes
        block = padded_block_size(sizes)
        if block == 0:
            return [memoryview(b"") for _ in sizes]
        return self._all_gather_blocks(call, block, sizes, call.fill, "the payload all-gather")

    def _gather_bytes(self, call: Call) -> Optional[Sequence[memoryview]]:
        """Gather blocks padded to :func:`padded_block_size` to ``call.root``; only it allocates receive memory.

        One ``ProcessGroup.gather`` straight into the root's receive buffer (one
        tensor per rank over its block). Paddle's gloo ``send`` / ``recv``
        cannot build it: each call takes the next tag of its own process, so
        ranks that make different numbers of point-to-point calls disagree on
        the tags and gloo times out.
        """
        rank, ws, dst, sizes = call.rank, call.world_size, call.root, call.sizes
        block = padded_block_size(sizes)
        if block == 0:
            return [memoryview(b"") for _ in sizes] if rank == dst else None
        size = int(sizes[rank])
        if rank == dst:
            array = _array(block * ws)
            view = memoryview(array)
            blocks = [_tensor(array[r * block : (r + 1) * block]) for r in range(ws)]
            send = blocks[rank]
            _fill_block(view[rank * block : (rank + 1) * block], size, call.fill)
        else:
            array = _array(block)
            send, view = _tensor(array), memoryview(array)
            _fill_block(view, size, call.fill)
            blocks = [send] * ws  # ignored off the destination (what paddle.distributed.gather passes)
        pg = self._process_group()
        call.keep(array, send, blocks)
        _run_on_thread(call, lambda: pg.gather(send, blocks, dst, True, False), "the payload gather")
        if rank != dst:
            return None
        return [view[r * block : r * block + int(n)] for r, n in enumerate(sizes)]

    def _broadcast_bytes(self, call: Call) -> Optional[memoryview]:
        """Broadcast exactly ``call.sizes[call.root]`` bytes from ``call.root`` (a rank in the group)."""
        rank, src = call.rank, call.root
        size = int(call.sizes[src])
        if size == 0:
            return None if rank == src else memoryview(b"")
        array = _array(size)
        buf, view = _tensor(array), memoryview(array)
        if rank == src:
            call.fill(view)
        pg = self._process_group()
        call.keep(array, buf)
        _run_on_thread(call, lambda: pg.broadcast(buf, src, True), "the payload broadcast")
        return None if rank == src else view


def _paddle_initialized() -> bool:
    """Whether paddle.distributed is imported and initialized (never imports paddle)."""
    dist = sys.modules.get("paddle.distributed")
    if dist is None:
        return False
    try:
        return bool(dist.is_initialized())
    except Exception:  # a half-imported or broken paddle is "not initialized"
        return False
