"""The ``safe`` codec: plain data only, never code.

The default ``pickle`` codec can run arbitrary code chosen by whoever produced
the bytes, so with it every rank must trust every other rank. The ``safe``
codec encodes and decodes only:

``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``,
``list``, ``tuple``, ``dict`` (keys of the same kinds), numpy scalars and
numpy arrays of plain dtypes (bool, integer, unsigned, float, complex,
datetime, timedelta; no object, void or structured dtypes).

Anything else raises :class:`~mmeval.core.errors.UnsafePayloadError` when
encoding; malformed input raises
:class:`~mmeval.core.errors.FrameDecodeError` when decoding.

Decoding is bounded by the payload: time is linear in the stream (a dict
whose keys share one hash -- more than :data:`MAX_SAME_HASH` of them, which
would make insertion quadratic -- is refused after one linear pass), and the
objects built take at most 8 bytes of memory per stream byte for a list
(a one-byte ``None`` becomes an 8-byte pointer; a tuple briefly holds its list
too: 16) plus the Python objects of the values themselves (at most ~36 bytes
per 9-byte number). docs/security.md has the measured figures. Arrays travel
out-of-band (no copy into the stream) like with pickle. Select it per backend
with ``codec='safe'`` or for every backend with ``MMEVAL_CODEC=safe``;
``MMEVAL_<BACKEND>_CODEC`` selects it for one backend.
"""

from __future__ import annotations

import struct
import sys
from typing import Any, Dict, List, Sequence, Tuple

from ..errors import FrameDecodeError, UnsafePayloadError

__all__ = ["dumps", "loads", "MAX_DEPTH", "MAX_SAME_HASH"]

#: Deepest nesting accepted in either direction.
MAX_DEPTH = 200

_Q = struct.Struct("<Q")
_q = struct.Struct("<q")
_d = struct.Struct("<d")
_dd = struct.Struct("<dd")
_PLAIN_KINDS = frozenset("biufcmM")


def _np() -> Any:
    import numpy

    return numpy


def dumps(obj: Any) -> Tuple[bytes, List[memoryview]]:
    """Encode ``obj``: the stream and the out-of-band array buffers."""
    out = bytearray()
    buffers: List[memoryview] = []
    _enc(obj, out, buffers, 0)
    return bytes(out), buffers


def _enc(obj: Any, out: bytearray, buffers: List[memoryview], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise UnsafePayloadError(f"safe codec: nesting deeper than {MAX_DEPTH}")
    t = type(obj)
    if obj is None:
        out += b"N"
    elif t is bool:
        out += b"T" if obj else b"F"
    elif t is int:
        if -(1 << 63) <= obj < (1 << 63):
            out += b"i"
            out += _q.pack(obj)
        else:
            raw = obj.to_bytes((obj.bit_length() + 8) // 8, "little", signed=True)
            out += b"I"
            out += _Q.pack(len(raw))
            out += raw
    elif t is float:
        out += b"f"
        out += _d.pack(obj)
    elif t is complex:
        out += b"c"
        out += _dd.pack(obj.real, obj.imag)
    elif t is str:
        raw = obj.encode("utf-8", "surrogatepass")
        out += b"s"
        out += _Q.pack(len(raw))
        out += raw
    elif t is bytes or t is bytearray:
        out += b"b" if t is bytes else b"B"
        out += _Q.pack(len(obj))
        out += obj
    elif t is list or t is tuple:
        out += b"l" if t is list else b"t"
        out += _Q.pack(len(obj))
        for item in obj:
            _enc(item, out, buffers, depth + 1)
    elif t is dict:
        out += b"d"
        out += _Q.pack(len(obj))
        for k, v in obj.items():
            _enc(k, out, buffers, depth + 1)
            _enc(v, out, buffers, depth + 1)
    else:
        np = sys.modules.get("numpy")
        if np is not None and t is np.ndarray:
            _enc_array(obj, out, buffers)
        elif np is not None and isinstance(obj, np.generic) and obj.dtype.kind in _PLAIN_KINDS:
            dt = obj.dtype.str.encode()
            out += b"n"
            out += bytes([len(dt)])
            out += dt
            out += obj.tobytes()
        else:
            raise UnsafePayloadError(
                f"safe codec: cannot send {t.__module__}.{t.__qualname__}; only None, bool, int, float, complex, "
                "str, bytes, list, tuple, dict and numpy arrays/scalars of plain dtypes are allowed "
                "(use codec='pickle' between trusted ranks for anything else)"
            )


def _enc_array(arr: Any, out: bytearray, buffers: List[memoryview]) -> None:
    if arr.dtype.kind not in _PLAIN_KINDS or arr.dtype.hasobject or arr.dtype.fields is not None:
        raise UnsafePayloadError(f"safe codec: numpy dtype {arr.dtype} is not plain data")
    np = _np()
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    dt = arr.dtype.str.encode()
    out += b"a"
    out += bytes([len(dt)])
    out += dt
    out += bytes([arr.ndim])
    for n in arr.shape:
        out += _Q.pack(n)
    out += _Q.pack(len(buffers))
    buffers.append(memoryview(arr.reshape(-1).view(np.uint8)) if arr.size else memoryview(b""))


class _Reader:
    __slots__ = ("mv", "pos", "buffers")

    def __init__(self, mv: memoryview, buffers: Sequence[memoryview]) -> None:
        self.mv = mv
        self.pos = 0
        self.buffers = buffers

    def take(self, n: int) -> memoryview:
        end = self.pos + n
        if n < 0 or end > self.mv.nbytes:
            raise FrameDecodeError("safe codec: truncated stream")
        chunk = self.mv[self.pos : end]
        self.pos = end
        return chunk

    def count(self) -> int:
        n: int = _Q.unpack(self.take(8))[0]
        if n > self.mv.nbytes - self.pos:  # every item takes at least one byte
            raise FrameDecodeError(f"safe codec: count {n} exceeds the remaining stream")
        return n


def loads(stream: memoryview, buffers: Sequence[memoryview]) -> Any:
    """Decode a stream made by :func:`dumps`; arrays are views of ``buffers``."""
    reader = _Reader(memoryview(stream).cast("B"), buffers)
    obj = _dec(reader, 0)
    if reader.pos != reader.mv.nbytes:
        raise FrameDecodeError("safe codec: trailing bytes after the object")
    return obj


#: Most distinct dict keys of one stream dict that may share a hash value.
MAX_SAME_HASH = 8


def _check_hashes(keys: List[Any]) -> None:
    """Refuse keys that are unhashable, or of which many share one hash (a crafted O(n^2) insert).

    Hashing every key once is linear in the keys' size; the counts are kept in
    a dict keyed by the hash values themselves (ints below 2**61, whose hashes
    are distinct), so the check cannot itself be slowed down.
    """
    try:
        hashes = list(map(hash, keys))
    except TypeError:
        raise FrameDecodeError("safe codec: unhashable dict key") from None
    if len(hashes) <= MAX_SAME_HASH:
        return
    counts: Dict[int, int] = {}
    for h in hashes:
        c = counts.get(h, 0) + 1
        if c > MAX_SAME_HASH:
            raise FrameDecodeError(
                f"safe codec: more than {MAX_SAME_HASH} dict keys share the hash {h} (keys crafted to collide "
                "make decoding quadratic); refused"
            )
        counts[h] = c


def _dtype(reader: _Reader) -> Any:
    n = reader.take(1)[0]
    raw = bytes(reader.take(n))
    np = _np()
    try:
        dt = np.dtype(raw.decode("ascii"))
    except Exception:
        raise FrameDecodeError(f"safe codec: bad dtype {raw!r}") from None
    if dt.kind not in _PLAIN_KINDS or dt.hasobject or dt.fields is not None:
        raise FrameDecodeError(f"safe codec: dtype {dt} is not plain data")
    return dt


def _dec(r: _Reader, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise FrameDecodeError(f"safe codec: nesting deeper than {MAX_DEPTH}")
    tag = bytes(r.take(1))
    if tag == b"N":
        return None
    if tag == b"T":
        return True
    if tag == b"F":
        return False
    if tag == b"i":
        return _q.unpack(r.take(8))[0]
    if tag == b"I":
        return int.from_bytes(r.take(r.count()), "little", signed=True)
    if tag == b"f":
        return _d.unpack(r.take(8))[0]
    if tag == b"c":
        re_, im = _dd.unpack(r.take(16))
        return complex(re_, im)
    if tag == b"s":
        try:
            return str(r.take(r.count()), "utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise FrameDecodeError(f"safe codec: bad UTF-8 in a string ({exc})") from None
    if tag == b"b":
        return bytes(r.take(r.count()))
    if tag == b"B":
        return bytearray(r.take(r.count()))
    if tag == b"l" or tag == b"t":
        n = r.count()
        items: List[Any] = [None] * n  # one allocation: appending would briefly hold two copies while growing
        for i in range(n):
            items[i] = _dec(r, depth + 1)
        return items if tag == b"l" else tuple(items)
    if tag == b"d":
        n = r.count()
        keys: List[Any] = [None] * n
        values: List[Any] = [None] * n
        for i in range(n):
            keys[i] = _dec(r, depth + 1)
            values[i] = _dec(r, depth + 1)
        _check_hashes(keys)
        return dict(zip(keys, values))
    if tag == b"n":
        dt = _dtype(r)
        return _np().frombuffer(r.take(dt.itemsize), dtype=dt)[0]
    if tag == b"a":
        dt = _dtype(r)
        ndim = r.take(1)[0]
        shape = tuple(_Q.unpack(r.take(8))[0] for _ in range(ndim))
        index = _Q.unpack(r.take(8))[0]
        if index >= len(r.buffers):
            raise FrameDecodeError(f"safe codec: array refers to buffer {index} of {len(r.buffers)}")
        buf = r.buffers[index]
        size = 1
        for n in shape:
            size *= n
        if size * dt.itemsize != buf.nbytes:
            raise FrameDecodeError(
                f"safe codec: array of shape {shape} and {dt} does not match its {buf.nbytes}-byte buffer"
            )
        np = _np()
        try:  # numpy refuses more than 64 dimensions, and empty shapes whose other sizes overflow
            return np.frombuffer(buf, dtype=dt).reshape(shape) if size else np.empty(shape, dtype=dt)
        except (ValueError, TypeError) as exc:
            raise FrameDecodeError(f"safe codec: cannot build an array of shape {shape} and {dt} ({exc})") from None
    raise FrameDecodeError(f"safe codec: unknown tag {tag!r}")
