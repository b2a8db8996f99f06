"""The collective path shared by every framed backend: the core's half of the transport contract.

:class:`FramedDistBackend` implements the object collectives once, over four
transport primitives a backend supplies (see
:mod:`mmeval.core.dist_backends.transport` for what each receives and must do).
The core owns, for every backend, built-in or third party:

* serialization (:mod:`mmeval.core.codecs`): pickle protocol 5 with
  out-of-band buffers, one copy into the transport's send buffer, reducers
  scoped to the backend; or the plain-data ``safe`` codec;
* one collective for small objects (they ride inline in the slot), two for
  large ones, and a gather that sends to one rank only;
* a per-rank header so that a serialization error on one rank, ranks that call
  different collectives, or ranks that ask different *questions* (see
  :func:`asking`) make every rank raise the same clear error;
* sequence numbers per group, a deadline on every collective (``timeout=``,
  else ``MMEVAL_<NAME>_TIMEOUT``, else ``MMEVAL_TIMEOUT``, else
  :data:`DEFAULT_TIMEOUT` seconds; validated at construction), waits that
  Ctrl-C interrupts within a second;
* **poisoning**: after a collective failed, timed out or was interrupted on a
  rank, every later collective on that group raises
  :class:`~mmeval.core.errors.GroupPoisonedError` at once, naming the first
  failure (a group whose transport was abandoned mid-transfer could otherwise
  deliver a previous call's bytes). Recover with a new group;
* **one collective at a time** per group: a second thread calling while one
  runs is refused with :class:`~mmeval.core.errors.ConcurrentCollectiveError`,
  and the running call fails too (its peers may have matched the other
  thread's call), poisoning the group; the calling thread's name is part of
  the question, so ranks whose matching calls come from differently named
  threads raise :class:`~mmeval.core.errors.CollectiveMismatchError`;
* events for the hooks of :mod:`mmeval.core.hooks`;
* the reductions (:meth:`~FramedDistBackend.all_reduce`,
  :meth:`~FramedDistBackend.reduce`) with the same guarantees: the array's
  (shape, dtype, op) travels in the slot and is agreed there, the array itself
  too when it fits (one collective); larger arrays go through
  :meth:`~FramedDistBackend._all_reduce_array` /
  :meth:`~FramedDistBackend._reduce_array`, built from the byte primitives
  unless the backend has a native reduction.
"""

from __future__ import annotations

import json
import math
import os
import struct
import threading
import time
import weakref
from abc import abstractmethod
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

from .. import hooks
from ..codecs import CODECS, Codec, Reducer, codec_id, make_codec
from ..errors import (
    CollectiveFailedError,
    CollectiveMismatchError,
    ConcurrentCollectiveError,
    DistCommunicationError,
    FrameDecodeError,
    GroupPoisonedError,
    RemoteSerializationError,
)
from ..wire import HEADER_SIZE, QUESTION_MAX, SLOT_SIZE, Frame, Op, SlotHeader, Status, build_slot, parse_slot
from ._reduce import ReduceHeader, check_reduce_headers, check_reduce_input, local_result, reduce_in_rank_order
from .base_backend import BaseDistBackend
from .transport import _QUESTION, Call, PeerLost, asking

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = ["FramedDistBackend", "DEFAULT_TIMEOUT", "MIN_TIMEOUT", "resolve_setting", "asking"]

#: Seconds a collective may take before every waiting rank raises. Like
#: torch.distributed's default: the first collective of ``compute()`` waits for
#: the slowest rank to finish its share of the evaluation.
DEFAULT_TIMEOUT = 1800.0
#: The shortest timeout accepted (seconds).
MIN_TIMEOUT = 0.001

_NO_LIMIT = ("inf", "infinity", "none", "never")


def resolve_setting(backend: str, key: str, value: Optional[str]) -> Optional[str]:
    """A backend setting: the explicit value, else ``MMEVAL_<BACKEND>_<KEY>``, else ``MMEVAL_<KEY>``."""
    if value is not None:
        return value
    for var in (f"MMEVAL_{backend.upper()}_{key}", f"MMEVAL_{key}"):
        env = os.environ.get(var)
        if env:
            return env
    return None


def _resolve_timeout(backend: str, timeout: Optional[float], max_timeout: float) -> float:
    """The validated timeout: finite, >= 1 ms, <= ``max_timeout``; ``inf`` only when ``max_timeout`` is."""
    origin = "timeout="
    raw: Any = timeout
    if timeout is None:
        for var in (f"MMEVAL_{backend.upper()}_TIMEOUT", "MMEVAL_TIMEOUT"):
            if os.environ.get(var):
                raw, origin = os.environ[var], var
                break
        else:
            return min(DEFAULT_TIMEOUT, max_timeout)
    where = f"{backend}: {origin}{'' if origin == 'timeout=' else '='}{raw!r}"
    if isinstance(raw, str) and raw.strip().lower() in _NO_LIMIT:
        value = math.inf
    else:
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"{where} is not a number of seconds") from None
    if math.isnan(value) or value < MIN_TIMEOUT:
        raise ValueError(f"{where}: a timeout must be at least {MIN_TIMEOUT:g} s (1 ms)")
    if value > max_timeout:
        if math.isinf(value):
            raise ValueError(
                f"{where}: this backend cannot wait without a limit (its transport ends an operation after "
                f"{max_timeout:g} s at most); give a number of seconds"
            )
        raise ValueError(f"{where}: at most {max_timeout:g} s is supported by this backend's transport")
    return value


def _question_bytes() -> bytes:
    fields: Dict[str, str] = {"thread": threading.current_thread().name[:64]}
    asked = _QUESTION.get()
    if asked:
        for key, value in asked.items():
            text = value if isinstance(value, str) else repr(value)
            fields[str(key)[:64]] = text if len(text) <= 160 else text[:140] + f"...(len {len(text)})"
    data = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    if len(data) > QUESTION_MAX:  # too long to compare field by field: compare a digest of the rest
        import hashlib

        digest = hashlib.sha256(data).hexdigest()[:32]
        data = json.dumps({"thread": fields["thread"], "question digest": digest}, sort_keys=True).encode()
    return data


def _question_fields(text: str) -> Dict[str, str]:
    if not text:
        return {}
    try:
        out = json.loads(text)
    except ValueError:
        return {"question": text}
    return {str(k): str(v) for k, v in out.items()} if isinstance(out, dict) else {"question": text}


# -- per-group state: sequence, one call at a time, poisoning ---------------------------


class _GroupState:
    __slots__ = ("lock", "seq", "poisoned", "running", "interfered")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seq = 0
        #: the first failure's message once the group is unusable
        self.poisoned: Optional[str] = None
        #: (thread name, op name, seq) of the collective running now
        self.running: Optional[tuple] = None  # type: ignore[type-arg]
        #: set by a refused concurrent call: the running call must fail too
        self.interfered: Optional[str] = None


_states_lock = threading.Lock()
#: states of keys that are objects (a backend, a group token): gone with the object, so a new object
#: born at a freed one's address starts clean (keying by ``id()`` handed it the old fate and sequence)
_object_states: "weakref.WeakKeyDictionary[Any, _GroupState]" = weakref.WeakKeyDictionary()
#: states of value keys (tuples naming a communicator); such a key must never name two communicators
_value_states: Dict[Hashable, _GroupState] = {}


def _state(key: Hashable) -> _GroupState:
    with _states_lock:
        state: Optional[_GroupState]
        try:
            table: Any = _object_states
            state = table.get(key)
        except TypeError:  # not weak-referenceable: a value key
            table = _value_states
            state = table.get(key)
        if state is None:
            state = table[key] = _GroupState()
        return state


#: words of a transport error that mean a peer is gone
_LOST_PEER_WORDS = ("connection closed", "connection reset", "broken pipe", "closed by peer", "peer closed",
                    "connection refused", "end of file", "process failed", "proc_failed", "eof")


def _lost_peer(exc: BaseException) -> bool:
    if isinstance(exc, PeerLost):
        return True
    text = str(exc).lower()
    return any(w in text for w in _LOST_PEER_WORDS)


class FramedDistBackend(BaseDistBackend):
    """A backend whose object collectives run through mmeval's frame protocol.

    Subclasses implement :attr:`is_initialized`, :attr:`rank`,
    :attr:`world_size` and four transport primitives, each given a
    :class:`~mmeval.core.dist_backends.transport.Call` (read its contract):

    * :meth:`_exchange_slots` -- all-gather one ``SLOT_SIZE``-byte slot per rank;
    * :meth:`_all_gather_bytes` -- all-gather frames of the known ``call.sizes``;
    * :meth:`_gather_bytes` -- the same, to rank ``call.root`` only;
    * :meth:`_broadcast_bytes` -- rank ``call.root``'s frame to all.

    Everything else -- sequence numbers, header agreement, deadlines, waiting,
    error translation, poisoning, one collective at a time -- is done here.

    Args:
        timeout: seconds before a collective gives up (see the module doc):
            at least 1 ms, at most :attr:`max_timeout`; ``float('inf')`` or
            ``'inf'`` for no limit where :attr:`max_timeout` is infinite.
        codec: ``'pickle'`` (default) or ``'safe'`` (plain data only; see
            :mod:`mmeval.core.safe_codec`); else ``MMEVAL_<NAME>_CODEC`` or
            ``MMEVAL_CODEC``. Every rank must use the same codec.
    """

    #: The longest timeout the transport honours (seconds); ``inf``: it can wait without limit.
    max_timeout: ClassVar[float] = math.inf
    #: How to build a new group on this transport, quoted by :class:`GroupPoisonedError`.
    new_group_hint: ClassVar[str] = "torch: dist.new_group(...); MPI: comm.Dup()"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _adapt_previous_contract(cls)

    def __init__(self, *, timeout: Optional[float] = None, codec: Optional[str] = None) -> None:
        label = self.name or type(self).__name__
        self.timeout: float = _resolve_timeout(label, timeout, self.max_timeout)
        self.codec: str = resolve_setting(label, "CODEC", codec) or "pickle"
        codec_id(self.codec)
        self._wire_codec: Optional[Codec] = None

    # -- what a backend may declare ------------------------------------------

    def reducers(self) -> Mapping[type, Reducer]:
        """``{type: reducer}`` the pickle codec applies for this backend only (default: none).

        Called once, before the first collective that encodes; the torch plugin
        returns its tensor reducer. See :class:`~mmeval.core.codecs.PickleCodec`.
        """
        return {}

    @property
    def wire_codec(self) -> Codec:
        """The codec this backend encodes and decodes with (its reducers included)."""
        codec = self._wire_codec
        if codec is None:
            codec = self._wire_codec = make_codec(self.codec, self.reducers() if self.codec == "pickle" else None)
        return codec

    # -- transport primitives ---------------------------------------------

    @abstractmethod
    def _exchange_slots(self, call: Call, slot: memoryview) -> Sequence[memoryview]:
        """All-gather ``slot`` (``SLOT_SIZE`` bytes, this rank's) from every rank.

        Return one ``SLOT_SIZE``-byte view per rank in rank order.
        """

    @abstractmethod
    def _all_gather_bytes(self, call: Call) -> Sequence[memoryview]:
        """All-gather frames: rank ``r`` contributes ``call.sizes[r]`` bytes (this rank's: ``call.frame``).

        Return one view of exactly ``call.sizes[r]`` bytes per rank. Write the
        frame with ``call.fill(buf)`` or, for large frames, send its segments
        from their own memory (``call.frame.segment_view`` / ``write_range``).
        """

    @abstractmethod
    def _gather_bytes(self, call: Call) -> Optional[Sequence[memoryview]]:
        """Like :meth:`_all_gather_bytes`, but only ``call.root`` receives (others return ``None``)."""

    @abstractmethod
    def _broadcast_bytes(self, call: Call) -> Optional[memoryview]:
        """Broadcast ``call.sizes[call.root]`` bytes from ``call.root`` (``call.frame`` there).

        Non-root ranks return a view of the received bytes; the root may return ``None``.
        """

    def _sequence_key(self) -> Hashable:
        """Key of the communicator whose collectives are counted, locked and poisoned together.

        Override to return the underlying group / communicator so that several
        backend objects over one group share one sequence (and one fate). An
        object key (weak-referenceable) holds its state only as long as it
        lives; a value key (a tuple) holds it for the process's life, so it
        must never be reused for a later communicator (no recycled handles
        or ids). The default is the backend object itself.
        """
        return self

    # -- object collectives -----------------------------------------------

    def all_gather_object(self, obj: Any) -> List[Any]:
        """Gather ``obj`` from every rank; return the list (rank order) on every rank."""
        if self.world_size == 1:
            return [self._local_copy(obj)]
        out = self._collective(Op.ALL_GATHER, obj, -1)
        assert out is not None
        return out  # type: ignore[no-any-return]

    def gather_object(self, obj: Any, dst: int = 0) -> Optional[List[Any]]:
        """Gather ``obj`` from every rank to ``dst``: the list there, ``None`` elsewhere.

        Only ``dst`` receives the payloads; the other ranks send theirs and hold
        nothing but their own object.
        """
        self._check_root("gather_object", "dst", dst)
        if self.world_size == 1:
            return [self._local_copy(obj)]
        return self._collective(Op.GATHER, obj, dst)  # type: ignore[no-any-return]

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """Return ``src``'s object on every rank; ``src`` gets its own ``obj`` back unchanged.

        Other ranks' ``obj`` is ignored (``None`` is fine) and never serialized.
        """
        self._check_root("broadcast_object", "src", src)
        if self.world_size == 1:
            return obj
        return self._collective(Op.BROADCAST, obj, src)

    def barrier(self) -> None:
        """Wait for every rank (with the collective timeout)."""
        if self.world_size > 1:
            self._collective(Op.BARRIER, None, -1)

    # -- reductions ---------------------------------------------------------

    def all_reduce(self, array: "np.ndarray", op: str = "sum") -> "np.ndarray":
        """Reduce ``array`` over every rank with ``op`` (``'sum'``, ``'min'``, ``'max'``); the result on every rank.

        Arguments, result and errors as
        :meth:`BaseDistBackend.all_reduce <mmeval.core.dist_backends.BaseDistBackend.all_reduce>`,
        with the guarantees of the object collectives: the (shape, dtype, op)
        of every rank is agreed in the slot exchange (a mismatch raises
        :class:`~mmeval.core.errors.CollectiveMismatchError` on every rank and
        leaves the group usable), the deadline, poisoning after a transport
        failure, one collective at a time, comm-stats events.

        An array that fits in the slot (about 3 KiB, less the question) rides
        there: one collective, reduced on every rank in rank order with numpy,
        so float results have the same bits everywhere. A larger one goes
        through :meth:`_all_reduce_array`: by default the raw bytes are
        all-gathered and reduced the same way; a backend's native reduction
        gives what its transport guarantees (see that backend's docs).
        """
        return self._reduction(Op.ALL_REDUCE, array, op, -1)  # type: ignore[no-any-return]

    def reduce(self, array: "np.ndarray", op: str = "sum", dst: int = 0) -> "Optional[np.ndarray]":
        """Reduce ``array`` over every rank with ``op`` to rank ``dst``: the result there, ``None`` elsewhere.

        As :meth:`all_reduce` (``dst`` agreed too); a large array goes through
        :meth:`_reduce_array`, by default a gather of the raw bytes to ``dst``.
        """
        return self._reduction(Op.REDUCE, array, op, dst)  # type: ignore[no-any-return]

    def _all_reduce_array(self, call: Call, array: "np.ndarray", op: str) -> "np.ndarray":
        """Transport primitive (optional): all-reduce ``array`` with ``op``; return the result (a new array).

        Called by the core for arrays too large for the slot, after every rank's
        (shape, dtype, op) was agreed; ``array`` is C-contiguous, ``op`` one of
        ``'sum'``, ``'min'``, ``'max'``, ``call.frame`` holds its raw bytes
        and ``call.sizes`` every rank's byte count. Wait only through
        ``call.wait`` / ``call.wait_until`` / ``call.run_blocking`` and
        ``call.keep`` the buffers, as for the byte primitives. The result must
        have the input's shape and dtype and the same bits on every rank.

        The default all-gathers the raw bytes with :meth:`_all_gather_bytes`
        and reduces them in rank order with numpy. Override it with the
        transport's native all-reduce.
        """
        blocks = self._all_gather_bytes(call)
        return _reduce_blocks(blocks, array, op)

    def _reduce_array(self, call: Call, array: "np.ndarray", op: str) -> "Optional[np.ndarray]":
        """Transport primitive (optional): reduce ``array`` with ``op`` to ``call.root``; the result there, else ``None``.

        As :meth:`_all_reduce_array`. The default gathers the raw bytes to the
        root with :meth:`_gather_bytes` and reduces them there in rank order.
        """
        blocks = self._gather_bytes(call)
        return None if blocks is None else _reduce_blocks(blocks, array, op)

    @property
    def poisoned(self) -> Optional[str]:
        """The first failure that made this backend's group unusable, or ``None`` while it is usable."""
        return _state(self._sequence_key()).poisoned

    # -- machinery ----------------------------------------------------------

    def _serialize_hint(self) -> str:
        return f"Send only picklable objects{' of plain data (codec=safe)' if self.wire_codec.plain_data_only else ''}."

    def _local_copy(self, obj: Any) -> Any:
        # a world of one still returns an independent object, and fails as a larger world would
        codec = self.wire_codec
        try:
            frame = codec.encode(obj)
        except Exception as exc:
            raise RemoteSerializationError(
                f"{self.name}: rank 0 (of 1) could not serialize its object ({type(exc).__name__}: {exc}). "
                + self._serialize_hint()
            ) from exc
        return codec.decode(frame.tobytes())

    def _check_root(self, op: str, arg: str, root: int) -> None:
        ws = self.world_size
        if not isinstance(root, int) or not 0 <= root < ws:
            raise ValueError(f"{self.name}.{op}: {arg}={root!r} is not a rank of this group (0..{ws - 1})")

    def _collective(self, op: int, obj: Any, root: int) -> Any:
        name = self.name or type(self).__name__
        op_name = Op.NAMES[op]
        rank, ws = self.rank, self.world_size
        state = _state(self._sequence_key())
        if state.poisoned is not None:
            raise GroupPoisonedError(
                f"{name}: {op_name} refused on rank {rank}: this group is unusable since an earlier collective "
                f"failed ({state.poisoned}). Build a new group ({self.new_group_hint}) and a new backend over it "
                "to go on."
            )
        thread = threading.current_thread().name
        if not state.lock.acquire(blocking=False):
            other = state.running or ("another thread", "a collective", 0)
            message = (
                f"{name}: {op_name} called by thread {thread!r} on rank {rank} while thread {other[0]!r} was in "
                f"{other[1]} (collective #{other[2]}) on the same group. One collective at a time per group: "
                "call collectives from one thread, or give each thread its own group."
            )
            state.interfered = message
            if state.poisoned is None:
                state.poisoned = f"concurrent collectives from two threads: {message}"
            raise ConcurrentCollectiveError(message)
        try:
            state.seq += 1
            seq = state.seq
            state.running = (thread, op_name, seq)
            emit = hooks.hooks_active()
            if emit:
                hooks.emit_start(op_name, name, rank, ws)
            start = time.monotonic()
            call = Call(name, op_name, seq, rank, ws, root, self.timeout)
            counters = [0, 0]  # bytes sent, received
            try:
                result = self._run(call, op, obj, counters)
                if state.interfered is not None:
                    raise ConcurrentCollectiveError(
                        f"{name}: {op_name} (collective #{seq}) cannot be trusted: {state.interfered}"
                    )
            except BaseException as exc:
                if emit:
                    self._emit(op_name, name, rank, ws, root, seq, counters, start, type(exc).__name__, str(exc))
                raise
            if emit:
                self._emit(op_name, name, rank, ws, root, seq, counters, start, "ok", "")
            return result
        finally:
            state.running = None
            state.interfered = None
            state.lock.release()

    def _emit(self, op: str, name: str, rank: int, ws: int, root: int, seq: int,
              counters: List[int], start: float, outcome: str, error: str) -> None:
        hooks.emit(
            hooks.CollectiveEvent(
                op=op, backend=name, rank=rank, world_size=ws, root=None if root < 0 else root, seq=seq,
                bytes_sent=counters[0], bytes_received=counters[1], seconds=time.monotonic() - start,
                outcome=outcome, error=error,
            )
        )

    def _transport(self, call: Call, what: str, step: Callable[[], Any]) -> Any:
        """Run one transport step; translate its errors; poison the group when it fails."""
        call.stage, call.detail = what, ""
        try:
            return step()
        except BaseException as exc:
            call.abandon()
            error = self._translate(call, exc)
            state = _state(self._sequence_key())
            if state.poisoned is None:
                state.poisoned = f"{call.op} (collective #{call.seq}) on rank {call.rank}: {error}"
            if error is exc:
                raise
            raise error from exc

    def _translate(self, call: Call, exc: BaseException) -> BaseException:
        if isinstance(exc, DistCommunicationError) and not isinstance(exc, PeerLost):
            return exc
        if isinstance(exc, TimeoutError):
            return call.timeout_error()
        if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: raised as they are
            return exc
        where = f"{self.name}: {call.op} (collective #{call.seq} on rank {call.rank} of {call.world_size})"
        if _lost_peer(exc):
            return CollectiveFailedError(
                f"{where} failed while {call.doing}: a peer rank has probably died or closed its connection "
                f"({type(exc).__name__}: {exc}). The group cannot be used for further collectives."
            )
        return CollectiveFailedError(
            f"{where} failed while {call.doing}: {type(exc).__name__}: {exc}. "
            "The group cannot be used for further collectives."
        )

    def _reduction(self, code: int, array: Any, op: Any, dst: int) -> Any:
        name = self.name or type(self).__name__
        header, error = check_reduce_input(name, Op.NAMES[code], array, op, dst, self.world_size)
        if self.world_size == 1:
            if error is not None:
                raise error
            return local_result(array)
        return self._collective(code, (header, error, array), header.dst if code == Op.REDUCE else -1)

    def _exchange_headers(self, call: Call, slot: memoryview, counters: List[int]) -> List[SlotHeader]:
        """The slot exchange every collective starts with: every rank's parsed header, in rank order."""
        ws = call.world_size
        slots = self._transport(call, "exchanging headers", lambda: self._exchange_slots(call, slot))
        counters[0] += SLOT_SIZE
        counters[1] += SLOT_SIZE * (ws - 1)
        if len(slots) != ws:
            raise self._translate(call, RuntimeError(f"the slot exchange returned {len(slots)} slots for {ws} ranks"))
        return [parse_slot(s, tuple(CODECS.values())) for s in slots]

    def _run_reduction(self, call: Call, code: int, obj: Any, counters: List[int]) -> Any:
        import numpy as np

        header, local_error, array = obj
        rank, ws, root = call.rank, call.world_size, call.root
        question = _question_bytes()
        slot = memoryview(bytearray(SLOT_SIZE))
        raw: Optional[memoryview] = None
        if local_error is not None:
            build_slot(slot, status=Status.ENCODE_ERROR, op=code, codec=self.wire_codec.id, seq=call.seq, root=root,
                       error=header.error, question=question)
        else:
            if not array.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
                array = array.copy(order="C")
            raw = array.reshape(-1).view(np.uint8).data
            room = SLOT_SIZE - HEADER_SIZE - len(question)
            desc = _reduce_descriptor(header, inline=True)
            inline = len(desc) + raw.nbytes <= room
            if not inline:
                desc = _reduce_descriptor(header, inline=False)
            parts = [(0, memoryview(desc))] + ([(len(desc), raw)] if inline else [])
            body = Frame(parts, len(desc) + (raw.nbytes if inline else 0))
            build_slot(slot, status=Status.OK, op=code, codec=self.wire_codec.id, seq=call.seq, root=root,
                       payload=body, question=question)
        headers = self._exchange_headers(call, slot, counters)
        reductions = (Op.ALL_REDUCE, Op.REDUCE)
        if len({(h.op in reductions, h.seq, h.codec) for h in headers}) != 1 or headers[0].op not in reductions:
            self._check_headers(headers, code, call, local_error)  # not the same kind of collective: says which
        self._check_question(headers, call)  # a different question (metric configuration) explains the rest
        parsed = [_parse_reduce_slot(h) for h in headers]
        check_reduce_headers(self.name or type(self).__name__, call.op, [p[0] for p in parsed], rank, local_error)
        dtype, op = array.dtype, header.op
        bodies = [body for _, body in parsed if body is not None]
        if len(bodies) == ws:  # every array rode in its slot
            if code == Op.REDUCE and rank != root:
                return None
            return reduce_in_rank_order([np.frombuffer(b, dtype) for b in bodies], op, dtype, array.shape)
        nbytes = array.nbytes
        call.frame = Frame([(0, raw)], nbytes)  # type: ignore[list-item]
        call.sizes = [nbytes] * ws
        native = (type(self)._all_reduce_array if code == Op.ALL_REDUCE else type(self)._reduce_array) is not (
            FramedDistBackend._all_reduce_array if code == Op.ALL_REDUCE else FramedDistBackend._reduce_array)
        if code == Op.ALL_REDUCE:
            out = self._transport(call, "reducing payloads", lambda: self._all_reduce_array(call, array, op))
            moved = 2 * (ws - 1) * nbytes // ws if native else nbytes * (ws - 1)  # a ring's share, else all-gather
            counters[0] += moved
            counters[1] += moved
        else:
            out = self._transport(call, f"reducing payloads to rank {root}",
                                  lambda: self._reduce_array(call, array, op))
            if rank != root:
                counters[0] += nbytes
                return None
            counters[1] += nbytes * (ws - 1)
        result = np.asarray(out)
        if result.dtype != dtype or result.size != array.size:
            raise self._translate(call, RuntimeError(
                f"{type(self).__name__}'s reduction primitive returned a {result.dtype} array of {result.size} "
                f"elements for a {dtype} array of {array.size}: a bug in the backend"))
        return result.reshape(array.shape)

    def _run(self, call: Call, op: int, obj: Any, counters: List[int]) -> Any:
        if op in (Op.ALL_REDUCE, Op.REDUCE):
            return self._run_reduction(call, op, obj, counters)
        rank, ws, root = call.rank, call.world_size, call.root
        codec = self.wire_codec
        sends = op in (Op.ALL_GATHER, Op.GATHER) or (op == Op.BROADCAST and rank == root)
        frame: Optional[Frame] = None
        local_exc: Optional[BaseException] = None
        status, error = Status.OK, ""
        if sends:
            try:
                frame = codec.encode(obj)
            except Exception as exc:
                local_exc = exc
                status = Status.ENCODE_ERROR
                error = f"{type(exc).__name__}: {exc}"
        call.frame = frame
        slot = memoryview(bytearray(SLOT_SIZE))
        build_slot(slot, status=status, op=op, codec=codec.id, seq=call.seq, root=root, payload=frame, error=error,
                   question=_question_bytes())
        headers = self._exchange_headers(call, slot, counters)
        self._check_headers(headers, op, call, local_exc)

        if op == Op.BARRIER:
            return None
        if op == Op.BROADCAST:
            head = headers[root]
            if head.inline:
                return obj if rank == root else codec.decode(head.data)  # type: ignore[arg-type]
            call.sizes = [h.payload_size if r == root else 0 for r, h in enumerate(headers)]
            if rank == root:
                self._transport(call, "sending the payload", lambda: self._broadcast_bytes(call))
                counters[0] += head.payload_size * (ws - 1)
                return obj
            data = self._transport(call, "receiving the payload", lambda: self._broadcast_bytes(call))
            counters[1] += head.payload_size
            return codec.decode(data)

        # gathers
        assert frame is not None
        if all(h.inline for h in headers):
            if op == Op.GATHER and rank != root:
                return None
            return [codec.decode(h.data) for h in headers]  # type: ignore[arg-type]
        sizes = call.sizes = [h.payload_size for h in headers]
        if op == Op.ALL_GATHER:
            blocks = self._transport(call, "exchanging payloads", lambda: self._all_gather_bytes(call))
            counters[0] += sizes[rank] * (ws - 1)
            counters[1] += sum(sizes) - sizes[rank]
        else:
            blocks = self._transport(call, "gathering payloads", lambda: self._gather_bytes(call))
            if rank != root:
                counters[0] += sizes[rank]
                return None
            counters[1] += sum(sizes) - sizes[rank]
        return [codec.decode(b) for b in blocks]

    def _check_headers(self, headers: List[SlotHeader], op: int, call: Call,
                       local_exc: Optional[BaseException]) -> None:
        name, op_name, seq = self.name, call.op, call.seq
        failed = [(r, h) for r, h in enumerate(headers) if h.status != Status.OK]
        if failed:
            detail = "; ".join(f"rank {r}: {h.error_text()}" for r, h in failed)
            raise RemoteSerializationError(
                f"{name}: {op_name} (collective #{seq}) aborted on every rank because "
                f"{'rank' if len(failed) == 1 else 'ranks'} {', '.join(str(r) for r, _ in failed)} "
                f"could not serialize {'its' if len(failed) == 1 else 'their'} object ({detail}). "
                + self._serialize_hint()
            ) from local_exc
        calls = [(h.op, h.root, h.seq, h.codec) for h in headers]
        if len(set(calls)) != 1:
            def describe(h: SlotHeader) -> str:
                arg = ""
                if h.op == Op.GATHER:
                    arg = f"dst={h.root}"
                elif h.op == Op.BROADCAST:
                    arg = f"src={h.root}"
                elif h.op == Op.REDUCE:
                    arg = f"dst={h.root}"
                codec = {v: k for k, v in CODECS.items()}.get(h.codec, "?")
                return f"{h.op_name}({arg}) #{h.seq} codec={codec}"

            detail = "; ".join(f"rank {r}: {describe(h)}" for r, h in enumerate(headers))
            hint = "Every rank must call the same collectives, in the same order, with the same src/dst and codec."
            if len({h.seq for h in headers}) > 1:
                hint += " The sequence numbers differ: a rank called more collectives than the others."
            raise CollectiveMismatchError(f"{name}: ranks disagree on the collective ({detail}). {hint}")
        self._check_question(headers, call)

    def _check_question(self, headers: List[SlotHeader], call: Call) -> None:
        """Raise on every rank when the ranks asked different questions (see :func:`asking`)."""
        name, op_name, seq = self.name, call.op, call.seq
        if len({h.question for h in headers}) == 1:
            return
        asked = [_question_fields(h.question) for h in headers]
        fields = sorted(set().union(*asked))
        differ = [f for f in fields if len({a.get(f, "(not asked)") for a in asked}) > 1]
        lines = "; ".join(
            f"{f}: " + ", ".join(f"rank {r}={a.get(f, '(not asked)')}" for r, a in enumerate(asked)) for f in differ
        )
        hint = ("Every rank must ask the same question: the same metric configuration, dist_collect_mode and "
                "size= in compute().")
        if "thread" in differ:
            hint += " The calling threads differ: make the matching calls from the same thread on every rank."
        raise CollectiveMismatchError(
            f"{name}: {op_name} (collective #{seq}): ranks asked different questions ({lines}). {hint}"
        )


_DESC_LEN = struct.Struct("<H")


def _reduce_descriptor(header: ReduceHeader, inline: bool) -> bytes:
    """The slot body's head for a reduction: its (shape, dtype, op) and whether the array follows inline."""
    desc = json.dumps([list(header.shape), header.dtype, header.op, inline], separators=(",", ":")).encode()
    return _DESC_LEN.pack(len(desc)) + desc


def _parse_reduce_slot(h: SlotHeader) -> Tuple[ReduceHeader, Optional[memoryview]]:
    """A rank's reduction header from its slot, and its inline array bytes (``None`` when not inline)."""
    dst = h.root if h.op == Op.REDUCE else -1
    if h.status != Status.OK:
        return ReduceHeader(h.op_name, (), "?", "?", dst, h.error_text()), None
    data = h.data
    try:
        if data is None:
            raise ValueError("no descriptor")
        (n,) = _DESC_LEN.unpack_from(data, 0)
        shape, dtype, op, inline = json.loads(bytes(data[_DESC_LEN.size:_DESC_LEN.size + n]))
        body = data[_DESC_LEN.size + n:]
        header = ReduceHeader(h.op_name, tuple(int(x) for x in shape), str(dtype), str(op), dst)
    except (ValueError, TypeError, struct.error) as exc:
        raise FrameDecodeError(f"corrupted reduction descriptor in a peer's slot ({exc})") from None
    return header, (body if inline else None)


def _reduce_blocks(blocks: Sequence[memoryview], array: "np.ndarray", op: str) -> "np.ndarray":
    import numpy as np

    return reduce_in_rank_order([np.frombuffer(b, array.dtype) for b in blocks], op, array.dtype, array.shape)


#: Transport (Fill) callback of the previous contract: writes this rank's bytes into a send buffer.
Fill = Callable[[memoryview], None]


def _adapt_previous_contract(cls: type) -> None:
    """Wrap primitives written for the previous contract (``fill, timeout`` arguments) into the current one.

    Such a backend keeps working, with every guarantee the core gives except
    waits that Ctrl-C interrupts (its own waits are not sliced); it gets a
    DeprecationWarning naming the class.
    """
    import inspect
    import warnings

    old = cls.__dict__.get("_exchange_slots")
    if old is None or "fill" not in inspect.signature(old).parameters:
        return
    warnings.warn(
        f"{cls.__module__}.{cls.__qualname__}: transport primitives taking (fill, timeout) follow mmeval's previous "
        "contract; take a Call instead (see mmeval.core.dist_backends.transport and docs/writing-a-backend.md)",
        DeprecationWarning, stacklevel=3,
    )
    ex, ag, ga, bc = (cls.__dict__.get(n) for n in ("_exchange_slots", "_all_gather_bytes", "_gather_bytes",
                                                       "_broadcast_bytes"))

    def _fill_slot(slot: memoryview) -> Fill:
        def fill(out: memoryview) -> None:
            memoryview(out).cast("B")[: slot.nbytes] = slot
        return fill

    if ex is not None:
        cls._exchange_slots = lambda self, call, slot: ex(self, _fill_slot(slot), call.remaining())  # type: ignore
    if ag is not None:
        cls._all_gather_bytes = lambda self, call: ag(self, call.sizes, call.frame, call.remaining())  # type: ignore
    if ga is not None:
        cls._gather_bytes = lambda self, call: ga(  # type: ignore
            self, call.sizes, call.frame if call.frame is not None else call.fill, call.root, call.remaining())
    if bc is not None:
        cls._broadcast_bytes = lambda self, call: bc(  # type: ignore
            self, call.sizes[call.root], call.frame if call.rank == call.root else None, call.root, call.remaining())
