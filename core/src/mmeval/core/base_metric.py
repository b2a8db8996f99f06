"""The base class of every mmeval metric: the metric API (``add`` / ``compute``) and the choice of path.

``compute()`` validates, then runs locally, through the state path
(:mod:`mmeval.core.state_sync`) or through the per-sample gather
(:mod:`mmeval.core.gather`); which samples count and in what order is
:mod:`mmeval.core.ordering`, what a rank kept :mod:`mmeval.core.results`.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import logging
from abc import ABCMeta, abstractmethod
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from .dist import _validate_name, get_default_dist_backend, get_dist_backend, launcher_environment
from .dist_backends.base_backend import BaseDistBackend
from .dist_backends.transport import asking
from .errors import RemoteMetricError, ShardingWarning
from .gather import ArrayBatches, assemble, collect, gather_and_compute, pack_exception, refuse, truncate, warn_short
from .inputs import as_indices
from .ordering import check_layout, first_occurrences, kept_by_size, kept_samples, round_robin_order, warn_sharding
from .results import ArrayResults, RankResults, select
from .state import MetricState, StateSpec, combine, reduce_rows
from .state_sync import compute_state

__all__ = ["BaseMetric", "ArrayResults", "MetricState", "RemoteMetricError", "ShardingWarning"]

_COLLECT_MODES = ("unzip", "cat")

# former private names, kept importable from here (they live in the modules named above)
_ArrayBatches, _assemble, _collect, _truncate, _select = ArrayBatches, assemble, collect, truncate, select
_unzip_permutation, _pack_exception = round_robin_order, pack_exception


class BaseMetric(metaclass=ABCMeta):
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
        if unexpected:
            raise TypeError(_unexpected_arguments(type(self), unexpected))
        if dist_collect_mode not in _COLLECT_MODES:
            raise ValueError(
                f"dist_collect_mode={dist_collect_mode!r} is not supported; use one of {list(_COLLECT_MODES)}"
            )
        if isinstance(dist_backend, str) and dist_backend != "auto":
            _validate_name(dist_backend)
        elif dist_backend is None:
            get_default_dist_backend()  # a bad MMEVAL_DIST_BACKEND raises here, naming the variable
        elif dist_backend is not None and not isinstance(dist_backend, (str, BaseDistBackend)):
            raise TypeError(
                f"dist_backend must be a backend name, a BaseDistBackend instance or None, got {dist_backend!r}"
            )
        self.dataset_meta = dataset_meta
        self.dist_collect_mode = dist_collect_mode
        self.dist_backend = dist_backend
        self.logger = logger
        #: what this rank kept since the last reset(): results, dataset indices, running state
        self._kept = RankResults()
        self._state_specs: List[StateSpec] = []
        self._adding = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        add = cls.__dict__.get("add")
        if callable(add) and not getattr(add, "__isabstractmethod__", False) \
                and not getattr(add, "_mmeval_indices", False):
            cls.add = _accepting_indices(add)  # type: ignore[method-assign]

    # -- state metrics ---------------------------------------------------------

    def _declare_state(self, name: str, shape: Tuple[int, ...] = (), dtype: str = "int64",
                       reduction: str = "sum") -> None:
        """Declare one sufficient statistic (call in ``__init__``): the metric becomes a state metric.

        ``shape`` is the per-sample (and reduced) shape, ``dtype`` ``'int64'``
        (exact) or ``'float64'`` (sums exact up to reordering, see
        :mod:`mmeval.core.state`), ``reduction`` ``'sum'``, ``'min'`` or ``'max'``.
        """
        if any(s.name == name for s in self._state_specs):
            raise ValueError(f"{self.name}: state {name!r} is declared twice")
        self._state_specs.append(StateSpec(name, tuple(int(d) for d in shape), dtype, reduction))

    def _add_rows(self, **rows: Any) -> None:
        """Keep one row per sample of every declared statistic (arrays of shape (N, *shape); any numeric dtype).

        Rows stay on this rank until :meth:`compute`, which drops the padding
        and duplicates among them, reduces them and moves only the result.
        """
        specs = {s.name: s for s in self._state_specs}
        if set(rows) != set(specs):
            raise ValueError(f"{self.name}._add_rows() needs exactly the declared states {sorted(specs)}, "
                             f"got {sorted(rows)}")
        for k, v in rows.items():
            if np.shape(v)[1:] != specs[k].shape:
                raise ValueError(f"{self.name}: rows of state {k!r} have per-sample shape {np.shape(v)[1:]}, "
                                 f"declared {specs[k].shape}")
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
        kept = self._kept
        if kept.objects:
            raise TypeError(f"{self.name}: do not mix self._results.append(...) with _add_batch(...)")
        arrays = {k: np.asarray(v) for k, v in columns.items()}
        if not arrays:
            raise ValueError(f"{self.name}._add_batch() needs at least one column")
        lengths = {k: (a.shape[0] if a.ndim else None) for k, a in arrays.items()}
        if len(set(lengths.values())) != 1 or None in lengths.values():
            raise ValueError(f"{self.name}: columns must share their first (sample) axis, got lengths {lengths}")
        if kept.batches:
            first = kept.batches[0]
            if set(first) != set(arrays):
                raise ValueError(f"{self.name}: batch columns {sorted(arrays)} differ from earlier {sorted(first)}")
            for k, a in arrays.items():
                if a.shape[1:] != first[k].shape[1:]:
                    raise ValueError(
                        f"{self.name}: column {k!r} has per-sample shape {a.shape[1:]}, earlier batches "
                        f"{first[k].shape[1:]}"
                    )
        if self._state_specs:
            batch_state = self._reduce_state(ArrayResults(arrays), None)
            kept.running = batch_state if kept.running is None else \
                combine(self._state_specs, kept.running, batch_state)
        kept.batches.append(arrays)

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
        saved, self._kept = self._kept, RankResults()
        try:
            self.add(*args, **kwargs)
            return self._compute_here(None)
        finally:
            self._kept = saved

    def _adding_rank(self) -> Optional[Tuple[int, int]]:
        """``(rank, world_size)`` of the backend now, when it runs across ranks (else ``None``)."""
        try:
            backend = self.dist_comm
            if backend.is_initialized and backend.world_size > 1:
                return (backend.rank, backend.world_size)
        except Exception:  # no backend usable yet: compute() will say why
            pass
        return None

    # -- indices ---------------------------------------------------------------

    def _state_of_rows(self, rows: ArrayResults) -> Dict[str, np.ndarray]:
        """This rank's state over ``rows`` (the per-sample rows it counts; at least one).

        By default each declared state is reduced over its own rows (what
        :meth:`_add_rows` keeps). A metric that keeps more compact per-sample
        columns with :meth:`_add_batch` (a predicted class rather than a
        one-hot row) overrides this to build its declared states from them.
        """
        return reduce_rows(self._state_specs, rows)

    def _reduce_state(self, rows: Optional[ArrayResults], keep: Optional[np.ndarray]) -> MetricState:
        """The local state over the rows at ``keep`` (``None``: all); identities when there are none."""
        if rows is not None and keep is not None:
            rows = rows.take(keep)
        if rows is None or not len(rows):
            return reduce_rows(self._state_specs, None)
        state = MetricState(self._state_of_rows(rows))
        for spec in self._state_specs:
            state[spec.name] = np.asarray(state[spec.name], dtype=spec.dtype).reshape(spec.shape)
        state.num_samples = len(rows)
        return state

    def _whole_state(self) -> MetricState:
        """This rank's state over every sample it added (folded in at each add: no pass over the rows)."""
        if self._kept.running is None or not self._kept.batches:
            return reduce_rows(self._state_specs, None)
        return self._kept.running

    def _local_rows(self) -> Optional[ArrayResults]:
        """A state metric's per-sample rows on this rank (``None``: none added)."""
        rows = self._local_results() if self._kept.batches else None
        return rows if isinstance(rows, ArrayResults) else None

    @property
    def _is_state_metric(self) -> bool:
        return bool(self._state_specs) and not self._kept.objects

    # -- compute -------------------------------------------------------------

    #: Attributes never part of the question the ranks must agree on (see :meth:`_question`).
    _NOT_ASKED = frozenset(("dataset_meta", "logger", "dist_backend", "dist_collect_mode"))

    def _question(self, size: Optional[int]) -> Dict[str, Any]:
        """What every rank's :meth:`compute` must agree on: the metric, its configuration, the mode and ``size``.

        The configuration is every public attribute holding plain data (numbers,
        strings, None, and tuples / lists / dicts of them): ``topk``, ``thrs``,
        ``average``, ... Subclasses may extend it.
        """
        question: Dict[str, Any] = {
            "metric": f"{type(self).__module__}.{type(self).__qualname__}",
            "dist_collect_mode": self.dist_collect_mode,
            "size": size,
        }
        for key, value in vars(self).items():
            if not key.startswith("_") and key not in self._NOT_ASKED and _plain(value):
                question[key] = value
        return question

    def compute(self, size: Optional[int] = None) -> Dict[str, Any]:
        """Compute the metric over every rank's results; every rank gets the result.

        First the ranks learn each other's sample counts, whether they passed
        ``indices=`` and their largest index (state metrics: inside their
        first ``all_reduce``; per-sample metrics: one tiny all-gather). Every
        collective carries the question the ranks must agree on
        (:meth:`_question`). Each rank then drops, from its own samples, those
        it must not count:

        * with indices (on every rank; ``size`` is then not used): every
          dataset index is counted once, by the lowest rank holding it, at its
          first occurrence there. The cost follows the number ``n`` of samples
          in the world, never the largest index: a dense int32 owner array
          (``all_reduce(min)``, at most ``8 n + 4 KiB`` bytes) while the
          largest index is below ``2 n + 1024``, else an all-gather of each
          rank's distinct indices (8 bytes each; see
          :func:`~mmeval.core.ordering.owned_positions`). Indices are int64:
          larger ones (a uint64 past ``2**63 - 1``) are refused at ``add()``;
        * else with ``size``: the samples lying past ``size`` in dataset order,
          from the per-rank counts and ``dist_collect_mode`` (``'unzip'``:
          round-robin, as ``DistributedSampler`` deals; ``'cat'``: contiguous
          shards).

        State metrics reduce the rows they keep and combine the states with
        ``all_reduce`` (see :meth:`_compute_state`: one reduction when every
        statistic is an int64 sum and at most ``world_size - 1`` samples a
        rank are padding; with indices three: the layout, the owner array, the
        state); every rank calls :meth:`compute_metric` on the same reduced
        state, so an exception there is raised on every rank. Per-sample
        metrics gather what they kept to rank 0 (with their indices), which
        orders it (by index, else by ``dist_collect_mode``), calls
        :meth:`compute_metric` and broadcasts the result; if it raises, every
        rank raises the same exception type and message.

        Warns (:class:`ShardingWarning`, on every rank) on more than one rank
        with ``'unzip'`` and neither ``size`` nor indices, and when more samples
        were added than ``size + world_size - 1`` without indices (one process
        included: results of an earlier evaluation not ``reset()``, a ``size``
        that is not ``len(dataset)``, batch-level sharding).

        Refusals reach every rank at once: a ``size`` that is not a positive
        int, an ``add()`` refused since the last :meth:`reset` (its batch is
        missing), or results restored from another rank's pickle make this
        rank raise ``ValueError`` and its peers
        :class:`~mmeval.core.errors.CollectiveMismatchError`, both naming the
        rank and the argument, in their first collective. A backend named
        explicitly whose runtime is not active while a launcher's variables say
        several processes run raises ``RuntimeError`` on every rank.
        """
        backend = self.dist_comm
        self._check_runtime(backend)
        refusal = self._refusal(size, backend)
        if not backend.is_initialized or backend.world_size == 1:
            if refusal is not None:
                raise ValueError(refusal)
            return self._compute_here(None if size is None else int(size))
        if refusal is not None:
            refuse(backend, f"rank {backend.rank}: {refusal}", reduction=self._is_state_metric)
        size = None if size is None else int(size)
        question = self._question(size)
        flag = self._kept.index_flag()
        indices = self._kept.indices() if flag == "all" else None
        top = int(indices.max()) if indices is not None and indices.size else -1
        if self._is_state_metric:
            return compute_state(self, backend, question, size, flag, indices, top)
        # the question rides in the header: ranks computing a different metric, configuration,
        # collect mode or size all raise CollectiveMismatchError instead of answering rank 0's question
        with asking(question):
            layout = backend.all_gather_object((self.num_results, flag, top))
        keep, indices = kept_samples(backend, question, layout, indices, self.dist_collect_mode, size, self.name)
        return gather_and_compute(self, backend, question, size, keep, indices)

    def _refusal(self, size: Any, backend: BaseDistBackend) -> Optional[str]:
        """Why this rank cannot take part in :meth:`compute` (``None``: it can), naming the argument."""
        if size is not None and (isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size <= 0):
            return f"{self.name}.compute(size={size!r}): size must be positive: an int, len(dataset), or None"
        if self._kept.refusals:
            return f"{self.name}.add() was refused since reset(): {self._kept.refusals[0]}"
        origin = self._kept.origin
        if origin is not None and backend.is_initialized and origin != (backend.rank, backend.world_size):
            return (f"{self.name} holds results added on rank {origin[0]} of {origin[1]}, restored from a pickle "
                    f"here (rank {backend.rank} of {backend.world_size}): they would count twice; reset() first")
        return None

    def _check_runtime(self, backend: BaseDistBackend) -> None:
        """Raise when a backend named explicitly is not running while a launcher started several processes."""
        named = self.dist_backend if self.dist_backend is not None else get_default_dist_backend()
        label = named if isinstance(named, str) else (backend.name or type(backend).__name__)
        if label in ("auto", "non_dist") or backend.is_initialized:
            return
        seen = launcher_environment()
        if not seen:
            return
        how = "dist_backend=" if self.dist_backend is not None else "the default backend (MMEVAL_DIST_BACKEND)"
        variables = ", ".join(f"{k}={v}" for k, v in seen.items())
        raise RuntimeError(
            f"{self.name}.compute(): {how} names the dist backend {label!r}, whose runtime is not active in "
            f"this process, while a launcher's variables say several processes run ({variables}): each rank would "
            f"answer on its own shard. Initialise that runtime in every process before compute() (e.g. "
            f"torch.distributed.init_process_group for torch_cpu, the launcher's MPI for mpi4py, hvd.init() for "
            f"Horovod), name the backend of the launcher you use, or dist_backend='non_dist' for one answer per process"
        )

    def _compute_here(self, size: Optional[int]) -> Dict[str, Any]:
        """:meth:`compute` in one process: duplicates of an index dropped (results in index order), or ``size``."""
        kept = self._kept
        check_layout([(self.num_results, kept.index_flag(), -1)], self.name)
        if kept.index_flag() == "all":
            indices = kept.indices()
            keep = first_occurrences(indices)
            keep = keep[np.argsort(indices[keep], kind="stable")]
            if self._is_state_metric:
                return self.compute_metric(self._reduce_state(self._local_rows(), keep))
            return self.compute_metric(select(self._local_results(), keep))
        n = self.num_results
        warn_sharding([n], self.dist_collect_mode, size, self.name)
        if self._is_state_metric:
            if size is not None and size > n:
                warn_short(self.name, size, n)
            sel = kept_by_size([n], 0, self.dist_collect_mode, size)
            return self.compute_metric(self._reduce_state(self._local_rows(), sel))
        return self.compute_metric(truncate(self._local_results(), size, self.name))


def _accepting_indices(add: Callable[..., None]) -> Callable[..., None]:
    """``add`` that also takes ``indices=`` (one dataset index per sample it adds), checked and kept.

    The wrapper's signature (``inspect.signature``, ``help()``) is ``add``'s
    with a keyword-only ``indices=None``. A refused batch keeps nothing of it,
    and a refusal of its indices is remembered until :meth:`BaseMetric.reset`:
    :meth:`BaseMetric.compute` then fails on every rank instead of answering
    without the batch.
    """

    @functools.wraps(add)
    def add_with_indices(self: BaseMetric, *args: Any, indices: Any = None, **kwargs: Any) -> None:
        if self._adding:  # a subclass's add() calling super().add(): the outermost call keeps the indices
            add(self, *args, **kwargs)
            return
        kept = self._kept
        try:
            idx = None if indices is None else as_indices(indices, f"{self.name}.add(indices=...)")
        except ValueError as exc:
            kept.refusals.append(str(exc))
            raise
        nb, nr, before, running = len(kept.batches), len(kept.objects), kept.num_results, kept.running
        self._adding = True
        try:
            add(self, *args, **kwargs)
        finally:
            self._adding = False
        added = kept.num_results - before
        if idx is not None and idx.shape[0] != added:
            kept.truncate(nb, nr)  # keep nothing of it
            kept.running = running
            message = (f"{self.name}.add(): indices= has {idx.shape[0]} dataset indices for a batch of "
                       f"{added} samples; pass one index per sample")
            kept.refusals.append(message)
            raise ValueError(message)
        if added:
            if kept.origin is None and not kept.index_parts:
                kept.origin = self._adding_rank()
            kept.index_parts.append((added, idx))

    add_with_indices._mmeval_indices = True  # type: ignore[attr-defined]
    add_with_indices.__signature__ = _with_indices(add)  # type: ignore[attr-defined]
    return add_with_indices


def _with_indices(add: Callable[..., None]) -> inspect.Signature:
    """``add``'s signature with a keyword-only ``indices=None`` (before ``**kwargs``, if any)."""
    sig = inspect.signature(add)
    if "indices" in sig.parameters:
        return sig
    params = list(sig.parameters.values())
    new = inspect.Parameter("indices", inspect.Parameter.KEYWORD_ONLY, default=None)
    at = len(params) - 1 if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD else len(params)
    return sig.replace(parameters=[*params[:at], new, *params[at:]])


def _unexpected_arguments(cls: type, unexpected: Dict[str, Any]) -> str:
    """``Accuracy() got an unexpected keyword argument 'top_k'; did you mean 'topk'?``"""
    known: List[str] = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None and klass is not object:
            known += [p.name for p in inspect.signature(init).parameters.values()
                      if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"]
    lines = []
    for key in unexpected:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; it takes {sorted(set(known))}"
        lines.append(f"{cls.__name__}() got an unexpected keyword argument {key!r}{hint}")
    return " ".join(lines)


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is small plain data whose ``repr`` is the same on every rank."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if depth < 2 and isinstance(value, (tuple, list)) and len(value) <= 64:
        return all(_plain(v, depth + 1) for v in value)
    if depth < 2 and isinstance(value, dict) and len(value) <= 64:
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


