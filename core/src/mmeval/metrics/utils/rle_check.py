"""COCO run-length encodings checked before pycocotools' C code sees them (issue 32, item 4).

pycocotools decodes a compressed RLE ``counts`` string without checking it: a
garbage string gives runs that do not add up to the image, and its mask IoU
can then spin for minutes while the peers time out. :func:`check_rle` decodes
the string as ``maskApi.c``'s ``rleFrString`` does (vectorised, no C) and
refuses, naming the field, anything that is not a mask of ``h x w`` pixels:
characters outside ``'0'..'o'``, a value cut off, a negative run, runs that do
not sum to ``h * w``. Uncompressed counts (a list of ints) get the same checks.
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from ...core.errors import MetricArgumentError

__all__ = ["check_polygon_rings", "check_rle", "check_rle_size", "decode_rle_counts"]

#: at most 6 chunks of 5 bits a value (30 bits, runs up to 2**29 pixels): pycocotools' ``rleFrString`` shifts
#: each chunk in a 32-bit ``int``, so a 7th chunk is read differently there than by the definition; its encoder
#: never writes one for an image under 2**29 pixels. Longer values are refused, never decoded two ways.
_MAX_CHUNKS = 6


def check_rle_size(size: Any, what: str) -> Tuple[int, int]:
    """``(h, w)`` of an RLE's ``size``: two non-negative ints, else a MetricArgumentError naming ``what``."""
    try:
        h, w = (int(v) for v in size)
        ok = all(float(v) == int(v) for v in size) and h >= 0 and w >= 0
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise MetricArgumentError(f"{what}['size'] must be [height, width], two non-negative ints, got {size!r}")
    return h, w


def decode_rle_counts(counts: bytes) -> np.ndarray:
    """The run lengths of a compressed RLE string (int64), as ``rleFrString`` reads them; ``ValueError`` if it is not one."""
    b = np.frombuffer(counts, dtype=np.uint8).astype(np.int64) - 48
    if b.size == 0:
        return np.zeros(0, dtype=np.int64)
    if int(b.min()) < 0 or int(b.max()) > 63:
        bad = int(np.flatnonzero((b < 0) | (b > 63))[0])
        raise ValueError(f"character {counts[bad : bad + 1]!r} at {bad} is not an RLE character ('0'..'o')")
    more = (b & 0x20) != 0
    if bool(more[-1]):
        raise ValueError("the last value is cut off (its last character continues it)")
    ends = np.flatnonzero(~more)
    starts = np.concatenate([[0], ends[:-1] + 1])
    chunks = ends - starts + 1
    if int(chunks.max()) > _MAX_CHUNKS:
        raise ValueError(
            f"a value spans {int(chunks.max())} characters (at most {_MAX_CHUNKS}: pycocotools' decoder reads longer "
            "values in 32 bits, differently from the definition; its encoder writes at most 6 for runs under 2**29)"
        )
    group = np.repeat(np.arange(ends.size), chunks)
    k = np.arange(b.size) - starts[group]
    x = np.zeros(ends.size, dtype=np.int64)
    np.add.at(x, group, (b & 0x1F) << (5 * k))
    negative = (b[ends] & 0x10) != 0
    x[negative] -= np.left_shift(1, 5 * chunks[negative])
    cnts = x.copy()  # values from the third on are deltas of the value two before (rleFrString's m > 2)
    if cnts.size > 3:
        cnts[3::2] = np.cumsum(x[1::2])[1:]
    if cnts.size > 4:
        cnts[4::2] = np.cumsum(x[2::2])[1:]
    return np.asarray(cnts, dtype=np.int64)


def check_rle(rle: Any, what: str) -> Tuple[int, int]:
    """Refuse (MetricArgumentError naming ``what``) an RLE dict that is not a mask of its ``size``; its ``(h, w)``."""
    h, w = check_rle_size(rle["size"], what)
    if h * w >= 2**32:
        raise MetricArgumentError(
            f"{what}['size'] {[h, w]} has {h * w} pixels: pycocotools counts a mask's pixels in 32 bits (under 2**32)"
        )
    counts = rle["counts"]
    if isinstance(counts, (list, tuple, np.ndarray)):
        arr = np.asarray(counts)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu" and not np.all(np.mod(arr, 1) == 0)):
            raise MetricArgumentError(
                f"{what}['counts'] (uncompressed) must be a flat list of ints, got {counts!r:.80}"
            )
        runs = arr.astype(np.int64)
    elif isinstance(counts, (str, bytes)):
        raw = counts.encode() if isinstance(counts, str) else counts
        try:
            runs = decode_rle_counts(raw)
        except (ValueError, UnicodeEncodeError) as exc:
            raise MetricArgumentError(f"{what}['counts'] is not a COCO compressed RLE: {exc}") from None
    else:
        raise MetricArgumentError(
            f"{what}['counts'] must be an RLE string or a list of ints, got {type(counts).__name__}"
        )
    if runs.size and int(runs.min()) < 0:
        raise MetricArgumentError(f"{what}['counts'] decodes to a negative run ({int(runs.min())}): not an RLE")
    total = int(runs.sum()) if runs.size else 0
    if total != h * w:
        raise MetricArgumentError(
            f"{what}['counts'] covers {total} pixels, its size {[h, w]} has {h * w}: not an RLE of that size "
            f"(pycocotools would read past it)"
        )
    return h, w


def check_polygon_rings(rings: Any, what: str) -> None:
    """Refuse (MetricArgumentError naming ``what``) a COCO polygon that is not rings of >= 3 finite (x, y) points."""
    for j, ring in enumerate(rings):
        try:
            pts = np.asarray(ring, dtype=np.float64)
        except (TypeError, ValueError):
            raise MetricArgumentError(f"{what}[{j}] must be a flat list of numbers [x1, y1, x2, y2, ...]") from None
        if pts.ndim != 1 or pts.size < 6 or pts.size % 2:
            raise MetricArgumentError(
                f"{what}[{j}] must be a flat list of at least 3 (x, y) points, got shape {pts.shape}"
            )
        if not np.isfinite(pts).all():
            raise MetricArgumentError(f"{what}[{j}] holds NaN or infinite coordinates")
