"""Reductions, in one file: the input checks, the per-rank header and its agreement, the reduce in rank
order, and the framed ``all_reduce`` / ``reduce`` over the slot and the transport's primitives.

Every backend's ``all_reduce`` / ``reduce`` goes through the checks here, so that
the same wrong input raises the same error everywhere and the result is
computed the same way wherever the core computes it (rank order, numpy, the
input's dtype).

The framed path: the array's (shape, dtype, op) travels in the slot and is
agreed there; an array that fits rides in the slot too (one collective). A
larger one goes to the backend's native ``_all_reduce_array`` /
``_reduce_array`` only for the (dtype, op) pairs its class declares in
``native_reductions`` -- other integer dtypes are converted to a declared
wider one and back (exact), and everything else (float ``min`` / ``max``,
whose NaN no transport propagates as numpy does; long double; undeclared
dtypes) takes the byte path: the raw bytes are all-gathered (or gathered to
``dst``) and reduced in rank order with numpy. So every dtype the input check
accepts works at every size on every backend.

numpy, the wire and the framed machinery are imported inside the functions
that use them: the registry imports the backend package (and with it the checks
here) without paying for them.
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    AbstractSet,
    Any,
    Callable,
    ClassVar,
    Dict,
    FrozenSet,
    Iterable,
    List,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Tuple,
)

from ..errors import CollectiveMismatchError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..wire import SlotHeader
    from ..wire.codecs import Codec
    from .guard import GroupGuard
    from .transport import Call

__all__ = [
    "REDUCE_OPS",
    "native_pairs",
    "ReduceHeader",
    "check_reduce_input",
    "check_reduce_headers",
    "reduce_in_rank_order",
    "local_result",
    "FramedReducer",
    "framed_reduction",
    "native_dtype",
    "gathered_reduction",
]


class FramedReducer(Protocol):
    """What :func:`framed_reduction` reads of its backend (a ``FramedDistBackend``): the extension points it runs.

    The header exchange and the four primitives are the framed backend's members a transport
    overrides (see :mod:`.framed_backend`); the guard holds its group's guarantees.
    """

    name: ClassVar[str]
    native_reductions: ClassVar[AbstractSet[Tuple[str, str]]]
    _guard: "GroupGuard"

    @property
    def world_size(self) -> int: ...

    @property
    def wire_codec(self) -> "Codec": ...

    def _exchange_headers(self, call: "Call", slot: memoryview, counters: List[int]) -> "List[SlotHeader]": ...

    def _serialize_hint(self) -> str: ...

    def _all_gather_bytes(self, call: "Call") -> Sequence[memoryview]: ...

    def _gather_bytes(self, call: "Call") -> Optional[Sequence[memoryview]]: ...

    def _all_reduce_array(self, call: "Call", array: "np.ndarray", op: str) -> "np.ndarray": ...

    def _reduce_array(self, call: "Call", array: "np.ndarray", op: str) -> "Optional[np.ndarray]": ...


#: The reduction operations every backend supports, by the name ``all_reduce`` / ``reduce`` take.
REDUCE_OPS: Tuple[str, ...] = ("sum", "min", "max")


def native_pairs(ints: Iterable[str] = (), float_sums: Iterable[str] = ()) -> FrozenSet[Tuple[str, str]]:
    """A backend's ``native_reductions``: every op for the integer dtypes ``ints``, ``sum`` for the float ones.

    E.g. ``native_pairs(ints=("int8", "uint8", "int32", "int64"), float_sums=("float32", "float64"))``.
    (Float ``min`` / ``max`` always take the core's byte path, where NaN propagates as in numpy.)
    """
    return frozenset([(d, op) for d in ints for op in REDUCE_OPS] + [(d, "sum") for d in float_sums])


#: numpy dtype kinds a reduction accepts: signed integer, unsigned integer, float.
_KINDS = "iuf"


class ReduceHeader(NamedTuple):
    """What a rank asks of a reduction; every rank must ask the same (``error``: why its input was refused)."""

    call: str
    shape: Tuple[int, ...]
    dtype: str
    op: str
    dst: int
    error: str = ""

    def field_values(self) -> Dict[str, str]:
        """The fields compared across ranks, as text (``dst`` only for ``reduce``)."""
        out = {"call": self.call, "shape": str(self.shape), "dtype": self.dtype, "op": repr(self.op)}
        if self.call == "reduce":
            out["dst"] = str(self.dst)
        return out


def check_reduce_input(
    backend: str, call: str, array: Any, op: Any, dst: int = -1, world_size: int = 1
) -> Tuple[ReduceHeader, Optional[BaseException]]:
    """Check one rank's arguments to ``all_reduce`` / ``reduce``.

    Returns this rank's header and, when the input is refused, the error to
    raise on this rank (a ``TypeError`` or ``ValueError`` naming the backend,
    the call and what to pass). A refused header still travels to the other
    ranks (its ``error`` set), so that they raise too instead of waiting.
    """
    where = f"{backend}.{call}"
    shape: Tuple[int, ...] = ()
    dtype = "?"
    error: Optional[BaseException] = None
    import numpy as np

    if not isinstance(array, np.ndarray):
        error = TypeError(
            f"{where}: array must be a numpy.ndarray of integer, unsigned or float dtype, got "
            f"{type(array).__module__}.{type(array).__qualname__}; pass numpy.asarray(value) (a tensor: "
            ".cpu().numpy())"
        )
    else:
        shape, dtype = tuple(int(n) for n in array.shape), array.dtype.str
        if array.dtype.kind not in _KINDS:
            kind = {"b": "bool", "c": "complex", "O": "object"}.get(array.dtype.kind, f"non-numeric ({array.dtype})")
            hint = (
                "cast it with .astype(numpy.int64)"
                if array.dtype.kind == "b"
                else (
                    "reduce the real and imaginary parts as float arrays"
                    if array.dtype.kind == "c"
                    else "pass an array of integer, unsigned or float dtype"
                )
            )
            error = TypeError(
                f"{where}: array has {kind} dtype {array.dtype}; only integer, unsigned and float arrays can be "
                f"reduced: {hint}"
            )
    if error is None and (not isinstance(op, str) or op not in REDUCE_OPS):
        error = ValueError(f"{where}: op={op!r} is not a reduction; pass one of {', '.join(map(repr, REDUCE_OPS))}")
    if (
        error is None
        and call == "reduce"
        and (isinstance(dst, bool) or not isinstance(dst, int) or not 0 <= dst < world_size)
    ):
        error = ValueError(f"{where}: dst={dst!r} is not a rank of this group (0..{world_size - 1})")
    header = ReduceHeader(
        call,
        shape,
        dtype,
        op if isinstance(op, str) else repr(op),
        dst if isinstance(dst, int) else -1,
        str(error) if error is not None else "",
    )
    return header, error


def check_reduce_headers(
    backend: str, call: str, headers: Sequence[ReduceHeader], rank: int, local_error: Optional[BaseException]
) -> None:
    """Raise on every rank when any rank's input was refused or the ranks' headers differ.

    A rank whose own input was refused raises its own error; the others raise
    :class:`~mmeval.core.errors.CollectiveMismatchError` naming the refused
    rank and why. Headers that differ raise it naming each differing field and
    every rank's value.
    """
    if local_error is not None:
        raise local_error
    refused = [(r, h) for r, h in enumerate(headers) if h.error]
    if refused:
        detail = "; ".join(f"rank {r}: {h.error}" for r, h in refused)
        raise CollectiveMismatchError(
            f"{backend}.{call} aborted on rank {rank}: "
            f"{'rank' if len(refused) == 1 else 'ranks'} {', '.join(str(r) for r, _ in refused)} "
            f"passed an input that cannot be reduced ({detail}). Fix the input there; every rank must pass a "
            "numeric array of the same shape and dtype, and the same op."
        )
    if len(set(headers)) == 1:
        return
    values = [h.field_values() for h in headers]
    fields = [f for f in ("call", "shape", "dtype", "op", "dst") if len({v.get(f, "-") for v in values}) > 1]
    lines = "; ".join(f"{f}: " + ", ".join(f"rank {r}={v.get(f, '-')}" for r, v in enumerate(values)) for f in fields)
    raise CollectiveMismatchError(
        f"{backend}.{call} (on rank {rank}): ranks disagree on the reduction ({lines}). Every rank must call the "
        "same reduction with an array of the same shape and dtype, the same op and the same dst."
    )


def reduce_in_rank_order(arrays: Sequence["np.ndarray"], op: str, dtype: Any, shape: Sequence[int]) -> "np.ndarray":
    """Reduce ``arrays`` (one per rank, rank order) with numpy, in rank order, into a new array.

    The result has ``dtype`` and ``shape``. Integers wrap around on overflow
    (as MPI's and torch's sums do); ``min`` / ``max`` propagate NaN. Any rank
    computing this from the same arrays gets the same bits.
    """
    import numpy as np

    ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}[op]
    out = np.array(arrays[0], dtype=dtype, copy=True).reshape(tuple(shape))
    with np.errstate(over="ignore"):
        for other in arrays[1:]:
            ufunc(out, np.asarray(other).reshape(out.shape), out=out)
    return out


def local_result(array: "np.ndarray") -> "np.ndarray":
    """A world of one's reduction: an independent copy of ``array`` (same shape and dtype)."""
    import numpy as np

    return np.array(array, copy=True)


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


def framed_reduction(backend: FramedReducer, code: int, array: Any, op: Any, dst: int) -> Any:
    """``all_reduce`` (``code`` ``Op.ALL_REDUCE``) or ``reduce`` of a framed backend, with every group guarantee."""
    from ..wire import Op

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


def _parse(h: "SlotHeader") -> Tuple[ReduceHeader, Optional[memoryview]]:
    from ..wire import Op, Status, parse_reduce_descriptor

    dst = h.root if h.op == Op.REDUCE else -1
    if h.status != Status.OK:
        return ReduceHeader(h.op_name, (), "?", "?", dst, h.error_text()), None
    shape, dtype, op, body = parse_reduce_descriptor(h.data)
    return ReduceHeader(h.op_name, shape, dtype, op, dst), body


def _reduce(
    backend: FramedReducer,
    call: "Call",
    code: int,
    header: ReduceHeader,
    local_error: Optional[BaseException],
    array: Any,
    counters: List[int],
) -> Any:
    import numpy as np

    from ..wire import HEADER_SIZE, SLOT_SIZE, Frame, Op, Status, build_slot, encode_reduce_descriptor
    from .agreement import check_headers, check_question
    from .transport import question_bytes

    reductions = (Op.ALL_REDUCE, Op.REDUCE)
    rank, ws, root = call.rank, call.world_size, call.root
    question = question_bytes()
    slot = memoryview(bytearray(SLOT_SIZE))
    common = dict(
        op=code,
        codec=backend.wire_codec.id,
        seq=call.seq,
        root=root,
        question=question,
        deadline=call.wall_deadline,
        start=call.wall_start,
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
    if len({(h.op in reductions, h.seq, h.codec) for h in headers}) != 1 or headers[0].op not in reductions:
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
