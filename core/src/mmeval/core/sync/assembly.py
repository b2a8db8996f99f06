"""Rank 0's assembly of the per-sample results it received: each output column allocated once, in dataset order,
filled a chunk of every rank at a time, the received pages given back as they are copied out.

What a rank sends (:class:`ArrayBatches`: its batches as they are, no concatenated copy) and how rank 0 puts
every rank's rows in place (:func:`assemble`, :class:`Placement`) without a permutation of all rows. The
per-sample path (:mod:`.gather`) calls it; nothing here talks to other ranks.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..results import ArrayResults
from ..wire.release import release
from .ordering import round_robin_spans

__all__ = ["ArrayBatches", "CHUNK_ROWS", "Placement", "assemble", "join_batches", "sendable_batches"]


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
    :func:`~mmeval.core.sync.gather.collect`); ``parts`` is then left as it was. Otherwise ``parts``
    is emptied and the rows are copied a chunk of every rank at a time, each
    copied chunk released (:mod:`mmeval.core.wire.release`): where the
    transport received each block into a releasable buffer of its own, rank
    0 holds about the output plus what is not copied yet, not the output plus
    every block, and a block is freed once copied. The result equals ``gather.collect`` (then ``select`` by
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
