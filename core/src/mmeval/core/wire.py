"""Every byte layout of mmeval's collectives: frames, slots, the question, the reduction descriptor, codec ids.

Every framed collective moves bytes in two stages:

1. A fixed-size *slot* (:data:`SLOT_SIZE` bytes) is exchanged by every rank
   of the group (one all-gather of equal-sized blocks). The slot carries a
   small header -- status, operation, sequence number, root, payload size,
   codec -- then the *question* (a short text the ranks must agree on, see
   :mod:`mmeval.core.dist_backends.transport`) and, when the encoded object is
   small enough, the payload itself (*inline*), so small objects need a single
   collective.
2. When a payload did not fit, the *frame* is sent by the transport's byte
   collective (all-gather, gather or broadcast). Sizes are already known from
   the slots, so no second size exchange is needed.

A frame is an encoded object::

    prefix  <4s magic "MMF1"> <u8 codec> <u8 flags> <u16 reserved> <u32 nbuf> <u64 meta_len>
    nbuf x <u64 buffer length>
    meta    (the codec's stream)
    buffers (each starting at a multiple of 64 bytes from the frame start)

The slot header also carries the sender's deadline (wall clock), so that a
rank whose call pairs with a peer's abandoned one fails (see
:data:`DEADLINE_SKEW`). This module knows nothing of codecs beyond their
one-byte id (:data:`CODEC_IDS`): see :mod:`mmeval.core.codecs` for what the
meta stream and buffers mean.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import FrameDecodeError

__all__ = [
    "SLOT_SIZE",
    "HEADER_SIZE",
    "QUESTION_MAX",
    "ALIGN",
    "CODEC_IDS",
    "DEADLINE_SKEW",
    "Op",
    "Status",
    "SlotHeader",
    "Frame",
    "assemble_frame",
    "split_frame",
    "build_slot",
    "parse_slot",
    "canonical_question",
    "encode_question",
    "question_fields",
    "encode_reduce_descriptor",
    "parse_reduce_descriptor",
]

Buffer = Union[bytes, bytearray, memoryview]

#: Size of the per-rank block exchanged at the start of every collective.
SLOT_SIZE = 4096
#: Bytes of the slot taken by the header (the rest holds the question, then an inline payload).
HEADER_SIZE = 64
#: Longest question (UTF-8 bytes) a slot carries.
QUESTION_MAX = 1024
#: Alignment of out-of-band buffers inside a frame.
ALIGN = 64

#: Codec names and the one-byte id each is sent as (in slots and frames).
CODEC_IDS: Dict[str, int] = {"pickle": 1, "safe": 2}
#: Seconds of clock difference between hosts tolerated when a rank checks a peer's deadline: a header
#: received more than this after its sender's deadline fails the call (the sender has given it up).
DEADLINE_SKEW = 1.0

_SLOT_MAGIC = b"MMEV"
_SLOT_VERSION = 3
# magic, version, status, op, codec, seq, root, payload_size, inline flag, question length, deadline (wall clock
# seconds since the epoch; 0: none)
_SLOT_HEAD = struct.Struct("<4sBBBBQqQBxH4xd")
_SLOT_CRC = struct.Struct("<I")
assert _SLOT_HEAD.size + _SLOT_CRC.size <= HEADER_SIZE

_FRAME_MAGIC = b"MMF1"
_FRAME_PREFIX = struct.Struct("<4sBBHIQ")
_U64 = struct.Struct("<Q")


class Op:
    """Operation codes carried in the slot header."""

    ALL_GATHER = 1
    GATHER = 2
    BROADCAST = 3
    BARRIER = 4
    #: the reductions: the slot carries the array's (shape, dtype, op), and the array itself when it fits
    ALL_REDUCE = 5
    REDUCE = 6

    NAMES = {1: "all_gather_object", 2: "gather_object", 3: "broadcast_object", 4: "barrier", 5: "all_reduce",
             6: "reduce"}


class Status:
    """Status codes carried in the slot header."""

    OK = 0
    ENCODE_ERROR = 1


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

    # removed once plugins stop importing it: the torch and mpi4py plugins still call a frame as a fill callback
    __call__ = write_into

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


def assemble_frame(codec: int, meta: Buffer, buffers: Sequence[memoryview]) -> Frame:
    """A frame of codec id ``codec``: ``meta`` then each buffer at a 64-byte boundary (nothing is copied)."""
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


def split_frame(frame: Buffer) -> Tuple[int, memoryview, List[memoryview]]:
    """Parse a frame: its codec id, its meta stream and its buffers, as views of ``frame`` (no copy).

    Raises :class:`FrameDecodeError` for anything that is not a well-formed
    frame; nothing is read outside ``frame``.
    """
    mv = _as_byte_view(frame)
    size = mv.nbytes
    if size < _FRAME_PREFIX.size:
        raise FrameDecodeError(f"frame of {size} bytes is shorter than its prefix")
    magic, codec, _flags, _res, nbuf, meta_len = _FRAME_PREFIX.unpack_from(mv, 0)
    if magic != _FRAME_MAGIC:
        raise FrameDecodeError(f"bad frame magic {bytes(magic)!r} (expected {_FRAME_MAGIC!r})")
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
    return codec, meta, buffers


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
    #: the question this rank asked (UTF-8 text; empty when none)
    question: str = ""
    #: the sender's deadline for this call (``time.time()`` seconds; 0: none)
    deadline: float = 0.0

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
    question: bytes = b"",
    deadline: float = 0.0,
) -> bool:
    """Fill ``out`` (``SLOT_SIZE`` writable bytes) with a header, the question and maybe the payload.

    The frame is written inline when it fits after the question; returns
    whether it was. With a non-OK status, ``error`` (UTF-8, truncated to fit)
    is written inline. ``question`` is at most :data:`QUESTION_MAX` bytes;
    ``deadline`` is the sender's wall-clock deadline (0 or ``inf``: none).
    """
    out = _as_byte_view(out)
    if len(question) > QUESTION_MAX:
        raise ValueError(f"question of {len(question)} bytes is longer than {QUESTION_MAX}")
    qlen = len(question)
    body_at = HEADER_SIZE + qlen
    room = SLOT_SIZE - body_at
    out[HEADER_SIZE:body_at] = question
    inline = False
    size = 0
    if status != Status.OK:
        body = error.encode("utf-8", "replace")[:room]
        size, inline = len(body), True
        out[body_at : body_at + size] = body
    elif payload is not None:
        size = payload.nbytes
        if size <= room:
            payload.write_into(out[body_at : body_at + size])
            inline = True
    deadline = deadline if math.isfinite(deadline) else 0.0
    _SLOT_HEAD.pack_into(out, 0, _SLOT_MAGIC, _SLOT_VERSION, status, op, codec, seq, root, size, int(inline), qlen,
                         deadline)
    crc = zlib.crc32(out[: _SLOT_HEAD.size])
    crc = zlib.crc32(out[HEADER_SIZE : body_at + (size if inline else 0)], crc)
    _SLOT_CRC.pack_into(out, _SLOT_HEAD.size, crc)
    return inline


def parse_slot(block: Buffer, known_codecs: Sequence[int] = ()) -> SlotHeader:
    """Parse and validate one rank's slot; raise :class:`FrameDecodeError` if it is not one.

    ``known_codecs``: the codec ids this rank knows (empty: any id).
    """
    mv = _as_byte_view(block)
    if mv.nbytes < SLOT_SIZE:
        raise FrameDecodeError(f"slot of {mv.nbytes} bytes is shorter than {SLOT_SIZE}")
    magic, version, status, op, codec, seq, root, size, inline, qlen, deadline = _SLOT_HEAD.unpack_from(mv, 0)
    if magic != _SLOT_MAGIC:
        raise FrameDecodeError(f"bad slot magic {bytes(magic)!r}: the peer is not an mmeval backend")
    if version != _SLOT_VERSION:
        raise FrameDecodeError(
            f"peer speaks slot version {version}, this rank {_SLOT_VERSION}: "
            "install the same mmeval-core on every rank"
        )
    body_at = HEADER_SIZE + qlen
    if qlen > QUESTION_MAX or inline not in (0, 1) or (inline and size > SLOT_SIZE - body_at) or op not in Op.NAMES:
        raise FrameDecodeError("corrupted slot header (question length, inline flag, size or operation out of range)")
    if status not in (Status.OK, Status.ENCODE_ERROR) or (known_codecs and codec not in known_codecs) or not (
            math.isfinite(deadline) and deadline >= 0):
        raise FrameDecodeError("corrupted slot header (status, codec or deadline out of range)")
    crc = zlib.crc32(mv[: _SLOT_HEAD.size])
    crc = zlib.crc32(mv[HEADER_SIZE : body_at + (size if inline else 0)], crc)
    (sent_crc,) = _SLOT_CRC.unpack_from(mv, _SLOT_HEAD.size)
    if crc != sent_crc:
        raise FrameDecodeError("slot checksum mismatch: corrupted bytes from a peer")
    data = mv[body_at : body_at + size] if inline else None
    question = bytes(mv[HEADER_SIZE:body_at]).decode("utf-8", "replace")
    return SlotHeader(status, op, codec, seq, root, size, bool(inline), data, question, deadline)


# --------------------------------------------------------------------------
# the question: what every rank must agree on, carried in the slot
# --------------------------------------------------------------------------

#: A question field's value is shown in full in the slot (and in messages) up to this many characters.
_SHOWN = 60
_LEN = struct.Struct("<Q")


def canonical_question(question: Mapping[str, Any]) -> bytes:
    """A canonical byte encoding of ``question``: two ranks' encodings are equal exactly when their values are.

    Accepts any values, whatever their size or type, and drops none: ``None``,
    bools, ints, floats (by exact value: ``float.hex``, so ``0.1`` and the
    next float differ, ``-0.0`` and ``0.0`` differ, NaN equals NaN), complex,
    str, bytes, numpy scalars and arrays (dtype, shape and bytes: a
    ``np.float32(0.5)`` differs from a ``0.5``), lists, tuples, sets and dicts
    at any length and depth (dict and set items in a canonical order), and any
    other object by its type and state (``__getstate__()`` / ``vars()``), else
    by its ``repr`` with memory addresses removed. Cycles are cut.

    A metric passes its whole configuration here as it is -- every public
    attribute, numpy values included, unfiltered -- plus its class, collect
    mode and ``size`` (see :func:`mmeval.core.dist_backends.asking`).
    """
    out = bytearray()
    _canon(dict(question), out, set(), 0)
    return bytes(out)


def _blob(out: bytearray, tag: bytes, data: bytes) -> None:
    out += tag + _LEN.pack(len(data)) + data


def _canon(value: Any, out: bytearray, seen: set, depth: int) -> None:  # type: ignore[type-arg]
    kind = type(value)
    if value is None or kind is bool:
        out += b"N" if value is None else (b"T" if value else b"F")
    elif kind is int:
        _blob(out, b"i", str(value).encode())
    elif kind is float:
        _blob(out, b"f", value.hex().encode())
    elif kind is complex:
        _blob(out, b"c", f"{value.real.hex()},{value.imag.hex()}".encode())
    elif kind is str:
        _blob(out, b"s", value.encode("utf-8", "surrogatepass"))
    elif kind in (bytes, bytearray):
        _blob(out, b"b", bytes(value))
    elif kind.__module__ == "numpy" and hasattr(value, "dtype") and hasattr(value, "tobytes"):
        if value.dtype.hasobject:  # object arrays hold pointers: encode their items
            _canon(value.tolist(), out, seen, depth)
        else:
            _blob(out, b"a", f"{value.dtype.str}{getattr(value, 'shape', ())}".encode())
            _blob(out, b"", value.tobytes())
    elif id(value) in seen or depth > 64:
        _blob(out, b"^", kind.__qualname__.encode())
    elif kind in (list, tuple, dict, set, frozenset):
        seen.add(id(value))
        if kind is dict:
            items = sorted((_encoded(k, seen, depth), _encoded(v, seen, depth)) for k, v in value.items())
            _blob(out, b"d", b"".join(k + v for k, v in items))
        elif kind in (set, frozenset):
            _blob(out, b"S", b"".join(sorted(_encoded(v, seen, depth) for v in value)))
        else:
            _blob(out, b"l" if kind is list else b"t", b"".join(_encoded(v, seen, depth) for v in value))
        seen.discard(id(value))
    else:
        _blob(out, b"o", f"{kind.__module__}.{kind.__qualname__}".encode())
        state = None
        if not isinstance(value, type) and not callable(value):
            getstate = getattr(value, "__getstate__", None)
            try:
                state = getstate() if getstate is not None else getattr(value, "__dict__", None)
            except Exception:
                state = None
        if state is not None:
            seen.add(id(value))
            _canon(state, out, seen, depth + 1)
            seen.discard(id(value))
        else:
            _blob(out, b"r", _stable_repr(value).encode("utf-8", "replace"))


def _encoded(value: Any, seen: set, depth: int) -> bytes:  # type: ignore[type-arg]
    out = bytearray()
    _canon(value, out, seen, depth + 1)
    return bytes(out)


def _stable_repr(value: Any) -> str:
    import re

    name = getattr(value, "__qualname__", None)
    if name is not None and getattr(value, "__module__", None):
        return f"{value.__module__}.{name}"
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<unrepresentable {type(exc).__name__}>"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


def _digest(data: bytes, n: int = 12) -> str:
    return hashlib.sha256(data).hexdigest()[:n]


def encode_question(question: Optional[Mapping[str, Any]], thread: str) -> bytes:
    """The question's bytes in the slot (at most :data:`QUESTION_MAX`).

    Each field travels as its readable text (in full up to 60 characters,
    else shortened) and a digest of its :func:`canonical_question` encoding,
    so a difference anywhere in a value is caught, and named by field; when
    the fields do not fit, only the digests travel, and past that one digest
    of the whole question (with the thread's name).
    """
    shown: Dict[str, List[str]] = {"thread": [thread[:64], ""]}
    for key, value in (question or {}).items():
        text = value if isinstance(value, str) else _stable_repr(value) if callable(value) else repr(value)
        if len(text) > _SHOWN:
            text = f"{text[:_SHOWN - 20]}...(len {len(text)})"
        shown[str(key)[:64]] = [text, _digest(canonical_question({"": value}))]
    data = json.dumps(shown, sort_keys=True, separators=(",", ":")).encode()
    if len(data) > QUESTION_MAX:
        shown = {k: ["(long)" if k != "thread" else v[0], v[1]] for k, v in shown.items()}
        data = json.dumps(shown, sort_keys=True, separators=(",", ":")).encode()
    if len(data) > QUESTION_MAX:
        whole = _digest(canonical_question(question or {}), 32)
        data = json.dumps({"thread": [thread[:64], ""], "question": ["(too long to show)", whole]}).encode()
    return data


def question_fields(text: str) -> Dict[str, Tuple[str, str]]:
    """A received question as ``{field: (readable text, digest)}`` (see :func:`encode_question`)."""
    if not text:
        return {}
    try:
        out = json.loads(text)
    except ValueError:
        return {"question": (text, "")}
    if not isinstance(out, dict):
        return {"question": (text, "")}
    fields: Dict[str, Tuple[str, str]] = {}
    for key, value in out.items():
        pair = value if isinstance(value, list) and len(value) == 2 else [str(value), ""]
        fields[str(key)] = (str(pair[0]), str(pair[1]))
    return fields


# --------------------------------------------------------------------------
# the reduction descriptor: the head of a reduction's slot body
# --------------------------------------------------------------------------

_DESC_LEN = struct.Struct("<H")


def encode_reduce_descriptor(shape: Sequence[int], dtype: str, op: str, inline: bool) -> bytes:
    """A reduction's (shape, dtype, op) and whether the array's bytes follow inline in the slot."""
    desc = json.dumps([list(shape), dtype, op, inline], separators=(",", ":")).encode()
    return _DESC_LEN.pack(len(desc)) + desc


def parse_reduce_descriptor(data: Optional[memoryview]) -> Tuple[Tuple[int, ...], str, str, Optional[memoryview]]:
    """``(shape, dtype, op, inline array bytes or None)`` from a slot body; :class:`FrameDecodeError` if corrupted."""
    try:
        if data is None:
            raise ValueError("no descriptor")
        (n,) = _DESC_LEN.unpack_from(data, 0)
        shape, dtype, op, inline = json.loads(bytes(data[_DESC_LEN.size:_DESC_LEN.size + n]))
        body = data[_DESC_LEN.size + n:]
        return tuple(int(x) for x in shape), str(dtype), str(op), (body if inline else None)
    except (ValueError, TypeError, struct.error) as exc:
        raise FrameDecodeError(f"corrupted reduction descriptor in a peer's slot ({exc})") from None
