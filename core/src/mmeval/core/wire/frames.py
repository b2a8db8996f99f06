"""Frames: an encoded object as byte segments at known offsets, and its prefix (see :mod:`mmeval.core.wire`)."""

from __future__ import annotations

import struct
from typing import Any, List, Optional, Sequence, Tuple, Union

from ..errors import FrameDecodeError

__all__ = ["ALIGN", "Buffer", "Frame", "as_byte_view", "assemble_frame", "split_frame"]

Buffer = Union[bytes, bytearray, memoryview]

#: Alignment of out-of-band buffers inside a frame.
ALIGN = 64

_FRAME_MAGIC = b"MMF1"
_FRAME_PREFIX = struct.Struct("<4sBBHIQ")
_U64 = struct.Struct("<Q")


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


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
        self.write_range(as_byte_view(out)[: self.nbytes], 0)

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

    def write_range(self, out: memoryview, start: int) -> None:
        """Write bytes ``start .. start + out.nbytes`` of the frame (clipped to its end) to ``out``.

        Lets a transport send a large frame in chunks through a small staging
        buffer instead of copying all of it into one fresh buffer first.
        """
        out = as_byte_view(out)
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


def as_byte_view(buf: Any) -> memoryview:
    """A flat unsigned-byte view of any buffer (casts a typed or multi-dimensional one; no copy)."""
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.format != "B":
        mv = mv.cast("B")
    return mv


def assemble_frame(codec: int, meta: Buffer, buffers: Sequence[memoryview]) -> Frame:
    """A frame of codec id ``codec``: ``meta`` then each buffer at a 64-byte boundary (nothing is copied)."""
    nbuf = len(buffers)
    meta_mv = as_byte_view(meta)
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
    mv = as_byte_view(frame)
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
