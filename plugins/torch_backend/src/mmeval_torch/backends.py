"""torch.distributed backends for mmeval: ``torch_cpu`` and ``torch_cuda``.

The four transport primitives of :class:`~mmeval.core.dist_backends.FramedDistBackend`
over a process group's collectives on uint8 tensors: how each moves its bytes,
and the settings, are in plugins/torch_backend/README.md. This module does not
import torch; the methods do.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple

from mmeval.core.dist_backends import ALIGN, SLOT_SIZE, Call, Frame, FramedDistBackend, PeerLost, native_pairs
from mmeval.core.dist_backends.plugin_kit import (
    blocks_at,
    keep_until_exit,
    logger,
    packed_offsets,
    padded_block_size,
    releasable,
    run_on_thread,
    seconds_left,
    sent_frame,
    slot_frame,
    split_blocks,
    write_block,
)
from mmeval.core.errors import CollectiveTimeoutError

from . import leave
from .groups import ProcessGroupMember, backend_map, default_backend_map, torch_dist_initialized
from .tensors import tensor_reducers

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch
    from torch.distributed import ProcessGroup

__all__ = ["TorchCPUDist", "TorchCUDADist", "BLOCK_ALIGN", "padded_block_size", "split_blocks", "backend_map"]

#: Per-rank blocks of a payload all-gather / gather are padded to a multiple of this (the core's ``ALIGN``).
BLOCK_ALIGN = ALIGN

#: torch backends whose all-gather accepts this rank's block of the output as its input.
_IN_PLACE_ALL_GATHER = ("gloo", "nccl")

#: Tag of the point-to-point messages of a gather (apart from user traffic on the default tag 0).
_GATHER_TAG = 0x6D6D65

#: gather (point to point, on gloo), broadcast and all-gather (on gloo) move a frame of at least
#: ``CHUNKED_MIN`` bytes as :func:`_chunks` of at most ``CHUNK_BYTES``: a chunk inside one segment of
#: the frame is sent from the frame's own memory, the others are copied into one of two small staging
#: buffers while the previous chunk is on the wire, instead of first copying the whole frame into a
#: fresh buffer (see docs/benchmarks.md).
#: Every rank derives the same chunks from the size.
CHUNK_BYTES = 16 << 20
CHUNKED_MIN = 32 << 20


def _chunks(size: int) -> List[Tuple[int, int]]:
    """``(offset, length)`` of each chunk of a ``size``-byte frame (one chunk below ``CHUNKED_MIN``).

    Aligned to the frame's end: a first chunk of ``size % (CHUNK_BYTES // 16)``
    bytes, then one of the rest modulo ``CHUNK_BYTES``, then whole chunks. A
    frame usually ends with its large array, so the chunk boundaries fall in
    step with the array's end, and every chunk but the first (the header, when
    the array's length is a multiple of ``CHUNK_BYTES // 16``) lies inside it.
    """
    if size < CHUNKED_MIN:
        return [(0, size)]
    out: List[Tuple[int, int]] = []
    off = 0
    for step in (max(1, CHUNK_BYTES // 16), CHUNK_BYTES):
        head = (size - off) % step
        if head:
            out.append((off, head))
            off += head
    out.extend((o, min(CHUNK_BYTES, size - o)) for o in range(off, size, CHUNK_BYTES))
    return out


def _direct_chunks(frame: Frame, chunks: Sequence[Tuple[int, int]]) -> List[Optional["torch.Tensor"]]:
    """Per chunk, a uint8 tensor over the frame's own memory, or ``None`` where the chunk must be staged.

    A chunk that lies inside one segment of the frame (an out-of-band array:
    the caller's memory, ``Frame.segment_view``) is sent from there, without a
    copy; chunks that straddle segments or gaps are ``None``. The tensors are
    read-only views (the transport only reads them; torch's warning about
    that is silenced here) and keep the memory alive.
    """
    import warnings

    import numpy as np
    import torch

    out: List[Optional[torch.Tensor]] = []
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)
        for off, n in chunks:
            view = frame.segment_view(off, off + n)
            out.append(None if view is None else torch.from_numpy(np.frombuffer(view, dtype=np.uint8)))
    return out


#: CPU staging buffers of at least this many bytes come from numpy (see :func:`_empty`).
NUMPY_ALLOC_MIN = 1 << 20


def _empty(nbytes: int, device: Optional["torch.device"] = None, release_ok: bool = False) -> "torch.Tensor":
    """An uninitialized uint8 buffer of ``nbytes`` on ``device`` (CPU by default).

    Large CPU buffers are numpy arrays wrapped without a copy: numpy asks the
    kernel for transparent huge pages (``madvise``), torch's CPU allocator does
    not (unless ``THP_MEM_ALLOC_ENABLE=1``), and faulting in a fresh large
    receive buffer 4 KiB at a time costs more than copying the payload into it
    (docs/benchmarks.md). The tensor keeps the array alive. ``release_ok``: a
    receive buffer whose pages the per-sample path may give back as it copies
    them out (:func:`~mmeval.core.wire.release.releasable`; large CPU ones only).
    """
    import torch

    if (device is None or device.type == "cpu") and nbytes >= NUMPY_ALLOC_MIN:
        import numpy as np

        array = np.empty(nbytes, dtype=np.uint8)
        return torch.from_numpy(releasable(array) if release_ok else array)
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def _byte_view(tensor: "torch.Tensor") -> memoryview:
    """A writable 1-D memoryview of a contiguous CPU uint8 tensor's bytes (no copy)."""
    array: Any = tensor.numpy()
    return memoryview(array)


class _TorchDist(ProcessGroupMember, FramedDistBackend):
    """What TorchCPUDist and TorchCUDADist share: waiting and the primitives (the group: :mod:`.groups`).

    Subclasses say where the bytes are staged (:meth:`_device`).
    """

    #: gloo / NCCL end an operation at the group's own timeout: no unlimited wait (10^9 s is the cap)
    max_timeout: ClassVar[float] = 1e9
    new_group_hint: ClassVar[str] = "torch.distributed.new_group(ranks) on every rank"
    #: reduced natively at any size; the core converts other integers and takes float min / max by bytes
    native_reductions = native_pairs(ints=("int8", "uint8", "int32", "int64"), float_sums=("float32", "float64"))

    def __init__(
        self,
        group: Optional["ProcessGroup"] = None,
        *,
        timeout: Optional[float] = None,
        codec: Optional[str] = None,
    ) -> None:
        super().__init__(timeout=timeout, codec=codec)
        #: The process group the collectives run on (``None``: the default group).
        self.group = group
        leave.register()  # this process tells its peers why it leaves (mmeval_torch.leave)

    def reducers(self) -> Dict[type, Any]:
        """The tensor reducer (:mod:`mmeval_torch.tensors`), for this backend's codec only."""
        return tensor_reducers()

    # -- staging (overridden by torch_cuda) ------------------------------------

    def _device(self) -> "torch.device":
        import torch

        device = torch.device("cpu")
        if self._transport_name(device) == "":
            raise RuntimeError(
                f"{self.name}: the process group has no backend for CPU tensors (an NCCL-only group?); "
                "use torch_cuda, or init_process_group('cpu:gloo,cuda:nccl')"
            )
        return device

    def _to_device(self, cpu_tensor: "torch.Tensor", device: "torch.device") -> "torch.Tensor":
        """The tensor the transport sends (the CPU buffer itself for torch_cpu)."""
        return cpu_tensor if device.type == "cpu" else cpu_tensor.to(device)

    def _to_host(self, tensor: "torch.Tensor") -> "torch.Tensor":
        """Received bytes on the CPU (the tensor itself for torch_cpu; one copy for torch_cuda)."""
        return tensor if tensor.device.type == "cpu" else tensor.cpu()

    def _wait(self, call: Call, work: Any, what: str, p2p: bool = False) -> None:
        """Wait for ``work`` through the core's wait (Ctrl-C and the deadline are honoured).

        A collective's work is polled (``is_completed()``, set by gloo's worker
        thread) with the core's backoff, then ``wait()`` raises its error if it
        failed: a timed ``wait(timeout=...)`` cannot be used in slices, since
        on gloo it may block past its timeout on a pending collective. A
        point-to-point work (``p2p``: ``isend`` / ``irecv``) only completes
        through ``wait()`` (a timed-out one finishes the work with the timeout
        as its error): it is waited once, up to the deadline, on a helper
        thread, while this thread waits for that one in slices. A wait that
        fails keeps the process group alive to the end of the process (see
        :func:`~mmeval.core.dist_backends.plugin_kit.keep_until_exit`).

        A collective's wait also reads the leave notices (:mod:`mmeval_torch.leave`)
        every 0.1 s, and any wait that fails with a transport error (a closed
        connection) reads them once: a member that left fails the collective
        naming it and why it left.
        """
        listener = leave.listener_for(self._dist(), self.group, self._token(), call.seq)
        try:
            if p2p:
                run_on_thread(call, lambda: work.wait(timeout=timedelta(seconds=seconds_left(call))), what)
            else:
                done: Callable[[], bool] = work.is_completed
                if listener is not None:
                    done = lambda: work.is_completed() or listener()  # noqa: E731
                call.wait_until(done, what)
                work.wait()
        except BaseException as exc:
            keep_until_exit(self._process_group())
            if not isinstance(exc, (TimeoutError, CollectiveTimeoutError, PeerLost)) and isinstance(exc, Exception):
                leave.explain(listener, exc)  # a closed connection: raise naming the member that left, and why
            raise

    # -- transport primitives --------------------------------------------------

    def _transport_name(self, device: "torch.device") -> str:
        """The torch.distributed backend (``'gloo'``, ``'nccl'``, ``'mpi'``, ...) serving ``device`` in the group."""
        transports: Dict[str, str] = self._token().state.setdefault("transports", {})
        name = transports.get(device.type)
        if name is None:
            dist = self._dist()
            getter = getattr(dist, "get_backend_config", None)  # torch >= 2.1
            config = str(getter(self.group)) if getter is not None else str(dist.get_backend(self.group))
            # "" when the group has no backend for the device; "unknown" when torch does not say
            name = backend_map(config).get(device.type, "") if config != "undefined" else "unknown"
            transports[device.type] = name
        return name

    def _filled_send_buffer(self, block: int, frame: Optional[Frame]) -> "torch.Tensor":
        """A CPU uint8 tensor of ``block`` bytes: the frame, then zeros (:func:`write_block`)."""
        send = _empty(block)
        if block:
            write_block(_byte_view(send), frame)
        return send

    def _all_gather_blocks(
        self, call: Call, block: int, sizes: Sequence[int], frame: Frame, what: str
    ) -> List[memoryview]:
        """All-gather one ``block``-byte buffer per rank; return views of ``sizes[r]`` bytes of each.

        With gloo and NCCL the all-gather runs in place: this rank's block of
        the receive tensor is its send buffer, so the frame is written once,
        into memory that is kept, and no separate send tensor is allocated.
        """

        dist = self._dist()
        rank, ws = self.rank, self.world_size
        device = self._device()
        recv = _empty(block * ws, device)
        mine = recv[rank * block : (rank + 1) * block]
        if self._transport_name(device) in _IN_PLACE_ALL_GATHER:
            if device.type == "cpu":
                write_block(_byte_view(mine), frame)
            else:
                mine.copy_(self._filled_send_buffer(block, frame))
            send = mine
        else:  # e.g. MPI, which refuses aliased send and receive buffers
            send = self._to_device(self._filled_send_buffer(block, frame), device)
        gather_into = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        work = gather_into(recv, send, group=self.group, async_op=True)
        call.keep(recv, send)
        self._wait(call, work, what)
        return split_blocks(_byte_view(self._to_host(recv)), block, sizes)

    def _send_chunks(
        self, call: Call, frame: Frame, start: Callable[["torch.Tensor"], Any], what: str, p2p: bool = False
    ) -> None:
        """Send ``frame`` as :func:`_chunks`, each through ``start(tensor) -> work`` (CPU only).

        A chunk inside one of the frame's segments is sent from the frame's own
        memory (:func:`_direct_chunks`); the others (the header) go through two
        staging buffers of ``CHUNK_BYTES``, the copy of one overlapping the
        transfer of the other. A frame of one chunk is written into one buffer.
        """
        chunks = _chunks(frame.nbytes)
        if len(chunks) == 1:
            whole = self._filled_send_buffer(frame.nbytes, frame)
            works = [start(whole[off : off + n]) for off, n in chunks]
            call.keep(whole)
            for work in works:
                self._wait(call, work, what, p2p)
            return
        stages: List[Optional[torch.Tensor]] = [None, None]
        pending: List[Any] = [None, None]
        direct: List[Tuple[Any, torch.Tensor]] = []  # (work, tensor): the tensor lives until the work is done
        k = 0
        for (off, n), tensor in zip(chunks, _direct_chunks(frame, chunks)):
            if tensor is not None:
                direct.append((start(tensor), tensor))
                call.keep(tensor)
                continue
            if pending[k] is not None:  # the buffer's previous chunk must be on its way before reuse
                self._wait(call, pending[k], what, p2p)
            stage = stages[k]
            if stage is None:
                stage = stages[k] = _empty(CHUNK_BYTES)
                call.keep(stage)
            buf = stage[:n]
            frame.write_range(_byte_view(buf), off)
            pending[k] = start(buf)
            k ^= 1
        for work in pending + [work for work, _ in direct]:
            if work is not None:
                self._wait(call, work, what, p2p)

    def _exchange_slots(self, call: Call, slot: memoryview) -> Sequence[memoryview]:
        """All-gather ``SLOT_SIZE`` bytes per rank (the headers of a collective)."""
        return self._all_gather_blocks(
            call, SLOT_SIZE, [SLOT_SIZE] * call.world_size, slot_frame(slot), "the header all-gather"
        )

    def _all_gather_bytes(self, call: Call) -> Sequence[memoryview]:
        """All-gather blocks padded to :func:`padded_block_size`; views of exactly ``sizes[r]`` bytes."""
        sizes, frame = call.sizes, sent_frame(call)
        block = padded_block_size(sizes)
        if block == 0:
            return [memoryview(b"") for _ in sizes]
        if block >= CHUNKED_MIN:
            device = self._device()
            if device.type == "cpu" and self._transport_name(device) == "gloo":
                return self._all_gather_by_broadcasts(call, sizes, frame)
        return self._all_gather_blocks(call, block, sizes, frame, "the payload all-gather")

    def _all_gather_by_broadcasts(self, call: Call, sizes: Sequence[int], frame: Frame) -> Sequence[memoryview]:
        """All-gather on gloo as one chunked broadcast per rank, in place in one receive buffer.

        Each rank's block lands straight in its place (no padding to the largest;
        gloo's all-gather receives into a temporary and copies out of it), and a
        rank sends its own frame from the frame's memory where it can
        (:func:`_direct_chunks`); it writes its own block while the others arrive.
        """
        dist = self._dist()
        rank = self.rank
        what = "the payload all-gather"
        offsets, total = packed_offsets(sizes)
        recv = _empty(total)
        call.keep(recv)
        view = _byte_view(recv)
        own, base = int(sizes[rank]), offsets[rank]
        own_chunks = _chunks(own)
        direct = _direct_chunks(frame, own_chunks)
        works: List[Tuple[int, Any, Any]] = []  # (rank, work, tensor): the tensor lives until the work is done
        for r, n in enumerate(sizes):
            if not n:
                continue
            root = self._global_rank(r)
            if r == rank:
                for (off, length), tensor in zip(own_chunks, direct):
                    if tensor is None:
                        tensor = recv[base + off : base + off + length]
                        # straddles the frame's segments: staged in this rank's block
                        frame.write_range(view[base + off : base + off + length], off)
                    works.append((r, dist.broadcast(tensor, src=root, group=self.group, async_op=True), tensor))
            else:
                for off, length in _chunks(int(n)):
                    tensor = recv[offsets[r] + off : offsets[r] + off + length]
                    works.append((r, dist.broadcast(tensor, src=root, group=self.group, async_op=True), tensor))
        for (off, length), tensor in zip(own_chunks, direct):
            if tensor is not None:  # the rest of this rank's block, while the others' arrive
                frame.write_range(view[base + off : base + off + length], off)
        call.keep([tensor for _, _, tensor in works])
        for r, work, _ in works:
            self._wait(call, work, f"{what} (rank {r}'s block)")
        return blocks_at(view, offsets, sizes)

    def _gather_bytes(self, call: Call) -> Optional[Sequence[memoryview]]:
        """Gather every rank's block to ``call.root`` (group rank); only the root allocates the receive buffer.

        On gloo (CPU) the blocks travel point to point, each straight into a
        receive buffer of its own on the root (gloo's ``gather`` receives into a
        temporary and copies out of it; one buffer per rank is freed with what
        was decoded over it); elsewhere one ``dist.gather`` of
        blocks padded to :func:`padded_block_size`.
        """
        sizes, frame, dst = call.sizes, sent_frame(call), call.root
        if padded_block_size(sizes) == 0:
            return [memoryview(b"") for _ in sizes] if self.rank == dst else None
        device = self._device()
        if device.type == "cpu" and self._transport_name(device) == "gloo":
            return self._gather_point_to_point(call, sizes, frame, dst)
        return self._gather_collective(call, sizes, frame, dst, device)

    def _gather_point_to_point(
        self, call: Call, sizes: Sequence[int], frame: Frame, dst: int
    ) -> Optional[Sequence[memoryview]]:
        dist = self._dist()
        rank = self.rank
        if rank != dst:
            if frame.nbytes:
                peer = self._global_rank(dst)
                self._send_chunks(
                    call,
                    frame,
                    lambda t: dist.isend(t, dst=peer, group=self.group, tag=_GATHER_TAG),
                    f"sending this rank's payload to rank {dst} (gather)",
                    p2p=True,
                )
            return None
        # one releasable receive buffer per peer: the per-sample path gives its pages back as it copies the rows
        # out, and frees it with what was decoded over it (rank 0 never holds every block and the output at once)
        recvs = [_empty(int(n), release_ok=r != rank) for r, n in enumerate(sizes)]
        call.keep(*recvs)
        works = []
        for r, n in enumerate(sizes):
            if r != rank and n:
                peer = self._global_rank(r)
                for off, length in _chunks(int(n)):  # the sender's chunks, in order (same peer and tag: FIFO)
                    part = recvs[r][off : off + length]
                    works.append((r, dist.irecv(part, src=peer, group=self.group, tag=_GATHER_TAG)))
        frame.write_into(_byte_view(recvs[rank])[: frame.nbytes])  # while the peers' blocks arrive
        for r, work in works:
            self._wait(call, work, f"receiving rank {r}'s payload (gather)", p2p=True)
        del works
        return [_byte_view(t)[: int(n)] for t, n in zip(recvs, sizes)]

    def _gather_collective(
        self, call: Call, sizes: Sequence[int], frame: Frame, dst: int, device: "torch.device"
    ) -> Optional[Sequence[memoryview]]:
        dist = self._dist()
        rank, ws = self.rank, self.world_size
        block = padded_block_size(sizes)
        send = self._to_device(self._filled_send_buffer(block, frame), device)
        recv: Optional[torch.Tensor] = None
        gather_list: Optional[List[torch.Tensor]] = None
        if rank == dst:
            recv = _empty(block * ws, device)
            gather_list = [recv[r * block : (r + 1) * block] for r in range(ws)]
        work = dist.gather(send, gather_list, dst=self._global_rank(dst), group=self.group, async_op=True)
        call.keep(send, recv)
        self._wait(call, work, "the payload gather")
        if recv is None:
            return None
        return split_blocks(_byte_view(self._to_host(recv)), block, sizes)

    def _broadcast_bytes(self, call: Call) -> Optional[memoryview]:
        """Broadcast exactly ``call.sizes[root]`` bytes from ``call.root`` (group rank), in place in one buffer."""
        dist = self._dist()
        rank, src = self.rank, call.root
        size = int(call.sizes[src])
        frame = sent_frame(call) if rank == src else None
        if size == 0:
            return None if rank == src else memoryview(b"")
        device = self._device()
        root = self._global_rank(src)
        if device.type == "cpu" and size >= CHUNKED_MIN:  # chunk by chunk (see _chunks); every rank, same chunks

            def bcast(t: "torch.Tensor") -> Any:
                return dist.broadcast(t, src=root, group=self.group, async_op=True)

            if frame is not None:
                self._send_chunks(call, frame, bcast, "the payload broadcast")
                return None
            buf = _empty(size)
            call.keep(buf)
            works = [bcast(buf[off : off + n]) for off, n in _chunks(size)]
            for work in works:
                self._wait(call, work, "the payload broadcast")
            return _byte_view(buf)
        if frame is not None:
            buf = self._to_device(self._filled_send_buffer(size, frame), device)
        else:
            buf = _empty(size, device)
        work = dist.broadcast(buf, src=root, group=self.group, async_op=True)
        call.keep(buf)
        self._wait(call, work, "the payload broadcast")
        if rank == src:
            return None
        return _byte_view(self._to_host(buf))

    # -- native reductions (arrays too large for the slot; see FramedDistBackend.all_reduce) ---------------

    def _reduction_tensor(self, call: Call, array: "np.ndarray") -> "torch.Tensor":
        """``array`` as a tensor the in-place reduction may overwrite: one copy, on the staging device."""
        import torch

        device = self._device()
        if device.type == "cpu":
            tensor = torch.from_numpy(array.copy())
        else:  # straight from the caller's memory to the device
            tensor = torch.as_tensor(array, device=device)
        call.keep(tensor)
        return tensor

    def _all_reduce_array(self, call: Call, array: "np.ndarray", op: str) -> "np.ndarray":
        """Native all-reduce: ``dist.all_reduce`` on the group (``async_op=True``, polled through the core's wait).

        gloo's ring all-reduce and NCCL's all-reduce reduce each element once
        and hand every rank the same bytes, so a float result has the same
        bits on every rank (the summation order may differ from the core's
        rank order, so not necessarily the same bits as an inline reduction).
        """
        dist = self._dist()
        tensor = self._reduction_tensor(call, array)
        work = dist.all_reduce(tensor, op=_reduce_op(dist, op), group=self.group, async_op=True)
        self._wait(call, work, "the native all-reduce")
        return self._to_host(tensor).numpy()

    def _reduce_array(self, call: Call, array: "np.ndarray", op: str) -> "Optional[np.ndarray]":
        """Native reduce: ``dist.reduce`` to ``call.root`` on the group (``async_op=True``, polled)."""
        dist = self._dist()
        tensor = self._reduction_tensor(call, array)
        work = dist.reduce(
            tensor, dst=self._global_rank(call.root), op=_reduce_op(dist, op), group=self.group, async_op=True
        )
        self._wait(call, work, "the native reduce")
        return self._to_host(tensor).numpy() if call.rank == call.root else None


def _reduce_op(dist: Any, op: str) -> Any:
    """torch.distributed's ReduceOp for an mmeval op name (``'sum'``, ``'min'``, ``'max'``)."""
    return {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op]


class TorchCPUDist(_TorchDist):
    """mmeval backend over torch.distributed with CPU tensors (gloo, mpi, or the CPU half of a mixed group).

    Args:
        group: the process group to run on; ``None`` (default) is the default
            group. :attr:`rank` and :attr:`world_size` are then the group's,
            and ``src`` / ``dst`` of the collectives are ranks *in the group*.
            Every member of the group must make the same calls; processes
            outside it must not use the backend (``rank`` raises).
        timeout: seconds a collective may take before every waiting rank
            raises (else ``MMEVAL_TORCH_CPU_TIMEOUT``, ``MMEVAL_TIMEOUT``, or
            1800 s).
        codec: ``'pickle'`` (default) or ``'safe'`` (see
            :class:`~mmeval.core.dist_backends.FramedDistBackend`).

    :meth:`detect` is true when torch.distributed is already imported and
    initialized with a default group that has a CPU backend (``gloo``,
    ``mpi``, ``cpu:gloo,cuda:nccl``, ...).
    """

    name = "torch_cpu"
    priority = 30  # auto-selection: after torch_cuda, before Horovod and MPI

    @classmethod
    def availability(cls) -> Optional[str]:
        """``None`` when torch is installed (found without importing it), else what to install."""
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            return "torch is not installed: `pip install torch`"
        return None

    @classmethod
    def detect(cls) -> bool:
        """Whether an initialized torch.distributed default group can move CPU tensors (never imports torch)."""
        if not torch_dist_initialized():
            return False
        return "cpu" in default_backend_map()


class TorchCUDADist(_TorchDist):
    """mmeval backend over torch.distributed with CUDA tensors (NCCL).

    Bytes are staged on this rank's own device: the group's bound device
    (``init_process_group(device_id=...)``) if any, else
    ``torch.cuda.current_device()`` -- call ``torch.cuda.set_device(local_rank)``
    first, as the usual launchers' scripts do. Received bytes are copied to
    the CPU once per collective, and objects are rebuilt there (CUDA tensors
    inside objects go back to the current device).

    Args:
        group: the process group to run on (see :class:`TorchCPUDist`).
        timeout: seconds per collective (else ``MMEVAL_TORCH_CUDA_TIMEOUT``,
            ``MMEVAL_TIMEOUT``, or 1800 s).
        codec: ``'pickle'`` (default) or ``'safe'``.

    :meth:`detect` is true when torch.distributed is already imported and
    initialized with NCCL for CUDA and CUDA is available; auto-selection
    prefers it to ``torch_cpu`` then.
    """

    name = "torch_cuda"
    priority = 40  # auto-selection: before torch_cpu (it detects only an NCCL group with CUDA present)
    _warned_local_rank: ClassVar[bool] = False

    @classmethod
    def availability(cls) -> Optional[str]:
        """``None`` when torch imports and ``torch.cuda.is_available()``, else why not (imports torch)."""
        try:
            import torch
        except Exception as exc:
            return f"torch does not import ({type(exc).__name__}: {exc}): install torch with CUDA support"
        if not torch.cuda.is_available():
            build = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            return (
                f"CUDA is not available in this process (torch {torch.__version__}, {build}; no usable GPU or "
                "driver): use torch_cpu (gloo) instead"
            )
        return None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As :class:`TorchCPUDist`, but refuses at once, on every rank, where CUDA is not available."""
        reason = type(self).availability()
        if reason is not None:
            raise RuntimeError(f"{self.name}: {reason}")
        super().__init__(*args, **kwargs)

    @classmethod
    def detect(cls) -> bool:
        """Whether an initialized torch.distributed default group uses NCCL and CUDA is available."""
        if not torch_dist_initialized():
            return False
        if "nccl" not in default_backend_map().get("cuda", ""):
            return False
        torch_mod = sys.modules.get("torch")
        return bool(torch_mod is not None and torch_mod.cuda.is_available())

    def _device(self) -> "torch.device":
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError(f"{self.name}: CUDA is not available in this process; use torch_cpu")
        if self._transport_name(torch.device("cuda")) == "":
            raise RuntimeError(f"{self.name}: the process group has no backend for CUDA tensors; use torch_cpu")
        bound = getattr(self._process_group(), "bound_device_id", None)
        if bound is not None and bound.type == "cuda" and bound.index is not None:
            return torch.device("cuda", bound.index)
        index = torch.cuda.current_device()
        local = os.environ.get("LOCAL_RANK", "")
        if (
            not TorchCUDADist._warned_local_rank
            and local.isdigit()
            and int(local) != index
            and int(local) < torch.cuda.device_count()
        ):
            TorchCUDADist._warned_local_rank = True
            logger.warning(
                "%s: staging on cuda:%d (torch.cuda.current_device()) while LOCAL_RANK=%s; call "
                "torch.cuda.set_device(local_rank) before evaluating if that is not intended",
                self.name,
                index,
                local,
            )
        return torch.device("cuda", index)

    def _wait(self, call: Call, work: Any, what: str) -> None:
        """Poll the NCCL work through the core's wait until it completes or the deadline passes.

        NCCL waits are stream-ordered; polling ``is_completed()`` is what bounds
        the wait on the host. ``wait()`` afterwards re-raises a failed
        collective's error and orders the current stream after it.
        """
        try:
            call.wait_until(work.is_completed, what, busy=0.0, spin=0.0, min_sleep=1e-5, max_sleep=1e-3)
        except BaseException:
            keep_until_exit(self._process_group())
            raise
        work.wait()
