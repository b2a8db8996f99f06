"""The conformance suite's reduction checks (``all_reduce`` / ``reduce``), used by :mod:`.conformance`.

Every dtype the input check accepts, at every size, with the same bits on
every rank; NaN through ``min`` / ``max``; mismatches raising on every rank.
The module imports no framework; it needs numpy.
"""

from __future__ import annotations

from typing import Any, Callable, Tuple

import numpy as np

from ..core.dist_backends.base_backend import BaseDistBackend

__all__ = [
    "REDUCTION_DTYPES",
    "REDUCTION_SHAPES",
    "REDUCTION_EXTRA_DTYPES",
    "LARGE_REDUCTION",
    "reduction_input",
    "expected_reduction",
    "check_reductions",
    "check_reduction_dtypes",
    "check_reduction_nan",
    "check_reduction_mismatch",
]


#: dtypes and shapes the reduction checks cover: 0-d, a small 2-d (inline on a framed backend), a large 2-d
#: (a framed backend's payload stage: its native reduction where it has one)
REDUCTION_DTYPES = ("int64", "float64", "float32", "uint8")
REDUCTION_SHAPES: Tuple[Tuple[int, ...], ...] = ((), (3, 4), (40, 50))


def reduction_input(rank: int, dtype: str, shape: Tuple[int, ...]) -> np.ndarray:
    """A deterministic array for ``rank``: negative values for signed dtypes, floats no sum represents exactly."""
    n = int(np.prod(shape)) if shape else 1
    base = np.arange(n, dtype=np.float64) * (rank + 1) - 3 * rank
    if np.dtype(dtype).kind == "f":
        base = base / 7.0 + 0.1 * rank
    elif np.dtype(dtype).kind == "u":
        base = np.abs(base) % 50
    out: np.ndarray = base.astype(dtype).reshape(shape)
    return out


def expected_reduction(ws: int, dtype: str, shape: Tuple[int, ...], op: str) -> np.ndarray:
    """The reduction of every rank's :func:`reduction_input` in rank order with numpy (the core's own order)."""
    ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}[op]
    out: np.ndarray = reduction_input(0, dtype, shape).copy()
    for r in range(1, ws):
        ufunc(out, reduction_input(r, dtype, shape), out=out)
    return out


def _assert_reduced(
    got: Any, arr: np.ndarray, dtype: str, shape: Tuple[int, ...], op: str, ws: int, where: str
) -> None:
    assert isinstance(got, np.ndarray), f"{where}: returned {type(got).__name__}, not an ndarray"
    assert got is not arr and not np.shares_memory(got, arr), f"{where}: returned the input itself"
    assert got.dtype == np.dtype(dtype) and got.shape == shape, f"{where}: {got.dtype}{got.shape} != {dtype}{shape}"
    want = expected_reduction(ws, dtype, shape, op)
    if np.dtype(dtype).kind == "f" and op == "sum":  # a native transport may sum in another order
        rtol = 1e-5 if dtype == "float32" else 1e-12
        assert np.allclose(got, want, rtol=rtol, atol=rtol), f"{where}: values differ from the sum"
    else:
        assert np.array_equal(got, want), f"{where}: values differ from the exact {op}"


def check_reductions(b: BaseDistBackend) -> None:
    """all_reduce and reduce to the last rank, every dtype, op and shape; float results have the same bits everywhere."""
    ws, rank, dst = b.world_size, b.rank, b.world_size - 1
    results = []
    for dtype in REDUCTION_DTYPES:
        for shape in REDUCTION_SHAPES:
            for op in ("sum", "min", "max"):
                arr = reduction_input(rank, dtype, shape)
                before = arr.copy()
                where = f"all_reduce({dtype}{shape}, op={op!r})"
                got = b.all_reduce(arr, op=op)
                _assert_reduced(got, arr, dtype, shape, op, ws, where)
                results.append(got.tobytes())
                where = f"reduce({dtype}{shape}, op={op!r}, dst={dst})"
                red = b.reduce(arr, op=op, dst=dst)
                if rank == dst:
                    _assert_reduced(red, arr, dtype, shape, op, ws, where)
                else:
                    assert red is None, f"{where}: returned {type(red).__name__} on a rank other than dst"
                assert np.array_equal(arr, before), f"{where}: the input was modified"
    everyone = b.all_gather_object(results)
    assert all(r == results for r in everyone), "all_reduce gave different bits on different ranks"


#: dtypes a transport's native reduction often lacks: each must still work at a size past the slot (converted, or
#: through the byte path), on every backend
REDUCTION_EXTRA_DTYPES = ("int16", "uint16", "uint32", "uint64", ">i8", ">f8", "longdouble")
#: elements of the large arrays of the extra-dtype and NaN checks (past any slot, through the payload stage)
LARGE_REDUCTION = 100_000


def check_reduction_dtypes(b: BaseDistBackend) -> None:
    """Every dtype the input check accepts reduces at a large size, exactly as numpy in rank order would."""
    ws, rank, dst = b.world_size, b.rank, b.world_size - 1
    for dtype in REDUCTION_EXTRA_DTYPES:
        for op in ("sum", "min", "max"):
            shape = (LARGE_REDUCTION,)
            arr = reduction_input(rank, dtype, shape)
            _assert_reduced(b.all_reduce(arr, op=op), arr, dtype, shape, op, ws, f"all_reduce({dtype}, op={op!r})")
            red = b.reduce(arr, op=op, dst=dst)
            if rank == dst:
                _assert_reduced(red, arr, dtype, shape, op, ws, f"reduce({dtype}, op={op!r}, dst={dst})")


def check_reduction_nan(b: BaseDistBackend) -> None:
    """min / max propagate a NaN from any rank at every size, as numpy's reduction in rank order does."""
    ws, rank = b.world_size, b.rank
    for dtype in ("float64", "float32"):
        for n in (8, LARGE_REDUCTION):
            arr = np.arange(n, dtype=dtype) * (1 + rank)
            holes = np.arange(rank % ws, n, max(1, n // 8))  # each rank puts NaNs at its own places
            arr[holes] = np.nan
            want = np.zeros(n, dtype=bool)
            for r in range(ws):
                want[np.arange(r % ws, n, max(1, n // 8))] = True
            for op in ("min", "max"):
                got = b.all_reduce(arr, op=op)
                where = f"all_reduce({dtype}[{n}] with NaN, op={op!r})"
                assert np.array_equal(np.isnan(got), want), (
                    f"{where}: {int(np.isnan(got).sum())} NaN in the result, {int(want.sum())} expected"
                )


def check_reduction_mismatch(b: BaseDistBackend) -> None:
    """Ranks passing another shape, dtype or op all raise CollectiveMismatchError naming it; the group stays usable."""
    from ..core.errors import CollectiveMismatchError

    if b.world_size < 2:
        return
    one = b.rank == 1
    cases: Tuple[Tuple[str, Callable[[], Any]], ...] = (
        ("shape", lambda: b.all_reduce(np.zeros(4 if one else 3, np.int64))),
        ("dtype", lambda: b.all_reduce(np.zeros(3, np.float32 if one else np.float64))),
        ("op", lambda: b.reduce(np.zeros(3), op="max" if one else "sum", dst=b.world_size - 1)),
    )
    for field, call in cases:
        try:
            call()
        except CollectiveMismatchError as exc:
            assert field in str(exc) and "rank 1" in str(exc), (
                f"the mismatch error should name {field!r} and rank 1: {exc}"
            )
        else:
            raise AssertionError(f"ranks reduced arrays of different {field} and this rank got an answer")
    got = b.all_reduce(np.array([b.rank], np.int64))
    assert got.tolist() == [sum(range(b.world_size))], "the group must stay usable after a reduction mismatch"
