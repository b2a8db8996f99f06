"""Hostile bytes against the frame and slot decoders: property-based (hypothesis), run as a child process.

``python fuzz_decoder.py [--examples N] [--only NAME]`` runs every property
below with N examples each (default 1500) and prints one JSON line: the
examples run per property. ``test_rel_fuzz.py`` runs it in a subprocess with
a timeout and a memory limit, so that "the decoder never crashes the
interpreter or hangs" is checked for real: a segfault, an abort, an
out-of-memory kill or a hang fails the test, which an in-process test could
not observe.

What every property asserts: the decoder either returns an object or raises
one of mmeval's clear errors -- :class:`FrameDecodeError`,
:class:`UnsafePayloadError` (and, for the whole receive path, the other
:class:`DistCommunicationError` subclasses) -- never anything else.

Properties:

* ``random_frames``: arbitrary bytes, with and without a valid frame prefix, both codecs;
* ``truncated_frames``: valid frames of random plain objects (numpy arrays included), cut anywhere;
* ``corrupted_frames``: the same with 1-8 bytes changed anywhere (the pickle stream too: in this
  child process, a corrupted pickle may do anything but crash or hang);
* ``hostile_safe_streams``: streams built token by token with the safe codec's grammar but hostile
  values (counts, lengths, dtypes, shapes of up to 255 dimensions, buffer indices);
* ``random_slots`` / ``corrupted_slots``: arbitrary and bit-flipped slot headers (a CRC covers them);
* ``forged_slots``: headers with every field random and a *valid* checksum (a peer that lies):
  parsed only into values in range, or refused;
* ``receive_path``: a two-rank backend whose peer sends forged headers and random payload bytes;
  every collective returns or raises a DistCommunicationError.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import resource
import struct
import sys
import zlib
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmeval.core import serialization as ser
from mmeval.core import wire
from mmeval.core.dist_backends import FramedDistBackend
from mmeval.core.errors import DistCommunicationError, FrameDecodeError, UnsafePayloadError

CLEAR = (FrameDecodeError, UnsafePayloadError)
COUNTS: Dict[str, int] = {}
PROPERTIES: Dict[str, Callable[..., None]] = {}


def prop(fn: Callable[..., None]) -> Callable[..., None]:
    PROPERTIES[fn.__name__] = fn
    return fn


def count(name: str) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + 1


def decode_or_clear(data: Any, codec: str) -> None:
    """``decode`` must return, or raise FrameDecodeError / UnsafePayloadError."""
    try:
        ser.decode(data, codec)
    except CLEAR:
        pass


# --------------------------------------------------------------------------
# strategies
# --------------------------------------------------------------------------

PLAIN_DTYPES = [
    "<i1",
    "<i2",
    "<i4",
    ">i8",
    "<u1",
    "<u2",
    "<u8",
    "<f2",
    "<f4",
    ">f8",
    "<c8",
    "<c16",
    "|b1",
    "<M8[D]",
    "<m8[s]",
]


def _array(dt: str, shape: tuple, seed: int) -> np.ndarray:
    dtype = np.dtype(dt)
    n = int(np.prod(shape, dtype=np.int64))
    raw = np.random.default_rng(seed).bytes(n * dtype.itemsize)
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


arrays = st.builds(
    _array, st.sampled_from(PLAIN_DTYPES), st.lists(st.integers(0, 5), max_size=3).map(tuple), st.integers(0, 2**32)
)
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.complex_numbers()
    | st.text(max_size=20)
    | st.binary(max_size=40)
    | arrays
)
plain = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=5) | st.integers(), children, max_size=5)
    ),
    max_leaves=25,
)


def frame_bytes(obj: Any, codec: str) -> bytes:
    return ser.encode(obj, codec).tobytes()


# --------------------------------------------------------------------------
# frames
# --------------------------------------------------------------------------


@prop
@given(
    st.binary(max_size=4096), st.booleans(), st.integers(0, 255), st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1)
)
def random_frames(tail: bytes, with_prefix: bool, codec: int, nbuf: int, meta_len: int) -> None:
    count("random_frames")
    data = tail
    if with_prefix:  # a plausible prefix with hostile counts, then random bytes
        data = struct.pack("<4sBBHIQ", b"MMF1", codec, 0, 0, nbuf, meta_len) + tail
    for allowed in ("pickle", "safe"):
        decode_or_clear(data, allowed)


@prop
@given(plain, st.sampled_from(["pickle", "safe"]), st.data())
def truncated_frames(obj: Any, codec: str, data: st.DataObject) -> None:
    count("truncated_frames")
    frame = frame_bytes(obj, codec)
    cut = data.draw(st.integers(0, len(frame) - 1))
    for allowed in ("pickle", "safe"):
        decode_or_clear(frame[:cut], allowed)


@prop
@given(plain, st.sampled_from(["pickle", "safe"]), st.data())
def corrupted_frames(obj: Any, codec: str, data: st.DataObject) -> None:
    count("corrupted_frames")
    frame = bytearray(frame_bytes(obj, codec))
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] ^= data.draw(st.integers(1, 255))
    for allowed in ("pickle", "safe"):
        decode_or_clear(bytes(frame), allowed)


# the safe codec's grammar with hostile values ------------------------------------

_Q = struct.Struct("<Q")


def _token(kind: str, n: int, dt: str, shape: Sequence[int], index: int, raw: bytes) -> bytes:
    if kind in "NTF":
        return kind.encode()
    if kind in "if":
        return kind.encode() + raw[:8].ljust(8, b"\0")
    if kind == "c":
        return b"c" + raw[:16].ljust(16, b"\0")
    if kind in "IsbBltd":
        return kind.encode() + _Q.pack(n) + raw
    dtb = dt.encode()
    if kind == "n":
        return b"n" + bytes([len(dtb)]) + dtb + raw
    # 'a': dtype, ndim, shape, buffer index
    return (
        b"a"
        + bytes([len(dtb)])
        + dtb
        + bytes([len(shape) % 256])
        + b"".join(_Q.pack(s) for s in shape)
        + _Q.pack(index)
    )


tokens = st.builds(
    _token,
    st.sampled_from([*"NTFifcIsbBltdn", *"a" * 6]),
    st.one_of(st.integers(0, 8), st.integers(0, 2**64 - 1)),
    st.sampled_from([*PLAIN_DTYPES, "O", "V8", "<U3", "f8,i4", "S0", "<M8", "xyz", "", "<i4" * 40]),
    st.lists(st.one_of(st.integers(0, 4), st.integers(0, 2**64 - 1)), max_size=70),
    st.one_of(st.integers(0, 3), st.integers(0, 2**64 - 1)),
    st.binary(max_size=16),
)


@prop
@given(st.lists(tokens, min_size=1, max_size=12), st.lists(st.binary(max_size=64) | st.just(b""), max_size=4))
def hostile_safe_streams(parts: List[bytes], buffers: List[bytes]) -> None:
    count("hostile_safe_streams")
    meta = b"".join(parts)
    frame = ser.assemble_frame(ser.CODECS["safe"], meta, [memoryview(b) for b in buffers]).tobytes()
    decode_or_clear(frame, "safe")
    decode_or_clear(frame, "pickle")
    from mmeval.core.wire import safe_codec

    try:
        safe_codec.loads(memoryview(meta), [memoryview(b) for b in buffers])
    except FrameDecodeError:
        pass


# --------------------------------------------------------------------------
# slots
# --------------------------------------------------------------------------


@prop
@given(st.binary(max_size=ser.SLOT_SIZE + 64), st.booleans())
def random_slots(data: bytes, with_magic: bool) -> None:
    count("random_slots")
    if with_magic:
        data = b"MMEV\x01" + data
    block = data.ljust(ser.SLOT_SIZE, b"\0")
    for candidate in (block, data):  # full-size slots and short blocks
        try:
            ser.parse_slot(candidate)
        except FrameDecodeError:
            pass


#: the most payload bytes a slot carries inline (with no question)
INLINE_MAX = ser.SLOT_SIZE - ser.HEADER_SIZE


def _valid_slot(op: int, seq: int, root: int, payload: Optional[bytes], error: str) -> bytearray:
    slot = bytearray(ser.SLOT_SIZE)
    frame = None if payload is None else ser.Frame([(0, memoryview(payload))], len(payload))
    status = ser.Status.ENCODE_ERROR if error else ser.Status.OK
    ser.build_slot(memoryview(slot), status=status, op=op, codec=1, seq=seq, root=root, payload=frame, error=error)
    return slot


@prop
@given(
    st.sampled_from([1, 2, 3, 4]),
    st.integers(0, 2**64 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.one_of(st.none(), st.binary(max_size=INLINE_MAX + 10)),
    st.text(max_size=30),
    st.data(),
)
def corrupted_slots(op: int, seq: int, root: int, payload: Optional[bytes], error: str, data: st.DataObject) -> None:
    count("corrupted_slots")
    slot = _valid_slot(op, seq, root, payload, error)
    head = ser.parse_slot(slot)  # the valid one parses
    covered = ser.HEADER_SIZE + (head.payload_size if head.inline else 0)
    pos = data.draw(st.integers(0, covered - 1))
    if wire._SLOT_HEAD.size + wire._SLOT_CRC.size <= pos < ser.HEADER_SIZE:
        return  # padding after the checksum: not part of the header
    slot[pos] ^= data.draw(st.integers(1, 255))
    try:
        ser.parse_slot(slot)
    except FrameDecodeError:
        return
    raise AssertionError(f"a slot with byte {pos} changed was accepted")


def _forge(status: int, op: int, codec: int, seq: int, root: int, size: int, inline: int, body: bytes) -> bytearray:
    """A slot with these raw field values and a valid checksum (what a lying peer can send)."""
    slot = bytearray(ser.SLOT_SIZE)
    wire._SLOT_HEAD.pack_into(
        slot, 0, b"MMEV", wire._SLOT_VERSION, status, op, codec, seq, root, size, inline, 0, 0.0, 0.0
    )  # no question, no call window
    slot[ser.HEADER_SIZE : ser.HEADER_SIZE + len(body)] = body
    crc = zlib.crc32(slot[: wire._SLOT_HEAD.size])
    if inline == 1 and size <= INLINE_MAX:
        crc = zlib.crc32(slot[ser.HEADER_SIZE : ser.HEADER_SIZE + size], crc)
    wire._SLOT_CRC.pack_into(slot, wire._SLOT_HEAD.size, crc)
    return slot


forged = st.builds(
    _forge,
    st.integers(0, 255),
    st.integers(0, 255),
    st.integers(0, 255),
    st.integers(0, 2**64 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.one_of(st.integers(0, INLINE_MAX + 8), st.integers(0, 2**64 - 1)),
    st.integers(0, 255),
    st.binary(max_size=INLINE_MAX),
)
forged_plausible = st.builds(
    _forge,
    st.sampled_from([0, 0, 0, 1]),
    st.sampled_from([1, 2, 3, 4]),
    st.sampled_from([1, 2]),
    st.sampled_from([1, 2, 3]),
    st.sampled_from([-1, 0, 1, 5, -(2**63)]),
    st.one_of(st.integers(0, 200), st.integers(INLINE_MAX - 2, INLINE_MAX + 2), st.integers(0, 2**64 - 1)),
    st.sampled_from([0, 1, 1]),
    st.one_of(st.binary(max_size=200), st.builds(lambda o: ser.encode(o, "safe").tobytes(), plain)),
)


@prop
@given(st.one_of(forged, forged_plausible))
def forged_slots(slot: bytearray) -> None:
    count("forged_slots")
    try:
        head = ser.parse_slot(slot, tuple(ser.CODECS.values()))  # as the core parses them
    except FrameDecodeError:
        return
    assert head.op in ser.Op.NAMES and head.status in (ser.Status.OK, ser.Status.ENCODE_ERROR)
    assert head.codec in ser.CODECS.values()
    assert not head.inline or (
        head.data is not None and head.payload_size <= INLINE_MAX and head.data.nbytes == head.payload_size
    )
    head.error_text()


# --------------------------------------------------------------------------
# the whole receive path
# --------------------------------------------------------------------------

#: The most bytes the fake transport hands out for one peer block; a real one would try to allocate more.
FAKE_TRANSPORT_MAX = 1 << 20


class LyingPeer(FramedDistBackend):
    """Rank 0 of two; rank 1's slot and payload bytes are whatever the test says."""

    name = "lying"

    def __init__(self, slot: bytes, payload: bytes, codec: str) -> None:
        super().__init__(timeout=5, codec=codec)
        self.peer_slot, self.peer_payload = slot, payload

    @property
    def is_initialized(self) -> bool:
        return True

    @property
    def rank(self) -> int:
        return 0

    @property
    def world_size(self) -> int:
        return 2

    def _mine(self, size: int, fill: Any) -> memoryview:
        buf = bytearray(size)
        if fill is not None:
            fill(memoryview(buf))
        return memoryview(buf)

    def _peer(self, size: int) -> memoryview:
        if size > FAKE_TRANSPORT_MAX:
            raise MemoryError(f"cannot allocate {size} bytes")  # what a real transport would meet
        return memoryview(self.peer_payload[:size].ljust(size, b"\0"))

    def _exchange_slots(self, fill: Any, timeout: float) -> Sequence[memoryview]:
        return [self._mine(ser.SLOT_SIZE, fill), memoryview(self.peer_slot)]

    def _all_gather_bytes(self, sizes: Sequence[int], fill: Any, timeout: float) -> Sequence[memoryview]:
        return [self._mine(sizes[0], fill), self._peer(sizes[1])]

    def _gather_bytes(self, sizes: Sequence[int], fill: Any, dst: int, timeout: float) -> Any:
        mine = self._mine(sizes[0], fill)
        return [mine, self._peer(sizes[1])] if dst == 0 else None

    def _broadcast_bytes(self, size: int, fill: Any, src: int, timeout: float) -> Any:
        return None if src == 0 else self._peer(size)


@prop
@given(
    st.one_of(forged, forged_plausible),
    st.binary(max_size=2048),
    st.sampled_from(["pickle", "safe"]),
    st.sampled_from(["all_gather", "gather0", "gather1", "broadcast0", "broadcast1", "barrier"]),
    plain,
)
def receive_path(slot: bytearray, payload: bytes, codec: str, op: str, obj: Any) -> None:
    count("receive_path")
    b = LyingPeer(bytes(slot), payload, codec)
    try:
        if op == "all_gather":
            b.all_gather_object(obj)
        elif op.startswith("gather"):
            b.gather_object(obj, dst=int(op[-1]))
        elif op.startswith("broadcast"):
            b.broadcast_object(obj, src=int(op[-1]))
        else:
            b.barrier()
    except DistCommunicationError:
        pass


# --------------------------------------------------------------------------


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--examples", type=int, default=1500)
    p.add_argument("--only", default="")
    p.add_argument("--memory-gb", type=float, default=4.0)
    p.add_argument("--hang-seconds", type=float, default=0.0, help="dump every thread's stack if still running then")
    args = p.parse_args(argv)
    limit = int(args.memory_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))  # a runaway allocation is a MemoryError, not an OOM kill
    if args.hang_seconds:
        faulthandler.dump_traceback_later(args.hang_seconds, exit=True)
    chosen = [n for n in PROPERTIES if not args.only or n in args.only.split(",")]
    for name in chosen:
        fn = PROPERTIES[name]
        settings(
            max_examples=args.examples,
            deadline=None,
            database=None,
            print_blob=True,
            suppress_health_check=list(HealthCheck),
        )(fn)()
    print(json.dumps({"examples": COUNTS}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
