"""The base class of every mmeval metric: the metric API (``add`` / ``compute`` / ``reset``) and the choice of path.

``compute()`` validates, then runs locally (:mod:`mmeval.core.sync.here`), through the
state path (:mod:`mmeval.core.sync.state_path`), through the per-sample gather
(:mod:`mmeval.core.sync.gather`) or in parts (:mod:`mmeval.core.sync.partitioned`);
which samples count and in what order is :mod:`mmeval.core.sync.ordering`, what a
rank kept and the methods a metric keeps it with :mod:`mmeval.core.results`.
"""

from __future__ import annotations

import logging
from abc import ABCMeta, abstractmethod
from typing import Any, Dict, List, Optional, Tuple, Union

from .dist import get_dist_backend
from .dist_backends.base_backend import BaseDistBackend
from .dist_backends.transport import asking
from .errors import RemoteMetricError, ShardingWarning
from .identity import question_of
from .results import ArrayResults, KeepsResults, KeepsSummaries, RankResults
from .state import MetricState, StateSpec
from .sync.add_indices import accepting_indices
from .sync.coverage import CoverageReport
from .sync.gather import gather_and_compute
from .sync.here import compute_here
from .sync.ordering import kept_samples
from .sync.partitioned import ComputesInParts, part_loads_of, partitioned_compute, world_owners
from .sync.promises import adding_lock
from .sync.protocols import Participant
from .sync.refusals import check_arguments, refusal_at_compute, refuse
from .sync.state_path import compute_state

__all__ = ["BaseMetric", "ArrayResults", "MetricState", "RemoteMetricError", "ShardingWarning", "taking_part"]


class BaseMetric(KeepsResults, KeepsSummaries, ComputesInParts, metaclass=ABCMeta):
    """Base class of metrics that can run distributed.

    Subclasses implement :meth:`add` (accumulate one batch) and
    :meth:`compute_metric` (turn every rank's results into the metric).
    Results are kept one of two ways:

    * one Python object per sample appended to ``self._results`` (any
      picklable object; ``compute_metric`` gets a list), or
    * arrays whose first axis is the sample, a batch at a time, with
      :meth:`_add_batch` (``compute_metric`` gets an :class:`ArrayResults`).
      Collection, ordering and ``size`` then work on whole arrays, without one
      Python object per sample -- the fast path; or
    * declared statistics (*state metrics*): :meth:`_declare_state` in
      ``__init__`` and one row per sample for each with :meth:`_add_rows`;
      ``compute_metric`` gets the :class:`~mmeval.core.state.MetricState`
      reduced over every rank. Only the reduced state moves, in one
      ``all_reduce`` per (dtype, reduction) group -- normally exactly one --
      and ``compute_metric`` runs on every rank (it must be deterministic).

    Every subclass's ``add()`` also accepts ``indices=``: the dataset indices
    of the batch's samples (a list, a numpy array, a tensor), one per sample.
    Given on every rank, :meth:`compute` counts each index once (a sampler's
    padding, wrap-around batches, duplicates across ranks) and orders
    per-sample results by index; ``size`` is then not needed. Given on some
    ranks (or ``add()`` calls) and not others, :meth:`compute` raises a
    ``ValueError`` on every rank.

    Pickling a metric saves its configuration and what this rank added (see
    :class:`~mmeval.core.results.RankResults`), with the rank and world size
    that added it: restore it in the same rank of a world of the same size (to
    resume an evaluation). :meth:`compute` across ranks refuses, on every rank,
    results restored on another rank (they would count twice); call
    :meth:`reset` first to reuse the configuration only.

    Args:
        dataset_meta: dataset information (class names, ...) for metrics that need it.
        dist_collect_mode: how the ranks' results are put back in dataset order:
            ``'unzip'`` (default) interleaves them round-robin, the order
            ``DistributedSampler`` deals samples in (ranks may hold different
            numbers of results: nothing is truncated); ``'cat'`` concatenates
            them rank after rank (contiguous shards).
        dist_backend: a backend name, a backend instance, or ``None`` for the
            default (see :func:`mmeval.core.set_default_dist_backend`), which is
            resolved at each :meth:`compute` so a metric built before the
            runtime starts uses it once it has.
    """

    def __init__(
        self,
        dataset_meta: Optional[Dict[str, Any]] = None,
        dist_collect_mode: str = "unzip",
        dist_backend: Union[str, BaseDistBackend, None] = None,
        logger: Optional[logging.Logger] = None,
        **unexpected: Any,
    ) -> None:
        check_arguments(type(self), dist_collect_mode, dist_backend, unexpected)
        self.dataset_meta = dataset_meta
        self.dist_collect_mode = dist_collect_mode
        self.dist_backend = dist_backend
        self.logger = logger
        #: what this rank kept since the last reset(): results, dataset indices, running state
        self._kept = RankResults()
        self._state_specs: List[StateSpec] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        add = cls.__dict__.get("add")
        if (
            callable(add)
            and not getattr(add, "__isabstractmethod__", False)
            and not getattr(add, "_mmeval_indices", False)
        ):
            cls.add = accepting_indices(add, _kept_of)  # type: ignore[method-assign]

    # -- backend and name -----------------------------------------------------

    @property
    def dist_comm(self) -> BaseDistBackend:
        """The backend :meth:`compute` uses now (resolved at each access)."""
        if isinstance(self.dist_backend, BaseDistBackend):
            return self.dist_backend
        return get_dist_backend(self.dist_backend)

    @property
    def name(self) -> str:
        return type(self).__name__

    # -- to implement --------------------------------------------------------

    @abstractmethod
    def add(self, *args: Any, **kwargs: Any) -> None:
        """Accumulate the results of one batch."""

    @abstractmethod
    def compute_metric(self, results: Any) -> Dict[str, Any]:
        """Compute the metric from every rank's results, in dataset order.

        ``results`` is a list (object results) or an :class:`ArrayResults`
        (array results). Runs on one rank; the returned dict must be picklable.
        """

    # -- results, reset and the stateless call ----------------------------------

    @property
    def num_results(self) -> int:
        """How many per-sample results this rank holds."""
        return self._kept.num_results

    def reset(self) -> None:
        """Drop the accumulated results (and any refusal of an ``add()`` since the last reset)."""
        self._kept = RankResults()

    def __call__(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        """Stateless: compute the metric of this one call's inputs, locally, leaving the state alone."""
        with adding_lock(self):  # no other thread's add() lands in this call's results, nor this call's in its
            saved, self._kept = self._kept, RankResults()
            try:
                self.add(*args, **kwargs)
                return compute_here(_participant(self), None)
            finally:
                self._kept = saved

    # -- compute -------------------------------------------------------------

    #: Set ``metric.coverage = True`` (on every rank) for a :class:`~mmeval.core.sync.coverage.CoverageReport` after
    #: each :meth:`compute` in :attr:`coverage_report`, at the cost of the exchange compute() makes anyway.
    coverage: bool = False

    @property
    def coverage_report(self) -> Optional[CoverageReport]:
        """What the last :meth:`compute` covered (with ``coverage = True``; else ``None``).

        See :mod:`~mmeval.core.sync.coverage`.
        """
        return self.__dict__.get("_coverage_report")

    def _take_coverage(self, report: Optional[CoverageReport]) -> None:
        self.__dict__["_coverage_report"] = report

    def _question(self, size: Optional[int]) -> Dict[str, Any]:
        """What every rank's :meth:`compute` must agree on: the metric, its public configuration but
        ``dataset_meta``, ``logger`` and ``dist_backend``, the mode and ``size``
        (:func:`mmeval.core.identity.question_of`). Subclasses may extend it."""
        return question_of(self, size)

    def compute(self, size: Optional[int] = None) -> Dict[str, Any]:
        """Compute the metric over every rank's results; every rank gets the result.

        Every collective carries the question the ranks must agree on
        (:meth:`_question`). Each rank drops, from its own samples, those it
        must not count (:mod:`mmeval.core.sync.ordering`): with ``indices=`` on every
        rank each dataset index counts once (``size`` is then not used), at a
        cost that follows the number ``n`` of samples in the world, never the
        largest index (at most ``8 n + 4 KiB`` bytes a rank; see
        :func:`~mmeval.core.sync.ordering.owned_positions`); else the samples past
        ``size`` in dataset order (``dist_collect_mode``).

        A state metric combines its counts with ``all_reduce``
        (:mod:`mmeval.core.sync.state_path`) and every rank calls
        :meth:`compute_metric` on the same state. A per-sample metric gathers
        its results to rank 0 (:mod:`mmeval.core.sync.gather`), which orders them,
        calls :meth:`compute_metric` and sends the result, or the exception it
        raised, to every rank; one that computes in parts
        (:meth:`_computes_in_parts`) sends each rank its part instead, and rank 0
        combines the partial results (:mod:`mmeval.core.sync.partitioned`).

        Warns (:class:`ShardingWarning`) with ``'unzip'`` on several ranks and
        neither ``size`` nor indices, and when more than ``size + world_size -
        1`` samples were added (one process included), with the likely causes.
        Refusals reach every rank at once, naming the rank and the argument
        (:mod:`mmeval.core.sync.refusals`): a ``size`` that is not a positive int, an
        ``add()`` refused since :meth:`reset`, results restored from another
        rank's pickle (``ValueError`` here, ``CollectiveMismatchError`` on the
        peers); a backend named explicitly that is not running while a
        launcher's variables say several processes run (``RuntimeError``).
        """
        backend = self.dist_comm
        me = taking_part(self, size, backend)
        if not backend.is_initialized or backend.world_size == 1:
            if me.refused is not None:
                raise ValueError(me.refused)
            return compute_here(me, None if size is None else int(size))
        if me.refused is not None:
            refuse(backend, f"rank {backend.rank}: {me.refused}", me.is_state, me.question(size))
        call, kept = me.call(None if size is None else int(size)), me.kept
        if me.is_state:
            return compute_state(kept, me.specs, call, backend, self)
        # the question rides in the header: ranks computing a different metric, configuration,
        # collect mode or size all raise CollectiveMismatchError instead of answering rank 0's question
        in_parts = self._computes_in_parts()
        flag = kept.index_flag()
        indices = kept.indices() if flag == "all" else None
        mine: Tuple[Any, ...] = (
            kept.num_results,
            flag,
            int(indices.max()) if indices is not None and indices.size else -1,
        )
        if in_parts:  # the keys' loads ride in the same exchange (see _part_loads)
            mine += (part_loads_of(self),)
        with asking(call.question):
            layout = backend.all_gather_object(mine)
        keep, indices = kept_samples(
            backend, call.question, [tuple(x[:3]) for x in layout], indices, call.mode, call.size, self.name
        )
        if not in_parts:
            return gather_and_compute(kept, call, backend, self, keep, indices)
        owners = world_owners([x[3] if len(x) > 3 else None for x in layout], backend.world_size)
        return partitioned_compute(kept, call, backend, self, [int(x[0]) for x in layout], keep, indices, owners)


def taking_part(metric: BaseMetric, size: Any, backend: BaseDistBackend) -> Participant:
    """``metric`` in its ``compute(size)`` on ``backend``, once the refusal checks ran
    (:func:`~mmeval.core.sync.refusals.refusal_at_compute`: it raises at once when the named backend is not
    running): what :meth:`BaseMetric.compute` and a ``MetricCollection`` read of a metric."""
    me = _participant(metric)
    me.refused = refusal_at_compute(me, metric.dist_backend, size, backend)
    return me


def _participant(metric: BaseMetric) -> Participant:
    """``metric`` as plain data and its protocol object (:class:`~mmeval.core.sync.protocols.Participant`)."""
    return Participant(
        metric.name,
        metric.dist_collect_mode,
        metric._kept,
        metric._state_specs,
        metric,
        metric.coverage,
        metric._take_coverage,
    )


def _kept_of(metric: BaseMetric) -> RankResults:
    """Where ``metric`` keeps what it added (what the ``add()`` wrapper of :mod:`.sync.add_indices` is handed)."""
    return metric._kept
