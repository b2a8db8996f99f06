"""Slots: the fixed-size block every rank sends at the start of every collective (see :mod:`mmeval.core.wire`).

Also the reduction descriptor, the head of a reduction's slot body.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

from ..errors import FrameDecodeError
from .frames import Buffer, Frame, as_byte_view

__all__ = [
    "SLOT_SIZE",
    "HEADER_SIZE",
    "QUESTION_MAX",
    "CODEC_IDS",
    "DEADLINE_SKEW",
    "Op",
    "Status",
    "SlotHeader",
    "build_slot",
    "parse_slot",
    "encode_reduce_descriptor",
    "parse_reduce_descriptor",
]

#: Size of the per-rank block exchanged at the start of every collective.
SLOT_SIZE = 4096
#: Bytes of the slot taken by the header (the rest holds the question, then an inline payload).
HEADER_SIZE = 64
#: Longest question (UTF-8 bytes) a slot carries.
QUESTION_MAX = 1024

#: Codec names and the one-byte id each is sent as (in slots and frames).
CODEC_IDS: Dict[str, int] = {"pickle": 1, "safe": 2}
#: Seconds of clock difference between hosts tolerated when the ranks compare their call windows: a
#: collective whose latest-starting rank began more than this after another rank's deadline fails on
#: every rank (that rank had given the call up, or the hosts' clocks differ by more than its timeout).
DEADLINE_SKEW = 1.0

_SLOT_MAGIC = b"MMEV"
SLOT_VERSION = 4
# magic, version, status, op, codec, seq, root, payload_size, inline flag, question length, the call's window: its
# start and its deadline (wall clock seconds since the epoch; deadline 0: none). Version 3 had no start.
SLOT_HEAD = struct.Struct("<4sBBBBQqQBxH4xdd")
SLOT_CRC = struct.Struct("<I")
assert SLOT_HEAD.size + SLOT_CRC.size <= HEADER_SIZE


class Op:
    """Operation codes carried in the slot header."""

    ALL_GATHER = 1
    GATHER = 2
    BROADCAST = 3
    BARRIER = 4
    #: the reductions: the slot carries the array's (shape, dtype, op), and the array itself when it fits
    ALL_REDUCE = 5
    REDUCE = 6

    NAMES = {
        1: "all_gather_object",
        2: "gather_object",
        3: "broadcast_object",
        4: "barrier",
        5: "all_reduce",
        6: "reduce",
    }


class Status:
    """Status codes carried in the slot header."""

    OK = 0
    ENCODE_ERROR = 1


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
    #: when the sender's call began (``time.time()`` seconds; ``deadline - start`` is its timeout)
    start: float = 0.0

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
    start: float = 0.0,
) -> bool:
    """Fill ``out`` (``SLOT_SIZE`` writable bytes) with a header, the question and maybe the payload.

    The frame is written inline when it fits after the question; returns
    whether it was. With a non-OK status, ``error`` (UTF-8, truncated to fit)
    is written inline. ``question`` is at most :data:`QUESTION_MAX` bytes;
    ``start`` and ``deadline`` are the sender's call window on its wall clock
    (``time.time()``; a deadline of 0 or ``inf``: none).
    """
    out = as_byte_view(out)
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
    start = start if math.isfinite(start) and start >= 0 else 0.0
    SLOT_HEAD.pack_into(
        out, 0, _SLOT_MAGIC, SLOT_VERSION, status, op, codec, seq, root, size, int(inline), qlen, start, deadline
    )
    crc = zlib.crc32(out[: SLOT_HEAD.size])
    crc = zlib.crc32(out[HEADER_SIZE : body_at + (size if inline else 0)], crc)
    SLOT_CRC.pack_into(out, SLOT_HEAD.size, crc)
    return inline


def parse_slot(block: Buffer, known_codecs: Sequence[int] = ()) -> SlotHeader:
    """Parse and validate one rank's slot; raise :class:`FrameDecodeError` if it is not one.

    ``known_codecs``: the codec ids this rank knows (empty: any id).
    """
    mv = as_byte_view(block)
    if mv.nbytes < SLOT_SIZE:
        raise FrameDecodeError(f"slot of {mv.nbytes} bytes is shorter than {SLOT_SIZE}")
    magic, version, status, op, codec, seq, root, size, inline, qlen, start, deadline = SLOT_HEAD.unpack_from(mv, 0)
    if magic != _SLOT_MAGIC:
        raise FrameDecodeError(f"bad slot magic {bytes(magic)!r}: the peer is not an mmeval backend")
    if version != SLOT_VERSION:
        raise FrameDecodeError(
            f"peer speaks slot version {version}, this rank {SLOT_VERSION}: install the same mmeval-core on every rank"
        )
    body_at = HEADER_SIZE + qlen
    if qlen > QUESTION_MAX or inline not in (0, 1) or (inline and size > SLOT_SIZE - body_at) or op not in Op.NAMES:
        raise FrameDecodeError("corrupted slot header (question length, inline flag, size or operation out of range)")
    if (
        status not in (Status.OK, Status.ENCODE_ERROR)
        or (known_codecs and codec not in known_codecs)
        or not (math.isfinite(start) and start >= 0 and math.isfinite(deadline) and deadline >= 0)
        or (deadline and deadline < start)
    ):
        raise FrameDecodeError("corrupted slot header (status, codec or call window out of range)")
    crc = zlib.crc32(mv[: SLOT_HEAD.size])
    crc = zlib.crc32(mv[HEADER_SIZE : body_at + (size if inline else 0)], crc)
    (sent_crc,) = SLOT_CRC.unpack_from(mv, SLOT_HEAD.size)
    if crc != sent_crc:
        raise FrameDecodeError("slot checksum mismatch: corrupted bytes from a peer")
    data = mv[body_at : body_at + size] if inline else None
    question = bytes(mv[HEADER_SIZE:body_at]).decode("utf-8", "replace")
    return SlotHeader(status, op, codec, seq, root, size, bool(inline), data, question, deadline, start)


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
        shape, dtype, op, inline = json.loads(bytes(data[_DESC_LEN.size : _DESC_LEN.size + n]))
        body = data[_DESC_LEN.size + n :]
        return tuple(int(x) for x in shape), str(dtype), str(op), (body if inline else None)
    except (ValueError, TypeError, struct.error) as exc:
        raise FrameDecodeError(f"corrupted reduction descriptor in a peer's slot ({exc})") from None
