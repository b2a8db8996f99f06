"""Rank programs for the reduction tests: each takes a backend and returns plain data to compare in the test.

Shared by the hub (framed) backend runs and the third-party five-member
backend's subprocesses, so both are held to the same expectations.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Tuple

import numpy as np

from mmeval.testing.conformance import REDUCTION_DTYPES as DTYPES
from mmeval.testing.conformance import REDUCTION_SHAPES as SHAPES
from mmeval.testing.conformance import expected_reduction as expected
from mmeval.testing.conformance import reduction_input as rank_array


def reductions(backend: Any) -> List[Dict[str, Any]]:
    """all_reduce and reduce (to the last rank) of every dtype, op and a 0-d and a 2-d shape."""
    ws, rank = backend.world_size, backend.rank
    dst = ws - 1
    out = []
    for dtype in DTYPES:
        for shape in SHAPES:
            for op in ("sum", "min", "max"):
                arr = rank_array(rank, dtype, shape)
                before = arr.copy()
                got = backend.all_reduce(arr, op=op)
                red = backend.reduce(arr, op=op, dst=dst)
                out.append(
                    {
                        "case": (dtype, shape, op),
                        "all_reduce": (got.dtype.str, got.shape, got.tobytes()),
                        "reduce": None if red is None else (red.dtype.str, red.shape, red.tobytes()),
                        "same_object": got is arr or red is arr,
                        "input_untouched": bool(np.array_equal(arr, before)),
                    }
                )
    return out


def check_reductions(results: Dict[int, List[Dict[str, Any]]]) -> None:
    """Assert the ``reductions`` results of every rank: exact values, shapes, dtypes, None off dst."""
    ws = len(results)
    for rank, rows in results.items():
        for row in rows:
            dtype, shape, op = row["case"]
            want = expected(ws, dtype, tuple(shape), op)
            assert row["all_reduce"] == (want.dtype.str, want.shape, want.tobytes()), (rank, row["case"])
            if rank == ws - 1:
                assert row["reduce"] == (want.dtype.str, want.shape, want.tobytes()), (rank, row["case"])
            else:
                assert row["reduce"] is None, (rank, row["case"])
            assert not row["same_object"] and row["input_untouched"], (rank, row["case"])


def _outcome(fn: Any) -> Tuple[str, str]:
    try:
        fn()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return "ok", ""


def mismatches(backend: Any) -> Dict[str, Any]:
    """Ranks disagree (shape, dtype, op, dst, call) or one rank passes a refused input; then the group still works."""
    rank, ws = backend.rank, backend.world_size
    last = rank == ws - 1
    out: Dict[str, Any] = {}
    out["shape"] = _outcome(lambda: backend.all_reduce(np.zeros(4 if last else 3, np.int64)))
    out["dtype"] = _outcome(lambda: backend.all_reduce(np.zeros(3, np.float32 if last else np.float64)))
    out["op"] = _outcome(lambda: backend.all_reduce(np.zeros(3), op="max" if last else "sum"))
    out["dst"] = _outcome(lambda: backend.reduce(np.zeros(3), dst=0 if last else ws - 1))
    out["bool_on_one_rank"] = _outcome(lambda: backend.all_reduce(np.zeros(3, bool if last else np.int64)))
    out["bad_op_on_one_rank"] = _outcome(lambda: backend.reduce(np.zeros(3), op="mean" if last else "sum"))
    out["after"] = backend.all_reduce(np.array([rank], np.int64)).tolist()
    return out


def framed_guarantees(backend: Any) -> Dict[str, Any]:
    """Comm-stats bytes, question agreement, then a deadline that poisons the group (the last rank never calls)."""
    from mmeval.core import hooks
    from mmeval.core.dist_backends.transport import asking

    rank, ws = backend.rank, backend.world_size
    out: Dict[str, Any] = {}
    stats = hooks.enable_comm_stats(print_at_exit=False)
    stats.reset()
    backend.all_reduce(np.ones(10, np.int64))
    out["small"] = stats.rows()
    stats.reset()
    backend.reduce(np.ones(100_000, np.float64), op="max", dst=1)
    out["large"] = stats.rows()
    with asking({"metric": f"Metric{rank % 2}"}):
        out["question"] = _outcome(lambda: backend.all_reduce(np.ones(2)))
    if rank == ws - 1:  # does not join (but stays alive): the others time out, then their group is poisoned
        time.sleep(2.0)
        return out
    backend.timeout = 0.5
    out["timeout"] = _outcome(lambda: backend.all_reduce(np.ones(2)))
    out["poisoned"] = _outcome(lambda: backend.all_reduce(np.ones(2)))
    time.sleep(1.0)  # no rank closes its connections while another still waits for its deadline
    return out


def native_hub_reductions(backend: Any) -> Dict[str, Any]:
    """The conformance kit's extra-dtype and NaN checks on a hub whose native reduction is as limited as gloo's."""
    from itertools import product

    from hub_backend import HubDist, free_port

    from mmeval.testing.conformance import CHECKS

    class GlooLikeHub(HubDist):
        """A native reduction over a few dtypes only, whose min / max drop NaN (as gloo's do).

        It declares its float min / max native too (as a careless backend might): the core must still give
        numpy's NaN propagation.
        """

        native_reductions = frozenset(
            product(("int8", "uint8", "int32", "int64", "float32", "float64"), ("sum", "min", "max"))
        )

        def _all_reduce_array(self, call: Any, array: np.ndarray, op: str) -> np.ndarray:
            if (
                array.dtype.name not in ("int8", "uint8", "int32", "int64", "float32", "float64")
                or not array.dtype.isnative
            ):
                raise TypeError(f"this transport cannot reduce {array.dtype}")
            native["calls"] += 1
            ufunc = {"sum": np.add, "min": np.fmin, "max": np.fmax}[op]
            blocks = [np.frombuffer(b, array.dtype) for b in self._all_gather_bytes(call)]
            out = blocks[0].copy()
            for b in blocks[1:]:
                ufunc(out, b, out=out)
            return out.reshape(array.shape)

        def _reduce_array(self, call: Any, array: np.ndarray, op: str) -> Any:
            out = self._all_reduce_array(call, array, op)
            return out if call.rank == call.root else None

    native = {"calls": 0}
    port = backend.broadcast_object(free_port() if backend.rank == 0 else None, src=0)
    hub = GlooLikeHub(backend.rank, backend.world_size, ("127.0.0.1", port), timeout=60)
    done = {}
    for name in ("reduction_dtypes", "reduction_nan"):
        try:
            CHECKS[name](hub)
            done[name] = "ok"
        except Exception as exc:  # reported to the test, which names the check
            done[name] = f"{type(exc).__name__}: {exc}"
            break
    return {"checks": done, "native_calls": native["calls"], "poisoned": hub.poisoned}
