"""Exact, order-independent sums of float64 values, kept as int64 limbs that ranks add with ``all_reduce``.

A float64 sum rounded after every addition depends on the order and the
grouping of the additions: the same values summed by one process and by four
ranks differ in the last bits. This module keeps instead the *exact* sum of
every finite value as a fixed-point integer over the whole float64 range
(every finite float64 is an integer multiple of ``2**-1074``), split into
:data:`LIMBS` signed int64 limbs of :data:`DIGIT_BITS` bits each, plus
:data:`COUNTS` int64 counts for what a fixed-point integer cannot hold (the
number of summands, of ``-0.0``, of ``+inf``, of ``-inf`` and of NaN). Adding
two accumulators is adding their int64 arrays -- also across ranks, in the
same integer ``all_reduce`` as the counts -- so the result is the same for any
partition and any order, and it is rounded to float64 once (:func:`rounded`):
the correctly rounded sum (round half to even), which is what
:func:`math.fsum` returns for the same values.

Special values follow IEEE 754 addition, whatever the order: NaN when any
summand is NaN or when both ``+inf`` and ``-inf`` occur, else ``+inf`` /
``-inf`` when one of them occurs; a finite exact sum too large for float64
rounds to ``+inf`` / ``-inf``; an exact zero is ``-0.0`` only when every
summand is ``-0.0`` (and there is at least one), else ``0.0``.

Layout: an accumulator of values of shape ``S`` is an int64 array of shape
``S + (WIDTH,)``; along the last axis ``LIMBS`` limbs (least significant
first; limb ``i`` weighs ``2**(DIGIT_BITS * i + LOW_EXP)``), then the counts.
Every accumulator this module returns has limbs below ``2**62`` in magnitude
(:func:`add` propagates carries when one reaches ``2**61``). A *normalised*
one (:func:`normalised`) has limbs ``0 .. LIMBS-2`` in ``[0, 2**DIGIT_BITS)``
and the sign in the last limb: up to ``2**(63 - DIGIT_BITS)`` (32,768) of
them add without overflow, so an accumulator is normalised before it goes to
an ``all_reduce``.
"""

from __future__ import annotations

import math
from typing import List, Tuple

import numpy as np

__all__ = ["COUNTS", "DIGIT_BITS", "LIMBS", "LOW_EXP", "WIDTH", "accumulate", "add", "normalised", "rounded", "zeros"]

#: bits of value per limb; the other 15 bits of an int64 are headroom for adding accumulators without carries
DIGIT_BITS = 48
#: the weight of the lowest bit: the lowest bit of a float64's 53-bit significand (from ``np.frexp``) is at
#: ``2**-1126`` or above (``2**-1074``, the smallest subnormal, is ``0.5 * 2**-1073``)
LOW_EXP = -1126
#: limbs: bits ``2**-1126`` to ``2**1024`` (2,151 bits), 9 bits above for carries, and the sign limb
LIMBS = 46
#: the counts after the limbs: summands, ``-0.0``, ``+inf``, ``-inf``, NaN
COUNTS = 5
#: int64 slots per accumulated value
WIDTH = LIMBS + COUNTS
#: a limb this large is normalised before the next addition (:func:`add`): limbs stay below ``2**62``
_BOUND = 1 << 61
#: rows accumulated between normalisations: each adds less than ``2**DIGIT_BITS`` to a limb (total < _BOUND)
_CHUNK = 1 << (60 - DIGIT_BITS)
_MASK = (1 << DIGIT_BITS) - 1
#: up to this many values, :func:`accumulate` sums Python ints; above, numpy digits (the same exact result)
_SMALL = 64
_N, _NEG_ZERO, _POS_INF, _NEG_INF, _NAN = range(LIMBS, WIDTH)


def zeros(shape: Tuple[int, ...] = ()) -> np.ndarray:
    """The accumulator of no values of shape ``shape`` (its :func:`rounded` value is ``0.0``)."""
    return np.zeros(tuple(shape) + (WIDTH,), dtype=np.int64)


def normalised(acc: np.ndarray) -> np.ndarray:
    """``acc`` (any int64 accumulator whose limbs have not overflowed) with its carries propagated: a copy
    whose limbs ``0 .. LIMBS-2`` lie in ``[0, 2**DIGIT_BITS)``. The value and the counts are unchanged."""
    out = np.array(acc, dtype=np.int64, copy=True)
    flat = out.reshape(-1, WIDTH)
    for j, row in enumerate(flat[:, :LIMBS].tolist()):
        flat[j, :LIMBS] = _limbs(_integer(row))  # Python ints: exact, faster than 45 carry steps on small arrays
    return out


def _limbs(total: int) -> List[int]:
    """The normalised limbs of the integer ``total`` (in units of ``2**LOW_EXP``)."""
    return [(total >> (DIGIT_BITS * i)) & _MASK for i in range(LIMBS - 1)] + [total >> (DIGIT_BITS * (LIMBS - 1))]


def _integer(limbs: List[int]) -> int:
    """The integer the limbs (least significant first, any signs) stand for, in units of ``2**LOW_EXP``."""
    total = 0
    for limb in reversed(limbs):
        total = (total << DIGIT_BITS) + limb
    return total


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The accumulator of the values of ``a`` and of ``b`` (of the same shape), carries propagated only when a
    limb nears the int64 range (so that adding many small accumulators stays cheap)."""
    out: np.ndarray = np.add(a, b, dtype=np.int64)
    if out.size and int(np.abs(out[..., : LIMBS - 1]).max()) >= _BOUND:
        out = normalised(out)
    return out


def accumulate(values: np.ndarray) -> np.ndarray:
    """The exact sum over the first axis of ``values`` (shape ``(n,) + S``, any real dtype; converted to
    float64 first), as an accumulator of shape ``S + (WIDTH,)``."""
    col = np.asarray(values, dtype=np.float64)
    shape = col.shape[1:]
    flat = col.reshape(col.shape[0], int(np.prod(shape, dtype=np.int64)))
    out = zeros((flat.shape[1],))
    out[:, _N] = flat.shape[0]
    element = np.broadcast_to(np.arange(flat.shape[1], dtype=np.int64), flat.shape)
    finite = np.isfinite(flat) & (flat != 0)
    if finite.all():  # the usual case: no zero, infinity or NaN to count
        vals, elems = flat.ravel(), element.ravel()
    else:
        out[:, _NEG_ZERO] = ((flat == 0) & np.signbit(flat)).sum(axis=0)
        out[:, _POS_INF] = (flat == np.inf).sum(axis=0)
        out[:, _NEG_INF] = (flat == -np.inf).sum(axis=0)
        out[:, _NAN] = np.isnan(flat).sum(axis=0)
        vals, elems = flat[finite], element[finite]
    if vals.shape[0] <= _SMALL:  # a few values: Python ints are faster than the vectorised digits below
        totals = [0] * flat.shape[1]
        for v, e in zip(vals.tolist(), elems.tolist()):
            m, x = math.frexp(v)  # m * 2**53 is the signed 53-bit significand, x - 53 - LOW_EXP >= 0
            totals[e] += int(m * 9007199254740992.0) << (x - 53 - LOW_EXP)
        out[:, :LIMBS] = [_limbs(t) for t in totals]
    for s in range(0, vals.shape[0] if vals.shape[0] > _SMALL else 0, _CHUNK):
        if s:
            out = normalised(out)
        _scatter(out, vals[s : s + _CHUNK], elems[s : s + _CHUNK])
    return out.reshape(shape + (WIDTH,))


def _scatter(out: np.ndarray, vals: np.ndarray, elems: np.ndarray) -> None:
    """Add the finite nonzero ``vals`` (of the elements ``elems``) into ``out``'s limbs, each as at most three
    digits below ``2**DIGIT_BITS``: value = sign * m * 2**(p + LOW_EXP), m the 53-bit significand."""
    frac, exp = np.frexp(np.abs(vals))
    m = np.ldexp(frac, 53).astype(np.int64)  # exact: 53 bits, an integer for normal and subnormal values
    p = exp.astype(np.int64) - 53 - LOW_EXP  # >= 0, see LOW_EXP
    q, s = p // DIGIT_BITS, p % DIGIT_BITS
    sign = np.where(vals < 0, -1, 1).astype(np.int64)
    low = (m & ((np.int64(1) << (DIGIT_BITS - s)) - 1)) << s  # the bits of m * 2**s below 2**DIGIT_BITS
    mid = (m >> (DIGIT_BITS - s)) & _MASK
    high = m >> (2 * DIGIT_BITS - s)  # 53 + s > 2 * DIGIT_BITS only for s > 43
    flat = out.reshape(-1)
    base = elems * WIDTH + q
    for k, digit in enumerate((low, mid, high)):
        np.add.at(flat, base + k, sign * digit)


def rounded(acc: np.ndarray) -> np.ndarray:
    """The float64 value of each accumulated sum in ``acc`` (shape ``S + (WIDTH,)``): the exact sum rounded
    once, to nearest with ties to even, with IEEE 754's special values (see the module docstring)."""
    acc = np.asarray(acc, dtype=np.int64)
    shape = acc.shape[:-1]
    flat = acc.reshape(-1, WIDTH)
    out = np.empty(flat.shape[0], dtype=np.float64)
    for j, row in enumerate(flat.tolist()):
        out[j] = _value(row)
    return out.reshape(shape)


def _value(row: List[int]) -> float:
    if row[_NAN] or (row[_POS_INF] and row[_NEG_INF]):
        return float("nan")
    if row[_POS_INF] or row[_NEG_INF]:
        return float("inf") if row[_POS_INF] else float("-inf")
    total = _integer(row[:LIMBS])
    if total == 0:
        return -0.0 if row[_N] and row[_NEG_ZERO] == row[_N] else 0.0
    try:
        return total / (1 << -LOW_EXP)  # int / int is correctly rounded in CPython, subnormals included
    except OverflowError:  # the correctly rounded sum is beyond float64: IEEE rounds it to an infinity
        return float("inf") if total > 0 else float("-inf")
