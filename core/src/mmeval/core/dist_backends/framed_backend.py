"""The collective path shared by every built-in backend.

:class:`FramedDistBackend` implements the object collectives once, over four
transport primitives a backend supplies (a slot all-gather and byte
all-gather / gather / broadcast). It brings:

* one serialization path (:mod:`mmeval.core.serialization`): pickle protocol 5
  with out-of-band buffers, one copy into the transport's own send buffer;
* one collective for small objects (they ride inline in the slot), two for
  large ones, and a gather that sends to one rank only;
* a per-rank header so that a serialization error on one rank, or ranks that
  call different collectives, make every rank raise the same clear error;
* a timeout on every collective (``timeout=`` argument, else
  ``MMEVAL_<NAME>_TIMEOUT``, else ``MMEVAL_TIMEOUT``, else
  :data:`DEFAULT_TIMEOUT` seconds);
* events for the hooks of :mod:`mmeval.core.hooks`.
"""

from __future__ import annotations

import os
import threading
import time
from abc import abstractmethod
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence

from .. import hooks
from ..errors import (
    CollectiveFailedError,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    DistCommunicationError,
    RemoteSerializationError,
)
from ..serialization import (
    CODECS,
    SLOT_SIZE,
    Frame,
    Op,
    SlotHeader,
    Status,
    build_slot,
    codec_id,
    decode,
    encode,
    parse_slot,
)
from .base_backend import BaseDistBackend

__all__ = ["FramedDistBackend", "DEFAULT_TIMEOUT", "resolve_setting"]

#: Seconds a collective may take before every waiting rank raises. Like
#: torch.distributed's default: the first collective of ``compute()`` waits for
#: the slowest rank to finish its share of the evaluation.
DEFAULT_TIMEOUT = 1800.0

#: Fill callback: writes this rank's bytes into the transport's send buffer. The core passes the
#: :class:`~mmeval.core.serialization.Frame` itself (callable), whose ``write_range(out, start)``
#: lets a transport copy a large frame chunk by chunk, and ``segment_view(start, stop)`` send a
#: range lying inside one out-of-band array straight from the caller's memory.
Fill = Callable[[memoryview], None]

_seq_lock = threading.Lock()
_sequences: Dict[Hashable, int] = {}


def resolve_setting(backend: str, key: str, value: Optional[str]) -> Optional[str]:
    """A backend setting: the explicit value, else ``MMEVAL_<BACKEND>_<KEY>``, else ``MMEVAL_<KEY>``."""
    if value is not None:
        return value
    for var in (f"MMEVAL_{backend.upper()}_{key}", f"MMEVAL_{key}"):
        env = os.environ.get(var)
        if env:
            return env
    return None


def _resolve_timeout(backend: str, timeout: Optional[float]) -> float:
    if timeout is not None:
        value, origin = float(timeout), "timeout="
    else:
        raw = None
        origin = ""
        for var in (f"MMEVAL_{backend.upper()}_TIMEOUT", "MMEVAL_TIMEOUT"):
            if os.environ.get(var):
                raw, origin = os.environ[var], var
                break
        if raw is None:
            return DEFAULT_TIMEOUT
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"{origin}={raw!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"{backend}: {origin} must be a positive number of seconds, got {value!r}")
    return value


class FramedDistBackend(BaseDistBackend):
    """A backend whose object collectives run through mmeval's frame protocol.

    Subclasses implement :attr:`is_initialized`, :attr:`rank`,
    :attr:`world_size` and four transport primitives. Every primitive gets a
    ``timeout`` in seconds and must raise ``TimeoutError`` (or any exception;
    it is wrapped) rather than wait longer:

    * :meth:`_exchange_slots` -- all-gather ``SLOT_SIZE`` bytes per rank;
    * :meth:`_all_gather_bytes` -- all-gather byte blocks of known sizes;
    * :meth:`_gather_bytes` -- the same, to one rank;
    * :meth:`_broadcast_bytes` -- one rank's block to all.

    Args:
        timeout: seconds before a collective gives up (see the module doc).
        codec: ``'pickle'`` (default) or ``'safe'`` (plain data only; see
            :mod:`mmeval.core.safe_codec`); else ``MMEVAL_<NAME>_CODEC`` or
            ``MMEVAL_CODEC``. Every rank must use the same codec.
    """

    def __init__(self, *, timeout: Optional[float] = None, codec: Optional[str] = None) -> None:
        label = self.name or type(self).__name__
        self.timeout: float = _resolve_timeout(label, timeout)
        self.codec: str = resolve_setting(label, "CODEC", codec) or "pickle"
        codec_id(self.codec)

    # -- transport primitives ---------------------------------------------

    @abstractmethod
    def _exchange_slots(self, fill: Fill, timeout: float) -> Sequence[memoryview]:
        """All-gather one ``SLOT_SIZE``-byte block per rank.

        Allocate a send buffer of ``SLOT_SIZE`` bytes, call ``fill`` on it,
        all-gather, and return one ``SLOT_SIZE``-byte view per rank in rank order.
        """

    @abstractmethod
    def _all_gather_bytes(self, sizes: Sequence[int], fill: Fill, timeout: float) -> Sequence[memoryview]:
        """All-gather byte blocks; rank ``r`` contributes ``sizes[r]`` bytes.

        Allocate a send buffer of at least ``sizes[self.rank]`` bytes, call
        ``fill`` on its first ``sizes[self.rank]`` bytes, and return one view
        of exactly ``sizes[r]`` bytes per rank.
        """

    @abstractmethod
    def _gather_bytes(self, sizes: Sequence[int], fill: Fill, dst: int, timeout: float) -> Optional[Sequence[memoryview]]:
        """Like :meth:`_all_gather_bytes`, but only ``dst`` receives (others return ``None``)."""

    @abstractmethod
    def _broadcast_bytes(self, size: int, fill: Optional[Fill], src: int, timeout: float) -> Optional[memoryview]:
        """Broadcast ``size`` bytes from ``src``; ``fill`` is given on ``src`` only.

        Non-source ranks return a view of the ``size`` received bytes; ``src``
        may return ``None``.
        """

    def _sequence_key(self) -> Hashable:
        """Key of the communicator whose collectives are counted together.

        Override to return the underlying group / communicator so that several
        backend objects over one group share one sequence.
        """
        return id(self)

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

    # -- machinery ----------------------------------------------------------

    def _local_copy(self, obj: Any) -> Any:
        # a world of one still returns an independent object, and fails as a larger world would
        try:
            frame = encode(obj, self.codec)
        except Exception as exc:
            raise RemoteSerializationError(
                f"{self.name}: rank 0 (of 1) could not serialize its object ({type(exc).__name__}: {exc}). "
                f"Send only picklable objects{' of plain data (codec=safe)' if self.codec == 'safe' else ''}."
            ) from exc
        return decode(frame.tobytes(), self.codec)

    def _check_root(self, op: str, arg: str, root: int) -> None:
        ws = self.world_size
        if not isinstance(root, int) or not 0 <= root < ws:
            raise ValueError(f"{self.name}.{op}: {arg}={root!r} is not a rank of this group (0..{ws - 1})")

    def _next_seq(self) -> int:
        key = self._sequence_key()
        with _seq_lock:
            seq = _sequences.get(key, 0) + 1
            _sequences[key] = seq
        return seq

    def _collective(self, op: int, obj: Any, root: int) -> Any:
        name = self.name or type(self).__name__
        op_name = Op.NAMES[op]
        rank, ws = self.rank, self.world_size
        seq = self._next_seq()
        emit = hooks.hooks_active()
        if emit:
            hooks.emit_start(op_name, name, rank, ws)
        start = time.monotonic()
        counters = [0, 0]  # bytes sent, received
        try:
            result = self._run(op, op_name, obj, root, seq, rank, ws, start, counters)
        except BaseException as exc:
            if emit:
                self._emit(op_name, name, rank, ws, root, seq, counters, start, type(exc).__name__, str(exc))
            raise
        if emit:
            self._emit(op_name, name, rank, ws, root, seq, counters, start, "ok", "")
        return result

    def _emit(self, op: str, name: str, rank: int, ws: int, root: int, seq: int,
              counters: List[int], start: float, outcome: str, error: str) -> None:
        hooks.emit(
            hooks.CollectiveEvent(
                op=op, backend=name, rank=rank, world_size=ws, root=None if root < 0 else root, seq=seq,
                bytes_sent=counters[0], bytes_received=counters[1], seconds=time.monotonic() - start,
                outcome=outcome, error=error,
            )
        )

    def _remaining(self, start: float, what: str, op_name: str, seq: int) -> float:
        left = self.timeout - (time.monotonic() - start)
        if left <= 0:
            raise self._timeout_error(op_name, seq, what)
        return left

    def _timeout_error(self, op_name: str, seq: int, what: str) -> CollectiveTimeoutError:
        return CollectiveTimeoutError(
            f"{self.name}: {op_name} (collective #{seq} on rank {self.rank} of {self.world_size}) did not "
            f"complete within {self.timeout:g}s while {what}: a peer rank died, hung, or never called it. "
            f"Set the limit with timeout=... or MMEVAL_{self.name.upper()}_TIMEOUT / MMEVAL_TIMEOUT."
        )

    def _transport(self, call: Callable[[], Any], op_name: str, seq: int, what: str) -> Any:
        try:
            return call()
        except DistCommunicationError:
            raise
        except TimeoutError as exc:
            raise self._timeout_error(op_name, seq, what) from exc
        except Exception as exc:
            raise CollectiveFailedError(
                f"{self.name}: {op_name} (collective #{seq} on rank {self.rank} of {self.world_size}) "
                f"failed while {what}: {type(exc).__name__}: {exc}. A peer rank has probably died; "
                "the group cannot be used for further collectives."
            ) from exc

    def _run(self, op: int, op_name: str, obj: Any, root: int, seq: int, rank: int, ws: int,
             start: float, counters: List[int]) -> Any:
        sends = op in (Op.ALL_GATHER, Op.GATHER) or (op == Op.BROADCAST and rank == root)
        frame: Optional[Frame] = None
        local_exc: Optional[BaseException] = None
        status, error = Status.OK, ""
        if sends:
            try:
                frame = encode(obj, self.codec)
            except Exception as exc:
                local_exc = exc
                status = Status.ENCODE_ERROR
                error = f"{type(exc).__name__}: {exc}"
        my_codec = CODECS[self.codec]

        def fill_slot(buf: memoryview) -> None:
            build_slot(buf, status=status, op=op, codec=my_codec, seq=seq, root=root, payload=frame, error=error)

        slots = self._transport(
            lambda: self._exchange_slots(fill_slot, self._remaining(start, "exchanging headers", op_name, seq)),
            op_name, seq, "exchanging headers",
        )
        counters[0] += SLOT_SIZE
        counters[1] += SLOT_SIZE * (ws - 1)
        headers = [parse_slot(s) for s in slots]
        self._check_headers(headers, op, op_name, seq, root, local_exc)

        if op == Op.BARRIER:
            return None
        if op == Op.BROADCAST:
            if rank == root:
                if not headers[root].inline:
                    assert frame is not None
                    size = frame.nbytes
                    self._transport(
                        lambda: self._broadcast_bytes(size, frame, root,
                                                      self._remaining(start, "sending the payload", op_name, seq)),
                        op_name, seq, "sending the payload",
                    )
                    counters[0] += size * (ws - 1)
                return obj
            head = headers[root]
            if head.inline:
                return decode(head.data, self.codec)  # type: ignore[arg-type]
            data = self._transport(
                lambda: self._broadcast_bytes(head.payload_size, None, root,
                                              self._remaining(start, "receiving the payload", op_name, seq)),
                op_name, seq, "receiving the payload",
            )
            counters[1] += head.payload_size
            return decode(data, self.codec)

        # gathers
        assert frame is not None
        if all(h.inline for h in headers):
            if op == Op.GATHER and rank != root:
                return None
            return [decode(h.data, self.codec) for h in headers]  # type: ignore[arg-type]
        sizes = [h.payload_size for h in headers]
        if op == Op.ALL_GATHER:
            blocks = self._transport(
                lambda: self._all_gather_bytes(sizes, frame,
                                               self._remaining(start, "exchanging payloads", op_name, seq)),
                op_name, seq, "exchanging payloads",
            )
            counters[0] += sizes[rank] * (ws - 1)
            counters[1] += sum(sizes) - sizes[rank]
        else:
            blocks = self._transport(
                lambda: self._gather_bytes(sizes, frame, root,
                                           self._remaining(start, "gathering payloads", op_name, seq)),
                op_name, seq, "gathering payloads",
            )
            if rank != root:
                counters[0] += sizes[rank]
                return None
            counters[1] += sum(sizes) - sizes[rank]
        return [decode(b, self.codec) for b in blocks]

    def _check_headers(self, headers: List[SlotHeader], op: int, op_name: str, seq: int, root: int,
                       local_exc: Optional[BaseException]) -> None:
        name = self.name
        failed = [(r, h) for r, h in enumerate(headers) if h.status != Status.OK]
        if failed:
            detail = "; ".join(f"rank {r}: {h.error_text()}" for r, h in failed)
            raise RemoteSerializationError(
                f"{name}: {op_name} (collective #{seq}) aborted on every rank because "
                f"{'rank' if len(failed) == 1 else 'ranks'} {', '.join(str(r) for r, _ in failed)} "
                f"could not serialize {'its' if len(failed) == 1 else 'their'} object ({detail}). "
                f"Send only picklable objects{' of plain data (codec=safe)' if self.codec == 'safe' else ''}."
            ) from local_exc
        calls = [(h.op, h.root, h.seq, h.codec) for h in headers]
        if len(set(calls)) == 1:
            return

        def describe(h: SlotHeader) -> str:
            arg = ""
            if h.op == Op.GATHER:
                arg = f"dst={h.root}"
            elif h.op == Op.BROADCAST:
                arg = f"src={h.root}"
            codec = {v: k for k, v in CODECS.items()}.get(h.codec, "?")
            return f"{h.op_name}({arg}) #{h.seq} codec={codec}"

        detail = "; ".join(f"rank {r}: {describe(h)}" for r, h in enumerate(headers))
        hint = "Every rank must call the same collectives, in the same order, with the same src/dst and codec."
        if len({h.seq for h in headers}) > 1:
            hint += " The sequence numbers differ: a rank called more collectives than the others."
        raise CollectiveMismatchError(f"{name}: ranks disagree on the collective ({detail}). {hint}")
