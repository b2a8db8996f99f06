"""The reduction primitives' shared half: input checks, the per-rank header, its agreement, the reduce itself.

Every backend's ``all_reduce`` / ``reduce`` goes through these helpers, so that
the same wrong input raises the same error everywhere and the result is
computed the same way wherever the core computes it (rank order, numpy, the
input's dtype).

numpy is imported inside the functions: the registry imports the backend
package without paying for numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, FrozenSet, Iterable, NamedTuple, Optional, Sequence, Tuple

from ..errors import CollectiveMismatchError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = [
    "REDUCE_OPS",
    "native_pairs",
    "ReduceHeader",
    "check_reduce_input",
    "check_reduce_headers",
    "reduce_in_rank_order",
    "local_result",
]

#: The reduction operations every backend supports, by the name ``all_reduce`` / ``reduce`` take.
REDUCE_OPS: Tuple[str, ...] = ("sum", "min", "max")


def native_pairs(ints: Iterable[str] = (), float_sums: Iterable[str] = ()) -> FrozenSet[Tuple[str, str]]:
    """A backend's ``native_reductions``: every op for the integer dtypes ``ints``, ``sum`` for the float ones.

    E.g. ``native_pairs(ints=("int8", "uint8", "int32", "int64"), float_sums=("float32", "float64"))``.
    (Float ``min`` / ``max`` always take the core's byte path, where NaN propagates as in numpy.)
    """
    return frozenset([(d, op) for d in ints for op in REDUCE_OPS] + [(d, "sum") for d in float_sums])


#: numpy dtype kinds a reduction accepts: signed integer, unsigned integer, float.
_KINDS = "iuf"


class ReduceHeader(NamedTuple):
    """What a rank asks of a reduction; every rank must ask the same (``error``: why its input was refused)."""

    call: str
    shape: Tuple[int, ...]
    dtype: str
    op: str
    dst: int
    error: str = ""

    def field_values(self) -> Dict[str, str]:
        """The fields compared across ranks, as text (``dst`` only for ``reduce``)."""
        out = {"call": self.call, "shape": str(self.shape), "dtype": self.dtype, "op": repr(self.op)}
        if self.call == "reduce":
            out["dst"] = str(self.dst)
        return out


def check_reduce_input(
    backend: str, call: str, array: Any, op: Any, dst: int = -1, world_size: int = 1
) -> Tuple[ReduceHeader, Optional[BaseException]]:
    """Check one rank's arguments to ``all_reduce`` / ``reduce``.

    Returns this rank's header and, when the input is refused, the error to
    raise on this rank (a ``TypeError`` or ``ValueError`` naming the backend,
    the call and what to pass). A refused header still travels to the other
    ranks (its ``error`` set), so that they raise too instead of waiting.
    """
    where = f"{backend}.{call}"
    shape: Tuple[int, ...] = ()
    dtype = "?"
    error: Optional[BaseException] = None
    import numpy as np

    if not isinstance(array, np.ndarray):
        error = TypeError(
            f"{where}: array must be a numpy.ndarray of integer, unsigned or float dtype, got "
            f"{type(array).__module__}.{type(array).__qualname__}; pass numpy.asarray(value) (a tensor: "
            ".cpu().numpy())"
        )
    else:
        shape, dtype = tuple(int(n) for n in array.shape), array.dtype.str
        if array.dtype.kind not in _KINDS:
            kind = {"b": "bool", "c": "complex", "O": "object"}.get(array.dtype.kind, f"non-numeric ({array.dtype})")
            hint = (
                "cast it with .astype(numpy.int64)"
                if array.dtype.kind == "b"
                else (
                    "reduce the real and imaginary parts as float arrays"
                    if array.dtype.kind == "c"
                    else "pass an array of integer, unsigned or float dtype"
                )
            )
            error = TypeError(
                f"{where}: array has {kind} dtype {array.dtype}; only integer, unsigned and float arrays can be "
                f"reduced: {hint}"
            )
    if error is None and (not isinstance(op, str) or op not in REDUCE_OPS):
        error = ValueError(f"{where}: op={op!r} is not a reduction; pass one of {', '.join(map(repr, REDUCE_OPS))}")
    if (
        error is None
        and call == "reduce"
        and (isinstance(dst, bool) or not isinstance(dst, int) or not 0 <= dst < world_size)
    ):
        error = ValueError(f"{where}: dst={dst!r} is not a rank of this group (0..{world_size - 1})")
    header = ReduceHeader(
        call,
        shape,
        dtype,
        op if isinstance(op, str) else repr(op),
        dst if isinstance(dst, int) else -1,
        str(error) if error is not None else "",
    )
    return header, error


def check_reduce_headers(
    backend: str, call: str, headers: Sequence[ReduceHeader], rank: int, local_error: Optional[BaseException]
) -> None:
    """Raise on every rank when any rank's input was refused or the ranks' headers differ.

    A rank whose own input was refused raises its own error; the others raise
    :class:`~mmeval.core.errors.CollectiveMismatchError` naming the refused
    rank and why. Headers that differ raise it naming each differing field and
    every rank's value.
    """
    if local_error is not None:
        raise local_error
    refused = [(r, h) for r, h in enumerate(headers) if h.error]
    if refused:
        detail = "; ".join(f"rank {r}: {h.error}" for r, h in refused)
        raise CollectiveMismatchError(
            f"{backend}.{call} aborted on rank {rank}: "
            f"{'rank' if len(refused) == 1 else 'ranks'} {', '.join(str(r) for r, _ in refused)} "
            f"passed an input that cannot be reduced ({detail}). Fix the input there; every rank must pass a "
            "numeric array of the same shape and dtype, and the same op."
        )
    if len(set(headers)) == 1:
        return
    values = [h.field_values() for h in headers]
    fields = [f for f in ("call", "shape", "dtype", "op", "dst") if len({v.get(f, "-") for v in values}) > 1]
    lines = "; ".join(f"{f}: " + ", ".join(f"rank {r}={v.get(f, '-')}" for r, v in enumerate(values)) for f in fields)
    raise CollectiveMismatchError(
        f"{backend}.{call} (on rank {rank}): ranks disagree on the reduction ({lines}). Every rank must call the "
        "same reduction with an array of the same shape and dtype, the same op and the same dst."
    )


def reduce_in_rank_order(arrays: Sequence["np.ndarray"], op: str, dtype: Any, shape: Sequence[int]) -> "np.ndarray":
    """Reduce ``arrays`` (one per rank, rank order) with numpy, in rank order, into a new array.

    The result has ``dtype`` and ``shape``. Integers wrap around on overflow
    (as MPI's and torch's sums do); ``min`` / ``max`` propagate NaN. Any rank
    computing this from the same arrays gets the same bits.
    """
    import numpy as np

    ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}[op]
    out = np.array(arrays[0], dtype=dtype, copy=True).reshape(tuple(shape))
    with np.errstate(over="ignore"):
        for other in arrays[1:]:
            ufunc(out, np.asarray(other).reshape(out.shape), out=out)
    return out


def local_result(array: "np.ndarray") -> "np.ndarray":
    """A world of one's reduction: an independent copy of ``array`` (same shape and dtype)."""
    import numpy as np

    return np.array(array, copy=True)
