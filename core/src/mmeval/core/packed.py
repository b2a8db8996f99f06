"""Ragged per-sample summaries as one ``bytes`` each: a few variable-length arrays packed, unpacked in bulk.

A metric whose samples turn into a variable number of rows (detections per
image, ground truths per image) keeps one packed summary per sample as an
object result (:meth:`~mmeval.core.BaseMetric._keep_to_summarize`, or
``self._results.append``). A ``bytes`` object costs a few bytes of framing on
the wire whatever the codec (pickle or safe), where a tuple of small arrays
would cost a hundred bytes or more each; :func:`unpack_arrays` joins every
sample's arrays column by column on the computing rank.
"""

from __future__ import annotations

import struct
from typing import List, Sequence, Tuple

import numpy as np

__all__ = ["pack_arrays", "unpack_arrays"]

#: dtype codes of the header (one byte each); other dtypes are refused
_DTYPES = ("?", "u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f4", "f8")
_CODE = {np.dtype(d): i for i, d in enumerate(_DTYPES)}
_ENTRY = struct.Struct("<BI")


def pack_arrays(*arrays: np.ndarray) -> bytes:
    """``arrays`` (flattened, little-endian; bool, int, uint or float of 1 to 8 bytes) as one ``bytes``.

    Layout: one byte for the count, then per array its dtype code (1 byte)
    and length (uint32), then the arrays' bytes one after another.
    """
    head = bytearray([len(arrays)])
    body: List[bytes] = []
    for a in arrays:
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        code = _CODE.get(np.dtype(dt))
        if code is None:
            raise TypeError(f"pack_arrays: dtype {a.dtype} is not packable (use one of {list(_DTYPES)})")
        head += _ENTRY.pack(code, a.size)
        body.append(np.ascontiguousarray(a, dtype=dt).tobytes())
    return bytes(head) + b"".join(body)


def unpack_arrays(blobs: Sequence[bytes], count: int) -> Tuple[np.ndarray, List[np.ndarray]]:
    """Every blob's ``count`` arrays joined column by column, and each blob's lengths.

    Returns ``(lengths, columns)``: ``lengths`` int64 ``(len(blobs), count)``
    (how many items blob i gave column j) and ``columns[j]`` the
    concatenation of column j over the blobs, in blob order (dtypes promoted
    as ``np.concatenate`` does). Raises ``ValueError`` on a blob that does not
    hold ``count`` arrays.
    """
    lengths = np.zeros((len(blobs), count), dtype=np.int64)
    parts: List[List[np.ndarray]] = [[] for _ in range(count)]
    for i, blob in enumerate(blobs):
        if not blob or blob[0] != count:
            raise ValueError(f"unpack_arrays: summary {i} holds {blob[0] if blob else 0} arrays, expected {count}")
        offset = 1 + count * _ENTRY.size
        for j in range(count):
            code, n = _ENTRY.unpack_from(blob, 1 + j * _ENTRY.size)
            dt = np.dtype(_DTYPES[code])
            parts[j].append(np.frombuffer(blob, dtype=dt, count=n, offset=offset))
            offset += n * dt.itemsize
            lengths[i, j] = n
    columns = [np.concatenate(p) if p else np.zeros(0) for p in parts]
    return lengths, columns
