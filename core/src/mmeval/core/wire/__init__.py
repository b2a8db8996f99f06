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

A slot (version 4, little-endian)::

    header  <4s magic "MMEV"> <u8 version> <u8 status> <u8 op> <u8 codec> <u64 seq> <i64 root>
            <u64 payload_size> <u8 inline> <pad 1> <u16 question length> <pad 4>
            <f64 start> <f64 deadline>           (the call window, wall clock)
            <u32 CRC-32 of the header and the inline bytes>   (60 bytes, padded to HEADER_SIZE = 64)
    question (UTF-8, at most QUESTION_MAX bytes)
    inline payload, or the error text when status != OK

The call window is the sender's ``time.time()`` when its call began and that
plus its timeout (deadline 0: none). Every rank receives every rank's header
(the slot exchange is an all-gather in every collective), and a collective
whose latest start comes more than :data:`DEADLINE_SKEW` after the earliest
deadline fails on all of them alike: a rank that called after a peer gave the
call up paired with that peer's abandoned operation -- or the hosts' clocks
differ by more than the timeout. Version 3 carried the deadline alone, each
receiver comparing it with its own clock, so a host whose clock was behind
had its calls refused by the other hosts while its own ranks answered.

This module knows nothing of codecs beyond their one-byte id
(:data:`CODEC_IDS`): see :mod:`mmeval.core.wire.codecs` for what the meta
stream and buffers mean.
"""

from __future__ import annotations

from .frames import ALIGN, Buffer, Frame, assemble_frame, split_frame
from .question import canonical_question, encode_question, question_fields
from .slots import (
    CODEC_IDS,
    DEADLINE_SKEW,
    HEADER_SIZE,
    QUESTION_MAX,
    SLOT_SIZE,
    Op,
    SlotHeader,
    Status,
    build_slot,
    encode_reduce_descriptor,
    parse_reduce_descriptor,
    parse_slot,
)
from .slots import SLOT_CRC as _SLOT_CRC  # noqa: F401  (the decoder fuzzer forges slots with these three)
from .slots import SLOT_HEAD as _SLOT_HEAD  # noqa: F401
from .slots import SLOT_VERSION as _SLOT_VERSION  # noqa: F401

__all__ = [
    "SLOT_SIZE",
    "HEADER_SIZE",
    "QUESTION_MAX",
    "ALIGN",
    "CODEC_IDS",
    "DEADLINE_SKEW",
    "Buffer",
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
