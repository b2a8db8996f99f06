"""Codecs: how an object becomes a frame's meta stream and buffers, and back.

Two codecs, each an object a backend holds (never process-wide state):

* :class:`PickleCodec` -- pickle protocol 5 with out-of-band buffers: contiguous
  buffers (numpy arrays; framework tensors through a backend's *reducers*) are
  not copied into the pickle stream but placed in the frame as they are, and
  rebuilt on the receiving side as views of the received bytes. Long
  homogeneous lists travel columnar (:mod:`mmeval.core.wire.columnar`). It runs
  whatever the peer's bytes say: every rank of a group must trust every other.
* :class:`SafeCodec` -- plain data only (:mod:`mmeval.core.wire.safe_codec`), with
  decoding bounded in time and memory by the payload.

A backend's reducers (``{type: reducer}``, see :class:`PickleCodec`) apply to
that backend's codec only: the torch plugin's tensor reducer changes nothing
for another backend or for the user's own pickling.
"""

from __future__ import annotations

import io
import pickle
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Optional, Sequence, Union

from .._gc import GC_PAUSE_MIN, gc_paused
from ..errors import FrameDecodeError, UnsafePayloadError
from .columnar import columnarize
from .frames import Buffer, Frame, assemble_frame, split_frame
from .slots import CODEC_IDS

__all__ = ["CODECS", "Codec", "PickleCodec", "SafeCodec", "Reducer", "codec_id", "make_codec", "encode", "decode"]

#: Codec names and the id each is sent as (the table lives with the other byte layouts in :mod:`.wire`).
CODECS: Dict[str, int] = CODEC_IDS
_CODEC_NAMES = {v: k for k, v in CODECS.items()}

#: ``reducer(obj)`` returns a ``__reduce__``-style tuple; it may put ``pickle.PickleBuffer``
#: objects in its arguments so that their bytes travel out-of-band.
Reducer = Callable[[Any], Any]


def codec_id(name: str) -> int:
    """Return the wire id of codec ``name``; raise ``ValueError`` naming the choices."""
    try:
        return CODECS[name]
    except KeyError:
        raise ValueError(
            f"unknown codec {name!r}: choose one of {sorted(CODECS)} "
            "(set it per backend with codec=... or with MMEVAL_CODEC)"
        ) from None


class Codec:
    """What a backend asks of a codec: encode to a :class:`Frame`, decode a received one.

    Attributes:
        name: ``'pickle'`` or ``'safe'``, the name settings use.
        id: the id sent in slots and frames.
        plain_data_only: True when only plain data can be sent (no arbitrary
            classes, no pickled exceptions): callers ask this instead of
            testing the name.
    """

    name: ClassVar[str] = ""
    id: ClassVar[int] = 0
    plain_data_only: ClassVar[bool] = False

    def encode(self, obj: Any) -> Frame:
        """Encode ``obj``; raises what the codec raises for an object it cannot carry."""
        raise NotImplementedError

    def decode_parts(self, meta: memoryview, buffers: Sequence[memoryview]) -> Any:
        """Rebuild the object from a frame's meta stream and buffers."""
        raise NotImplementedError

    def decode(self, frame: Buffer) -> Any:
        """Decode one frame under this codec's policy.

        A pickle-encoded frame is refused (:class:`UnsafePayloadError`) by a
        plain-data codec before a byte is unpickled; a malformed frame raises
        :class:`FrameDecodeError`.
        """
        cid, meta, buffers = split_frame(frame)
        other = _CODEC_NAMES.get(cid)
        if other is None:
            raise FrameDecodeError(f"frame names unknown codec id {cid}")
        if cid == self.id:
            return self.decode_parts(meta, buffers)
        if self.plain_data_only:
            raise UnsafePayloadError(
                f"received a {other!r}-encoded frame but this backend only accepts the {self.name!r} codec; "
                f"make every rank use codec={self.name!r} (or MMEVAL_CODEC={self.name})"
            )
        return _codec_for_id(cid).decode_parts(meta, buffers)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class PickleCodec(Codec):
    """Pickle protocol 5 with out-of-band buffers and the columnar encoding.

    Args:
        reducers: ``{type: reducer}`` applied to objects of exactly that type
            (subclasses are not matched) while this codec pickles. Backends
            pass theirs (the torch plugin: ``torch.Tensor``).
    """

    name = "pickle"
    id = CODECS["pickle"]

    def __init__(self, reducers: Optional[Mapping[type, Reducer]] = None) -> None:
        self.reducers: Dict[type, Reducer] = dict(reducers or {})

    def encode(self, obj: Any) -> Frame:
        buffers: List[memoryview] = []

        def take(pb: pickle.PickleBuffer) -> bool:
            try:
                buffers.append(pb.raw())
            except BufferError:  # not contiguous: serialize in-band
                return True
            return False

        obj = columnarize(obj)
        meta: Buffer
        if self.reducers:
            stream = io.BytesIO()
            _Pickler(stream, self.reducers, buffer_callback=take).dump(obj)
            meta = stream.getbuffer()
        else:
            meta = pickle.dumps(obj, protocol=5, buffer_callback=take)
        return assemble_frame(self.id, meta, buffers)

    def decode_parts(self, meta: memoryview, buffers: Sequence[memoryview]) -> Any:
        try:
            if meta.nbytes < GC_PAUSE_MIN:  # too few objects to trigger a collection: skip the bookkeeping
                return pickle.loads(meta, buffers=buffers)
            with gc_paused():
                return pickle.loads(meta, buffers=buffers)
        except Exception as exc:
            raise FrameDecodeError(f"could not unpickle a frame: {type(exc).__name__}: {exc}") from exc


class _Pickler(pickle.Pickler):
    def __init__(self, stream: io.BytesIO, reducers: Dict[type, Reducer], buffer_callback: Any) -> None:
        super().__init__(stream, protocol=5, buffer_callback=buffer_callback)
        self._reducers = reducers

    def reducer_override(self, obj: Any) -> Any:
        reducer = self._reducers.get(type(obj))
        if reducer is None:
            return NotImplemented
        return reducer(obj)


class SafeCodec(Codec):
    """Plain data only (see :mod:`mmeval.core.wire.safe_codec`); refuses pickle frames."""

    name = "safe"
    id = CODECS["safe"]
    plain_data_only = True

    def encode(self, obj: Any) -> Frame:
        from . import safe_codec

        meta, buffers = safe_codec.dumps(obj)
        return assemble_frame(self.id, meta, buffers)

    def decode_parts(self, meta: memoryview, buffers: Sequence[memoryview]) -> Any:
        from . import safe_codec

        return safe_codec.loads(meta, buffers)


_PLAIN_PICKLE = PickleCodec()
_SAFE = SafeCodec()


def _codec_for_id(cid: int) -> Codec:
    return _SAFE if cid == _SAFE.id else _PLAIN_PICKLE


def make_codec(name: str, reducers: Optional[Mapping[type, Reducer]] = None) -> Codec:
    """The codec called ``name``, with ``reducers`` for the pickle codec; ``ValueError`` for other names."""
    codec_id(name)
    if name == "safe":
        return _SAFE
    return PickleCodec(reducers) if reducers else _PLAIN_PICKLE


def encode(obj: Any, codec: Union[str, Codec] = "pickle") -> Frame:
    """Encode ``obj`` into a :class:`Frame` with a codec (a name, or a :class:`Codec`)."""
    return (codec if isinstance(codec, Codec) else make_codec(codec)).encode(obj)


def decode(frame: Buffer, allowed: Union[str, Codec] = "pickle") -> Any:
    """Decode one frame; ``allowed`` is the receiver's codec (its policy: ``'safe'`` refuses pickle frames)."""
    return (allowed if isinstance(allowed, Codec) else make_codec(allowed)).decode(frame)
