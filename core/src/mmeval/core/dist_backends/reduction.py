"""The framed reductions: ``all_reduce`` / ``reduce`` over the slot and the transport's primitives.

The array's (shape, dtype, op) travels in the slot and is agreed there; an
array that fits rides in the slot too (one collective). A larger one goes to
the backend's native ``_all_reduce_array`` / ``_reduce_array`` only for the
(dtype, op) pairs its class declares in ``native_reductions`` -- other integer
dtypes are converted to a declared wider one and back (exact), and everything
else (float ``min`` / ``max``, whose NaN no transport propagates as numpy does;
long double; undeclared dtypes) takes the byte path: the raw bytes are
all-gathered (or gathered to ``dst``) and reduced in rank order with numpy.
So every dtype the input check accepts works at every size on every backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, AbstractSet, Any, Callable, List, Optional, Sequence, Tuple

from ..wire import (
    HEADER_SIZE,
    SLOT_SIZE,
    Frame,
    Op,
    SlotHeader,
    Status,
    build_slot,
    encode_reduce_descriptor,
    parse_reduce_descriptor,
)
from ._reduce import ReduceHeader, check_reduce_headers, check_reduce_input, local_result, reduce_in_rank_order
from .agreement import check_headers, check_question
from .transport import Call, question_bytes

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from .framed_backend import FramedDistBackend

__all__ = ["framed_reduction", "native_dtype", "gathered_reduction"]

_REDUCTIONS = (Op.ALL_REDUCE, Op.REDUCE)


def native_dtype(native: AbstractSet[Tuple[str, str]], dtype: "np.dtype", op: str) -> "Optional[np.dtype]":
    """The dtype in which a backend's native reduction reduces a ``dtype`` array with ``op``, or ``None``: byte path.

    ``native`` holds the backend's declared ``(dtype name, op)`` pairs. Float
    ``min`` / ``max`` always take the byte path (NaN propagates there as in
    numpy); integers may widen (exact for min / max, and for sums, which wrap
    the same way once cast back).
    """
    import numpy as np

    if not native or dtype.kind not in "iuf" or (dtype.kind == "f" and op != "sum"):
        return None
    plain = dtype.newbyteorder("=")
    if (plain.name, op) in native:
        return np.dtype(plain.str)  # type: ignore[no-any-return]
    if dtype.kind == "f":
        return None
    for name in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"):
        wider = np.dtype(name)
        if wider.itemsize > dtype.itemsize and np.can_cast(dtype, wider) and (name, op) in native:
            return wider
    return None


def gathered_reduction(blocks: Optional[Sequence[memoryview]], array: "np.ndarray", op: str) -> "Optional[np.ndarray]":
    """The byte path's reduce: every rank's raw bytes (rank order) reduced with numpy; ``None`` without blocks."""
    import numpy as np

    if blocks is None:
        return None
    return reduce_in_rank_order([np.frombuffer(b, array.dtype) for b in blocks], op, array.dtype, array.shape)


def framed_reduction(backend: "FramedDistBackend", code: int, array: Any, op: Any, dst: int) -> Any:
    """``all_reduce`` (``code`` ``Op.ALL_REDUCE``) or ``reduce`` of a framed backend, with every group guarantee."""
    name = backend.name or type(backend).__name__
    header, error = check_reduce_input(name, Op.NAMES[code], array, op, dst, backend.world_size)
    if backend.world_size == 1:
        if error is not None:
            raise error
        return local_result(array)
    root = header.dst if code == Op.REDUCE else -1
    return backend._guard.run(
        code, root, lambda call, counters: _reduce(backend, call, code, header, error, array, counters)
    )


def _parse(h: SlotHeader) -> Tuple[ReduceHeader, Optional[memoryview]]:
    dst = h.root if h.op == Op.REDUCE else -1
    if h.status != Status.OK:
        return ReduceHeader(h.op_name, (), "?", "?", dst, h.error_text()), None
    shape, dtype, op, body = parse_reduce_descriptor(h.data)
    return ReduceHeader(h.op_name, shape, dtype, op, dst), body


def _reduce(
    backend: "FramedDistBackend",
    call: Call,
    code: int,
    header: ReduceHeader,
    local_error: Optional[BaseException],
    array: Any,
    counters: List[int],
) -> Any:
    import numpy as np

    rank, ws, root = call.rank, call.world_size, call.root
    question = question_bytes()
    slot = memoryview(bytearray(SLOT_SIZE))
    common = dict(
        op=code, codec=backend.wire_codec.id, seq=call.seq, root=root, question=question, deadline=call.wall_deadline
    )
    raw: Optional[memoryview] = None
    if local_error is not None:
        build_slot(slot, status=Status.ENCODE_ERROR, error=header.error, **common)  # type: ignore[arg-type]
    else:
        if not array.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
            array = array.copy(order="C")
        raw = array.reshape(-1).view(np.uint8).data
        desc = encode_reduce_descriptor(header.shape, header.dtype, header.op, inline=True)
        inline = len(desc) + raw.nbytes <= SLOT_SIZE - HEADER_SIZE - len(question)
        if not inline:
            desc = encode_reduce_descriptor(header.shape, header.dtype, header.op, inline=False)
        parts = [(0, memoryview(desc))] + ([(len(desc), raw)] if inline else [])
        build_slot(slot, status=Status.OK, payload=Frame(parts, len(desc) + (raw.nbytes if inline else 0)), **common)  # type: ignore[arg-type]
    headers = backend._exchange_headers(call, slot, counters)
    if len({(h.op in _REDUCTIONS, h.seq, h.codec) for h in headers}) != 1 or headers[0].op not in _REDUCTIONS:
        check_headers(backend.name, headers, call, local_error, backend._serialize_hint())  # says which collective
    check_question(backend.name, headers, call)  # a different question (metric configuration) explains the rest
    parsed = [_parse(h) for h in headers]
    check_reduce_headers(backend.name or type(backend).__name__, call.op, [p[0] for p in parsed], rank, local_error)
    dtype, op = array.dtype, header.op
    bodies = [body for _, body in parsed if body is not None]
    if len(bodies) == ws:  # every array rode in its slot
        if code == Op.REDUCE and rank != root:
            return None
        return reduce_in_rank_order([np.frombuffer(b, dtype) for b in bodies], op, dtype, array.shape)
    call.phase = "payload"
    native = native_dtype(type(backend).native_reductions, dtype, op)
    work = array if native is None or native == dtype else array.astype(native)
    call.frame = Frame([(0, work.reshape(-1).view(np.uint8).data)], work.nbytes)
    call.sizes = [work.nbytes] * ws
    nbytes = work.nbytes
    step: Callable[[], Optional[np.ndarray]]
    if code == Op.ALL_REDUCE:
        if native is not None:
            step = lambda: backend._all_reduce_array(call, work, op)  # noqa: E731
            moved = 2 * (ws - 1) * nbytes // ws  # a ring's share
        else:
            step = lambda: gathered_reduction(backend._all_gather_bytes(call), work, op)  # noqa: E731
            moved = nbytes * (ws - 1)
        out = backend._guard.transport_step(call, "reducing payloads", step)
        counters[0] += moved
        counters[1] += moved
    else:
        if native is not None:
            step = lambda: backend._reduce_array(call, work, op)  # noqa: E731
        else:
            step = lambda: gathered_reduction(backend._gather_bytes(call), work, op)  # noqa: E731
        out = backend._guard.transport_step(call, f"reducing payloads to rank {root}", step)
        if rank != root:
            counters[0] += nbytes
            return None
        counters[1] += nbytes * (ws - 1)
    result = np.asarray(out)
    if result.dtype != work.dtype or result.size != work.size:
        raise backend._guard.fail(
            call,
            RuntimeError(
                f"{type(backend).__name__}'s reduction primitive returned a {result.dtype} array of {result.size} "
                f"elements for a {work.dtype} array of {work.size}: a bug in the backend"
            ),
        )
    return result.astype(dtype, copy=False).reshape(array.shape)
