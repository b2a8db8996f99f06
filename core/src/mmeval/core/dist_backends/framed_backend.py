"""The collective path shared by every framed backend: the core's half of the transport contract.

:class:`FramedDistBackend` implements the object collectives once, as
templates over transport primitives; a backend supplies one,
:meth:`~FramedDistBackend._all_gather_bytes`, and may override the others for
speed (see :mod:`.transport` for what each receives and must do). The core
owns, for every backend: serialization (:mod:`mmeval.core.wire.codecs`); one
collective for small objects (inline in the slot), two for large ones; the
per-rank header and its agreement (:mod:`.agreement`); the group guarantees --
sequence, deadline, one call at a time, poisoning, error translation, hook
events (:mod:`.guard`); the reductions (:mod:`.reduction`). The README and
docs/writing-a-backend.md say what each promises.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import TYPE_CHECKING, AbstractSet, Any, ClassVar, Hashable, List, Mapping, Optional, Sequence, Tuple

from ..errors import RemoteSerializationError
from ..settings import resolve_setting, setting_from_env
from ..wire import CODEC_IDS, SLOT_SIZE, Frame, Op, SlotHeader, Status, build_slot, parse_slot
from ..wire.codecs import Codec, Reducer, codec_id, make_codec
from .agreement import check_headers
from .base_backend import BaseDistBackend
from .guard import GroupGuard
from .guard import group_state as _state  # noqa: F401  (tests of plugins look a group's state up by key)
from .reduction import framed_reduction, gathered_reduction
from .transport import Call, asking, question_bytes

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


def _resolve_timeout(backend: str, timeout: Optional[float], max_timeout: float) -> float:
    """The validated timeout: finite, >= 1 ms, <= ``max_timeout``; ``inf`` only when ``max_timeout`` is."""
    origin = "timeout="
    raw: Any = timeout
    if timeout is None:
        found = setting_from_env(backend, "TIMEOUT")
        if found is None:
            return min(DEFAULT_TIMEOUT, max_timeout)
        origin, raw = found
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


class FramedDistBackend(BaseDistBackend):
    """A backend whose collectives run through mmeval's frame protocol.

    Subclasses implement :attr:`is_initialized`, :attr:`rank`,
    :attr:`world_size` and one transport primitive, :meth:`_all_gather_bytes`
    (given a :class:`~mmeval.core.dist_backends.transport.Call`; read its
    contract). The others have defaults built on it, which a faster transport
    overrides: :meth:`_exchange_slots`, :meth:`_gather_bytes`,
    :meth:`_broadcast_bytes`, :meth:`_all_reduce_array`, :meth:`_reduce_array`.

    Args:
        timeout: seconds before a collective gives up: at least 1 ms, at most
            :attr:`max_timeout`; ``float('inf')`` or ``'inf'`` for no limit
            where :attr:`max_timeout` is infinite. Else
            ``MMEVAL_<NAME>_TIMEOUT``, ``MMEVAL_TIMEOUT``, :data:`DEFAULT_TIMEOUT`.
        codec: ``'pickle'`` (default) or ``'safe'`` (plain data only); else
            ``MMEVAL_<NAME>_CODEC`` or ``MMEVAL_CODEC``. Every rank must use the same codec.
    """

    #: The longest timeout the transport honours (seconds); ``inf``: it can wait without limit.
    max_timeout: ClassVar[float] = math.inf
    #: How to build a new group on this transport, quoted by :class:`GroupPoisonedError`.
    new_group_hint: ClassVar[str] = "for example a new communicator or connection of this backend's transport"
    #: ``(dtype name, op)`` pairs that :meth:`_all_reduce_array` / :meth:`_reduce_array` reduce natively at any
    #: size (native byte order); the core converts or takes the byte path for the rest (see :mod:`.reduction`).
    native_reductions: ClassVar[AbstractSet[Tuple[str, str]]] = frozenset()

    def __init__(self, *, timeout: Optional[float] = None, codec: Optional[str] = None) -> None:
        label = self.name or type(self).__name__
        self.timeout: float = _resolve_timeout(label, timeout, self.max_timeout)
        self.codec: str = resolve_setting(label, "CODEC", codec) or "pickle"
        codec_id(self.codec)
        self._wire_codec: Optional[Codec] = None
        self._guard = GroupGuard(self)

    def reducers(self) -> Mapping[type, Reducer]:
        """``{type: reducer}`` the pickle codec applies for this backend only (default: none).

        Called once, before the first collective that encodes; the torch plugin
        returns its tensor reducer. See :class:`~mmeval.core.wire.codecs.PickleCodec`.
        """
        return {}

    @property
    def wire_codec(self) -> Codec:
        """The codec this backend encodes and decodes with (its reducers included)."""
        codec = self._wire_codec
        if codec is None:
            codec = self._wire_codec = make_codec(self.codec, self.reducers() if self.codec == "pickle" else None)
        return codec

    @property
    def poisoned(self) -> Optional[str]:
        """The first failure that made this backend's group unusable, or ``None`` while it is usable."""
        return self._guard.state.poisoned

    def _sequence_key(self) -> Hashable:
        """Key of the communicator whose collectives are counted, locked and poisoned together.

        Override to return the underlying group / communicator so that several
        backend objects over one group share one sequence (and one fate). An
        object key (weak-referenceable) holds its state only as long as it
        lives; a value key (a tuple) holds it for the process's life, so it
        must never be reused for a later communicator. The default is the backend object itself.
        """
        return self

    # -- transport primitives: one required, the rest with defaults built on it --------

    @abstractmethod
    def _all_gather_bytes(self, call: Call) -> Sequence[memoryview]:
        """All-gather frames: rank ``r`` contributes ``call.sizes[r]`` bytes (this rank's: ``call.frame``).

        Return one view of exactly ``call.sizes[r]`` bytes per rank, in rank
        order, this rank's own included. Write the frame with
        ``call.fill(buf)`` or send its segments from their own memory
        (``call.frame.segment_view`` / ``write_range``). A size may be 0.
        ``call.phase`` is ``'header'`` for the slot exchange, else ``'payload'``.
        """

    def _exchange_slots(self, call: Call, slot: memoryview) -> Sequence[memoryview]:
        """All-gather ``slot`` (``SLOT_SIZE`` bytes, this rank's); one ``SLOT_SIZE``-byte view per rank, own included.

        The default goes through :meth:`_all_gather_bytes` with ``call.phase == 'header'``.
        """
        frame, sizes = call.frame, call.sizes
        call.frame, call.sizes = Frame([(0, slot)], SLOT_SIZE), [SLOT_SIZE] * call.world_size
        try:
            return self._all_gather_bytes(call)
        finally:
            call.frame, call.sizes = frame, sizes

    def _gather_bytes(self, call: Call) -> Optional[Sequence[memoryview]]:
        """As :meth:`_all_gather_bytes`, but only ``call.root`` receives: the list there, ``None`` elsewhere.

        The default all-gathers and keeps the result on the root only.
        """
        blocks = self._all_gather_bytes(call)
        return blocks if call.rank == call.root else None

    def _broadcast_bytes(self, call: Call) -> Optional[memoryview]:
        """Broadcast ``call.sizes[call.root]`` bytes from ``call.root`` (``call.frame`` there).

        Non-root ranks return a view of the received bytes; the root returns
        ``None`` (or anything: it is ignored). ``call.sizes`` is 0 for every
        other rank; the default all-gathers those sizes.
        """
        blocks = self._all_gather_bytes(call)
        return None if call.rank == call.root else blocks[call.root]

    def _all_reduce_array(self, call: Call, array: "np.ndarray", op: str) -> "np.ndarray":
        """All-reduce ``array`` with ``op``; return the result (a new array of its shape and dtype).

        Called for arrays too large for the slot, and only for the
        :attr:`native_reductions` a class declares, after every rank's (shape,
        dtype, op) was agreed; ``array`` is C-contiguous, ``call.frame`` holds
        its raw bytes and ``call.sizes`` every rank's byte count. Wait only
        through ``call.wait`` / ``call.wait_until`` / ``call.run_blocking`` and
        ``call.keep`` the buffers. The result must have the same bits on every
        rank. The default all-gathers the bytes and reduces them in rank order.
        """
        out = gathered_reduction(self._all_gather_bytes(call), array, op)
        assert out is not None
        return out

    def _reduce_array(self, call: Call, array: "np.ndarray", op: str) -> "Optional[np.ndarray]":
        """As :meth:`_all_reduce_array` to ``call.root``: the result there, ``None`` elsewhere (default: a gather)."""
        return gathered_reduction(self._gather_bytes(call), array, op)

    # -- the collectives ---------------------------------------------------------

    def all_gather_object(self, obj: Any) -> List[Any]:
        """Gather ``obj`` from every rank; return the list (rank order) on every rank."""
        if self.world_size == 1:
            return [_local_copy(self, obj)]
        out = self._object_collective(Op.ALL_GATHER, obj, -1)
        assert out is not None
        return out  # type: ignore[no-any-return]

    def gather_object(self, obj: Any, dst: int = 0) -> Optional[List[Any]]:
        """Gather ``obj`` from every rank to ``dst``: the list there, ``None`` elsewhere (only ``dst`` receives)."""
        _check_root(self, "gather_object", "dst", dst)
        if self.world_size == 1:
            return [_local_copy(self, obj)]
        return self._object_collective(Op.GATHER, obj, dst)  # type: ignore[no-any-return]

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """Return ``src``'s object on every rank; ``src`` gets its own ``obj`` back (others' is never serialized)."""
        _check_root(self, "broadcast_object", "src", src)
        if self.world_size == 1:
            return obj
        return self._object_collective(Op.BROADCAST, obj, src)

    def barrier(self) -> None:
        """Wait for every rank (with the collective timeout)."""
        if self.world_size > 1:
            self._object_collective(Op.BARRIER, None, -1)

    def all_reduce(self, array: "np.ndarray", op: str = "sum") -> "np.ndarray":
        """Reduce ``array`` over every rank with ``op``; the result on every rank.

        As :meth:`BaseDistBackend.all_reduce <mmeval.core.dist_backends.BaseDistBackend.all_reduce>`,
        with the guarantees of the object collectives; the (shape, dtype, op)
        of every rank is agreed in the slot exchange (a mismatch raises on
        every rank and leaves the group usable). See :mod:`.reduction` for
        which path an array takes.
        """
        return framed_reduction(self, Op.ALL_REDUCE, array, op, -1)  # type: ignore[no-any-return]

    def reduce(self, array: "np.ndarray", op: str = "sum", dst: int = 0) -> "Optional[np.ndarray]":
        """Reduce ``array`` over every rank with ``op`` to rank ``dst``: the result there, ``None`` elsewhere."""
        return framed_reduction(self, Op.REDUCE, array, op, dst)  # type: ignore[no-any-return]

    # -- the object collectives' template ---------------------------------------------

    def _object_collective(self, op: int, obj: Any, root: int) -> Any:
        return self._guard.run(op, root, lambda call, counters: self._move_object(call, op, obj, counters))

    def _exchange_headers(self, call: Call, slot: memoryview, counters: List[int]) -> List[SlotHeader]:
        """The slot exchange every collective starts with: every rank's parsed header, in rank order."""
        ws = call.world_size
        call.phase = "header"
        slots = self._guard.transport_step(call, "exchanging headers", lambda: self._exchange_slots(call, slot))
        call.phase = "payload"
        counters[0] += SLOT_SIZE
        counters[1] += SLOT_SIZE * (ws - 1)
        if len(slots) != ws:
            raise self._guard.fail(call, RuntimeError(f"the slot exchange returned {len(slots)} slots for {ws} ranks"))
        headers = [parse_slot(s, tuple(CODEC_IDS.values())) for s in slots]
        self._guard.check_windows(call, headers)
        return headers

    def _move_object(self, call: Call, op: int, obj: Any, counters: List[int]) -> Any:
        """One object collective: encode, exchange and agree on headers, move the payload if it was not inline."""
        rank, ws, root = call.rank, call.world_size, call.root
        codec, step = self.wire_codec, self._guard.transport_step
        frame: Optional[Frame] = None
        local_exc: Optional[BaseException] = None
        status, error = Status.OK, ""
        if op in (Op.ALL_GATHER, Op.GATHER) or (op == Op.BROADCAST and rank == root):
            try:
                frame = codec.encode(obj)
            except Exception as exc:
                local_exc, status, error = exc, Status.ENCODE_ERROR, f"{type(exc).__name__}: {exc}"
        call.frame = frame
        slot = memoryview(bytearray(SLOT_SIZE))
        build_slot(
            slot,
            status=status,
            op=op,
            codec=codec.id,
            seq=call.seq,
            root=root,
            payload=frame,
            error=error,
            question=question_bytes(),
            deadline=call.wall_deadline,
            start=call.wall_start,
        )
        headers = self._exchange_headers(call, slot, counters)
        check_headers(self.name, headers, call, local_exc, self._serialize_hint())
        if op == Op.BARRIER:
            return None
        if op == Op.BROADCAST:
            head = headers[root]
            if head.inline:
                return obj if rank == root else codec.decode(head.data)  # type: ignore[arg-type]
            call.sizes = [h.payload_size if r == root else 0 for r, h in enumerate(headers)]
            if rank == root:
                step(call, "sending the payload", lambda: self._broadcast_bytes(call))
                counters[0] += head.payload_size * (ws - 1)
                return obj
            data = step(call, "receiving the payload", lambda: self._broadcast_bytes(call))
            counters[1] += head.payload_size
            return codec.decode(data)
        if all(h.inline for h in headers):
            if op == Op.GATHER and rank != root:
                return None
            return [codec.decode(h.data) for h in headers]  # type: ignore[arg-type]
        sizes = call.sizes = [h.payload_size for h in headers]
        if op == Op.ALL_GATHER:
            blocks = step(call, "exchanging payloads", lambda: self._all_gather_bytes(call))
            counters[0] += sizes[rank] * (ws - 1)
        else:
            blocks = step(call, "gathering payloads", lambda: self._gather_bytes(call))
            if rank != root:
                counters[0] += sizes[rank]
                return None
        counters[1] += sum(sizes) - sizes[rank]
        return [codec.decode(b) for b in blocks]

    def _serialize_hint(self) -> str:
        return f"Send only picklable objects{' of plain data (codec=safe)' if self.wire_codec.plain_data_only else ''}."


def _local_copy(backend: FramedDistBackend, obj: Any) -> Any:
    """A world of one's collective: an independent copy of ``obj``, failing as a larger world would."""
    codec = backend.wire_codec
    try:
        frame = codec.encode(obj)
    except Exception as exc:
        raise RemoteSerializationError(
            f"{backend.name}: rank 0 (of 1) could not serialize its object ({type(exc).__name__}: {exc}). "
            + backend._serialize_hint()
        ) from exc
    return codec.decode(frame.tobytes())


def _check_root(backend: FramedDistBackend, op: str, arg: str, root: int) -> None:
    ws = backend.world_size
    if not isinstance(root, int) or not 0 <= root < ws:
        raise ValueError(f"{backend.name}.{op}: {arg}={root!r} is not a rank of this group (0..{ws - 1})")
