"""The columnar encoding: long homogeneous lists sent as a few contiguous arrays.

A list of 100,000 ``(int, float32[10])`` tuples pickles as 100,000 small
objects; :func:`columnarize` replaces it (at the top levels of the object
only) by a :class:`_Columns` whose pickle is two arrays, sent out-of-band like
any array, and rebuilt exactly on the receiving rank. The pickle codec applies
it; nothing else needs to know.
"""

from __future__ import annotations

import operator
import sys
from typing import Any, Dict, List, Optional, Tuple

from .._gc import gc_paused

__all__ = ["COLUMNAR_MIN", "columnarize"]

#: Lists at least this long are checked for the columnar layout.
COLUMNAR_MIN = 512
_SCALARS = (int, float, bool)


_dtype_of = operator.attrgetter("dtype")
_ndim_of = operator.attrgetter("ndim")


def _all_of_type(values: List[Any], t: type) -> bool:
    """Whether every value's exact type is ``t`` (one C-level pass, no Python frame per value)."""
    return set(map(type, values)) == {t}


def _column(values: List[Any]) -> Optional[Tuple[str, Any]]:
    """One column of same-typed values as an array, with how to rebuild it; ``None`` if mixed.

    Checks run as C loops (``set(map(type, ...))``) rather than a Python
    generator per value: the cost is a few ns per value, not ~100.
    """
    first = values[0]
    t = type(first)
    np = sys.modules.get("numpy")
    if np is None:
        return None
    if t in _SCALARS:
        if not _all_of_type(values, t):
            return None
        try:
            arr = np.array(values, dtype={int: np.int64, float: np.float64, bool: np.bool_}[t])
        except OverflowError:
            return None
        return "py", arr
    if t is np.ndarray:
        dt, shape = first.dtype, first.shape
        if not shape or dt.hasobject or not _all_of_type(values, np.ndarray):
            return None
        if len(set(map(_dtype_of, values))) != 1:  # one dtype (byte order included): exact round trip
            return None
        if len(shape) == 1 and set(map(len, values)) == {shape[0]} and set(map(_ndim_of, values)) == {1}:
            try:  # 1-D rows of one length: their bytes, joined by one C loop (3x faster than np.array)
                joined = b"".join(values)
            except (BufferError, TypeError):  # a non-contiguous row: np.array below copies it
                pass
            else:
                return "rows", np.frombuffer(joined, dtype=dt).reshape(len(values), shape[0])
        try:  # rows of different shapes cannot form one array: numpy refuses them
            arr = np.array(values, dtype=dt)
        except (ValueError, TypeError):
            return None
        if arr.shape != (len(values), *shape):
            return None
        return "rows", arr
    if isinstance(first, np.generic) and not first.dtype.hasobject:
        # one dtype, not just one type: np.str_ of different lengths or datetime64 of
        # different units share a type, and one array of them would truncate or convert
        if not _all_of_type(values, t) or len(set(map(_dtype_of, values))) != 1:
            return None
        return "np", np.array(values, dtype=first.dtype)
    return None


class _Columns:
    """A homogeneous list sent as a few contiguous columns (see :func:`_to_columns`)."""

    __slots__ = ("layout", "columns")

    def __init__(self, layout: Any, columns: List[Tuple[str, Any]]) -> None:
        self.layout = layout
        self.columns = columns

    def __reduce__(self) -> Any:
        kinds = tuple(k for k, _ in self.columns)
        return _rebuild_columns, (self.layout, kinds, *[c for _, c in self.columns])


def _unpack_column(kind: str, col: Any) -> List[Any]:
    return col.tolist() if kind == "py" else list(col)


def _rebuild_columns(layout: Any, kinds: Tuple[str, ...], *cols: Any) -> List[Any]:
    """Inverse of :func:`_to_columns`: the original list, rebuilt on the receiving rank."""
    with gc_paused():
        unpacked = [_unpack_column(k, c) for k, c in zip(kinds, cols)]
        if layout == "flat":
            return unpacked[0]
        if layout == "tuple":
            return list(zip(*unpacked))
        keys = layout[1]
        return [dict(zip(keys, row)) for row in zip(*unpacked)]


def _to_columns(lst: List[Any]) -> Optional[_Columns]:
    """Columns for a list of same-shaped tuples / dicts / arrays / scalars, else ``None``.

    Exact round trip: python ints, floats and bools come back as themselves,
    numpy scalars with their dtype, arrays with their shape and dtype (as rows
    of one array). Anything else (strings, mixed types, ragged shapes) is
    left to pickle.
    """
    first = lst[0]
    t = type(first)
    if t is tuple:
        width = len(first)
        if not width or not _all_of_type(lst, tuple) or set(map(len, lst)) != {width}:
            return None
        cols = []
        for i in range(width):
            col = _column(list(map(operator.itemgetter(i), lst)))
            if col is None:
                return None
            cols.append(col)
        return _Columns("tuple", cols)
    if t is dict:
        keys = tuple(first)
        if not keys or not _all_of_type(lst, dict) or set(map(tuple, lst)) != {keys}:
            return None
        cols = []
        for k in keys:
            col = _column(list(map(operator.itemgetter(k), lst)))
            if col is None:
                return None
            cols.append(col)
        return _Columns(("dict", keys), cols)
    col = _column(lst)
    return None if col is None else _Columns("flat", [col])


#: The only types :func:`_columnarize` looks into (exact types, like the checks).
_CONTAINER_TYPES = frozenset((list, tuple, dict))


def _columnarize(obj: Any, depth: int = 0) -> Any:
    """Replace long homogeneous lists inside ``obj`` (top levels only) by :class:`_Columns`.

    Returns ``obj`` itself when nothing was replaced. Only the values that are
    containers are visited (a small object costs a few microseconds here).
    """
    t = type(obj)
    if t is list:
        if len(obj) >= COLUMNAR_MIN:
            cols = _to_columns(obj)
            return obj if cols is None else cols
        if depth >= 2 or len(obj) > 64:
            return obj
        items: Any = obj
    elif t is tuple or t is dict:
        if depth >= 2 or len(obj) > 64:
            return obj
        items = obj.values() if t is dict else obj
    else:
        return obj
    if _CONTAINER_TYPES.isdisjoint(map(type, items)):  # scalars only: nothing to replace (the common case)
        return obj
    changed: Optional[Dict[Any, Any]] = None  # position or key -> replacement
    for key, value in obj.items() if t is dict else enumerate(obj):
        if type(value) in _CONTAINER_TYPES:
            new = _columnarize(value, depth + 1)
            if new is not value:
                if changed is None:
                    changed = {}
                changed[key] = new
    if changed is None:
        return obj
    if t is dict:
        return {**obj, **changed}
    out = [changed.get(i, v) for i, v in enumerate(obj)]
    return out if t is list else tuple(out)


#: Public name of :func:`_columnarize`.
columnarize = _columnarize
