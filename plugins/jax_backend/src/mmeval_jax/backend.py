"""The ``jax`` backend: mmeval's object collectives over multi-process JAX.

The four transport primitives of :class:`~mmeval.core.dist_backends.FramedDistBackend`
as tiny jitted XLA programs over a mesh of one device per process, each run on a
helper thread (an XLA collective cannot be interrupted); what each moves, the
CPU collectives setting and how to recover after a failure:
plugins/jax_backend/README.md. This module does not import jax; the methods do.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Hashable, List, Optional, Sequence, Tuple

from mmeval.core.dist_backends import ALIGN, SLOT_SIZE, Call, Frame, FramedDistBackend
from mmeval.core.dist_backends.plugin_kit import (
    align_up,
    gather_in_rounds,
    not_a_member,
    round_bytes_setting,
    run_on_thread,
    sent_frame,
    slot_frame,
    split_blocks,
    write_block,
)

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = ["JaxDist", "bucket_size", "jax_distributed_active"]

#: Blocks are at least this many bytes and a multiple of it (the core's ``ALIGN``).
BLOCK_ALIGN = ALIGN


def bucket_size(n: int) -> int:
    """The padded block size for a frame of ``n`` bytes: few distinct sizes, at most 12.5 % padding.

    Every distinct size is one more XLA program to compile (tens of
    milliseconds), so sizes are rounded up to :data:`BLOCK_ALIGN` and then to
    ``k * 2**e`` with ``8 <= k <= 16``: about eight sizes per doubling.
    Every rank derives the same size from the same ``n``.
    """
    n = int(n)
    if n < 0:
        raise ValueError(f"negative block size {n}")
    n = max(BLOCK_ALIGN, align_up(n))
    return align_up(n, max(BLOCK_ALIGN, 1 << max(0, n.bit_length() - 4)))


def jax_distributed_active() -> bool:
    """Whether ``jax.distributed.initialize`` has run in this process (never imports jax)."""
    mod = sys.modules.get("jax._src.distributed")
    state = getattr(mod, "global_state", None)
    return state is not None and getattr(state, "client", None) is not None


#: A group: its process indices in rank order and the local device index it runs on.
GroupKey = Tuple[Tuple[int, ...], int]

_programs_lock = threading.Lock()
#: (group, kind) -> (mesh, jitted program); one per group and kind, kept for the process's life.
_programs: Dict[Tuple[GroupKey, str], Tuple[Any, Any]] = {}


def _program(group: GroupKey, kind: str) -> Tuple[Any, Any]:
    """The mesh over the group (one device each) and the jitted ``'all_gather'`` or ``'broadcast'`` program."""
    key = (group, kind)
    with _programs_lock:
        found = _programs.get(key)
    if found is not None:
        return found
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as _P

    spec: Any = _P  # untyped in jax's stubs
    procs, index = group
    local: Dict[int, List[Any]] = {}
    for dev in sorted(jax.devices(), key=lambda d: int(d.id)):
        local.setdefault(int(dev.process_index), []).append(dev)
    missing = [p for p in procs if p not in local]
    if missing:
        raise RuntimeError(
            f"jax: processes {missing} have no devices visible to process {jax.process_index()} "
            f"({jax.process_count()} processes); a group lists process indices 0..{jax.process_count() - 1}"
        )
    short = [p for p in procs if len(local[p]) <= index]
    if short:
        raise RuntimeError(
            f"jax: device={index} but processes {short} have only {min(len(local[p]) for p in short)} device(s); "
            "pick a smaller device index, or give each process more (on CPU: "
            "jax.config.update('jax_num_cpu_devices', N) before jax.distributed.initialize)"
        )
    mesh = Mesh(np.array([local[p][index] for p in procs]), ("p",))
    replicated = NamedSharding(mesh, spec())
    fn: Any
    if kind == "all_gather":
        fn = jax.jit(lambda x: x, out_shardings=replicated)
    else:

        def _sum(x: Any) -> Any:
            psum: Any = jax.lax.psum
            return psum(x[0], "p")

        fn = jax.jit(jax.shard_map(_sum, mesh=mesh, in_specs=spec("p"), out_specs=spec()))
    with _programs_lock:
        return _programs.setdefault(key, (mesh, fn))


def _run_program(group: GroupKey, kind: str, block: "np.ndarray") -> "np.ndarray":
    """Run ``kind`` over the group with this process's ``(1, n)`` uint8 ``block``; the host result.

    ``'all_gather'`` returns ``(len(group[0]), n)``, ``'broadcast'`` the ``(n,)``
    byte-wise sum of the blocks. Runs on the worker thread.
    """
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as _P

    spec: Any = _P
    mesh, fn = _program(group, kind)
    me = jax.process_index()
    local = next(d for d in mesh.devices.flat if int(d.process_index) == me)
    shape = (len(group[0]), block.shape[1])
    x = jax.make_array_from_single_device_arrays(shape, NamedSharding(mesh, spec("p")), [jax.device_put(block, local)])
    out = fn(x)
    out.block_until_ready()
    return np.asarray(out.addressable_data(0))


class JaxDist(FramedDistBackend):
    """mmeval backend over multi-process JAX (``jax.distributed.initialize``).

    Rank and world size are JAX's process index and process count (or the
    position in, and length of, ``group``). Every process of the group must
    make the same collective calls; processes outside the group must not use
    the backend (``rank`` raises).

    Args:
        group: process indices (``jax.process_index()`` values) that form the
            group, in rank order; ``None`` (default): every process. Rank
            ``r`` of the group is process ``group[r]``, and ``src`` / ``dst``
            are group ranks. Only the group's processes take part in its
            collectives.
        device: which of each process's local devices (in device id order)
            carries the group's transfers (default 0). Groups over the same
            processes but different devices are independent groups: after a
            failure poisons one, a backend with another ``device`` goes on.
        timeout: seconds a collective may take before every waiting rank
            raises (else ``MMEVAL_JAX_TIMEOUT``, ``MMEVAL_TIMEOUT``, or 1800 s).
            After a failure the core refuses further calls on the group
            (``GroupPoisonedError``; see the module documentation).
        codec: ``'pickle'`` (default) or ``'safe'`` (see
            :class:`~mmeval.core.dist_backends.FramedDistBackend`).

    :meth:`detect` is true when ``jax.distributed`` is initialized in this
    process (jax already imported; it is never imported by ``detect``).
    """

    name = "jax"
    #: Auto-selection rank among detected backends (torch_cpu's is higher: a torch job that also imports
    #: and initializes JAX keeps its torch backend).
    priority: ClassVar[int] = 10
    new_group_hint: ClassVar[str] = "JaxDist(device=N), another local device, on every process"

    def __init__(
        self,
        group: Optional[Sequence[int]] = None,
        *,
        device: int = 0,
        timeout: Optional[float] = None,
        codec: Optional[str] = None,
    ) -> None:
        super().__init__(timeout=timeout, codec=codec)
        procs: Optional[Tuple[int, ...]] = None
        if group is not None:
            procs = tuple(int(p) for p in group)
            if not procs or len(set(procs)) != len(procs) or min(procs) < 0:
                raise ValueError(
                    f"jax: group={list(group)!r} must list distinct, non-negative process indices "
                    "(jax.process_index() values) of every member"
                )
        #: The group's process indices in rank order (``None``: every process).
        self.group = procs
        if isinstance(device, bool) or not isinstance(device, int) or device < 0:
            raise ValueError(f"jax: device={device!r} must be a non-negative index of each process's local devices")
        #: The index, among each process's local devices, of the device the group runs on.
        self.device = device

    # -- runtime ---------------------------------------------------------------

    @classmethod
    def detect(cls) -> bool:
        """Whether ``jax.distributed`` is initialized in this process (looks at ``sys.modules`` only)."""
        return jax_distributed_active()

    @property
    def is_initialized(self) -> bool:
        """True once ``jax.distributed.initialize`` has run (a lone process without it computes alone)."""
        return jax_distributed_active()

    def _processes(self) -> Tuple[int, ...]:
        if self.group is not None:
            return self.group
        import jax

        return tuple(range(jax.process_count()))

    @property
    def rank(self) -> int:
        """This process's rank in the group (``jax.process_index()`` without a group)."""
        import jax

        me = jax.process_index()
        if self.group is None:
            return int(me)
        if me not in self.group:
            raise not_a_member(self.name, f"process {me}", f"group {list(self.group)}")
        return self.group.index(me)

    @property
    def world_size(self) -> int:
        """The number of processes in the group (``jax.process_count()`` without a group)."""
        if self.group is not None:
            return len(self.group)
        import jax

        return int(jax.process_count())

    def _group_key(self) -> GroupKey:
        return self._processes(), self.device

    def _sequence_key(self) -> Hashable:
        return ("jax", *self._group_key())

    # -- transport ---------------------------------------------------------------

    def _collect(self, call: Call, kind: str, block: int, frame: Optional[Frame], what: str) -> "np.ndarray":
        """Run ``kind`` with this rank's ``block`` bytes: ``frame``, then zeros (all zeros without a frame).

        The transfer runs on a helper thread (:func:`run_on_thread`); it cannot
        be cancelled: when the wait is abandoned it stays there, its buffer
        kept by ``call.keep``, and the core poisons the group.
        """
        import numpy as np

        buf = np.empty((1, block), dtype=np.uint8)
        write_block(buf.reshape(-1).data, frame)
        group = self._group_key()
        call.keep(buf)
        return run_on_thread(call, lambda: _run_program(group, kind, buf), what)

    def _gathered(self, call: Call, sizes: Sequence[int], frame: Frame, what: str) -> List[memoryview]:
        block = bucket_size(max(int(s) for s in sizes))
        out = self._collect(call, "all_gather", block, frame, what)
        return split_blocks(out.reshape(-1).data, block, sizes)

    def _exchange_slots(self, call: Call, slot: memoryview) -> Sequence[memoryview]:
        """All-gather ``SLOT_SIZE`` bytes per rank (the headers of a collective)."""
        return self._gathered(call, [SLOT_SIZE] * call.world_size, slot_frame(slot), "the header all-gather")

    def _all_gather_bytes(self, call: Call) -> Sequence[memoryview]:
        """All-gather blocks padded to :func:`bucket_size` of the largest; views of exactly ``sizes[r]`` bytes."""
        return self._gathered(call, call.sizes, sent_frame(call), "the payload all-gather")

    def _gather_bytes(self, call: Call) -> Optional[Sequence[memoryview]]:
        """The all-gather kept on ``call.root`` only (JAX has no gather to one process), in rounds.

        Each round all-gathers a block of at most ``MMEVAL_JAX_GATHER_ROUND_MIB``
        (4 MiB, one compiled program) per rank (``gather_in_rounds``); the root
        copies each peer's block into that peer's own receive buffer, so no
        rank holds every rank's padded block at once, and the per-sample path
        gives the root's pages back as it copies the rows out.
        """
        group = self._group_key()

        def gather_round(send: "np.ndarray", into: Optional[List["np.ndarray"]]) -> None:
            block = send.reshape(1, -1)
            out = run_on_thread(call, lambda: _run_program(group, "all_gather", block), "the payload gather")
            for r, dest in enumerate(into or ()):
                if r != call.rank:
                    dest[...] = out[r]

        return gather_in_rounds(call, gather_round, round_bytes_setting(self.name), bucket_size)

    def _broadcast_bytes(self, call: Call) -> Optional[memoryview]:
        """Broadcast ``call.sizes[root]`` bytes from ``call.root`` as an all-reduce (sum) only the root feeds."""
        rank, src = call.rank, call.root
        size = int(call.sizes[src])
        out = self._collect(
            call, "broadcast", bucket_size(size), sent_frame(call) if rank == src else None, "the payload broadcast"
        )
        return None if rank == src else out.reshape(-1).data[:size]
