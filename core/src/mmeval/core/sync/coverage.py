"""What an evaluation covered: the dataset positions never seen and those seen more than once, world-wide.

Asked for with ``metric.coverage = True`` (an attribute, so it is part of the
question every rank must agree on); after :meth:`~mmeval.core.BaseMetric.compute`
every rank holds the same :class:`CoverageReport` in ``metric.coverage_report``.

What it costs is the exchange ``compute()`` already makes to decide which
samples count (:func:`mmeval.core.sync.ordering.owned_positions`), no other collective:

- with ``add(..., indices=)`` and dense indices (the largest below ``2 n +
  1024`` for ``n`` samples in the world), the owner array's ``all_reduce(min)``
  carries a second row: per index value the highest rank holding it, or -1
  where one rank holds it twice -- 8 bytes per index value instead of 4;
- with sparse indices, each rank's all-gathered distinct indices travel with
  its locally repeated ones (8 more bytes per repeat);
- with ``size=`` and no indices, the layout every rank already has: a
  ``DistributedSampler`` pads its shards by repeating the dataset's first
  positions, and a shortfall leaves the last ones unseen.

In one process the report is made from the local indices (or count).
"""

from __future__ import annotations

import weakref
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..dist_backends.base_backend import BaseDistBackend
from ..dist_backends.transport import asking
from ..results import RankResults

__all__ = [
    "CoverageReport",
    "deliver",
    "owned_with_report",
    "report_here",
    "report_of_indices",
    "report_of_layout",
    "start",
]

#: Never-seen positions listed at most (the counts are always exact); beyond, the first ones.
LISTED = 1_000_000


@dataclass(frozen=True)
class CoverageReport:
    """Which dataset positions an evaluation saw, world-wide (the same on every rank).

    Attributes:
        basis: ``'indices'`` (from ``add(..., indices=)``), ``'size'`` (from
            ``compute(size=)`` and the sampler layout of ``dist_collect_mode``)
            or ``'count'`` (neither: only the number of samples is known).
        size: the range checked, positions ``0 .. size - 1``: ``compute(size=)``,
            else (indices) the largest index + 1; ``None`` when unknown.
        samples: samples added on every rank together.
        seen: distinct positions seen.
        never_seen: the positions of the range never added (ascending; the
            first :data:`LISTED`), or ``None`` where the range is unknown.
        never_seen_count: how many positions of the range were never added.
        repeated: the positions added more than once (ascending).
        extra: samples beyond the first of their position (``samples - seen``).
    """

    basis: str
    size: Optional[int]
    samples: int
    seen: int
    never_seen: Optional[np.ndarray]
    never_seen_count: Optional[int]
    repeated: np.ndarray
    extra: int

    @property
    def complete(self) -> bool:
        """Every position of the range seen exactly once (``False`` where the range is unknown)."""
        return self.never_seen_count == 0 and self.extra == 0

    def __str__(self) -> str:
        never = "unknown" if self.never_seen_count is None else f"{self.never_seen_count}"
        rng = "an unknown range" if self.size is None else f"positions 0..{self.size - 1}"
        shown = "" if not self.repeated.size else f" (first: {self.repeated[:5].tolist()})"
        return (
            f"coverage by {self.basis} of {rng}: {self.samples} samples, {self.seen} distinct; never seen: "
            f"{never}; seen more than once: {self.repeated.size}{shown}"
        )


def _report(
    basis: str, size: Optional[int], samples: int, seen_mask: Optional[np.ndarray], repeated: np.ndarray, seen: int
) -> CoverageReport:
    """A report from a mask of the range's seen positions (``None``: the range is unknown)."""
    never: Optional[np.ndarray] = None
    count: Optional[int] = None
    if seen_mask is not None:
        missing = np.flatnonzero(~seen_mask)
        count = int(missing.size)
        never = missing[:LISTED].astype(np.int64)
    return CoverageReport(basis, size, samples, seen, never, count, np.asarray(repeated, np.int64), samples - seen)


def _range_mask(size: Optional[int], top: int, seen_values: np.ndarray) -> Tuple[Optional[int], np.ndarray]:
    """The range (``size``, else ``top + 1``) and which of its positions are among ``seen_values``."""
    n = size if size is not None else top + 1
    mask = np.zeros(n, dtype=bool)
    inside = seen_values[(seen_values >= 0) & (seen_values < n)]
    mask[inside] = True
    return n, mask


def report_of_indices(indices: np.ndarray, size: Optional[int]) -> CoverageReport:
    """One process's report from every index it was given."""
    values, counts = np.unique(indices, return_counts=True)
    top = int(values[-1]) if values.size else -1
    n, mask = _range_mask(size, top, values)
    return _report("indices", n, int(indices.size), mask, values[counts > 1], int(values.size))


def report_of_layout(counts: Sequence[int], mode: str, size: Optional[int]) -> CoverageReport:
    """The report without indices: positions follow the sampler layout (``DistributedSampler``'s padding).

    With ``size``, the samples past it repeat the dataset's first positions
    (as ``DistributedSampler`` pads; ``'cat'`` blocks too), and positions past
    the samples added were never seen. Without ``size`` only the count is known.
    """
    total = int(sum(counts))
    if size is None:
        return CoverageReport("count", None, total, total, None, None, np.zeros(0, np.int64), 0)
    seen = min(total, size)
    mask = np.arange(size) < seen
    repeated = np.arange(min(max(total - size, 0), size), dtype=np.int64)
    return CoverageReport(
        "size", size, total, seen, np.flatnonzero(~mask)[:LISTED], int(size - seen), repeated, total - seen
    )


def _local_repeats(indices: np.ndarray) -> np.ndarray:
    values, counts = np.unique(indices, return_counts=True)
    return np.asarray(values[counts > 1], dtype=np.int64)


def owned_with_report(
    backend: BaseDistBackend,
    question: Dict[str, Any],
    indices: np.ndarray,
    first: np.ndarray,
    layout: List[Tuple[int, str, int]],
    dense: bool,
    size: Optional[int],
) -> Tuple[np.ndarray, CoverageReport]:
    """:func:`~mmeval.core.sync.ordering.owned_positions`' exchange with the coverage riding in it.

    ``first``: the positions of this rank's first occurrence of each index;
    ``dense``: the owner-array path (else the all-gather of distinct indices).
    Returns this rank's positions to count and the world's report.
    """
    rank, ws = backend.rank, backend.world_size
    top = max(m for _, _, m in layout)
    total = sum(int(c) for c, _, _ in layout)
    mine = _local_repeats(indices)
    if dense:
        claims = np.full((2, top + 1), ws, dtype=np.int32)
        claims[0, indices] = rank
        claims[1, indices] = ws - 1 - rank  # min over ranks: ws - 1 - (the highest rank holding it)
        claims[1, mine] = -1  # one rank holds it twice
        with asking(question):
            both = backend.all_reduce(claims.ravel(), op="min").reshape(2, top + 1)
        owner, high = both[0], both[1]
        keep = np.asarray(first[owner[indices[first]] == rank], dtype=np.int64)
        held = owner < ws
        repeated = np.flatnonzero(held & ((high < 0) | (ws - 1 - high != owner)))
        n, mask = _range_mask(size, top, np.flatnonzero(held))
        return keep, _report("indices", n, total, mask, repeated, int(np.count_nonzero(held)))
    with asking(question):
        every = backend.all_gather_object((np.sort(indices[first]), mine))
    lower = [np.asarray(every[r][0], dtype=np.int64) for r in range(rank)]
    keep = first if not lower else np.asarray(first[~np.isin(indices[first], np.concatenate(lower))], np.int64)
    values, counts = np.unique(np.concatenate([np.asarray(d, np.int64) for d, _ in every]), return_counts=True)
    repeated = np.union1d(values[counts > 1], np.concatenate([np.asarray(r, np.int64) for _, r in every]))
    if size is None:  # sparse indices: the range up to the largest would cost what the largest is worth
        return keep, _report("indices", None, total, None, repeated, int(values.size))
    n, mask = _range_mask(size, top, values)
    return keep, _report("indices", n, total, mask, repeated, int(values.size))


# --- where the report goes: the sink of the metric whose compute() is running ---------------------------------

#: Where a report goes: a callable taking it (``BaseMetric`` hands its own bound method, held weakly).
Sink = Callable[[Optional[CoverageReport]], None]

_RUNNING: ContextVar[Optional["weakref.WeakMethod[Any]"]] = ContextVar("mmeval_coverage_sink", default=None)


def start(sink: Sink) -> None:
    """Called as ``compute()`` starts: ``sink(None)`` forgets the last report; one made during this compute goes to
    ``sink`` (a bound method, held weakly: the metric is not kept alive by it)."""
    sink(None)
    _RUNNING.set(weakref.WeakMethod(sink))


def deliver(report: CoverageReport, sink: Optional[Sink] = None) -> None:
    """Hand ``report`` to ``sink``, else to that of the ``compute()`` running (nothing when none is)."""
    if sink is None:
        ref = _RUNNING.get()
        sink = ref() if ref is not None else None
    if sink is not None:
        sink(report)


def report_here(kept: "RankResults", mode: str, size: Optional[int]) -> CoverageReport:
    """One process's report from what it kept (a :class:`~mmeval.core.results.RankResults`)."""
    if kept.index_flag() == "all":
        return report_of_indices(kept.indices(), size)
    return report_of_layout([kept.num_results], mode, size)
