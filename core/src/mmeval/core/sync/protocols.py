"""The extension points the compute paths ask of a metric, as named, documented protocols.

:class:`~mmeval.core.base_metric.BaseMetric` satisfies every one of them (mypy
checks it where it calls a path); a path module names the protocol it needs
instead of importing the base class, so the sync package sits below the metric
API. What a rank kept travels as :class:`~mmeval.core.results.RankResults`.

* :class:`NamedMetric` -- what every path reads: the metric's name (for messages)
  and ``dist_collect_mode`` (the sampler's order: ``'cat'`` or ``'unzip'``);
* :class:`PerSampleMetric` -- the per-sample gather (:mod:`.gather`): the kept
  results and ``compute_metric``;
* :class:`PartitionedMetric` -- computing in parts (:mod:`.partitioned`):
  ``_partition``, ``_part_loads``, ``_compute_part``, ``_combine_parts``;
* :class:`StateMetric` -- the state path (:mod:`.state_path`): the declared
  state, its reduction over kept rows and ``compute_metric``;
* :class:`RefusingMetric` -- the checks that reach every rank (:mod:`.refusals`);
* :class:`IndexedMetric` -- ``add(..., indices=)`` (:mod:`.add_indices`).

The underscore names are the metric's hooks as :class:`BaseMetric` documents
them; a metric overrides them, the core calls them only through these protocols.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Protocol, Union

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..dist_backends.base_backend import BaseDistBackend
    from ..results import ArrayResults, RankResults
    from ..state import MetricState, StateSpec

__all__ = ["NamedMetric", "PerSampleMetric", "PartitionedMetric", "StateMetric", "RefusingMetric", "IndexedMetric"]


class NamedMetric(Protocol):
    """What every compute path reads of a metric."""

    dist_collect_mode: str

    @property
    def name(self) -> str:
        """The metric's name, for messages."""


class PerSampleMetric(NamedMetric, Protocol):
    """The per-sample gather's view of a metric: what this rank kept, and the metric's computation."""

    _kept: "RankResults"

    def _local_results(self) -> "Union[List[Any], ArrayResults]":
        """This rank's kept results, merged (objects, or one array per column)."""

    def compute_metric(self, results: Any) -> Dict[str, Any]:
        """The metric from the world's results, in dataset order."""


class PartitionedMetric(NamedMetric, Protocol):
    """A metric that computes in parts, one per rank (see ``BaseMetric._computes_in_parts``)."""

    def _local_results(self) -> "Union[List[Any], ArrayResults]":
        """This rank's kept results, merged."""

    def _partition(
        self, results: List[Any], positions: "np.ndarray", world_size: int, owners: "Optional[np.ndarray]" = None
    ) -> List[Any]:
        """This rank's counted results split into ``world_size`` parts (see ``BaseMetric._partition``)."""

    def _part_loads(self) -> "Optional[np.ndarray]":
        """The work this rank's results bring to each key, or ``None``."""

    def _compute_part(self, parts: List[Any]) -> Any:
        """The partial result of the parts every rank sent to this one."""

    def _combine_parts(self, partials: List[Any]) -> Dict[str, Any]:
        """The metric from every rank's partial result, on rank 0."""


class StateMetric(NamedMetric, Protocol):
    """A state metric: declared statistics reduced over kept rows (see :mod:`mmeval.core.state`)."""

    _kept: "RankResults"
    _state_specs: "List[StateSpec]"

    @property
    def num_results(self) -> int:
        """How many per-sample results this rank holds."""

    def _whole_state(self) -> "MetricState":
        """The state over every sample this rank holds."""

    def _reduce_state(self, rows: "Optional[ArrayResults]", keep: "Optional[np.ndarray]") -> "MetricState":
        """The state over the kept rows ``keep`` (all with ``None``)."""

    def _local_rows(self) -> "Optional[ArrayResults]":
        """This rank's kept rows, merged."""

    def compute_metric(self, results: Any) -> Dict[str, Any]:
        """The metric from the world's combined state."""


class RefusingMetric(NamedMetric, Protocol):
    """What the refusals read: the backend the metric names, and what it kept."""

    _kept: "RankResults"
    dist_backend: "Union[str, BaseDistBackend, None]"


class IndexedMetric(RefusingMetric, Protocol):
    """What the ``add(..., indices=)`` wrapper reads and sets: whether an ``add()`` is running (a subclass's
    ``add()`` calling ``super().add()`` keeps the indices once), and what the rank kept."""

    _adding: bool
