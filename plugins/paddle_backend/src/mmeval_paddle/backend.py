"""The ``paddle_dist`` backend: mmeval's object collectives over ``paddle.distributed`` (gloo, CPU).

The four transport primitives of :class:`~mmeval.core.dist_backends.FramedDistBackend`
over a paddle group's ``ProcessGroup``, each blocking gloo call run on a helper
thread; what each moves and how to recover after a failure:
plugins/paddle_backend/README.md. This module does not import paddle; the methods do.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar, Hashable, List, Optional, Sequence

from mmeval.core.dist_backends import ALIGN, SLOT_SIZE, Call, Frame, FramedDistBackend
from mmeval.core.dist_backends.plugin_kit import (
    GroupTokens,
    gather_in_rounds,
    not_a_member,
    padded_block_size,
    round_bytes_setting,
    run_on_thread,
    sent_frame,
    slot_frame,
    split_blocks,
    write_block,
)

__all__ = ["PaddleDist", "BLOCK_ALIGN", "padded_block_size"]

#: Per-rank blocks of a padded all-gather are a multiple of this many bytes (the core's ``ALIGN``).
BLOCK_ALIGN = ALIGN

#: One token per paddle group object: backends over one group share its collective sequence.
_GROUPS = GroupTokens()


def _array(nbytes: int) -> Any:
    """A fresh, uninitialized uint8 numpy array of ``nbytes``."""
    import numpy as np

    return np.empty(nbytes, dtype=np.uint8)


def _tensor(array: Any) -> Any:
    """A paddle CPU tensor over ``array``'s memory (DLPack: no copy; the tensor keeps the array alive)."""
    import paddle

    return paddle.utils.dlpack.from_dlpack(array)


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

        return not_a_member(self.name, f"global rank {dist.get_rank()}", "the group")

    def _sequence_key(self) -> Hashable:
        """One key per paddle group object: backends over the same group share a collective sequence."""
        group = self._group()
        if group is None:  # one process without a parallel environment
            return ("paddle_dist", 0)
        return _GROUPS.token(group, label=f"paddle group {int(group.id)}")

    def _process_group(self) -> Any:
        group = self._group()
        process_group = None if group is None else group.process_group
        if process_group is None:
            raise RuntimeError(f"{self.name}: the paddle group has no process group (static-graph mode?)")
        return process_group

    # -- transport primitives --------------------------------------------------

    def _all_gather_blocks(
        self, call: Call, block: int, sizes: Sequence[int], frame: Frame, what: str
    ) -> List[memoryview]:
        """All-gather one ``block``-byte buffer per rank; views of the first ``sizes[r]`` bytes of each.

        In place: the frame is written into this rank's block of the receive
        buffer, and that block is the send tensor (gloo copies a block onto
        itself), so no separate send buffer is allocated and filled.
        """
        rank, ws = call.rank, call.world_size
        array = _array(block * ws)
        recv, recv_view = _tensor(array), memoryview(array)
        send = _tensor(array[rank * block : (rank + 1) * block])
        write_block(recv_view[rank * block : (rank + 1) * block], frame)
        pg = self._process_group()
        call.keep(array, recv, send)  # gloo may still write into them after an abandoned wait
        run_on_thread(call, lambda: pg.all_gather_into_tensor(recv, send, True), what)
        return split_blocks(recv_view, block, sizes)

    def _exchange_slots(self, call: Call, slot: memoryview) -> Sequence[memoryview]:
        """All-gather ``SLOT_SIZE`` bytes per rank (the headers of a collective)."""
        return self._all_gather_blocks(
            call, SLOT_SIZE, [SLOT_SIZE] * call.world_size, slot_frame(slot), "the header all-gather"
        )

    def _all_gather_bytes(self, call: Call) -> Sequence[memoryview]:
        """All-gather blocks padded to :func:`padded_block_size`; views of exactly ``call.sizes[r]`` bytes."""
        sizes = call.sizes
        block = padded_block_size(sizes)
        if block == 0:
            return [memoryview(b"") for _ in sizes]
        return self._all_gather_blocks(call, block, sizes, sent_frame(call), "the payload all-gather")

    def _gather_bytes(self, call: Call) -> Optional[Sequence[memoryview]]:
        """Gather every rank's frame to ``call.root`` in rounds of equal blocks (``gather_in_rounds``).

        Each round is one ``ProcessGroup.gather`` of a block of at most
        ``MMEVAL_PADDLE_DIST_GATHER_ROUND_MIB`` (4 MiB) per rank, received
        straight into each peer's own receive buffer on the root, so the root
        never holds every peer's padded block (nor gloo's temporary of all of
        them) at once, and the per-sample path gives the pages back as it
        copies the rows out. Paddle's gloo ``send`` / ``recv`` cannot build a
        gather: each call takes the next tag of its own process, so ranks that
        make different numbers of point-to-point calls disagree on the tags
        and gloo times out.
        """
        pg = self._process_group()
        dst = call.root

        def gather_round(send: Any, into: Optional[List[Any]]) -> None:
            sent = _tensor(send)
            blocks = [sent if a is send else _tensor(a) for a in into] if into is not None else [sent] * call.world_size
            call.keep(sent, blocks)  # gloo may still write into them after an abandoned wait
            run_on_thread(call, lambda: pg.gather(sent, blocks, dst, True, False), "the payload gather")

        return gather_in_rounds(call, gather_round, round_bytes_setting(self.name))

    def _broadcast_bytes(self, call: Call) -> Optional[memoryview]:
        """Broadcast exactly ``call.sizes[call.root]`` bytes from ``call.root`` (a rank in the group)."""
        rank, src = call.rank, call.root
        size = int(call.sizes[src])
        if size == 0:
            return None if rank == src else memoryview(b"")
        array = _array(size)
        buf, view = _tensor(array), memoryview(array)
        if rank == src:
            sent_frame(call).write_into(view)
        pg = self._process_group()
        call.keep(array, buf)
        run_on_thread(call, lambda: pg.broadcast(buf, src, True), "the payload broadcast")
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
