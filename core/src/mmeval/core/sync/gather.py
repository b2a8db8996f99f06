"""The per-sample path of ``compute()``: each rank sends what it keeps to rank 0, which assembles the results
in dataset order, runs ``compute_metric`` and replies to every rank (the result, or the exception it raised).

Rank 0's own array results never go through the transport; received arrays are
views of the receive buffer, copied once into their place in the output.
"""

from __future__ import annotations

import itertools
import pickle
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

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
from ..wire.release import release
from .ordering import round_robin_order, round_robin_spans, warn_short
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


class ArrayBatches:
    """A rank's array results as the batches it kept (each a dict of same-length columns).

    Sending the batches as they are spares the sending rank a concatenated copy
    of its results (each batch array travels out-of-band, copied once into the
    transport's buffer); the receiving rank gets them back as an
    :class:`ArrayBatches` of views of its receive buffer, which
    :func:`assemble` copies once, straight to their places in the output.
    """

    __slots__ = ("batches",)

    def __init__(self, batches: List[Dict[str, np.ndarray]]) -> None:
        self.batches = batches

    def __reduce__(self) -> Any:
        keys = tuple(self.batches[0])
        arrays = [batch[k] for k in keys for batch in self.batches]  # key-major
        return join_batches, (keys, len(self.batches), *arrays)


def join_batches(keys: Sequence[str], count: int, *arrays: np.ndarray) -> ArrayBatches:
    """Inverse of :class:`ArrayBatches.__reduce__`: the batches again, their arrays as received (not copied)."""
    return ArrayBatches([{k: arrays[i * count + b] for i, k in enumerate(keys)} for b in range(count)])


def sendable_batches(batches: List[Dict[str, np.ndarray]]) -> bool:
    """Whether ``batches`` are array results of plain dtypes (every codec carries them: rank 0 may keep them)."""
    return bool(batches) and all(
        a.dtype.kind in "biufcmM" and a.dtype.fields is None for batch in batches for a in batch.values()
    )


def _pieces(part: Any) -> Optional[List[Mapping[str, np.ndarray]]]:
    """A rank's array results as the pieces they arrived in; ``None`` for object results (a list)."""
    if isinstance(part, ArrayBatches):
        return list(part.batches)
    if isinstance(part, dict):
        return [part]
    return None


def _rows(piece: Mapping[str, np.ndarray]) -> int:
    return int(next(iter(piece.values())).shape[0])


def _kept_spans(
    pieces: List[Mapping[str, np.ndarray]], keep: Optional[np.ndarray]
) -> List[Tuple[Mapping[str, np.ndarray], Union[slice, np.ndarray]]]:
    """Each piece with the rows of it that are kept (a slice where they are contiguous), pieces without any left out.

    ``keep`` (a boolean mask or ascending positions over the pieces' rows
    end to end; ``None``: all) is applied piece by piece: no concatenation.
    """
    if keep is None:
        return [(p, slice(0, _rows(p))) for p in pieces if _rows(p)]
    positions = np.flatnonzero(keep) if keep.dtype == bool else np.asarray(keep, dtype=np.int64)
    spans: List[Tuple[Mapping[str, np.ndarray], Union[slice, np.ndarray]]] = []
    start = 0
    for p in pieces:
        stop = start + _rows(p)
        lo, hi = np.searchsorted(positions, [start, stop])
        if hi > lo:
            sel = positions[lo:hi] - start
            first, last = int(sel[0]), int(sel[-1])
            spans.append((p, slice(first, last + 1) if last - first + 1 == hi - lo else sel))
        start = stop
    return spans


class Placement:
    """Where each rank's j-th kept row goes in the output (dataset order), without a permutation of all rows.

    ``'cat'``: rank after rank. ``'unzip'``: round-robin over the ranks that
    have rows (:func:`~mmeval.core.sync.ordering.round_robin_spans`).
    With ``by_index`` (each rank's dataset indices of its rows) a row goes to
    its index's rank among all of them: one sorted copy of the indices when
    they are distinct (what ``compute()`` keeps), else the inverse of their
    stable argsort (equal indices then keep rank order).
    """

    def __init__(self, counts: List[int], mode: str, by_index: Optional[List[np.ndarray]]) -> None:
        self.counts = counts
        self.mode = mode
        self.offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.by_index = by_index
        self.sorted: Optional[np.ndarray] = None
        self.dest: Optional[np.ndarray] = None
        if by_index is not None:
            every = np.concatenate(by_index)
            every.sort()
            if not np.any(every[1:] == every[:-1]):
                self.sorted = every
            else:
                del every
                order = np.argsort(np.concatenate(by_index), kind="stable")
                self.dest = np.empty(len(order), dtype=np.int64)
                self.dest[order] = np.arange(len(order), dtype=np.int64)

    def spans(self, rank: int, a: int, b: int) -> List[Tuple[Union[slice, np.ndarray], slice]]:
        """(output positions, span of rows a..b) pairs covering this rank's kept rows ``a:b``."""
        off = int(self.offsets[rank])
        if self.sorted is not None and self.by_index is not None:
            return [(np.searchsorted(self.sorted, self.by_index[rank][a:b]), slice(0, b - a))]
        if self.dest is not None:
            return [(self.dest[off + a : off + b], slice(0, b - a))]
        if self.mode == "cat":
            return [(slice(off + a, off + b), slice(0, b - a))]
        return round_robin_spans(self.counts, rank, a, b)


def assemble(
    parts: List[Any], own_keep: Optional[np.ndarray], by_index: Optional[List[np.ndarray]], mode: str, name: str
) -> Optional[ArrayResults]:
    """Every rank's array results in dataset order, each column allocated once and filled in place.

    ``parts[r]`` is rank ``r``'s results: a dict / :class:`ArrayResults` (one
    piece), an :class:`ArrayBatches` (its batches; received ones are views
    of the receive buffer) or a list (object results). ``own_keep`` selects
    the rows of ``parts[0]`` to count (``None``: all; the others arrive
    already selected). With ``by_index`` (each rank's dataset indices of its
    rows) the output is in index order, else in ``mode`` order. Returns
    ``None`` when no rank has array results (object results: see
    :func:`collect`); ``parts`` is then left as it was. Otherwise ``parts``
    is emptied and the rows are copied a chunk of every rank at a time, each
    copied chunk released (:mod:`mmeval.core.wire.release`): where the
    transport received each block into a releasable buffer of its own, rank
    0 holds about the output plus what is not copied yet, not the output plus
    every block, and a block is freed once copied. The result equals ``collect`` (then ``select`` by
    index): same columns, dtypes (promoted across ranks as ``np.concatenate``
    does) and row order; the same errors for mixed or mismatched results.
    """
    pieces = [_pieces(p) for p in parts]
    if all(p is None for p in pieces):
        return None
    if any(p is None and len(parts[r]) for r, p in enumerate(pieces)):
        raise TypeError(f"{name}: some ranks kept array results and others object results")
    spans = [_kept_spans(p, own_keep if r == 0 else None) if p is not None else [] for r, p in enumerate(pieces)]
    counts = [sum(_span_rows(sel) for _, sel in s) for s in spans]
    first_array = next(p for p in pieces if p is not None)
    keys = list(first_array[0])
    for r, p in enumerate(pieces):
        if p is not None and counts[r] and list(p[0]) != keys:
            raise ValueError(f"{name}: ranks kept different result columns: {keys} vs {list(p[0])}")
    # columns come from the ranks with rows (every batch of each: np.concatenate's promotion), or the first
    sources = [p for r, p in enumerate(pieces) if p is not None and counts[r]] or [first_array]
    total = sum(counts)
    out: Dict[str, np.ndarray] = {}
    arrays: List[np.ndarray] = []
    for k in keys:
        arrays = [piece[k] for p in sources for piece in p]
        trailing = {a.shape[1:] for a in arrays}
        if len(trailing) > 1:
            raise ValueError(
                f"{name}: column {k!r} has different per-sample shapes on different ranks "
                f"({sorted(trailing)}); every rank must keep the same shapes"
            )
        out[k] = np.empty((total, *arrays[0].shape[1:]), dtype=np.result_type(*arrays))
    del arrays, sources, first_array, pieces
    place = Placement(counts, mode, by_index)
    copies = [_copy_rank(out, keys, place, r, spans[r]) for r in range(len(spans))]
    del spans, parts[:]  # what was received now lives on in the copies only (see the docstring)
    while copies:  # a chunk of every rank in turn: the output fills as the received blocks empty
        copies = [c for c in copies if next(c, _DONE) is not _DONE]
    return ArrayResults(out)


#: Rows of one rank copied at a time by :func:`assemble` (then the copied rows' pages are released).
CHUNK_ROWS = 1 << 16
_DONE = object()


def _copy_rank(
    out: Dict[str, np.ndarray],
    keys: List[str],
    place: Placement,
    r: int,
    rank_spans: List[Tuple[Mapping[str, np.ndarray], Union[slice, np.ndarray]]],
) -> Iterator[None]:
    """Write rank ``r``'s kept rows to their places in ``out``, :data:`CHUNK_ROWS` at a time (one per ``next``).

    After each chunk the copied source rows are released (:func:`~mmeval.core.wire.release.release`:
    only a transport's receive buffer marked releasable gives its pages back; anything else is untouched).
    """
    j = 0
    while rank_spans:
        piece, sel = rank_spans.pop(0)
        n = _span_rows(sel)
        for a in range(0, n, CHUNK_ROWS):
            b = min(a + CHUNK_ROWS, n)
            for dest, part in place.spans(r, j + a, j + b):
                part = slice(a + part.start, a + part.stop)
                src = sel[part] if isinstance(sel, np.ndarray) else slice(sel.start + part.start, sel.start + part.stop)
                for k in keys:
                    out[k][dest] = piece[k][src]
            if not isinstance(sel, np.ndarray):
                for k in keys:
                    release(piece[k][sel.start + a : sel.start + b])
            yield None
        j += n
        del piece, sel


def _span_rows(sel: Union[slice, np.ndarray]) -> int:
    """How many rows a span (a slice or positions) of a piece selects."""
    return len(sel) if isinstance(sel, np.ndarray) else int(sel.stop - sel.start)


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
