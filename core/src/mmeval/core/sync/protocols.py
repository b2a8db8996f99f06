"""What the compute paths are handed: plain data, and one named protocol object for the metric's own computation.

A path is a function of

* what the rank kept -- :class:`~mmeval.core.results.RankResults` (results,
  index parts, origin, running state), never the metric that holds it;
* the declared state -- a sequence of :class:`~mmeval.core.state.StateSpec`;
* the call's fields -- :class:`Call` (the metric's name for messages, the
  collect mode, ``size``, the question every collective asks);
* for what only the metric can compute, one protocol object:
  :class:`PerSampleComputation` (:mod:`.gather`), :class:`StateComputation`
  (:mod:`.state_path`) or :class:`PartsComputation` (:mod:`.partitioned`).

A caller that syncs a metric -- ``BaseMetric.compute`` itself, a ``MetricCollection``
for several at once -- reads it as a :class:`Participant`: that plain data, with
the metric as a :class:`MetricComputation`.

:class:`~mmeval.core.base_metric.BaseMetric` builds the data, satisfies the
protocols (mypy checks it where it calls a path) and chooses the path; no module
here imports it or reads a metric's members. The underscore names below are the
extension points a metric overrides, documented here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Protocol, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..results import ArrayResults, RankResults
    from ..state import StateSpec

__all__ = [
    "Call",
    "MetricComputation",
    "Participant",
    "PartsComputation",
    "PerSampleComputation",
    "StateComputation",
]


@dataclass(frozen=True)
class Call:
    """One ``compute()`` call as every path reads it.

    Attributes:
        name: the metric's name, for messages.
        mode: ``dist_collect_mode`` -- the sampler's order, ``'cat'`` or ``'unzip'``.
        size: ``compute(size=)`` as an int, or ``None``.
        question: what every rank must agree on (``BaseMetric._question``); every collective asks it.
    """

    name: str
    mode: str
    size: Optional[int]
    question: Dict[str, Any]


class PerSampleComputation(Protocol):
    """The per-sample gather's view of a metric (:mod:`.gather`): its computation over the world's results."""

    def compute_metric(self, results: Any) -> Dict[str, Any]:
        """The metric from the world's results, in dataset order (a list, or an ``ArrayResults``)."""


class StateComputation(Protocol):
    """A state metric's computation (:mod:`.state_path`): its declared states from rows, the metric from them."""

    def _state_of_rows(self, rows: "ArrayResults") -> Dict[str, "np.ndarray"]:
        """This rank's state over ``rows`` (the per-sample rows it counts; at least one).

        By default each declared state is reduced over its own rows (what
        ``_add_rows`` keeps). A metric that keeps more compact per-sample
        columns with ``_add_batch`` (a predicted class rather than a one-hot
        row) overrides it to build its declared states from them.
        """

    def compute_metric(self, results: Any) -> Dict[str, Any]:
        """The metric from the world's combined :class:`~mmeval.core.state.MetricState` (runs on every rank)."""


class PartsComputation(Protocol):
    """A metric that computes in parts, one per rank (:mod:`.partitioned`).

    It returns ``True`` from ``_computes_in_parts``; each rank then computes on
    its part of the world's results and only the partial results meet on rank
    0. Its ``compute_metric`` should be
    ``_combine_parts([_compute_part(_partition(results, positions, 1))])`` so
    that one process gives the very same numbers.
    """

    @property
    def name(self) -> str:
        """The metric's name, for messages."""

    def _partition(
        self, results: List[Any], positions: "np.ndarray", world_size: int, owners: "Optional[np.ndarray]" = None
    ) -> List[Any]:
        """This rank's counted results split into ``world_size`` parts, part ``r`` for rank ``r``.

        ``positions``: each result's place in dataset order among the world's
        counted results (0 .. n-1), what the gather path would order them by.
        ``owners``: only for a metric whose ``_part_loads`` gives loads -- the
        rank chosen for each key (int64, one per key; the same on every rank);
        ``None`` otherwise (and in one process), when the metric deals its keys
        itself. The core passes it by keyword and only then, so a
        ``_partition(results, positions, world_size)`` keeps working.
        """

    def _part_loads(self) -> "Optional[np.ndarray]":
        """The work this rank's results bring to each key of the partition, or ``None`` (the default).

        A metric whose keys carry unequal work (detections per category: a
        long-tailed dataset's few large classes) returns one non-negative
        integer per key, the same number of keys on every rank; it is a cost
        estimate, never part of the result. The core sums every rank's loads in
        the exchange that precedes the partition (no extra collective; 2 bytes
        a key from each rank, scaled by a power of two to fit) and hands
        ``_partition`` each key's owner, chosen by
        :func:`~mmeval.core.sync.partitioned.balanced_owners`. A rank whose
        loads cannot be read (an exception, another number of keys) makes every
        rank fall back to ``owners=None``, which changes the balance, not the
        result.
        """

    def _compute_part(self, parts: List[Any]) -> Any:
        """The partial result of the parts every rank sent to this one (in rank order).

        ``parts`` is the metric's to consume: clearing it once read releases
        the received data before the work that follows.
        """

    def _combine_parts(self, partials: List[Any]) -> Dict[str, Any]:
        """The metric from every rank's partial result (in rank order), on rank 0."""


class MetricComputation(StateComputation, Protocol):
    """A metric as a caller that syncs it reads it: its computation (:class:`StateComputation`, which a per-sample
    metric's :class:`PerSampleComputation` is part of), its question and its samples still to summarize."""

    def _question(self, size: Optional[int]) -> Dict[str, Any]:
        """What every rank's ``compute(size)`` must agree on (see ``BaseMetric._question``); a metric may extend it."""

    def _summarize_pending(self) -> None:
        """Replace the samples kept to summarize later by their summaries (see ``KeepsSummaries``)."""


@dataclass
class Participant:
    """One metric in one ``compute(size)`` call, as the caller that syncs it reads it.

    Built by :func:`mmeval.core.base_metric.taking_part` (once the refusal checks ran) or
    ``BaseMetric``'s stateless call; the one-process path is :func:`mmeval.core.sync.here.compute_here`.

    Attributes:
        name: the metric's name, for messages.
        mode: its ``dist_collect_mode``.
        kept: what this rank kept (:class:`~mmeval.core.results.RankResults`).
        specs: the declared state (empty: not a state metric).
        computation: the metric itself, as the protocol object.
        coverage: whether a coverage report is asked for (``metric.coverage``).
        sink: where the metric's coverage report goes (see :mod:`.coverage`).
        refused: why this rank cannot take part (``None``: it can); set once, by ``taking_part``.
    """

    name: str
    mode: str
    kept: "RankResults"
    specs: "Sequence[StateSpec]"
    computation: MetricComputation
    coverage: bool
    sink: "Callable[[Any], None]"
    refused: Optional[str] = None

    @property
    def is_state(self) -> bool:
        """Whether it takes the state path: statistics declared and no object results kept."""
        return self.kept.is_state(self.specs)

    def question(self, size: Any) -> Dict[str, Any]:
        """What every rank must agree on for ``compute(size)`` (the metric's ``_question``)."""
        return self.computation._question(size)

    def call(self, size: Optional[int]) -> Call:
        """``compute(size)`` as the paths read it."""
        return Call(self.name, self.mode, size, self.question(size))
