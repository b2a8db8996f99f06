"""The base class of every mmeval metric: the metric API (``add`` / ``compute``) and the choice of path.

``compute()`` validates, then runs locally, through the state path
(:mod:`mmeval.core.sync.state_path`), through the per-sample gather
(:mod:`mmeval.core.sync.gather`) or in parts (:mod:`mmeval.core.sync.partitioned`);
which samples count and in what order is :mod:`mmeval.core.sync.ordering`, what a
rank kept :mod:`mmeval.core.results`.
"""

from __future__ import annotations

import logging
from abc import ABCMeta, abstractmethod
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from .dist import get_dist_backend
from .dist_backends.base_backend import BaseDistBackend
from .dist_backends.transport import asking
from .errors import RemoteMetricError, ShardingWarning
from .identity import question_of
from .results import ArrayResults, KeepsSummaries, RankResults, select, state_over
from .state import MetricState, StateSpec, check_rows, declared, reduce_rows
from .sync import coverage as _coverage
from .sync.add_indices import accepting_indices
from .sync.gather import gather_and_compute
from .sync.ordering import kept_in_one_process, kept_samples
from .sync.partitioned import ComputesInParts, part_loads_of, partitioned_compute, world_owners
from .sync.promises import adding_lock
from .sync.protocols import Call
from .sync.refusals import check_arguments, check_runtime, refusal, refuse
from .sync.state_path import compute_state

__all__ = ["BaseMetric", "ArrayResults", "MetricState", "RemoteMetricError", "ShardingWarning"]


class BaseMetric(KeepsSummaries, ComputesInParts, metaclass=ABCMeta):
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

    # -- state metrics ---------------------------------------------------------

    def _declare_state(
        self, name: str, shape: Tuple[int, ...] = (), dtype: str = "int64", reduction: str = "sum"
    ) -> None:
        """Declare one sufficient statistic (call in ``__init__``): the metric becomes a state metric.

        ``shape`` is the per-sample (and reduced) shape, ``dtype`` ``'int64'``
        (exact) or ``'float64'``, ``reduction`` ``'sum'``, ``'min'`` or ``'max'``,
        or ``'exact_sum'`` for a float64 sum that is the same to the bit at any
        world size, under any sharding and in any order (the correctly rounded
        sum; a plain float64 ``'sum'`` may differ in the last bits, see
        :mod:`mmeval.core.state`). Declare a float sum ``'exact_sum'``.
        """
        self._state_specs.append(declared(self._state_specs, name, shape, dtype, reduction, self.name))

    def _add_rows(self, **rows: Any) -> None:
        """Keep one row per sample of every declared statistic (arrays of shape (N, *shape); any numeric dtype).

        Rows stay on this rank until :meth:`compute`, which drops the padding
        and duplicates among them, reduces them and moves only the result.
        """
        check_rows(self._state_specs, rows, self.name)
        self._add_batch(**rows)

    # -- backend -----------------------------------------------------------

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

    # -- results -------------------------------------------------------------

    @property
    def _results(self) -> List[Any]:
        """Object results, one per sample (MMEval's ``self._results.append(...)`` keeps working)."""
        return self._kept.objects

    @_results.setter
    def _results(self, value: List[Any]) -> None:
        self._kept.objects = value

    @property
    def _batches(self) -> List[Dict[str, np.ndarray]]:
        """Array results, one dict of same-length columns per batch."""
        return self._kept.batches

    def _add_batch(self, **columns: Any) -> None:
        """Keep one batch of per-sample results as arrays (first axis: the sample).

        Every column must have the same length, and the same names, trailing
        shapes and dtype kinds as earlier batches. Validate before calling:
        a rejected batch leaves the state unchanged.
        """
        self._kept.add_batch(columns, self.name, self._state_specs, lambda rows: self._reduce_state(rows, None))

    def _local_results(self) -> Union[List[Any], ArrayResults]:
        return self._kept.merged()

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
                return self._compute_here(None)
            finally:
                self._kept = saved

    # -- state ---------------------------------------------------------------

    def _state_of_rows(self, rows: ArrayResults) -> Dict[str, np.ndarray]:
        """This rank's state over ``rows`` (:meth:`StateComputation._state_of_rows`; by default each declared
        state reduced over its own rows, what :meth:`_add_rows` keeps)."""
        return reduce_rows(self._state_specs, rows)

    def _reduce_state(self, rows: Optional[ArrayResults], keep: Optional[np.ndarray]) -> MetricState:
        """The local state over the rows at ``keep`` (``None``: all); identities when there are none."""
        return state_over(self._state_specs, rows, keep, self._state_of_rows)

    def _whole_state(self) -> MetricState:
        """This rank's state over every sample it added (folded in at each add: no pass over the rows)."""
        return self._kept.whole_state(self._state_specs)

    @property
    def _is_state_metric(self) -> bool:
        return self._kept.is_state(self._state_specs)

    # -- compute -------------------------------------------------------------

    #: Set ``metric.coverage = True`` (on every rank) for a :class:`~mmeval.core.sync.coverage.CoverageReport` after
    #: each :meth:`compute` in :attr:`coverage_report`, at the cost of the exchange compute() makes anyway.
    coverage: bool = False

    @property
    def coverage_report(self) -> Optional["_coverage.CoverageReport"]:
        """What the last :meth:`compute` covered (with ``coverage = True``; else ``None``).

        See :mod:`~mmeval.core.sync.coverage`.
        """
        return self.__dict__.get("_coverage_report")

    def _take_coverage(self, report: Optional["_coverage.CoverageReport"]) -> None:
        self.__dict__["_coverage_report"] = report

    def _question(self, size: Optional[int]) -> Dict[str, Any]:
        """What every rank's :meth:`compute` must agree on: the metric, its public configuration but
        ``dataset_meta``, ``logger`` and ``dist_backend``, the mode and ``size``
        (:func:`mmeval.core.identity.question_of`). Subclasses may extend it."""
        return question_of(self, size)

    def _call(self, size: Optional[int]) -> Call:
        """This ``compute(size)`` call as the paths read it (:class:`~mmeval.core.sync.protocols.Call`)."""
        return Call(self.name, self.dist_collect_mode, size, self._question(size))

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
        refused = self._refusal(size, backend)
        if not backend.is_initialized or backend.world_size == 1:
            if refused is not None:
                raise ValueError(refused)
            return self._compute_here(None if size is None else int(size))
        if refused is not None:
            refuse(backend, f"rank {backend.rank}: {refused}", self._is_state_metric, self._question(size))
        call, kept = self._call(None if size is None else int(size)), self._kept
        if self._is_state_metric:
            return compute_state(kept, self._state_specs, call, backend, self)
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

    def _refusal(self, size: Any, backend: BaseDistBackend) -> Optional[str]:
        """Why this rank cannot take part in ``compute(size)`` on ``backend`` (``None``: it can), once summarized.

        Raises at once (see :func:`~mmeval.core.sync.refusals.check_runtime`) when the named backend is not running.
        """
        check_runtime(self.name, self.dist_backend, backend)
        _coverage.start(self._take_coverage)
        try:
            self._summarize_pending()
        except Exception as exc:  # every rank must hear of it: a refusal reaches them all
            self._kept.refusals.append(f"summarizing the samples added on this rank failed: {exc!r}")
        return refusal(self.name, self._kept, size, backend)

    def _compute_here(self, size: Optional[int]) -> Dict[str, Any]:
        """:meth:`compute` in one process: duplicates of an index dropped (results in index order), or ``size``."""
        self._summarize_pending()
        kept = self._kept
        keep = kept_in_one_process(
            kept.num_results, kept.index_flag(), kept.indices(), self.dist_collect_mode, size, self.name
        )
        if self.coverage:
            _coverage.deliver(_coverage.report_here(kept, self.dist_collect_mode, size), self._take_coverage)
        if self._is_state_metric:
            return self.compute_metric(self._reduce_state(kept.rows(), keep))
        results = kept.merged()
        return self.compute_metric(results if keep is None else select(results, keep))


def _kept_of(metric: BaseMetric) -> RankResults:
    """Where ``metric`` keeps what it added (what the ``add()`` wrapper of :mod:`.sync.add_indices` is handed)."""
    return metric._kept
