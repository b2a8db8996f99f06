"""The per-sample path of ``compute()``: each rank sends what it keeps to rank 0, which assembles the results
in dataset order, runs ``compute_metric`` and replies to every rank (the result, or the exception it raised).

Rank 0's own array results never go through the transport; received arrays are
views of the receive buffer, copied once into their place in the output by :mod:`.assembly`.
"""

from __future__ import annotations

import itertools
import pickle
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..dist_backends.base_backend import BaseDistBackend
from ..dist_backends.transport import asking
from ..errors import (
    CollectiveFailedError,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    RemoteMetricError,
    RemoteSerializationError,
)
from ..results import ArrayResults, RankResults, select
from ..settings import logger
from .assembly import ArrayBatches, Placement, assemble, sendable_batches
from .ordering import round_robin_order, warn_short
from .protocols import Call

if TYPE_CHECKING:
    from .protocols import PerSampleComputation

__all__ = [
    "ArrayBatches",
    "MAX_SENT_BATCHES",
    "Placement",
    "answered_by_rank0",
    "assemble",
    "broadcast_failure",
    "collect",
    "gather_and_compute",
    "gather_to_rank0",
    "pack_exception",
    "plain_data_only",
    "results_in_order",
    "sent_results",
    "truncate",
    "unpack_exception",
    "warn_short",
]


#: Ranks that only send their array results send up to this many batches unmerged.
MAX_SENT_BATCHES = 1024


def truncate(results: Union[List[Any], ArrayResults], size: Optional[int], name: str) -> Any:
    if size is None:
        return results
    n = len(results)
    if size > n:
        warn_short(name, size, n)
        return results
    if isinstance(results, ArrayResults):
        return results.take(slice(0, size))
    return results[:size]


def collect(parts: Sequence[Any], mode: str, name: str) -> Union[List[Any], ArrayResults]:
    """Merge every rank's results into dataset order, in time linear in their number."""
    arrays = [isinstance(p, ArrayResults) for p in parts]
    nonempty = [p for p in parts if len(p)]
    if any(arrays):
        if not all(arrays[r] or not len(p) for r, p in enumerate(parts)):
            raise TypeError(f"{name}: some ranks kept array results and others object results")
        parts_a = [p for p in parts if isinstance(p, ArrayResults)]
        keys = list(parts_a[0])
        for p in parts_a[1:]:
            if list(p) != keys and len(p):
                raise ValueError(f"{name}: ranks kept different result columns: {keys} vs {list(p)}")
        if not nonempty:
            return parts_a[0]
        counts = [len(p) if isinstance(p, ArrayResults) else 0 for p in parts]
        cols = {k: np.concatenate([p[k] for p in parts if isinstance(p, ArrayResults) and len(p)]) for k in keys}
        if mode == "cat" or len(parts) == 1:
            return ArrayResults(cols)
        order = round_robin_order(counts)
        return ArrayResults({k: v[order] for k, v in cols.items()})
    flat = list(itertools.chain.from_iterable(parts))
    if mode == "cat" or len(parts) == 1:
        return flat
    return [flat[i] for i in round_robin_order([len(p) for p in parts])]


def gather_and_compute(
    kept: RankResults,
    call: Call,
    backend: BaseDistBackend,
    computation: "PerSampleComputation",
    keep: Optional[np.ndarray],
    indices: Optional[np.ndarray],
) -> Dict[str, Any]:
    """The per-sample path: what this rank keeps goes to rank 0, which computes and broadcasts the result.

    ``kept`` is what this rank kept, ``keep`` / ``indices`` which of it counts
    (:func:`~mmeval.core.sync.ordering.kept_samples`); ``computation`` runs on rank 0.
    """
    plain = plain_data_only(backend)
    payload, own = sent_results(kept, backend, keep, indices)
    gathered = gather_to_rank0(backend, call.question, payload)
    box: List[List[Any]] = [gathered] if gathered is not None else []
    del gathered

    def compute() -> Dict[str, Any]:
        return computation.compute_metric(results_in_order(kept, call, box, own, plain, keep, indices))

    return answered_by_rank0(backend, call.name, plain, compute)


def sent_results(
    kept: RankResults, backend: BaseDistBackend, keep: Optional[np.ndarray], indices: Optional[np.ndarray]
) -> Tuple[Any, bool]:
    """What this rank sends rank 0 of what it ``kept``, and whether rank 0 keeps its own out (``own``).

    With ``own`` the payload is ``None``: rank 0's array results go straight from its batches to their
    places in the output (see :func:`results_in_order`), with no serialized copy of them.
    """
    computes = backend.rank == 0
    # the safe codec moves plain data only: array results travel as a plain dict, and an error
    # report's pickled exception is never unpickled (a hostile rank 0 could run code with it)
    plain = plain_data_only(backend)
    own = computes and sendable_batches(kept.batches)
    local: Any
    if own:
        local = None
    elif keep is not None:
        local = select(kept.merged(), keep)
    elif computes or plain or not 1 < len(kept.batches) <= MAX_SENT_BATCHES:
        local = kept.merged()
    else:
        # the ranks that only send do not merge their batches first: the frame takes them as they
        # are, and rank 0 joins them while decoding (their peak memory stays ~1x their results)
        local = ArrayBatches(kept.batches)
    if plain and isinstance(local, ArrayResults):
        local = dict(local)
    return (local if indices is None or own else (local, indices if keep is None else indices[keep])), own


def gather_to_rank0(backend: BaseDistBackend, question: Dict[str, Any], payload: Any) -> Optional[List[Any]]:
    """Every rank's ``payload`` on rank 0 (``None`` elsewhere), asking ``question``; the reply comes next.

    A failure of rank 0 alone (e.g. it could not decode a peer's results) is
    told to the others, who would otherwise wait in the reply
    (:func:`answered_by_rank0`) for the whole timeout.
    """
    try:
        with asking(question):
            return backend.gather_object(payload, dst=0)
    except SHARED_FAILURES:
        raise  # every rank of the group raises these together
    except Exception as exc:
        if backend.rank == 0:
            broadcast_failure(backend, exc)
        raise


def answered_by_rank0(
    backend: BaseDistBackend, name: str, plain: bool, compute: Callable[[], Dict[str, Any]]
) -> Dict[str, Any]:
    """Rank 0 runs ``compute()`` and sends its result, or the exception it raised, to every rank; all return it."""
    if backend.rank == 0:
        try:
            result = compute()
        except Exception as exc:
            backend.broadcast_object(("error", pack_exception(exc)), src=0)
            raise
        backend.broadcast_object(("ok", result), src=0)
        return result
    status, value = backend.broadcast_object(None, src=0)
    if status == "error":
        raise unpack_exception(value, name, trusted=not plain)
    return value  # type: ignore[no-any-return]


def results_in_order(
    kept: RankResults,
    call: Call,
    box: List[List[Any]],
    own: bool,
    plain: bool,
    keep: Optional[np.ndarray],
    indices: Optional[np.ndarray],
) -> Any:
    """On rank 0: every rank's kept results, in dataset order (by index, else by ``call.mode``).

    ``kept`` is rank 0's own (its batches go straight to the output with ``own``).

    ``box`` holds the gathered list, taken out of it here so that the received
    buffers are released once assembled, before ``compute_metric`` runs.
    """
    gathered = box.pop()
    if indices is not None:
        mine = indices if keep is None else indices[keep]
        gathered = [(None, mine) if own and r == 0 else g for r, g in enumerate(gathered)]
    received = [g if indices is None else g[0] for g in gathered]
    parts = [ArrayResults(p) if plain and type(p) is dict else p for p in received]
    if own:
        parts[0] = ArrayBatches(kept.batches)
    by_index = None if indices is None else [np.asarray(i, dtype=np.int64) for _, i in gathered]
    del gathered, received
    # each output column built once, in its final order, from the received arrays (views of
    # the receive buffer) and rank 0's own batches; the received ones are released before
    # compute_metric runs
    assembled = assemble(parts, keep if own else None, by_index, call.mode, call.name)
    if assembled is not None:
        del parts
        collected = assembled if indices is not None else truncate(assembled, call.size, call.name)
    elif indices is None:
        collected = truncate(collect(parts, call.mode, call.name), call.size, call.name)
    else:
        assert by_index is not None
        order = np.argsort(np.concatenate(by_index), kind="stable")
        collected = select(collect(parts, "cat", call.name), order)
    del assembled, by_index
    return collected


def plain_data_only(backend: BaseDistBackend) -> bool:
    """Whether the backend's codec carries plain data only (then no arbitrary object or pickled exception)."""
    codec = getattr(backend, "wire_codec", None)
    return bool(getattr(codec, "plain_data_only", False))


SHARED_FAILURES = (RemoteSerializationError, CollectiveMismatchError, CollectiveTimeoutError, CollectiveFailedError)


def broadcast_failure(backend: BaseDistBackend, exc: BaseException) -> None:
    try:
        backend.broadcast_object(("error", pack_exception(exc)), src=0)
    except Exception as second:  # the others are gone too: keep the original error
        logger().debug("mmeval: could not tell the other ranks about %r: %s", exc, second)


def pack_exception(exc: BaseException) -> Dict[str, Any]:
    packed: Dict[str, Any] = {
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc),
        "pickled": None,
    }
    try:
        blob = pickle.dumps(exc)
        pickle.loads(blob)
        packed["pickled"] = blob
    except Exception:
        pass
    return packed


def unpack_exception(packed: Mapping[str, Any], name: str, trusted: bool = True) -> BaseException:
    note = f"raised by {name}.compute_metric on rank 0 (the computing rank)"
    if trusted and packed.get("pickled") is not None:
        try:
            exc = pickle.loads(packed["pickled"])
            if isinstance(exc, BaseException):
                if sys.version_info >= (3, 11):
                    exc.add_note(note)
                return exc
        except Exception:
            pass
    return RemoteMetricError(f"{packed['type']}: {packed['message']} ({note})", packed["type"], packed["message"])
