"""Frames, slots and codecs: round trips, zero-copy, and hostile bytes."""

from __future__ import annotations

import math
import pickle
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmeval.core import serialization as ser
from mmeval.core import wire
from mmeval.core.errors import FrameDecodeError, UnsafePayloadError
from mmeval.core.wire import columnar, frames


def roundtrip(obj, codec="pickle"):
    frame = ser.encode(obj, codec)
    buf = bytearray(frame.nbytes)
    frame.write_into(memoryview(buf))
    return ser.decode(memoryview(buf), codec), buf


def test_pickle_roundtrip_nested():
    obj = {"a": [1, 2.5, None, ("x", b"y")], "arr": np.arange(12).reshape(3, 4), "s": {1, 2}}
    out, _ = roundtrip(obj)
    assert out["a"] == obj["a"] and out["s"] == obj["s"]
    np.testing.assert_array_equal(out["arr"], obj["arr"])


def test_arrays_travel_out_of_band_and_decode_without_copy():
    arr = np.random.default_rng(0).random(1_000_000)
    frame = ser.encode({"x": arr})
    # the pickle stream is tiny: the array is a separate buffer
    assert frame.nbytes >= arr.nbytes
    buf = bytearray(frame.nbytes)
    frame.write_into(memoryview(buf))
    out = ser.decode(memoryview(buf))
    np.testing.assert_array_equal(out["x"], arr)
    # the decoded array is a view of the received bytes
    assert np.shares_memory(out["x"], np.frombuffer(buf, dtype=np.uint8))
    assert out["x"].ctypes.data % ser.ALIGN == (np.frombuffer(buf, np.uint8).ctypes.data % ser.ALIGN)


def test_non_contiguous_array_falls_back_in_band():
    arr = np.arange(100)[::2]
    out, _ = roundtrip(arr)
    np.testing.assert_array_equal(out, arr)


def test_safe_codec_roundtrip():
    obj = {
        "i": 1,
        "big": 1 << 100,
        "neg": -(1 << 70),
        "f": 1.5,
        "c": 1 + 2j,
        "s": "ü",
        "b": b"\x00",
        "ba": bytearray(b"q"),
        "l": [None, True, False],
        "t": (1, (2,)),
        3: "int key",
        "arr": np.arange(6, dtype=np.int16).reshape(2, 3),
        "empty": np.zeros((0, 4)),
        "scalar": np.float32(2.5),
        "dt": np.array(["2024-01-01"], dtype="datetime64[D]"),
    }
    out, _ = roundtrip(obj, "safe")
    for k, v in obj.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(out[k], v)
            assert out[k].dtype == v.dtype and out[k].shape == v.shape
        else:
            assert out[k] == v and type(out[k]) is type(v)


@pytest.mark.parametrize("bad", [object(), {1, 2}, np.array([object()]), lambda: 1, np.zeros(2, dtype=[("a", "i4")])])
def test_safe_codec_refuses_non_plain_data(bad):
    with pytest.raises(UnsafePayloadError):
        ser.encode({"x": bad}, "safe")


def test_safe_receiver_refuses_pickle_frames():
    frame = ser.encode({"x": 1}, "pickle").tobytes()
    with pytest.raises(UnsafePayloadError, match="safe"):
        ser.decode(frame, "safe")


def test_unknown_codec_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown codec 'json'"):
        ser.encode(1, "json")


def test_slot_roundtrip_inline_and_error():
    slot = bytearray(ser.SLOT_SIZE)
    frame = ser.encode({"k": "v"})
    assert ser.build_slot(
        memoryview(slot), status=ser.Status.OK, op=ser.Op.GATHER, codec=1, seq=7, root=2, payload=frame
    )
    head = ser.parse_slot(slot)
    assert (head.op, head.seq, head.root, head.inline) == (ser.Op.GATHER, 7, 2, True)
    assert ser.decode(head.data) == {"k": "v"}
    big = ser.encode(np.zeros(10_000))
    assert not ser.build_slot(
        memoryview(slot), status=ser.Status.OK, op=ser.Op.ALL_GATHER, codec=1, seq=1, root=-1, payload=big
    )
    assert ser.parse_slot(slot).payload_size == big.nbytes
    ser.build_slot(
        memoryview(slot),
        status=ser.Status.ENCODE_ERROR,
        op=ser.Op.BROADCAST,
        codec=1,
        seq=1,
        root=0,
        error="TypeError: nope",
    )
    assert ser.parse_slot(slot).error_text() == "TypeError: nope"


def test_corrupted_slot_is_detected():
    slot = bytearray(ser.SLOT_SIZE)
    ser.build_slot(memoryview(slot), status=0, op=1, codec=1, seq=1, root=-1, payload=ser.encode([1, 2, 3]))
    for pos in (0, 5, 9, 20, 40, ser.HEADER_SIZE + 3):
        bad = bytearray(slot)
        bad[pos] ^= 0xFF
        with pytest.raises(FrameDecodeError):
            ser.parse_slot(bad)


def test_the_slot_carries_the_call_window_and_refuses_one_that_ends_before_it_begins():
    slot = bytearray(ser.SLOT_SIZE)
    ser.build_slot(memoryview(slot), status=0, op=1, codec=1, seq=1, root=-1, start=1.7e9, deadline=1.7e9 + 5)
    head = ser.parse_slot(slot)
    assert (head.start, head.deadline) == (1.7e9, 1.7e9 + 5)
    ser.build_slot(memoryview(slot), status=0, op=1, codec=1, seq=1, root=-1, start=1.7e9, deadline=math.inf)
    assert (ser.parse_slot(slot).start, ser.parse_slot(slot).deadline) == (1.7e9, 0.0)  # no deadline
    forged = bytearray(slot)
    wire._SLOT_HEAD.pack_into(forged, 0, b"MMEV", wire._SLOT_VERSION, 0, 1, 1, 1, -1, 0, 0, 0, 1.7e9, 1.7e9 - 1)
    wire._SLOT_CRC.pack_into(forged, wire._SLOT_HEAD.size, zlib.crc32(forged[: wire._SLOT_HEAD.size]))
    with pytest.raises(FrameDecodeError, match="call window"):
        ser.parse_slot(forged)


def test_frame_bigger_than_4gib_header_arithmetic():
    # sizes are 64-bit everywhere: a >4 GiB buffer length survives the header
    view = memoryview(bytearray(64))
    frame = ser.assemble_frame(1, b"meta", [view])
    prefix = frame.tobytes()[: frames._FRAME_PREFIX.size + 8]
    assert frames._U64.unpack_from(prefix, frames._FRAME_PREFIX.size)[0] == 64
    head = bytearray(ser.SLOT_SIZE)
    fake = ser.Frame([], 5 * 2**30)
    ser.build_slot(memoryview(head), status=0, op=1, codec=1, seq=1, root=-1, payload=fake)
    assert ser.parse_slot(head).payload_size == 5 * 2**30


HOSTILE = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@HOSTILE
@given(st.binary(max_size=2048))
def test_random_bytes_never_crash_the_frame_decoder(data):
    for codec in ("pickle", "safe"):
        try:
            ser.decode(data, codec)
        except (FrameDecodeError, UnsafePayloadError):
            pass


@HOSTILE
@given(st.booleans(), st.binary(max_size=ser.HEADER_SIZE + 64))
def test_random_slots_are_rejected(with_magic, head):
    data = (b"MMEV\x01" + head if with_magic else head).ljust(ser.SLOT_SIZE, b"\x00")[: ser.SLOT_SIZE]
    with pytest.raises(FrameDecodeError):
        ser.parse_slot(data)
    with pytest.raises(FrameDecodeError):
        ser.parse_slot(data[: len(head)])  # short blocks too


plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=5), children, max_size=5)
    ),
    max_leaves=30,
)


@HOSTILE
@given(plain, st.data())
def test_truncated_and_corrupted_frames_raise_clearly(obj, data):
    for codec in ("pickle", "safe"):
        frame = ser.encode(obj, codec).tobytes()
        assert ser.decode(frame, codec) == obj
        cut = data.draw(st.integers(0, len(frame) - 1))
        try:
            ser.decode(frame[:cut], codec)
        except (FrameDecodeError, UnsafePayloadError):
            pass
        pos = data.draw(st.integers(0, len(frame) - 1))
        bad = bytearray(frame)
        bad[pos] ^= data.draw(st.integers(1, 255))
        if codec == "pickle" and pos >= 16:
            continue  # a flipped byte inside a pickle stream may still be valid pickle: not the decoder's job
        try:
            ser.decode(bytes(bad), codec)
        except (FrameDecodeError, UnsafePayloadError):
            pass


def test_a_codecs_reducers_send_custom_types_out_of_band_and_stay_scoped_to_that_codec():
    class Blob:
        def __init__(self, data: bytes) -> None:
            self.data = data

    seen = []

    def reduce_blob(b):
        seen.append(b)
        return (bytes, (pickle.PickleBuffer(b.data),))

    codec = ser.PickleCodec({Blob: reduce_blob})
    frame = codec.encode([Blob(b"x" * 100_000)])
    assert len(frame.parts) >= 3  # the blob's bytes are an out-of-band segment
    assert seen and codec.decode(frame.tobytes()) == [b"x" * 100_000]
    # another codec (another backend's, or the plain one) does not apply the reducer
    seen.clear()
    with pytest.raises((pickle.PicklingError, AttributeError)):  # a local class: plain pickle cannot carry it
        ser.PickleCodec().encode([Blob(b"y" * 10)])
    assert not seen


def test_homogeneous_per_sample_lists_travel_as_columns():
    rng = np.random.default_rng(1)
    rows = [(int(rng.integers(10)), rng.random(10).astype(np.float32)) for _ in range(5000)]
    frame = ser.encode(rows)
    # a few contiguous columns: the frame is about the bytes of the data, not the object count
    assert frame.nbytes < 5000 * (8 + 40) + 4096
    out, _ = roundtrip(rows)
    assert len(out) == len(rows)
    for (a, b), (c, d) in zip(out, rows):
        assert a == c and type(a) is int
        assert d.dtype == b.dtype and d.shape == b.shape and np.array_equal(b, d)


@pytest.mark.parametrize(
    "obj",
    [
        [{"score": 0.5, "label": np.int32(3), "ok": True}] * 600,
        [np.float32(x) for x in range(700)],
        list(range(1000)),
        [1.5, float("nan"), -0.0] * 300,
        [(1, "text")] * 600,  # strings: not columnar, still exact
        [(1, 2)] * 300 + [(1, 2, 3)] * 300,  # ragged: not columnar
        [np.zeros(3), np.zeros(4)] * 300,  # ragged arrays
        [1] * 600 + [1.0],  # mixed types
        [1 << 70] * 600,  # overflows int64
        [np.str_("a"), np.str_("abc")] * 300,  # one numpy type, two dtypes: not one column (no truncation)
        [np.datetime64("2020-01-01", "D"), np.datetime64("2020-01-01T05", "h")] * 300,  # two units
        [np.zeros(4), np.zeros((4, 1))] * 300,  # same length, different ndim
        [np.zeros(3, ">f4"), np.zeros(3, "<f4")] * 300,  # byte orders differ
        [np.arange(20.0)[::2]] * 600,  # non-contiguous rows
        [(i, np.arange(i, i + 3, dtype=np.int16)) for i in range(700)],
        {"results": [(i, float(i)) for i in range(1000)], "meta": ("x", [1, 2])},
        ("head", list(range(600)), 3, [np.float32(1)] * 700),  # tuple holding two long lists
        [1, {"a": list(range(600))}, [[0.5] * 600, "x"]],  # depth 1 and 2 containers
        {"deep": [[[1] * 600]]},  # too deep: pickled as it is
    ],
)
def test_columnar_round_trip_is_exact(obj):
    out, _ = roundtrip(obj)

    def same(a, b):
        assert type(a) is type(b)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
        elif isinstance(a, (list, tuple)):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                same(x, y)
        elif isinstance(a, dict):
            assert list(a) == list(b)
            for k in a:
                same(a[k], b[k])
        elif isinstance(a, float) and a != a:
            assert b != b
        else:
            assert a == b

    same(obj, out)


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000, 4096, 1 << 20])
def test_write_range_chunks_reassemble_the_frame(chunk):
    obj = {"a": np.arange(1000, dtype=np.float32), "b": [np.ones(3)] * 5, "c": "x" * 100, "d": np.zeros(17, np.int8)}
    frame = ser.encode(obj)
    whole = frame.tobytes()
    out = bytearray(b"\xff" * frame.nbytes)  # stale bytes: every byte, gaps included, must be written
    for start in range(0, frame.nbytes, chunk):
        n = min(chunk, frame.nbytes - start)
        frame.write_range(memoryview(out)[start : start + n], start)
    assert bytes(out) == whole
    buf = bytearray(frame.nbytes)
    frame.write_into(memoryview(buf))
    assert bytes(buf) == whole


def test_frame_parts_locate_every_byte_and_share_the_arrays_memory():
    data = np.arange(4096, dtype=np.float64)
    frame = ser.encode({"data": data, "rank": 3})
    whole = frame.tobytes()
    parts = frame.parts
    assert [o for o, _ in parts] == sorted(o for o, _ in parts)
    covered = bytearray(frame.nbytes)  # every non-gap byte belongs to one part, the gaps are zeros
    for offset, part in parts:
        assert whole[offset : offset + part.nbytes] == part.tobytes()
        covered[offset : offset + part.nbytes] = b"\x01" * part.nbytes
    assert all(whole[i] == 0 for i in range(frame.nbytes) if not covered[i])
    big = max(parts, key=lambda p: p[1].nbytes)[1]
    assert np.shares_memory(np.frombuffer(big, dtype=np.uint8), data)  # no copy: a transport may send it as it is


def test_columnarize_leaves_objects_without_long_lists_untouched():
    obj = {"rank": 1, "ids": list(range(100)), "names": ["a"] * 40, "t": (1, [2, 3])}
    assert ser.columnarize(obj) is obj
    nested = {"keep": [1, 2], "long": [(i, 1.0) for i in range(600)]}
    out = ser.columnarize(nested)
    assert out is not nested and out["keep"] is nested["keep"] and list(out) == ["keep", "long"]
    assert isinstance(out["long"], columnar._Columns) and nested["long"][0] == (0, 1.0)  # the input is not modified


def test_large_decode_restores_the_collector_and_keeps_garbage_collectable():
    import gc
    import weakref

    rows = [(i, np.full(4, i, np.float32)) for i in range(20000)]
    data = ser.encode(rows).tobytes()

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle created before the decode ...
    ref = weakref.ref(a)
    del a, b
    assert gc.isenabled()
    frozen_before = gc.get_freeze_count()  # not 0 everywhere: Python 3.12 starts with some objects frozen
    assert len(ser.decode(data)) == len(rows)
    assert gc.isenabled() and gc.get_freeze_count() == frozen_before
    gc.collect()
    assert ref() is None  # ... is still collected afterwards

    gc.disable()  # a caller who turned the collector off keeps it off
    try:
        ser.decode(data)
        assert not gc.isenabled()
    finally:
        gc.enable()

    frozen = [[] for _ in range(10)]  # a program that froze its objects keeps them frozen
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        ser.decode(data)
        assert gc.get_freeze_count() == before
    finally:
        gc.unfreeze()
    del frozen


def test_segment_view_gives_a_range_inside_one_segment_and_nothing_else():
    data = np.arange(1 << 16, dtype=np.uint8)
    frame = ser.encode({"data": data, "rank": 1})
    whole = frame.tobytes()
    offset = max(frame.parts, key=lambda p: p[1].nbytes)[0]
    view = frame.segment_view(offset + 100, frame.nbytes)
    assert view is not None and view.readonly and bytes(view) == whole[offset + 100 :]
    assert np.shares_memory(np.frombuffer(view, dtype=np.uint8), data)
    assert frame.segment_view(offset - 1, offset + 10) is None  # straddles the start of the array
    two = ser.encode([np.zeros(100, np.uint8), np.ones(100, np.uint8)])
    assert two.segment_view(0, two.nbytes) is None  # spans several segments


def _safe_frame(stream: bytes) -> bytes:
    return ser.assemble_frame(ser.CODECS["safe"], stream, []).tobytes()


def test_safe_codec_refuses_dict_keys_crafted_to_share_a_hash_in_linear_time():
    import struct
    import time

    p = (1 << 61) - 1  # int hashes are taken modulo this prime: every multiple hashes to 0
    keys = [i * p for i in range(20_000)]
    stream = (
        b"d"
        + struct.pack("<Q", len(keys))
        + b"".join(b"I" + struct.pack("<Q", 16) + k.to_bytes(16, "little", signed=True) + b"N" for k in keys)
    )
    started = time.perf_counter()
    with pytest.raises(FrameDecodeError, match="share the hash"):
        ser.decode(_safe_frame(stream), "safe")
    assert time.perf_counter() - started < 2.0  # quadratic insertion of 20,000 such keys takes ~3 s here


def test_safe_codec_still_decodes_large_ordinary_dicts_and_the_natural_int_collision():
    big = {f"key-{i}": i for i in range(50_000)}
    big.update({-1: "a", -2: "b"})  # hash(-1) == hash(-2): two colliding keys are fine
    assert ser.decode(ser.encode(big, "safe").tobytes(), "safe") == big
    ints = {i: None for i in range(-1000, 50_000)}
    assert ser.decode(ser.encode(ints, "safe").tobytes(), "safe") == ints
