"""Objects to frames and back: the one serialization module of mmeval.

Every built-in backend moves Python objects the same way:

1. A fixed-size *slot* (:data:`SLOT_SIZE` bytes) is exchanged by every rank
   of the group (one all-gather of equal-sized blocks). The slot carries a
   small header -- status, operation, sequence number, root, payload size,
   codec -- and, when the encoded object is small enough, the payload itself
   (*inline*), so small objects need a single collective.
2. When a payload did not fit, the *frame* is sent by the transport's byte
   collective (all-gather, gather or broadcast). Sizes are already known from
   the slots, so no second size exchange is needed.

A frame is the encoded object::

    prefix  <4s magic "MMF1"> <u8 codec> <u8 flags> <u16 reserved> <u32 nbuf> <u64 meta_len>
    nbuf x <u64 buffer length>
    meta    (pickle stream, or the safe codec's stream)
    buffers (each starting at a multiple of 64 bytes from the frame start)

With the pickle codec, contiguous buffers (numpy arrays, tensors through the
plugins) are taken out-of-band with pickle protocol 5: they are copied once,
straight into the transport's send buffer, and on the receiving side the
arrays are rebuilt as views of the received bytes (no copy).

Security: the ``pickle`` codec runs whatever the peer's bytes say. Every rank
of a group must trust every other rank (they run your program anyway). Use the
``safe`` codec (:mod:`mmeval.core.safe_codec`) to accept only plain data.
"""

from __future__ import annotations

import contextlib
import gc
import io
import operator
import pickle
import struct
import sys
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .errors import FrameDecodeError, UnsafePayloadError

__all__ = [
    "SLOT_SIZE",
    "HEADER_SIZE",
    "INLINE_MAX",
    "ALIGN",
    "CODECS",
    "Op",
    "Status",
    "SlotHeader",
    "Frame",
    "encode",
    "decode",
    "build_slot",
    "parse_slot",
    "register_reducer",
    "codec_id",
]

Buffer = Union[bytes, bytearray, memoryview]

#: Size of the per-rank block exchanged at the start of every collective.
SLOT_SIZE = 4096
#: Bytes of the slot taken by the header (the rest may hold an inline payload).
HEADER_SIZE = 64
#: Largest payload carried inline in the slot.
INLINE_MAX = SLOT_SIZE - HEADER_SIZE
#: Alignment of out-of-band buffers inside a frame.
ALIGN = 64

_SLOT_MAGIC = b"MMEV"
_SLOT_VERSION = 1
# magic, version, status, op, codec, seq, root, payload_size, inline flag
_SLOT_HEAD = struct.Struct("<4sBBBBQqQB7x")
_SLOT_CRC = struct.Struct("<I")
assert _SLOT_HEAD.size + _SLOT_CRC.size <= HEADER_SIZE

_FRAME_MAGIC = b"MMF1"
_FRAME_PREFIX = struct.Struct("<4sBBHIQ")
_U64 = struct.Struct("<Q")

#: Codec names and the id each is sent as.
CODECS: Dict[str, int] = {"pickle": 1, "safe": 2}
_CODEC_NAMES = {v: k for k, v in CODECS.items()}


class Op:
    """Operation codes carried in the slot header."""

    ALL_GATHER = 1
    GATHER = 2
    BROADCAST = 3
    BARRIER = 4

    NAMES = {1: "all_gather_object", 2: "gather_object", 3: "broadcast_object", 4: "barrier"}


class Status:
    """Status codes carried in the slot header."""

    OK = 0
    ENCODE_ERROR = 1


def codec_id(name: str) -> int:
    """Return the wire id of codec ``name``; raise ``ValueError`` naming the choices."""
    try:
        return CODECS[name]
    except KeyError:
        raise ValueError(
            f"unknown codec {name!r}: choose one of {sorted(CODECS)} "
            "(set it per backend with codec=... or with MMEVAL_CODEC)"
        ) from None


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


# --------------------------------------------------------------------------
# frames
# --------------------------------------------------------------------------


class Frame:
    """An encoded object: a list of byte segments placed at known offsets.

    ``nbytes`` is the frame's total size; :meth:`write_into` copies the frame
    into a caller-provided buffer (the transport's send buffer), which is the
    only copy of the out-of-band data on the sending side.
    """

    __slots__ = ("nbytes", "_parts")

    def __init__(self, parts: List[Tuple[int, memoryview]], nbytes: int) -> None:
        self._parts = parts
        self.nbytes = nbytes

    def write_into(self, out: memoryview) -> None:
        """Write the whole frame to ``out[:nbytes]`` (``out`` must be writable, 1-D bytes)."""
        if out.nbytes < self.nbytes:
            raise ValueError(f"frame of {self.nbytes} bytes does not fit in {out.nbytes}")
        self.write_range(_as_byte_view(out)[: self.nbytes], 0)

    @property
    def parts(self) -> List[Tuple[int, memoryview]]:
        """The frame's segments as ``(offset, bytes)``, in order; gaps between them are zeros.

        A transport may send a large segment (an out-of-band array) straight
        from this memory instead of copying it: the views stay valid while the
        frame exists, and must only be read.
        """
        return list(self._parts)

    def segment_view(self, start: int, stop: int) -> Optional[memoryview]:
        """Bytes ``start:stop`` of the frame as a read-only view of the one segment holding them all, else ``None``.

        A transport may send such a range straight from that memory (an
        out-of-band array's segment is the caller's array) instead of copying
        it; a range that touches a gap or two segments must be written with
        :meth:`write_range`.
        """
        for offset, part in self._parts:
            if offset > start:
                break
            if stop <= offset + part.nbytes:
                return part[start - offset : stop - offset].toreadonly()
        return None

    def __call__(self, out: memoryview) -> None:
        """Same as :meth:`write_into`: a frame is the ``fill`` callback the transports receive."""
        self.write_into(out)

    def write_range(self, out: memoryview, start: int) -> None:
        """Write bytes ``start .. start + out.nbytes`` of the frame (clipped to its end) to ``out``.

        Lets a transport send a large frame in chunks through a small staging
        buffer instead of copying all of it into one fresh buffer first.
        """
        out = _as_byte_view(out)
        stop = min(start + out.nbytes, self.nbytes)
        if start < 0 or start > stop:
            raise ValueError(f"range starting at {start} is outside the {self.nbytes}-byte frame")
        pos = start  # the frame position of the next byte to write
        for offset, part in self._parts:
            end = offset + part.nbytes
            if end <= pos:
                continue
            if offset >= stop:
                break
            if offset > pos:  # zero the alignment gap: no stale memory is sent
                out[pos - start : offset - start] = bytes(offset - pos)
                pos = offset
            upto = min(end, stop)
            out[pos - start : upto - start] = part[pos - offset : upto - offset]
            pos = upto
            if pos >= stop:
                break
        if pos < stop:
            out[pos - start : stop - start] = bytes(stop - pos)

    def tobytes(self) -> bytes:
        """The frame as one ``bytes`` object (copies; for tests and small frames)."""
        buf = bytearray(self.nbytes)
        self.write_into(memoryview(buf))
        return bytes(buf)


def _as_byte_view(buf: Any) -> memoryview:
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.format != "B":
        mv = mv.cast("B")
    return mv


def _assemble(codec: int, meta: Buffer, buffers: Sequence[memoryview]) -> Frame:
    nbuf = len(buffers)
    meta_mv = _as_byte_view(meta)
    head = bytearray(_FRAME_PREFIX.size + 8 * nbuf)
    _FRAME_PREFIX.pack_into(head, 0, _FRAME_MAGIC, codec, 0, 0, nbuf, meta_mv.nbytes)
    for i, b in enumerate(buffers):
        _U64.pack_into(head, _FRAME_PREFIX.size + 8 * i, b.nbytes)
    parts: List[Tuple[int, memoryview]] = [(0, memoryview(head)), (len(head), meta_mv)]
    pos = len(head) + meta_mv.nbytes
    for b in buffers:
        pos = _align(pos)
        parts.append((pos, b))
        pos += b.nbytes
    return Frame(parts, pos)


# pickle with out-of-band buffers ----------------------------------------------

_Reducer = Callable[[Any], Any]
_REDUCERS: Dict[type, _Reducer] = {}


def register_reducer(cls: type, reducer: _Reducer) -> None:
    """Teach the pickle codec a faster reduction for ``cls``.

    ``reducer(obj)`` returns a ``__reduce__``-style tuple; it may put
    ``pickle.PickleBuffer`` objects in its arguments so the bytes travel
    out-of-band. Plugins use this for framework tensors (the torch plugin
    registers ``torch.Tensor``). Exact types only; subclasses are not matched.
    """
    _REDUCERS[cls] = reducer


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        reducer = _REDUCERS.get(type(obj))
        if reducer is None:
            return NotImplemented
        return reducer(obj)


#: Pickle streams shorter than this are decoded without pausing the garbage collector.
_GC_PAUSE_MIN = 1 << 16


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while many container objects are built.

    Rebuilding 100,000 tuples (or unpickling them) otherwise triggers ~140
    young-generation collections and a few full ones, each walking every
    object of the process (a framework's import alone leaves ~10^5): a third
    of the decoding time. Nothing collectable is created meanwhile; the
    collector is restored as it was (left off if the caller had turned it off).

    On the way out the new objects are moved to the oldest generation
    (``gc.freeze()`` then ``gc.unfreeze()``: two list splices, O(1)) instead of
    being walked by the young-generation pass that re-enabling would trigger
    (4-9 ms per 100,000 tuples here). They stay collectable: the next full
    collection sees them. Skipped whenever objects are frozen already
    (``gc.get_freeze_count() > 0``: the program's own ``gc.freeze()``, or
    Python 3.12, which starts with a few hundred frozen), since ``unfreeze``
    would undo that freeze.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


# columnar lists ------------------------------------------------------------------

#: Lists at least this long are checked for the columnar layout.
COLUMNAR_MIN = 512
_SCALARS = (int, float, bool)


_dtype_of = operator.attrgetter("dtype")
_ndim_of = operator.attrgetter("ndim")


def _all_of_type(values: List[Any], t: type) -> bool:
    """Whether every value's exact type is ``t`` (one C-level pass, no Python frame per value)."""
    return set(map(type, values)) == {t}


def _column(values: List[Any]) -> Optional[Tuple[str, Any]]:
    """One column of same-typed values as an array, with how to rebuild it; ``None`` if mixed.

    Checks run as C loops (``set(map(type, ...))``) rather than a Python
    generator per value: the cost is a few ns per value, not ~100.
    """
    first = values[0]
    t = type(first)
    np = sys.modules.get("numpy")
    if np is None:
        return None
    if t in _SCALARS:
        if not _all_of_type(values, t):
            return None
        try:
            arr = np.array(values, dtype={int: np.int64, float: np.float64, bool: np.bool_}[t])
        except OverflowError:
            return None
        return "py", arr
    if t is np.ndarray:
        dt, shape = first.dtype, first.shape
        if not shape or dt.hasobject or not _all_of_type(values, np.ndarray):
            return None
        if len(set(map(_dtype_of, values))) != 1:  # one dtype (byte order included): exact round trip
            return None
        if len(shape) == 1 and set(map(len, values)) == {shape[0]} and set(map(_ndim_of, values)) == {1}:
            try:  # 1-D rows of one length: their bytes, joined by one C loop (3x faster than np.array)
                joined = b"".join(values)
            except (BufferError, TypeError):  # a non-contiguous row: np.array below copies it
                pass
            else:
                return "rows", np.frombuffer(joined, dtype=dt).reshape(len(values), shape[0])
        try:  # rows of different shapes cannot form one array: numpy refuses them
            arr = np.array(values, dtype=dt)
        except (ValueError, TypeError):
            return None
        if arr.shape != (len(values), *shape):
            return None
        return "rows", arr
    if isinstance(first, np.generic) and not first.dtype.hasobject:
        # one dtype, not just one type: np.str_ of different lengths or datetime64 of
        # different units share a type, and one array of them would truncate or convert
        if not _all_of_type(values, t) or len(set(map(_dtype_of, values))) != 1:
            return None
        return "np", np.array(values, dtype=first.dtype)
    return None


class _Columns:
    """A homogeneous list sent as a few contiguous columns (see :func:`_to_columns`)."""

    __slots__ = ("layout", "columns")

    def __init__(self, layout: Any, columns: List[Tuple[str, Any]]) -> None:
        self.layout = layout
        self.columns = columns

    def __reduce__(self) -> Any:
        kinds = tuple(k for k, _ in self.columns)
        return _rebuild_columns, (self.layout, kinds, *[c for _, c in self.columns])


def _unpack_column(kind: str, col: Any) -> List[Any]:
    return col.tolist() if kind == "py" else list(col)


def _rebuild_columns(layout: Any, kinds: Tuple[str, ...], *cols: Any) -> List[Any]:
    """Inverse of :func:`_to_columns`: the original list, rebuilt on the receiving rank."""
    with _gc_paused():
        unpacked = [_unpack_column(k, c) for k, c in zip(kinds, cols)]
        if layout == "flat":
            return unpacked[0]
        if layout == "tuple":
            return list(zip(*unpacked))
        keys = layout[1]
        return [dict(zip(keys, row)) for row in zip(*unpacked)]


def _to_columns(lst: List[Any]) -> Optional[_Columns]:
    """Columns for a list of same-shaped tuples / dicts / arrays / scalars, else ``None``.

    Exact round trip: python ints, floats and bools come back as themselves,
    numpy scalars with their dtype, arrays with their shape and dtype (as rows
    of one array). Anything else (strings, mixed types, ragged shapes) is
    left to pickle.
    """
    first = lst[0]
    t = type(first)
    if t is tuple:
        width = len(first)
        if not width or not _all_of_type(lst, tuple) or set(map(len, lst)) != {width}:
            return None
        cols = []
        for i in range(width):
            col = _column(list(map(operator.itemgetter(i), lst)))
            if col is None:
                return None
            cols.append(col)
        return _Columns("tuple", cols)
    if t is dict:
        keys = tuple(first)
        if not keys or not _all_of_type(lst, dict) or set(map(tuple, lst)) != {keys}:
            return None
        cols = []
        for k in keys:
            col = _column(list(map(operator.itemgetter(k), lst)))
            if col is None:
                return None
            cols.append(col)
        return _Columns(("dict", keys), cols)
    col = _column(lst)
    return None if col is None else _Columns("flat", [col])


#: The only types :func:`_columnarize` looks into (exact types, like the checks).
_CONTAINER_TYPES = frozenset((list, tuple, dict))


def _columnarize(obj: Any, depth: int = 0) -> Any:
    """Replace long homogeneous lists inside ``obj`` (top levels only) by :class:`_Columns`.

    Returns ``obj`` itself when nothing was replaced. Only the values that are
    containers are visited (a small object costs a few microseconds here).
    """
    t = type(obj)
    if t is list:
        if len(obj) >= COLUMNAR_MIN:
            cols = _to_columns(obj)
            return obj if cols is None else cols
        if depth >= 2 or len(obj) > 64:
            return obj
        items: Any = obj
    elif t is tuple or t is dict:
        if depth >= 2 or len(obj) > 64:
            return obj
        items = obj.values() if t is dict else obj
    else:
        return obj
    if _CONTAINER_TYPES.isdisjoint(map(type, items)):  # scalars only: nothing to replace (the common case)
        return obj
    changed: Optional[Dict[Any, Any]] = None  # position or key -> replacement
    for key, value in (obj.items() if t is dict else enumerate(obj)):
        if type(value) in _CONTAINER_TYPES:
            new = _columnarize(value, depth + 1)
            if new is not value:
                if changed is None:
                    changed = {}
                changed[key] = new
    if changed is None:
        return obj
    if t is dict:
        return {**obj, **changed}
    out = [changed.get(i, v) for i, v in enumerate(obj)]
    return out if t is list else tuple(out)


def _pickle_encode(obj: Any) -> Frame:
    buffers: List[memoryview] = []

    def take(pb: pickle.PickleBuffer) -> bool:
        try:
            buffers.append(pb.raw())
        except BufferError:  # not contiguous: serialize in-band
            return True
        return False

    obj = _columnarize(obj)
    if _REDUCERS:
        stream = io.BytesIO()
        _Pickler(stream, protocol=5, buffer_callback=take).dump(obj)
        meta: Buffer = stream.getbuffer()
    else:
        meta = pickle.dumps(obj, protocol=5, buffer_callback=take)
    return _assemble(CODECS["pickle"], meta, buffers)


def encode(obj: Any, codec: str = "pickle") -> Frame:
    """Encode ``obj`` into a :class:`Frame` with the named codec.

    Raises whatever the codec raises for an object it cannot encode
    (``pickle.PicklingError``, ``TypeError``, :class:`UnsafePayloadError`).
    """
    if codec == "pickle":
        return _pickle_encode(obj)
    if codec == "safe":
        from . import safe_codec

        meta, buffers = safe_codec.dumps(obj)
        return _assemble(CODECS["safe"], meta, buffers)
    codec_id(codec)  # raises a ValueError naming the choices
    raise AssertionError("unreachable")


def decode(frame: Buffer, allowed: str = "pickle") -> Any:
    """Decode one frame; ``allowed`` is the receiver's codec policy.

    With ``allowed='safe'`` a frame encoded by the pickle codec is refused
    (:class:`UnsafePayloadError`) before a single byte is unpickled. Any
    malformed frame raises :class:`FrameDecodeError`; nothing is read outside
    ``frame``.
    """
    mv = _as_byte_view(frame)
    size = mv.nbytes
    if size < _FRAME_PREFIX.size:
        raise FrameDecodeError(f"frame of {size} bytes is shorter than its prefix")
    magic, codec, _flags, _res, nbuf, meta_len = _FRAME_PREFIX.unpack_from(mv, 0)
    if magic != _FRAME_MAGIC:
        raise FrameDecodeError(f"bad frame magic {bytes(magic)!r} (expected {_FRAME_MAGIC!r})")
    if codec not in _CODEC_NAMES:
        raise FrameDecodeError(f"frame names unknown codec id {codec}")
    if allowed == "safe" and codec != CODECS["safe"]:
        raise UnsafePayloadError(
            f"received a {_CODEC_NAMES[codec]!r}-encoded frame but this backend only accepts "
            "the 'safe' codec; make every rank use codec='safe' (or MMEVAL_CODEC=safe)"
        )
    pos = _FRAME_PREFIX.size
    if nbuf > (size - pos) // 8:
        raise FrameDecodeError(f"frame claims {nbuf} buffers but is only {size} bytes")
    lengths = [_U64.unpack_from(mv, pos + 8 * i)[0] for i in range(nbuf)]
    pos += 8 * nbuf
    if meta_len > size - pos:
        raise FrameDecodeError(f"frame meta of {meta_len} bytes overruns the {size}-byte frame")
    meta = mv[pos : pos + meta_len]
    pos += meta_len
    buffers: List[memoryview] = []
    for n in lengths:
        pos = _align(pos)
        if n > size - pos:
            raise FrameDecodeError(f"frame buffer of {n} bytes overruns the {size}-byte frame")
        buffers.append(mv[pos : pos + n])
        pos += n
    if codec == CODECS["safe"]:
        from . import safe_codec

        return safe_codec.loads(meta, buffers)
    try:
        if meta_len < _GC_PAUSE_MIN:  # too few objects to trigger a collection: skip the bookkeeping
            return pickle.loads(meta, buffers=buffers)
        with _gc_paused():
            return pickle.loads(meta, buffers=buffers)
    except Exception as exc:
        raise FrameDecodeError(f"could not unpickle a frame: {type(exc).__name__}: {exc}") from exc


# --------------------------------------------------------------------------
# slots
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotHeader:
    """What one rank announced at the start of a collective."""

    status: int
    op: int
    codec: int
    seq: int
    root: int
    payload_size: int
    inline: bool
    #: the inline payload (an encoded frame, or the error text when status != OK)
    data: Optional[memoryview]

    @property
    def op_name(self) -> str:
        return Op.NAMES.get(self.op, f"op#{self.op}")

    def error_text(self) -> str:
        """The error message a failing rank sent (status ``ENCODE_ERROR``)."""
        if self.data is None:
            return "(no message)"
        return bytes(self.data).decode("utf-8", "replace")


def build_slot(
    out: memoryview,
    *,
    status: int,
    op: int,
    codec: int,
    seq: int,
    root: int,
    payload: Optional[Frame] = None,
    error: str = "",
) -> bool:
    """Fill ``out`` (``SLOT_SIZE`` writable bytes) with a header.

    The frame is written inline when it fits; returns whether it was. With a
    non-OK status, ``error`` (UTF-8, truncated to fit) is written inline.
    """
    out = _as_byte_view(out)
    inline = False
    size = 0
    body = b""
    if status != Status.OK:
        body = error.encode("utf-8", "replace")[:INLINE_MAX]
        size, inline = len(body), True
        out[HEADER_SIZE : HEADER_SIZE + size] = body
    elif payload is not None:
        size = payload.nbytes
        if size <= INLINE_MAX:
            payload.write_into(out[HEADER_SIZE : HEADER_SIZE + size])
            inline = True
    _SLOT_HEAD.pack_into(
        out, 0, _SLOT_MAGIC, _SLOT_VERSION, status, op, codec, seq, root, size, int(inline)
    )
    crc = zlib.crc32(out[: _SLOT_HEAD.size])
    if inline:
        crc = zlib.crc32(out[HEADER_SIZE : HEADER_SIZE + size], crc)
    _SLOT_CRC.pack_into(out, _SLOT_HEAD.size, crc)
    return inline


def parse_slot(block: Buffer) -> SlotHeader:
    """Parse and validate one rank's slot; raise :class:`FrameDecodeError` if it is not one."""
    mv = _as_byte_view(block)
    if mv.nbytes < SLOT_SIZE:
        raise FrameDecodeError(f"slot of {mv.nbytes} bytes is shorter than {SLOT_SIZE}")
    magic, version, status, op, codec, seq, root, size, inline = _SLOT_HEAD.unpack_from(mv, 0)
    if magic != _SLOT_MAGIC:
        raise FrameDecodeError(f"bad slot magic {bytes(magic)!r}: the peer is not an mmeval backend")
    if version != _SLOT_VERSION:
        raise FrameDecodeError(
            f"peer speaks slot version {version}, this rank {_SLOT_VERSION}: "
            "install the same mmeval-core on every rank"
        )
    if inline not in (0, 1) or (inline and size > INLINE_MAX) or op not in Op.NAMES:
        raise FrameDecodeError("corrupted slot header (inline flag, size or operation out of range)")
    if status not in (Status.OK, Status.ENCODE_ERROR) or codec not in _CODEC_NAMES:
        raise FrameDecodeError("corrupted slot header (status or codec out of range)")
    crc = zlib.crc32(mv[: _SLOT_HEAD.size])
    data = mv[HEADER_SIZE : HEADER_SIZE + size] if inline else None
    if data is not None:
        crc = zlib.crc32(data, crc)
    (sent_crc,) = _SLOT_CRC.unpack_from(mv, _SLOT_HEAD.size)
    if crc != sent_crc:
        raise FrameDecodeError("slot checksum mismatch: corrupted bytes from a peer")
    return SlotHeader(status, op, codec, seq, root, size, bool(inline), data)
