"""The ``mpi4py`` backend: mmeval's frame protocol over non-blocking MPI collectives.

Nothing here imports ``mpi4py.MPI`` (whose import runs ``MPI_Init``) before a
collective, ``rank`` or ``world_size`` needs the communicator; that first
import is bounded by the backend's timeout. How each primitive moves its bytes,
large counts, the buffer pool and the settings: plugins/mpi_backend/README.md.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple, TypeVar

import numpy as np

from mmeval.core.dist_backends import SLOT_SIZE, Call, Frame, FramedDistBackend, group_state, native_pairs
from mmeval.core.dist_backends.plugin_kit import (
    GroupToken,
    blocks_at,
    choice,
    flag,
    mebibytes,
    read_setting,
    releasable,
    sent_frame,
    split_blocks,
    start_up_watchdog,
    write_block,
)

from . import notice
from .buffers import DEFAULT_CACHE_BYTES, BufferPool, aligned_empty
from .launcher import launch_info
from .layout import INT_MAX, Layout, plan_block, plan_blocks

if TYPE_CHECKING:  # pragma: no cover
    from mpi4py import MPI

__all__ = ["MPI4PyDist", "LARGE_COUNT_MODES"]

#: Values of ``MMEVAL_MPI4PY_LARGE_COUNT``: ``auto`` (MPI-4 large counts when
#: the library has them, else a derived datatype), ``native``, ``datatype``.
LARGE_COUNT_MODES = ("auto", "native", "datatype")

_T = TypeVar("_T")


# Large transport buffers reused between collectives (see mmeval_mpi4py.buffers).
_POOL = BufferPool()


_TOKEN_LOCK = threading.Lock()
_KEYVAL: Optional[int] = None


def _mpi(timeout: float = math.inf) -> Any:
    """``mpi4py.MPI``, imported on first use (this runs ``MPI_Init`` unless mpi4py.rc says not to).

    ``MPI_Init`` waits for every rank of the job and cannot be interrupted (it
    holds the interpreter): the first import runs under a watchdog that ends
    this process, with a message on stderr, when it has not finished within
    ``timeout`` seconds -- a peer that exited or never reaches its first
    collective would otherwise hang this rank forever.
    """
    mpi = _mpi_if_imported()
    if mpi is not None:
        return mpi
    rank = next((os.environ[v] for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK") if v in os.environ), "?")
    size = launch_info().world_size
    message = (
        f"mmeval mpi4py: rank {rank}{f' of {size}' if size else ''}: starting MPI (MPI_Init, run when the backend "
        f"is first used) did not finish within {timeout:g}s: a peer rank exited or has not reached its first "
        "collective. MPI_Init cannot be interrupted, so this process is ended. Import mpi4py.MPI at the start of "
        "the script on every rank, or set the limit with timeout=... / MMEVAL_MPI4PY_TIMEOUT / MMEVAL_TIMEOUT."
    )
    with start_up_watchdog(timeout, message):
        from mpi4py import MPI
    return MPI


def _mpi_if_imported() -> Any:
    """``mpi4py.MPI`` if something already imported it, else ``None`` (imports nothing)."""
    return sys.modules.get("mpi4py.MPI")


def _mpi_running(mpi: Any) -> bool:
    try:
        return bool(mpi.Is_initialized()) and not bool(mpi.Is_finalized())
    except Exception:  # a half-imported or broken module
        return False


class MPI4PyDist(FramedDistBackend):
    """Distributed communication over MPI with mpi4py, for any MPI library (MPICH, Open MPI, Intel MPI, ...).

    Args:
        comm: the communicator whose ranks take part (an ``mpi4py.MPI.Comm``
            intracommunicator, e.g. from ``COMM_WORLD.Split``). ``None``
            (default) means ``MPI.COMM_WORLD``, looked up when first needed, so
            building the backend does not initialize MPI. ``rank`` and
            ``world_size`` are this communicator's.
        timeout: seconds a collective may take before every rank still alive
            raises :class:`~mmeval.core.errors.CollectiveTimeoutError`; default
            ``MMEVAL_MPI4PY_TIMEOUT``, else ``MMEVAL_TIMEOUT``, else 1800.
        codec: ``'pickle'`` (default) or ``'safe'`` (see the core).

    Contract:

    * every rank of ``comm`` calls the same collectives in the same order;
    * :attr:`is_initialized` is true when MPI is running (``mpi4py.MPI``
      imported, ``MPI_Init`` done, not finalized) or, before MPI is imported,
      when the launcher's environment says the job has more than one process;
    * after a timeout or an MPI error the communicator is unusable: later
      collectives on it raise at once (a request left pending is kept, with
      its buffers, until the process exits), and at exit the process calls
      ``MPI_Abort`` rather than ``MPI_Finalize``, which could wait forever for
      the missing peer (``MMEVAL_MPI4PY_ABORT_AT_EXIT=0`` turns this off).

    Settings from the environment: ``MMEVAL_MPI4PY_LARGE_COUNT`` (``auto`` |
    ``native`` | ``datatype``, the same on every rank) chooses how blocks over
    ``INT_MAX`` bytes are counted; ``MMEVAL_MPI4PY_BUFFER_CACHE_MB`` (default
    256, 0 turns it off) bounds the large buffers kept for reuse.
    """

    name = "mpi4py"
    new_group_hint = "comm.Dup() on every rank of comm"
    #: reduced natively at any size (int16 sums came out wrong under Open MPI 5.0.11 through mpi4py 4.1.2: the
    #: core widens the other integers to int32 / int64 and back, exact); float min / max take the byte path
    native_reductions = native_pairs(ints=("uint8", "int32", "int64"), float_sums=("float32", "float64"))
    priority = 10  # auto-selection: last of the in-tree backends (torch or Horovod may run under mpiexec)

    @classmethod
    def availability(cls) -> Optional[str]:
        """``None`` when mpi4py and its ``MPI`` extension are installed; found without importing ``mpi4py.MPI``.

        Never initializes MPI (``MPI_Init`` runs when ``mpi4py.MPI`` is imported).
        """
        import importlib.util

        try:
            found = (
                importlib.util.find_spec("mpi4py") is not None and importlib.util.find_spec("mpi4py.MPI") is not None
            )
        except (ImportError, ValueError) as exc:
            return f"mpi4py cannot be found ({type(exc).__name__}: {exc}): `pip install mpi4py mpich`"
        if not found:
            return "mpi4py is not installed: `pip install mpi4py` and an MPI (`pip install mpich`, or your cluster's)"
        return None

    #: Seconds of ``MPI_Test`` alone before a wait starts yielding: on a loaded machine ``sched_yield``
    #: hands the core to another process, which slows small collectives (docs/benchmarks.md).
    busy_seconds: float = 100e-6
    #: Seconds of ``MPI_Test`` + ``sched_yield`` (from the start of the wait) before it starts sleeping.
    spin_seconds: float = 0.002
    #: First and largest sleep between two ``MPI_Test`` calls once spinning is over.
    min_sleep: float = 20e-6
    max_sleep: float = 0.001
    #: Largest MPI count; tests lower it to run the derived-datatype path on small blocks.
    max_count: int = INT_MAX

    def __init__(
        self, comm: Optional[MPI.Comm] = None, *, timeout: Optional[float] = None, codec: Optional[str] = None
    ) -> None:
        super().__init__(timeout=timeout, codec=codec)
        if comm is not None:
            if not comm:  # MPI.COMM_NULL, e.g. from Split(MPI.UNDEFINED)
                raise ValueError(f"{self.name}: comm is MPI.COMM_NULL; this process is not in the group")
            is_inter = getattr(comm, "Is_inter", None)
            if is_inter is not None and is_inter():
                raise TypeError(f"{self.name}: comm must be an intracommunicator, got an intercommunicator")
        self._comm: Optional[MPI.Comm] = comm
        self.large_count: str = read_setting(
            self.name, "LARGE_COUNT", choice(*LARGE_COUNT_MODES), "auto", f"one of {LARGE_COUNT_MODES}"
        )
        #: Bytes of large transport buffers kept for reuse between collectives (0: none).
        self.buffer_cache_bytes: int = read_setting(
            self.name, "BUFFER_CACHE_MB", mebibytes, DEFAULT_CACHE_BYTES, "a number of MiB"
        )
        #: Call ``MPI_Abort`` at exit after a collective timed out or failed (see :meth:`_guarded`).
        self.abort_at_exit: bool = read_setting(self.name, "ABORT_AT_EXIT", flag, True, "1 or 0")
        #: Tell the peers when this process leaves, and raise when a peer did (see mmeval_mpi4py.notice).
        self.leave_notice: bool = read_setting(self.name, "LEAVE_NOTICE", flag, True, "1 or 0")
        if self.leave_notice:
            notice.watch(comm, _notice_state)
        self._big_count: Optional[bool] = None
        self._types: Dict[int, Any] = {}

    # -- runtime state -------------------------------------------------------

    @classmethod
    def detect(cls) -> bool:
        """True when this process is one of several started by an MPI launcher.

        Reads the launcher's environment (:mod:`mmeval_mpi4py.launcher`), or
        asks an MPI that is already initialized; never imports ``mpi4py.MPI``.
        """
        info = launch_info()
        if info.world_size is not None and info.world_size > 1:
            return True
        mpi = _mpi_if_imported()
        if mpi is not None and _mpi_running(mpi):
            try:
                return int(mpi.COMM_WORLD.Get_size()) > 1
            except Exception:
                return False
        return False

    @property
    def is_initialized(self) -> bool:
        """Whether MPI runs (or, before ``mpi4py.MPI`` is imported, whether a launcher started >1 processes)."""
        mpi = _mpi_if_imported()
        if mpi is not None:
            return _mpi_running(mpi)
        size = launch_info().world_size
        return size is not None and size > 1

    def _world_of_one(self) -> bool:
        # No MPI imported, no communicator given, and no launcher with peers:
        # answer rank 0 of 1 without running MPI_Init for nothing.
        if self._comm is not None or _mpi_if_imported() is not None:
            return False
        size = launch_info().world_size
        return size is None or size <= 1

    @property
    def comm(self) -> MPI.Comm:
        """The communicator (``MPI.COMM_WORLD`` unless one was given); imports mpi4py.MPI if needed."""
        if self._comm is None:
            mpi = _mpi(self.timeout)
            if not _mpi_running(mpi):
                raise RuntimeError(
                    f"{self.name}: MPI is not initialized (or already finalized): call MPI.Init() "
                    "(mpi4py.rc.initialize is False?) before using the backend"
                )
            self._comm = mpi.COMM_WORLD
        return self._comm

    @property
    def rank(self) -> int:
        """Rank of this process in :attr:`comm`."""
        if self._world_of_one():
            return 0
        return int(self.comm.Get_rank())

    @property
    def world_size(self) -> int:
        """Number of processes in :attr:`comm`."""
        if self._world_of_one():
            return 1
        return int(self.comm.Get_size())

    def _sequence_key(self) -> Hashable:
        """One key per communicator, shared by every backend object over it, gone when it is freed.

        The key is a token cached on the communicator as an MPI attribute: MPI
        frees it with the communicator and does not copy it to a ``Dup()``. The
        handle itself (``py2f()``) would not do: MPI hands a freed
        communicator's handle to the next one, which then inherited the old
        group's sequence and poison.
        """
        return _token(self.comm)

    # -- large counts ----------------------------------------------------------

    def _uses_big_count(self) -> bool:
        if self._big_count is None:
            if self.large_count == "native":
                self._big_count = True
            elif self.large_count == "datatype":
                self._big_count = False
            else:
                import mpi4py

                mpi = _mpi()
                major = int(str(mpi4py.__version__).split(".")[0])
                self._big_count = major >= 4 and tuple(mpi.Get_version()) >= (4, 0)
        return self._big_count

    def _datatype(self, unit: int) -> Any:
        mpi = _mpi()
        if unit == 1:
            return mpi.BYTE
        dtype = self._types.get(unit)
        if dtype is None:
            dtype = mpi.BYTE.Create_contiguous(unit).Commit()
            self._types[unit] = dtype
        return dtype

    def _buffer(self, nbytes: int, send_only: bool = False) -> np.ndarray:
        """A 64-byte aligned transport buffer, reused from the pool when a large one is free.

        A ``send_only`` buffer of more than :data:`SEND_KEEP_MAX` bytes is never
        pooled: it is freed as soon as its collective is done.
        """
        if send_only and nbytes > SEND_KEEP_MAX:
            return aligned_empty(nbytes)
        return _POOL.get(nbytes, self.buffer_cache_bytes)

    def _plan(self, sizes: Sequence[int]) -> Layout:
        return plan_blocks(sizes, big_count=self._uses_big_count(), max_count=self.max_count)

    # -- waiting -------------------------------------------------------------

    def _wait(self, call: Call, request: Any, keep: Tuple[Any, ...], what: str) -> None:
        """Poll ``request`` with ``MPI_Test`` through the core's wait (deadline, Ctrl-C, backoff).

        ``keep`` holds the buffers the request uses: if the call fails the core
        keeps them alive with the request for the life of the process, since
        MPI may still touch them when a late peer arrives.
        """
        call.keep(request, *keep)
        done: Callable[[], Any] = request.Test
        if self.leave_notice:
            listener = notice.Listener(self.comm, call.seq, _notice_state(self.comm)[1])
            done = lambda: request.Test() or listener()  # noqa: E731
        call.wait_until(
            done,
            what,
            busy=self.busy_seconds,
            spin=self.spin_seconds,
            min_sleep=self.min_sleep,
            max_sleep=self.max_sleep,
        )

    # -- transport primitives ------------------------------------------------

    def _guarded(self, call: Call, step: Callable[[], _T]) -> _T:
        """Run one transport step; if it fails, make the process ``MPI_Abort`` at exit (``abort_at_exit``).

        The core poisons the communicator (later collectives raise at once);
        ``MPI_Finalize`` at exit could wait forever for the peer that never
        came, so the process aborts instead. A failure of this rank's own (a
        ``MemoryError`` allocating a buffer, an MPI error, its timeout) is
        told to the peers at once (a leave notice on this communicator), so
        that they raise naming this rank and the step instead of waiting.
        """
        try:
            return step()
        except BaseException as exc:
            if self.abort_at_exit:
                _abort_at_exit()
            if self.leave_notice and not getattr(exc, "departed", False):
                why = f"{call.op} (collective #{call.seq}) failed on it while {call.doing}: {type(exc).__name__}: {exc}"
                notice.send_notices(why, linger=False, comm=self.comm)
            raise

    def _exchange_slots(self, call: Call, slot: memoryview) -> Sequence[memoryview]:
        """``Iallgather`` in place of one ``SLOT_SIZE`` block per rank."""
        return self._guarded(call, lambda: self._slots(call, slot))

    def _all_gather_bytes(self, call: Call) -> Sequence[memoryview]:
        """``Iallgatherv`` in place: this rank's frame is written at its own offset of the receive buffer."""
        return self._guarded(call, lambda: self._allgatherv(call, call.sizes, sent_frame(call)))

    def _gather_bytes(self, call: Call) -> Optional[Sequence[memoryview]]:
        """``Igatherv`` to ``call.root`` (in place there); other ranks send from a buffer of their own size."""
        return self._guarded(call, lambda: self._gatherv(call, call.sizes, sent_frame(call), call.root))

    def _broadcast_bytes(self, call: Call) -> Optional[memoryview]:
        """``Ibcast`` of the root's frame size from ``call.root``."""
        src = call.root
        frame = sent_frame(call) if call.rank == src else None
        return self._guarded(call, lambda: self._bcast(call, int(call.sizes[src]), frame, src))

    def _all_reduce_array(self, call: Call, array: np.ndarray, op: str) -> np.ndarray:
        """Native ``Iallreduce`` (SUM / MIN / MAX on the array's MPI datatype), polled with ``MPI_Test``.

        MPICH, Open MPI and Intel MPI hand every rank the same bits for the
        built-in ops (the MPI standard recommends it; the conformance suite
        checks it); the summation order is the library's, so a float sum may
        differ in its last bits from the core's rank-order (inline) reduction.
        """
        return self._guarded(call, lambda: self._native_reduce(call, array, op, -1))  # type: ignore[return-value]

    def _reduce_array(self, call: Call, array: np.ndarray, op: str) -> Optional[np.ndarray]:
        """Native ``Ireduce`` to ``call.root``, polled with ``MPI_Test``."""
        return self._guarded(call, lambda: self._native_reduce(call, array, op, call.root))

    def _native_reduce(self, call: Call, array: np.ndarray, op: str, root: int) -> Optional[np.ndarray]:
        mpi = _mpi()
        mpi_op = {"sum": mpi.SUM, "min": mpi.MIN, "max": mpi.MAX}[op]
        send = array  # C-contiguous already (the core's); MPI reads it in place, kept alive with the request
        out = np.empty_like(send) if root < 0 or call.rank == root else None
        if root < 0:
            req = self.comm.Iallreduce(send, out, op=mpi_op)
            what = "the native all-reduce (Iallreduce)"
        else:
            req = self.comm.Ireduce(send, out, op=mpi_op, root=root)
            what = f"the native reduce (Ireduce to rank {root})"
        self._wait(call, req, (send, out), what)
        return out

    def _slots(self, call: Call, slot: memoryview) -> Sequence[memoryview]:
        mpi = _mpi()
        comm = self.comm
        rank, ws = comm.Get_rank(), comm.Get_size()
        buf = aligned_empty(SLOT_SIZE * ws)
        view = buf.data
        view[rank * SLOT_SIZE : (rank + 1) * SLOT_SIZE] = slot
        req = comm.Iallgather(mpi.IN_PLACE, [buf, SLOT_SIZE, mpi.BYTE])
        self._wait(call, req, (buf,), "the slot exchange (Iallgather)")
        return split_blocks(view, SLOT_SIZE, [SLOT_SIZE] * ws)

    def _allgatherv(self, call: Call, sizes: Sequence[int], frame: Frame) -> Sequence[memoryview]:
        mpi = _mpi()
        comm = self.comm
        rank = comm.Get_rank()
        lay = self._plan(sizes)
        buf = self._buffer(lay.nbytes)
        view = buf.data
        start = lay.offsets[rank]
        write_block(view[start : start + lay.padded(rank)], frame)
        dtype = self._datatype(lay.unit)
        req = comm.Iallgatherv(mpi.IN_PLACE, [buf, (list(lay.counts), list(lay.displs)), dtype])
        self._wait(call, req, (buf, dtype), "the payloads (Iallgatherv)")
        return blocks_at(view, lay.offsets, sizes)

    def _gatherv(self, call: Call, sizes: Sequence[int], frame: Frame, dst: int) -> Optional[Sequence[memoryview]]:
        mpi = _mpi()
        comm = self.comm
        rank = comm.Get_rank()
        lay = self._plan(sizes)
        if lay.unit == 1 and max(sizes) >= SPLIT_MIN:
            return self._gatherv_split(call, lay, frame, dst)
        dtype = self._datatype(lay.unit)
        if rank == dst:
            buf = self._buffer(lay.nbytes)
            view = buf.data
            start = lay.offsets[rank]
            frame.write_into(view[start : start + sizes[rank]])
            req = comm.Igatherv(mpi.IN_PLACE, [buf, (list(lay.counts), list(lay.displs)), dtype], root=dst)
            self._wait(call, req, (buf, dtype), f"the payloads (Igatherv to rank {dst})")
            return blocks_at(view, lay.offsets, sizes)
        padded = lay.padded(rank)
        send = self._buffer(padded, send_only=True)
        write_block(send.data[:padded], frame)
        req = comm.Igatherv([send, lay.counts[rank], dtype], None, root=dst)
        self._wait(call, req, (send, dtype), f"the payload (Igatherv to rank {dst})")
        return None

    def _gatherv_split(self, call: Call, lay: Layout, frame: Frame, dst: int) -> Optional[Sequence[memoryview]]:
        """Point to point (tag :data:`GATHER_TAG`): each block's first :data:`SPLIT_HEAD` bytes, then the rest.

        ``dst`` receives every peer's block into a buffer of its own (not
        pooled), so that each block -- and what is decoded over it -- is freed
        as soon as its user drops it: the per-sample path assembles the results
        rank after rank, and rank 0 then never holds every received block and
        the whole output at once (docs/benchmarks.md). Every rank derives the
        split from the sizes. A sender sends the rest of its frame straight
        from the caller's memory when one segment holds it (see
        :meth:`_bcast_split`). Messages of one sender, tag and communicator do
        not overtake each other, so the head and the rest, and consecutive
        gathers, arrive in order.
        """
        mpi = _mpi()
        comm = self.comm
        rank = comm.Get_rank()
        sizes = lay.sizes
        heads = [min(n, SPLIT_HEAD) for n in sizes]
        if rank != dst:
            size, head = sizes[rank], heads[rank]
            if not size:
                return None
            head_buf, rest = self._split_send_buffers(frame, head, size)
            reqs = [comm.Isend([head_buf, head, mpi.BYTE], dest=dst, tag=GATHER_TAG)]
            if size > head:
                reqs.append(comm.Isend([rest, size - head, mpi.BYTE], dest=dst, tag=GATHER_TAG))
            for req in reqs:
                self._wait(call, req, (head_buf, rest), f"sending this rank's payload to rank {dst} (gather)")
            return None
        blocks: List[memoryview] = []
        pending: List[Tuple[int, Any, np.ndarray]] = []
        for r, (size, head) in enumerate(zip(sizes, heads)):
            buf = aligned_empty(size)
            blocks.append(buf.data[:size])
            if r == rank:
                frame.write_into(buf.data[:size])
            elif size:
                releasable(buf)  # the per-sample path gives its pages back as it copies them out
                pending.append((r, comm.Irecv([buf[:head], head, mpi.BYTE], source=r, tag=GATHER_TAG), buf))
                if size > head:
                    rest = buf[head:size]
                    pending.append((r, comm.Irecv([rest, size - head, mpi.BYTE], source=r, tag=GATHER_TAG), buf))
        for r, req, buf in pending:
            self._wait(call, req, (buf,), f"receiving rank {r}'s payload (gather to rank {dst})")
        return blocks

    def _bcast(self, call: Call, size: int, frame: Optional[Frame], src: int) -> Optional[memoryview]:
        if size >= SPLIT_MIN:
            return self._bcast_split(call, size, frame, src)
        comm = self.comm
        unit, count = plan_block(size, big_count=self._uses_big_count(), max_count=self.max_count)
        dtype = self._datatype(unit)
        buf = self._buffer(count * unit)
        view = buf.data
        if frame is not None:
            write_block(view[: count * unit], frame)
        req = comm.Ibcast([buf, count, dtype], root=src)
        self._wait(call, req, (buf, dtype), f"the payload (Ibcast from rank {src})")
        return None if frame is not None else view[:size]

    def _bcast_split(self, call: Call, size: int, frame: Optional[Frame], src: int) -> Optional[memoryview]:
        """Two ``Ibcast``: the frame's first :data:`SPLIT_HEAD` bytes, then the rest.

        Every rank derives the split from ``size``. The root sends the rest
        straight from the caller's memory when one segment of the frame (an
        out-of-band array, see ``Frame.segment_view``) holds all of it -- the usual
        case of a large array in a small container -- instead of copying the
        whole frame into a send buffer first; otherwise from a filled buffer.
        """
        comm = self.comm
        what = f"the payload (Ibcast from rank {src})"
        rest = size - SPLIT_HEAD
        unit, count = plan_block(rest, big_count=self._uses_big_count(), max_count=self.max_count)
        dtype = self._datatype(unit)
        padded = SPLIT_HEAD + count * unit
        buf: Optional[np.ndarray] = None
        if frame is not None:
            head_buf, tail_buf = self._split_send_buffers(frame, SPLIT_HEAD, padded)
        else:
            buf = self._buffer(padded)
            head_buf, tail_buf = buf[:SPLIT_HEAD], buf[SPLIT_HEAD:]
        reqs = [
            comm.Ibcast([head_buf, SPLIT_HEAD, _mpi().BYTE], root=src),
            comm.Ibcast([tail_buf, count, dtype], root=src),
        ]
        for req in reqs:
            self._wait(call, req, (head_buf, tail_buf, dtype), what)
        return None if buf is None else buf.data[:size]

    def _split_send_buffers(self, frame: Frame, head: int, padded: int) -> Tuple[np.ndarray, np.ndarray]:
        """The two send buffers of a split transfer: the frame's first ``head`` bytes, then the rest.

        The rest is the caller's memory itself when one segment of the frame
        holds it and it needs no padding (``padded == size``); only the head is
        copied then. Otherwise the frame is written into one buffer of
        ``padded`` bytes (zero-padded) and sent in two slices.
        """
        size = frame.nbytes
        rest = _segment_bytes(frame, head, size) if padded == size else None
        if rest is not None:
            head_buf = aligned_empty(head)
            frame.write_range(head_buf.data, 0)
            return head_buf, rest
        buf = self._buffer(padded, send_only=True)
        write_block(buf.data[:padded], frame)
        return buf[:head], buf[head:padded]


#: Broadcasts and gathers of a frame of at least this many bytes are split in two
#: (see ``MPI4PyDist._bcast_split`` and ``MPI4PyDist._gatherv_split``).
SPLIT_MIN = 1 << 20
#: Send-only staging buffers larger than this (a frame of several large arrays, copied whole for a gather or a
#: broadcast: what ``compute()`` sends from a non-root rank) are not kept in the buffer pool after their
#: collective. Receive buffers, and smaller send buffers, are pooled as before (``MMEVAL_MPI4PY_BUFFER_CACHE_MB``).
SEND_KEEP_MAX = 64 << 20
#: The point-to-point tag of a large gather's messages (``'MG'``; see ``MPI4PyDist._gatherv_split``), reserved on
#: the communicators given to the backend, as the leave notices' tag is.
GATHER_TAG = 0x4D47
#: Bytes of the first part of a split broadcast or gather: the frame's prefix, pickle stream and first
#: alignment gap usually fit, so the large array after them is sent from where it lies.
SPLIT_HEAD = 64 << 10


def _segment_bytes(frame: Frame, start: int, stop: int) -> Optional[np.ndarray]:
    """Bytes ``start:stop`` of ``frame`` as a read-only view of the caller's memory, if one segment holds them."""
    view = frame.segment_view(start, stop)
    return None if view is None else np.frombuffer(view, dtype=np.uint8)


def _token(comm: Any) -> GroupToken:
    """The token cached on ``comm`` (see ``MPI4PyDist._sequence_key``), made on first use."""
    global _KEYVAL
    with _TOKEN_LOCK:
        if _KEYVAL is None:
            _KEYVAL = comm.Create_keyval()  # (MPI.Comm's classmethod) no copy function: a Dup() gets no token
        token = comm.Get_attr(_KEYVAL)
        if token is None:
            token = GroupToken(f"communicator {int(comm.py2f()):#x}")
            comm.Set_attr(_KEYVAL, token)
    return token  # type: ignore[no-any-return]


def _notice_state(comm: Any) -> Tuple[int, Dict[int, Any]]:
    """Collectives this process completed on ``comm`` (a failed or unfinished one does not count), and the
    leave notices read from it (kept on the communicator's token; see mmeval_mpi4py.notice)."""
    token = _token(comm)
    state = group_state(token)
    done = state.seq - (1 if state.running is not None or state.poisoned is not None else 0)
    return done, token.state.setdefault("departed", {})


def _abort_at_exit() -> None:
    """Make mpi4py call ``MPI_Abort`` instead of ``MPI_Finalize`` when Python exits."""
    notice.aborting = True
    try:
        from mpi4py.run import set_abort_status

        set_abort_status(1)
    except Exception:  # older mpi4py: the private hook set_abort_status wraps
        mpi = _mpi_if_imported()
        setter = getattr(mpi, "_set_abort_status", None)
        if setter is not None:
            setter(1)
