"""Horovod backends for mmeval: ``torch_horovod`` and ``tf_horovod``.

Both are :class:`~mmeval.core.dist_backends.FramedDistBackend` subclasses:
mmeval's core does the framing, headers, error propagation and hooks; this
module supplies the four transport primitives over Horovod's collectives on
``uint8`` tensors (torch tensors for ``torch_horovod``, TensorFlow tensors for
``tf_horovod``):

============================  ==============================================
primitive                     Horovod operation
============================  ==============================================
``_exchange_slots``           ``allgather`` of one 4 KiB block per rank
``_all_gather_bytes``         ``allgather`` (first dims may differ per rank:
                              no padding)
``_gather_bytes``             ``alltoall`` with splits that send every byte
                              to ``dst`` only (Horovod has no gather; the
                              other ranks receive nothing)
``_broadcast_bytes``          ``broadcast``
============================  ==============================================

**Names.** Horovod matches a collective across ranks by its tensor *name*
(within a process set). Horovod's own ``broadcast_object`` names the op after
the object's type, so a root broadcasting a ``dict`` while the other ranks pass
``None`` waits forever. Here the header exchange that starts every collective
is named ``mmeval.<backend>.ps<id>[.<namespace>].slots`` (constant, so ranks
that disagree on the collective still meet there and the core raises
:class:`~mmeval.core.errors.CollectiveMismatchError` on every rank), and each
payload operation ``mmeval.<backend>.ps<id>[.<namespace>].<seq>.<op>``, where
``seq`` is the core's sequence number of the collective (:attr:`Call.seq`,
the same on every rank): unique per call, whatever the objects are.

**Waiting.** Waiting, deadlines, error translation and poisoning are the
core's (:mod:`mmeval.core.dist_backends.transport`). ``torch_horovod`` starts
each operation with ``hvd.*_async`` and polls ``hvd.poll(handle)`` through
:meth:`Call.wait_until` (``hvd.synchronize`` has no timeout, so it is called
only once the poll says done). ``tf_horovod``'s ops have no poll: each runs
once on a daemon helper thread that the caller waits for in slices through
:meth:`Call.wait`. Either way Ctrl-C interrupts a collective within a second,
and the timeout (``timeout=``, else ``MMEVAL_TORCH_HOROVOD_TIMEOUT`` /
``MMEVAL_TF_HOROVOD_TIMEOUT``, else ``MMEVAL_TIMEOUT``, else 1800 s; ``inf``
allowed: Horovod's negotiation waits without limit) is checked between slices.
An abandoned operation stays queued inside Horovod (it cannot be cancelled);
its buffers are kept alive (:meth:`Call.keep`), and the core poisons the group:
every later collective on it raises
:class:`~mmeval.core.errors.GroupPoisonedError`.

**Groups.** A group is a process set and a *namespace* (a string, default
``""``). Horovod cannot register a second process set with the ranks of an
existing one (``hvd.add_process_set`` refuses duplicates, and a removed set's
id is reused), so the new group to recover on after a failure is the same
process set under a new ``namespace=``: its operations have names that no
abandoned operation has, so they can never be matched with one. Backend
objects with the same process set and namespace share one sequence (and one
fate). A process set other than the global one may also be removed
(``hvd.remove_process_set``) and a new one added over the same ranks: the new
``ProcessSet`` object starts clean even when Horovod gives it the removed
set's id (the sequence is keyed by the object, not the id).
``process_set=`` takes a registered ``horovod.<framework>.ProcessSet``;
``rank`` / ``world_size`` are the process set's, and ``src`` / ``dst`` are
ranks *within* it (translated to the global ranks Horovod's ``broadcast``
expects).

Importing this module imports neither Horovod nor a framework: they are
imported when a backend object is first used.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType
from typing import Any, Callable, ClassVar, Hashable, List, Optional, Sequence, Tuple

import numpy as np

from mmeval.core.dist_backends import FramedDistBackend
from mmeval.core.dist_backends.transport import Call, PeerLost
from mmeval.core.errors import DistCommunicationError
from mmeval.core.wire import SLOT_SIZE

__all__ = ["TorchHorovodDist", "TFHorovodDist"]


def _split(data: memoryview, sizes: Sequence[int], backend: str, op: str) -> List[memoryview]:
    """Cut ``data`` into consecutive blocks of ``sizes`` bytes (rank order)."""
    total = sum(sizes)
    if data.nbytes != total:
        raise RuntimeError(
            f"{backend}: horovod {op} returned {data.nbytes} bytes, expected {total} (sizes {list(sizes)})"
        )
    out: List[memoryview] = []
    pos = 0
    for n in sizes:
        out.append(data[pos : pos + n])
        pos += n
    return out


def _byte_view(array: Any) -> memoryview:
    """A flat, writable-if-possible ``uint8`` memoryview of a numpy array."""
    mv = memoryview(array)
    if mv.ndim != 1 or mv.format != "B":
        mv = mv.cast("B")
    return mv


def _peer_lost(backend: str, op: str, name: str, exc: BaseException) -> BaseException:
    """Horovod's internal error (a peer died, Horovod shut down) as :class:`PeerLost`; others unchanged."""
    if type(exc).__name__ == "HorovodInternalError":
        return PeerLost(f"{backend}: horovod {op} {name!r} failed ({exc}); a peer rank has probably died or "
                        "Horovod was shut down")
    return exc


class _SetToken:
    """The key of one Horovod process set's collective sequence (kept on its ``ProcessSet`` object)."""

    __slots__ = ("name", "process_set_id", "namespace", "__weakref__")

    def __init__(self, name: str, process_set_id: int, namespace: str) -> None:
        self.name, self.process_set_id, self.namespace = name, process_set_id, namespace

    def __repr__(self) -> str:
        return f"<{self.name} process set {self.process_set_id} namespace {self.namespace!r}>"


_TOKEN_LOCK = threading.Lock()


class _HorovodDist(FramedDistBackend):
    """Common machinery of the Horovod backends (not registered itself).

    Subclasses name the Horovod framework module (:attr:`_module_name`) and
    implement :meth:`_new_buffer` and three operations on framework byte
    tensors, each waiting only through the :class:`Call` it is given:
    :meth:`_allgather`, :meth:`_alltoall` and :meth:`_broadcast`.

    Args:
        process_set: a registered ``horovod.<framework>.ProcessSet`` to limit
            every collective to (``None``: all Horovod processes).
        timeout: seconds before a collective gives up (see the module doc).
        codec: ``'pickle'`` (default) or ``'safe'`` (see
            :class:`~mmeval.core.dist_backends.FramedDistBackend`).
        namespace: names this backend's group within the process set (see
            the module doc): after a failure, build a backend with a new one,
            the same on every rank, to go on.
    """

    #: the Horovod framework module: ``'horovod.torch'`` / ``'horovod.tensorflow'``
    _module_name: ClassVar[str] = ""
    #: the extra to install, for error messages
    _extra: ClassVar[str] = ""
    new_group_hint = "the same process set under a new namespace=..., or a new process set"
    #: reduced natively at any size; the core converts other integers and takes float min / max by bytes
    native_reductions = frozenset([(d, op) for d in ("int8", "uint8", "int32", "int64") for op in ("sum", "min", "max")]
                                  + [("float32", "sum"), ("float64", "sum")])
    priority = 20  # auto-selection: after torch_cuda / torch_cpu, before mpi4py (Horovod may run under mpiexec)

    @classmethod
    def availability(cls) -> Optional[str]:
        """``None`` when ``horovod.<framework>`` imports (Horovod built for the framework), else why not."""
        try:
            importlib.import_module(cls._module_name)
        except Exception as exc:
            return (
                f"{cls._module_name} does not import ({type(exc).__name__}: {exc}): install the framework, build "
                f"Horovod for it and install mmeval-horovod[{cls._extra}] (plugins/horovod_backend/README.md; "
                f"tools/build_horovod.sh {cls._extra})"
            )
        return None

    def __init__(self, process_set: Any = None, *, timeout: Optional[float] = None,
                 codec: Optional[str] = None, namespace: str = "") -> None:
        super().__init__(timeout=timeout, codec=codec)
        if not isinstance(namespace, str) or not all(c.isalnum() or c in "_-" for c in namespace):
            raise ValueError(
                f"{self.name}: namespace={namespace!r} must be a string of letters, digits, '_' and '-' "
                "(it becomes part of Horovod's tensor names)"
            )
        self.process_set = process_set
        self.namespace = namespace
        self._hvd_module: Optional[ModuleType] = None

    # -- runtime -------------------------------------------------------------

    @property
    def hvd(self) -> ModuleType:
        """The Horovod framework module (imported on first use)."""
        mod = self._hvd_module
        if mod is None:
            try:
                mod = importlib.import_module(self._module_name)
            except ImportError as exc:
                raise ImportError(
                    f"{self.name}: cannot import {self._module_name} ({type(exc).__name__}: {exc}). Install "
                    f"mmeval-horovod[{self._extra}] and build Horovod for it (see the mmeval-horovod README: "
                    f"tools/build_horovod.sh {self._extra})."
                ) from exc
            self._hvd_module = mod
        return mod

    @classmethod
    def detect(cls) -> bool:
        """True when ``horovod.<framework>`` is already imported and ``hvd.init()`` has run.

        Never imports Horovod or a framework: looks in ``sys.modules`` only.
        """
        mod = sys.modules.get(cls._module_name)
        if mod is None:
            return False
        is_init = getattr(mod, "is_initialized", None)
        return bool(is_init()) if callable(is_init) else False

    @property
    def is_initialized(self) -> bool:
        """Horovod's own ``hvd.is_initialized()``."""
        return bool(self.hvd.is_initialized())

    def _ps(self) -> Any:
        """The process set every operation runs on (Horovod's global one by default)."""
        return self.hvd.global_process_set if self.process_set is None else self.process_set

    def _require_init(self, what: str) -> ModuleType:
        hvd = self.hvd
        if not hvd.is_initialized():
            raise RuntimeError(
                f"{self.name}: {what} needs Horovod to be initialized: call {self._module_name}.init() first "
                "(and launch with horovodrun)"
            )
        return hvd

    def _ps_query(self, what: str) -> int:
        hvd = self._require_init(what)
        if self.process_set is None:
            return int(hvd.rank() if what == "rank" else hvd.size())
        ps = self.process_set
        if getattr(ps, "process_set_id", None) is None:
            raise RuntimeError(
                f"{self.name}: {what}: {ps} is not registered with Horovod (pass it to hvd.init(process_sets=...) "
                "or hvd.add_process_set())"
            )
        try:
            value = ps.rank() if what == "rank" else ps.size()
        except ValueError as exc:  # Horovod: "Process is not part of provided process set." ...
            raise RuntimeError(f"{self.name}: {what} of {ps} (global rank {hvd.rank()}): {exc}") from exc
        if value is None or value < 0:
            raise RuntimeError(f"{self.name}: {what} of {ps} is unavailable (global rank {hvd.rank()})")
        return int(value)

    @property
    def rank(self) -> int:
        """This process's rank in the process set (Horovod's global rank without one)."""
        return self._ps_query("rank")

    @property
    def world_size(self) -> int:
        """The number of processes in the process set (all Horovod processes without one)."""
        return self._ps_query("world_size")

    def _process_set_id(self) -> int:
        return 0 if self.process_set is None else int(self.process_set.process_set_id)

    def _sequence_key(self) -> Hashable:
        """Every backend object over one process set and namespace shares one sequence and one fate.

        The global process set (id 0) is never removed: its key is a value. Any other set is keyed by a
        token kept on its ``ProcessSet`` object: Horovod hands a removed set's id to the next set it
        adds, and that set must not inherit the removed one's sequence or poisoning.
        """
        ps_id = self._process_set_id()
        ps = self.process_set
        tokens = None if ps is None or ps_id == 0 else getattr(ps, "__dict__", None)
        if tokens is None:
            return (self.name, ps_id, self.namespace)
        table = tokens.setdefault("_mmeval_sequence_tokens", {})
        with _TOKEN_LOCK:
            token = table.get((self.name, self.namespace, ps_id))
            if token is None:
                token = table[(self.name, self.namespace, ps_id)] = _SetToken(self.name, ps_id, self.namespace)
        return token

    def _global_rank(self, rank: int) -> int:
        """Horovod's ``broadcast`` takes a *global* root rank, even within a process set."""
        if self.process_set is None:
            return rank
        ranks = self.process_set.ranks
        if not ranks:
            raise RuntimeError(f"{self.name}: {self.process_set} lists no ranks")
        return int(sorted(ranks)[rank])

    def _prefix(self) -> str:
        scope = f".{self.namespace}" if self.namespace else ""
        return f"mmeval.{self.name}.ps{self._process_set_id()}{scope}"

    def _slot_name(self) -> str:
        """The header exchange's name: the same for every collective of this group.

        Horovod only needs names unique among operations in flight, so ranks
        that disagree on the collective -- one rank calling one more, or a
        different one -- still meet in the header exchange and every rank
        raises :class:`~mmeval.core.errors.CollectiveMismatchError` at once.
        Payload operations, which only run once the headers agree, take
        per-call names from :meth:`_op_name`.
        """
        return f"{self._prefix()}.slots"

    def _op_name(self, call: Call, op: str) -> str:
        """A tensor name identical on every rank and unique per collective: the core's sequence number."""
        return f"{self._prefix()}.{call.seq}.{op}"

    # -- framework operations (subclasses) -----------------------------------

    def _new_buffer(self, nbytes: int) -> Tuple[Any, memoryview]:
        """A framework send buffer of ``nbytes`` bytes and a writable byte view of it."""
        raise NotImplementedError

    def _allgather(self, call: Call, buf: Any, name: str) -> memoryview:
        """All-gather ``buf`` (first dims may differ per rank): the concatenation in rank order."""
        raise NotImplementedError

    def _alltoall(self, call: Call, buf: Any, splits: List[int], name: str) -> memoryview:
        """Send ``splits[r]`` consecutive bytes of ``buf`` to rank ``r``; return what this rank received."""
        raise NotImplementedError

    def _broadcast(self, call: Call, buf: Any, root: int, name: str) -> memoryview:
        """Broadcast ``buf`` from global rank ``root``; return the received bytes."""
        raise NotImplementedError

    # -- transport primitives ------------------------------------------------

    def _exchange_slots(self, call: Call, slot: memoryview) -> Sequence[memoryview]:
        buf, view = self._new_buffer(SLOT_SIZE)
        view[:SLOT_SIZE] = slot
        data = self._allgather(call, buf, self._slot_name())
        return _split(data, [SLOT_SIZE] * call.world_size, self.name, "allgather (headers)")

    def _filled(self, call: Call) -> Any:
        buf, view = self._new_buffer(call.size)
        call.fill(view)
        return buf

    def _all_gather_bytes(self, call: Call) -> Sequence[memoryview]:
        data = self._allgather(call, self._filled(call), self._op_name(call, "allgather"))
        return _split(data, call.sizes, self.name, "allgather")

    def _gather_bytes(self, call: Call) -> Optional[Sequence[memoryview]]:
        splits = [0] * call.world_size
        splits[call.root] = call.size
        data = self._alltoall(call, self._filled(call), splits, self._op_name(call, "gather"))
        if call.rank != call.root:
            return None
        return _split(data, call.sizes, self.name, "alltoall (gather)")

    def _reduce_array(self, call: Call, array: "np.ndarray", op: str) -> "Optional[np.ndarray]":
        """Native reduce: Horovod has no reduce to one rank, so an all-reduce kept on ``call.root`` only."""
        out = self._all_reduce_array(call, array, op)
        return out if call.rank == call.root else None

    def _broadcast_bytes(self, call: Call) -> Optional[memoryview]:
        src = call.root
        buf, view = self._new_buffer(call.sizes[src])
        if call.rank == src:
            call.fill(view)
        data = self._broadcast(call, buf, self._global_rank(src), self._op_name(call, "broadcast"))
        return None if call.rank == src else data


class TorchHorovodDist(_HorovodDist):
    """mmeval backend over ``horovod.torch`` (registered as ``torch_horovod``).

    Operations run with ``hvd.*_async``; the caller polls ``hvd.poll`` through
    the call's wait (Ctrl-C and the deadline are honoured) and collects the
    result with ``hvd.synchronize`` once it is done. Buffers are CPU
    ``torch.uint8`` tensors; the frame is written straight into the send
    tensor (one copy).

    Args:
        process_set: a registered ``horovod.torch.ProcessSet`` (``None``: all processes).
        timeout: seconds before a collective raises ``CollectiveTimeoutError`` on every waiting rank.
        codec: ``'pickle'`` (default) or ``'safe'``.
        namespace: the group's name within the process set (a new one after a failure).
    """

    name = "torch_horovod"
    _module_name = "horovod.torch"
    _extra = "torch"

    def _new_buffer(self, nbytes: int) -> Tuple[Any, memoryview]:
        import torch

        t = torch.empty(nbytes, dtype=torch.uint8)
        return t, _byte_view(t.numpy())

    def _wait(self, call: Call, handle: Any, keep: Tuple[Any, ...], op: str, name: str) -> memoryview:
        hvd = self.hvd
        call.keep(handle, *keep)  # Horovod may still read / write them if the wait is abandoned
        call.wait_until(lambda: hvd.poll(handle), f"horovod {op} {name!r}")
        try:
            out = hvd.synchronize(handle)  # done: returns at once
        except Exception as exc:
            raise _peer_lost(self.name, op, name, exc) from exc
        if isinstance(out, tuple):  # alltoall: (output, received_splits)
            out = out[0]
        return _byte_view(out.numpy())

    def _allgather(self, call: Call, buf: Any, name: str) -> memoryview:
        handle = self.hvd.allgather_async(buf, name=name, process_set=self._ps())
        return self._wait(call, handle, (buf,), "allgather", name)

    def _alltoall(self, call: Call, buf: Any, splits: List[int], name: str) -> memoryview:
        import torch

        split_t = torch.tensor(splits, dtype=torch.int32)
        handle = self.hvd.alltoall_async(buf, splits=split_t, name=name, process_set=self._ps())
        return self._wait(call, handle, (buf, split_t), "alltoall", name)

    def _broadcast(self, call: Call, buf: Any, root: int, name: str) -> memoryview:
        handle = self.hvd.broadcast_async_(buf, root_rank=root, name=name, process_set=self._ps())
        return self._wait(call, handle, (buf,), "broadcast", name)

    def _all_reduce_array(self, call: Call, array: "np.ndarray", op: str) -> "np.ndarray":
        """Native all-reduce: ``hvd.allreduce_async_`` (op Sum / Min / Max) on the process set, polled.

        Horovod hands every rank the same reduced bytes (so a float result has
        the same bits everywhere; the summation order is Horovod's, not the
        core's rank order).
        """
        import torch

        tensor = torch.from_numpy(array.copy())  # reduced in place: our own buffer, not the caller's
        name = self._op_name(call, "allreduce")
        handle = self.hvd.allreduce_async_(tensor, name=name, op=_hvd_op(self.hvd, op), process_set=self._ps())
        self._wait(call, handle, (tensor,), "allreduce", name)
        return tensor.numpy()


class TFHorovodDist(_HorovodDist):
    """mmeval backend over ``horovod.tensorflow`` (registered as ``tf_horovod``).

    Names: in eager mode TensorFlow drops the ``name=`` of an op (Horovod then
    sees one fixed name per op type, e.g. ``__wrapped__HorovodAllgather...``),
    so each operation is traced into a one-op ``tf.function`` graph, where the
    node -- and so the Horovod tensor -- gets its unique name. That costs a
    trace (about 10 ms) per operation, a few per collective.

    Waiting: TensorFlow's Horovod ops have no poll and no timed wait; each op
    runs once on a daemon helper thread, and the caller waits for that thread
    in slices through the call's wait. An abandoned op leaves its thread
    blocked inside Horovod until the op completes or Horovod shuts down (at the
    latest at exit); its buffers are kept alive.

    Buffers are numpy ``uint8`` arrays converted to ``tf.uint8`` tensors.

    Args:
        process_set: a registered ``horovod.tensorflow.ProcessSet`` (``None``: all processes).
        timeout: seconds before a collective raises ``CollectiveTimeoutError`` on every waiting rank.
        codec: ``'pickle'`` (default) or ``'safe'``.
        namespace: the group's name within the process set (a new one after a failure).
    """

    name = "tf_horovod"
    _module_name = "horovod.tensorflow"
    _extra = "tensorflow"

    def _new_buffer(self, nbytes: int) -> Tuple[Any, memoryview]:
        import numpy as np

        arr = np.empty(nbytes, dtype=np.uint8)
        return arr, _byte_view(arr)

    def _on_thread(self, call: Call, buf: Any, op: str, name: str, run: Callable[[], Any]) -> memoryview:
        """Run a TensorFlow op (no poll, no timed wait) through :meth:`Call.run_blocking`; its bytes as a view."""

        def target() -> Any:
            out = run()
            if isinstance(out, (tuple, list)):  # alltoall: (output, received_splits)
                out = out[0]
            arr = out.numpy()
            return arr if arr.flags.writeable else arr.copy()

        call.keep(buf)
        try:
            arr = call.run_blocking(target, f"horovod {op} {name!r}")
        except DistCommunicationError:  # the core's timeout: raised as it is
            raise
        except Exception as exc:
            raise _peer_lost(self.name, op, name, exc) from exc
        return _byte_view(arr)

    def _allgather(self, call: Call, buf: Any, name: str) -> memoryview:
        hvd, ps = self.hvd, self._ps()

        def op(x: Any) -> Any:
            return hvd.allgather(x, name=name, ignore_name_scope=True, process_set=ps)

        return self._on_thread(call, buf, "allgather", name, lambda: _graph_op(op, name)(_to_tf(buf)))

    def _alltoall(self, call: Call, buf: Any, splits: List[int], name: str) -> memoryview:
        hvd, ps = self.hvd, self._ps()

        def op(x: Any, s: Any) -> Any:
            return hvd.alltoall(x, splits=s, name=name, ignore_name_scope=True, process_set=ps)

        return self._on_thread(
            call, buf, "alltoall", name, lambda: _graph_op(op, name)(_to_tf(buf), _to_tf_int32(splits))
        )

    def _broadcast(self, call: Call, buf: Any, root: int, name: str) -> memoryview:
        hvd, ps = self.hvd, self._ps()

        def op(x: Any) -> Any:
            return hvd.broadcast(x, root, name=name, ignore_name_scope=True, process_set=ps)

        return self._on_thread(call, buf, "broadcast", name, lambda: _graph_op(op, name)(_to_tf(buf)))

    def _all_reduce_array(self, call: Call, array: "np.ndarray", op: str) -> "np.ndarray":
        """Native all-reduce: ``hvd.allreduce`` (op Sum / Min / Max) on the process set, on the helper thread.

        As for torch_horovod, every rank gets the same reduced bytes.
        """
        import tensorflow as tf

        hvd, ps, name, hvd_op = self.hvd, self._ps(), self._op_name(call, "allreduce"), _hvd_op(self.hvd, op)

        def reduce(x: Any) -> Any:
            return hvd.allreduce(x, op=hvd_op, name=name, ignore_name_scope=True, process_set=ps)

        source = array.copy()
        view = self._on_thread(call, source, "allreduce", name,
                               lambda: _graph_op(reduce, name)(tf.convert_to_tensor(source)))
        return np.frombuffer(view, dtype=array.dtype).reshape(array.shape).copy()


class _OneShot:
    """A callable wrapper without ``__code__``: TensorFlow keys its retracing statistics by the
    function's code object, so one-op graphs traced from a shared closure would log "excessive
    retracing" warnings; a fresh object per operation is traced exactly once."""

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self._fn = fn
        self.__name__ = "mmeval_horovod_op"
        self.__qualname__ = name

    def __call__(self, *args: Any) -> Any:
        return self._fn(*args)


def _hvd_op(hvd: ModuleType, op: str) -> Any:
    """Horovod's reduction op for an mmeval op name (``'sum'``, ``'min'``, ``'max'``)."""
    return {"sum": hvd.Sum, "min": hvd.Min, "max": hvd.Max}[op]


def _graph_op(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` as a one-op ``tf.function``: inside a graph, TensorFlow keeps the op's name."""
    import tensorflow as tf

    return tf.function(_OneShot(fn, name), autograph=False)  # type: ignore[no-any-return]


def _to_tf(array: Any) -> Any:
    import tensorflow as tf

    return tf.convert_to_tensor(array, dtype=tf.uint8)


def _to_tf_int32(values: List[int]) -> Any:
    import tensorflow as tf

    return tf.convert_to_tensor(values, dtype=tf.int32)
