"""Objects to frames and back: the names of :mod:`mmeval.core.wire`, :mod:`mmeval.core.wire.codecs` and
:mod:`mmeval.core.wire.columnar` in one place, for callers that want all of them.

The layers live apart: the wire format (slots and frames) in ``wire``, the
codecs (pickle with backend-scoped reducers, safe) in ``codecs``, the columnar
encoding of long homogeneous lists in ``columnar``. See those modules.
"""

from __future__ import annotations

from .wire import (
    ALIGN,
    HEADER_SIZE,
    QUESTION_MAX,
    SLOT_SIZE,
    Frame,
    Op,
    SlotHeader,
    Status,
    assemble_frame,
    build_slot,
    parse_slot,
    split_frame,
)
from .wire.codecs import CODECS, Codec, PickleCodec, Reducer, SafeCodec, codec_id, decode, encode, make_codec
from .wire.columnar import COLUMNAR_MIN, columnarize

__all__ = [
    "SLOT_SIZE",
    "HEADER_SIZE",
    "QUESTION_MAX",
    "ALIGN",
    "CODECS",
    "COLUMNAR_MIN",
    "Op",
    "Status",
    "SlotHeader",
    "Frame",
    "Codec",
    "PickleCodec",
    "SafeCodec",
    "Reducer",
    "encode",
    "decode",
    "build_slot",
    "parse_slot",
    "assemble_frame",
    "split_frame",
    "codec_id",
    "make_codec",
    "columnarize",
]
