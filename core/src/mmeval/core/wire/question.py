"""The question's encoding: what every rank must agree on, as the slot carries it (see :mod:`mmeval.core.wire`)."""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .slots import QUESTION_MAX

__all__ = ["canonical_question", "encode_question", "question_fields"]

#: A question field's value is shown in full in the slot (and in messages) up to the first of these
#: lengths at which the whole question fits in :data:`QUESTION_MAX` bytes (a refusal's sentence fits whole).
_SHOWN = (240, 60)
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

    Each field travels as its readable text (in full up to 240 characters
    when the whole question fits so, else up to 60, else shortened) and a
    digest of its :func:`canonical_question` encoding, so a difference
    anywhere in a value is caught, and named by field; when the fields do not
    fit, only the digests travel, and past that one digest of the whole
    question (with the thread's name).
    """
    fields = []
    for key, value in (question or {}).items():
        text = (
            value
            if isinstance(value, str)
            else _stable_repr(value)
            if callable(value)
            else "{" + ", ".join(sorted(map(repr, value))) + "}"
            if type(value) in (set, frozenset)
            else repr(value)
        )
        # (a set's repr follows the process's hash order, which differs between ranks: shown sorted)
        # a str / int / bool / None / float shown whole is its own exact encoding (repr round-trips): no
        # digest, so the slot keeps its room for a reduction's array
        exact = value is None or type(value) in (str, int, bool, float)
        fields.append((str(key)[:64], text, "" if exact else _digest(canonical_question({"": value}))))
    for limit in _SHOWN:
        shown: Dict[str, List[str]] = {"thread": [thread[:64], ""]}
        for key, text, digest in fields:
            if len(text) <= limit:
                shown[key] = [text, digest]
            else:  # shortened: the digest of the whole value tells it apart
                shown[key] = [
                    f"{text[: limit - 20]}...(len {len(text)})",
                    digest or _digest(canonical_question({"": text})),
                ]
        data = json.dumps(shown, sort_keys=True, separators=(",", ":")).encode()
        if len(data) <= QUESTION_MAX:
            break
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
