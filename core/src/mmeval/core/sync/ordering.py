"""Which samples count and in what order: a sampler's padding past ``size``, duplicates of a dataset index.

The order ``dist_collect_mode='unzip'`` puts results in (round robin over the
ranks, as ``DistributedSampler`` deals them) has one implementation here,
:func:`round_robin_spans`, which every other use goes through. Deduplication
by dataset index (:func:`owned_positions`) costs what the samples cost, never
what the largest index is worth.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..dist_backends.base_backend import BaseDistBackend
from ..dist_backends.transport import asking
from ..errors import ShardingWarning
from ..inputs import warn_user
from . import coverage
from .promises import check_size_explains

__all__ = [
    "DENSE_CLAIMS_SLACK",
    "check_layout",
    "dataset_positions",
    "first_occurrences",
    "kept_by_size",
    "kept_count",
    "owned_positions",
    "kept_in_one_process",
    "kept_samples",
    "round_robin_order",
    "round_robin_positions",
    "round_robin_spans",
    "warn_sharding",
    "warn_short",
]

#: Dataset indices up to ``2 * samples + DENSE_CLAIMS_SLACK`` are deduplicated with one dense owner array
#: (4 bytes per index value); larger ones by exchanging the distinct indices (8 bytes per sample).
DENSE_CLAIMS_SLACK = 1024

Span = Tuple[Union[slice, np.ndarray], slice]


def round_robin_spans(counts: Sequence[int], rank: int, a: int, b: int) -> List[Span]:
    """Where ``rank``'s items ``a..b`` land in the round-robin merge of every rank's items.

    Item j of rank r comes after every rank's first j items (``min(c, j)``
    each) and after item j of the ranks before r that have one (uneven counts
    included). Returns ``(output positions, span of a..b)`` pairs; items below
    the smallest non-zero count form one strided slice (no index array).
    """
    nonzero = [c for c in counts if c]
    k, even = len(nonzero), (min(nonzero) if nonzero else 0)
    out: List[Span] = []
    mid = min(max(a, even), b)
    if mid > a:
        before = sum(1 for c in counts[:rank] if c)
        out.append((slice(a * k + before, (mid - 1) * k + before + 1, k), slice(0, mid - a)))
    if b > mid:
        j = np.arange(mid, b, dtype=np.int64)
        pos = np.zeros_like(j)
        for r, c in enumerate(counts):
            pos += np.minimum(j, c)
            if r < rank:
                pos += j < c
        out.append((pos, slice(mid - a, b - a)))
    return out


def round_robin_positions(counts: Sequence[int], rank: int) -> np.ndarray:
    """Output position of each of ``rank``'s items in the round-robin merge (see :func:`round_robin_spans`)."""
    pos = np.empty(int(counts[rank]), dtype=np.int64)
    for dest, part in round_robin_spans(counts, rank, 0, int(counts[rank])):
        pos[part] = np.arange(dest.start, dest.stop, dest.step, dtype=np.int64) if isinstance(dest, slice) else dest
    return pos


def round_robin_order(counts: Sequence[int]) -> np.ndarray:
    """The permutation taking rank-concatenated items to round-robin order (``items[order]``)."""
    order = np.empty(int(sum(counts)), dtype=np.int64)
    offset = 0
    for r, c in enumerate(counts):
        order[round_robin_positions(counts, r)] = np.arange(offset, offset + c, dtype=np.int64)
        offset += c
    return order


def dataset_positions(counts: Sequence[int], rank: int, mode: str) -> np.ndarray:
    """Each of ``rank``'s samples' place in dataset order: ``'cat'`` rank after rank, else round-robin."""
    if mode == "cat":
        return sum(int(c) for c in counts[:rank]) + np.arange(int(counts[rank]), dtype=np.int64)
    return round_robin_positions(counts, rank)


def kept_by_size(counts: Sequence[int], rank: int, mode: str, size: Optional[int]) -> Optional[np.ndarray]:
    """The mask of ``rank``'s samples that lie before ``size`` in dataset order; ``None`` keeps them all."""
    if size is None or size >= sum(counts):
        return None
    return dataset_positions(counts, rank, mode) < size


def kept_count(counts: Sequence[int], rank: int, mode: str, size: Optional[int]) -> int:
    """How many of ``rank``'s samples :func:`kept_by_size` keeps (they are always its first ones)."""
    mask = kept_by_size(counts, rank, mode, size)
    return int(counts[rank]) if mask is None else int(np.count_nonzero(mask))


def first_occurrences(indices: np.ndarray) -> np.ndarray:
    """Positions (ascending) of the first occurrence of each distinct index: O(n log n), whatever the values."""
    _, first = np.unique(indices, return_index=True)
    first.sort()
    return np.asarray(first, dtype=np.int64)


def owned_positions(
    backend: BaseDistBackend, question: Dict[str, Any], indices: np.ndarray, layout: List[Tuple[int, str, int]]
) -> np.ndarray:
    """Positions (ascending) of the samples this rank counts: its first occurrence of each index no lower rank has.

    One collective, the same on every rank (chosen from ``layout``: each
    rank's ``(count, flag, largest index)``): with ``n`` samples in the world
    and a largest index below ``2 * n + DENSE_CLAIMS_SLACK``, an
    ``all_reduce(min)`` of a dense int32 owner array (4 bytes per index value,
    so at most ``8 n + 4 KiB``); otherwise an all-gather of each rank's
    distinct indices (8 bytes each; every rank receives at most ``8 n`` bytes
    and sorts them). Memory and bytes follow ``n``, never the largest index.
    """
    rank, ws = backend.rank, backend.world_size
    top = max(m for _, _, m in layout)
    total = sum(int(c) for c, _, _ in layout)
    first = first_occurrences(indices)
    if question.get("coverage"):  # the same exchange, carrying what the coverage report needs
        dense = top < 2 * total + DENSE_CLAIMS_SLACK
        keep, report = coverage.owned_with_report(backend, question, indices, first, layout, dense, question["size"])
        coverage.deliver(report)
        return keep
    if top < 2 * total + DENSE_CLAIMS_SLACK:
        claims = np.full(top + 1, ws, dtype=np.int32)
        claims[indices] = rank
        with asking(question):
            owner = backend.all_reduce(claims, op="min")
        return np.asarray(first[owner[indices[first]] == rank], dtype=np.int64)
    with asking(question):
        every = backend.all_gather_object(np.sort(indices[first]))
    lower = [np.asarray(every[r], dtype=np.int64) for r in range(rank)]
    if not lower:
        return first
    return np.asarray(first[~np.isin(indices[first], np.concatenate(lower))], dtype=np.int64)


def check_layout(layout: List[Any], name: str) -> bool:
    """Whether the ranks gave indices, from every rank's ``(count, flag, max_index)``; raise if only some did.

    ``flag`` is ``'all'`` (every ``add()`` had indices), ``'none'``, ``'mixed'``
    or ``'empty'`` (nothing added). The same ``layout`` reaches every rank,
    so every rank raises the same error.
    """
    flags = [f for _, f, _ in layout]
    mixed = [r for r, f in enumerate(flags) if f == "mixed"]
    if mixed:
        raise ValueError(
            f"{name}.compute(): rank(s) {mixed} passed indices= to some add() calls and not others; "
            f"pass indices= to every add() on every rank, or to none"
        )
    given = {f for f in flags if f != "empty"}
    if given == {"all", "none"}:
        with_idx = [r for r, f in enumerate(flags) if f == "all"]
        without = [r for r, f in enumerate(flags) if f == "none"]
        raise ValueError(
            f"{name}.compute(): rank(s) {with_idx} passed indices= to add() and rank(s) {without} did not; "
            f"pass indices= on every rank, or on none"
        )
    return given == {"all"}


def warn_sharding(counts: Sequence[int], mode: str, size: Optional[int], name: str) -> None:
    """Warn (:class:`ShardingWarning`) without ``size`` on several ranks; refuse more samples than ``size`` explains.

    The refusal is :func:`mmeval.core.sync.promises.check_size_explains`.
    """
    ws = len(counts)
    if size is None and mode == "unzip" and ws > 1:
        warn_user(
            f"{name}.compute() on {ws} ranks without size= or indices=: a DistributedSampler pads its shards "
            f"with repeated samples, which are counted. Pass compute(size=len(dataset)), or indices= to add()",
            ShardingWarning,
        )
    elif size is not None:
        check_size_explains(counts, size, name)  # more than size + padding: refused on every rank


def kept_in_one_process(
    n: int, flag: str, indices: np.ndarray, mode: str, size: Optional[int], name: str
) -> Optional[np.ndarray]:
    """One process's samples to count, as positions in the order ``compute_metric`` sees them (``None``: all).

    With indices (``flag == 'all'``): the first occurrence of each, in index
    order; else the first ``size`` (warning when ``size`` is more than ``n``,
    or when less: see :func:`warn_sharding`).
    """
    check_layout([(n, flag, -1)], name)
    if flag == "all":
        keep = first_occurrences(indices)
        return keep[np.argsort(indices[keep], kind="stable")]
    warn_sharding([n], mode, size, name)
    if size is not None and size > n:
        warn_short(name, size, n)
    return kept_by_size([n], 0, mode, size)


def warn_short(name: str, size: int, n: int) -> None:
    """Warn that ``size`` asks for more results than the ranks hold (every one is then counted)."""
    warn_user(f"{name}.compute(size={size}): only {n} results were collected; computing on all {n}", RuntimeWarning)


def kept_samples(
    backend: BaseDistBackend,
    question: Dict[str, Any],
    layout: List[Tuple[int, str, int]],
    indices: Optional[np.ndarray],
    mode: str,
    size: Optional[int],
    name: str,
) -> Tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """This rank's samples to count (``None``: all) and, when the ranks gave indices, its indices.

    ``layout`` is every rank's ``(count, index flag, largest index)``; with
    indices on every rank, each index counts once (:func:`owned_positions`),
    else the samples past ``size`` in ``mode`` order are dropped.
    """
    counts = [int(c) for c, _, _ in layout]
    if not check_layout(layout, name):
        warn_sharding(counts, mode, size, name)
        if question.get("coverage"):
            coverage.deliver(coverage.report_of_layout(counts, mode, size))
        return kept_by_size(counts, backend.rank, mode, size), None
    own = np.zeros(0, dtype=np.int64) if indices is None else indices
    return owned_positions(backend, question, own, layout), own
