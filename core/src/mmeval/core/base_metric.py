"""The base class of every mmeval metric."""

from __future__ import annotations

import functools
import itertools
import logging
import pickle
import sys
import warnings
from abc import ABCMeta, abstractmethod
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .dist import _validate_name, get_default_dist_backend, get_dist_backend
from .dist_backends.base_backend import BaseDistBackend
from .dist_backends.transport import asking
from .errors import (
    CollectiveFailedError,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    RemoteMetricError,
    RemoteSerializationError,
    ShardingWarning,
)
from .sample_index import (
    as_indices,
    check_layout,
    kept_by_size,
    kept_count,
    owned_first,
    warn_sharding,
)
from .state import MetricState, StateSpec, combine, pack, reduce_rows, unpack

__all__ = ["BaseMetric", "ArrayResults", "MetricState", "RemoteMetricError", "ShardingWarning"]

logger = logging.getLogger("mmeval")

_COLLECT_MODES = ("unzip", "cat")


class ArrayResults(Dict[str, np.ndarray]):
    """Per-sample results kept as arrays: name -> array whose first axis is the sample.

    ``len()`` is the number of samples. Metrics that call
    :meth:`BaseMetric._add_batch` receive one of these in ``compute_metric``.
    """

    def __len__(self) -> int:
        for value in self.values():
            return int(value.shape[0])
        return 0

    @property
    def num_samples(self) -> int:
        return len(self)

    def take(self, index: Any) -> "ArrayResults":
        """Select samples (a slice or an index array) from every column."""
        return ArrayResults({k: v[index] for k, v in self.items()})


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
    ) -> None:
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
        self._results: List[Any] = []
        self._batches: List[Dict[str, np.ndarray]] = []
        self._state_specs: List[StateSpec] = []
        #: (samples added, their dataset indices or None) for each add() call
        self._index_parts: List[Tuple[int, Optional[np.ndarray]]] = []
        self._adding = False
        #: a state metric's state over every sample added so far, folded in at each add(): compute()
        #: then costs the same at a hundred samples and at a million (None: nothing folded yet)
        self._running: Optional[MetricState] = None

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

    def _add_batch(self, **columns: Any) -> None:
        """Keep one batch of per-sample results as arrays (first axis: the sample).

        Every column must have the same length, and the same names, trailing
        shapes and dtype kinds as earlier batches. Validate before calling:
        a rejected batch leaves the state unchanged.
        """
        if self._results:
            raise TypeError(f"{self.name}: do not mix self._results.append(...) with _add_batch(...)")
        arrays = {k: np.asarray(v) for k, v in columns.items()}
        if not arrays:
            raise ValueError(f"{self.name}._add_batch() needs at least one column")
        lengths = {k: (a.shape[0] if a.ndim else None) for k, a in arrays.items()}
        if len(set(lengths.values())) != 1 or None in lengths.values():
            raise ValueError(f"{self.name}: columns must share their first (sample) axis, got lengths {lengths}")
        if self._batches:
            first = self._batches[0]
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
            self._running = batch_state if self._running is None else \
                combine(self._state_specs, self._running, batch_state)
        self._batches.append(arrays)

    def _local_results(self) -> Union[List[Any], ArrayResults]:
        if not self._batches:
            return self._results
        if len(self._batches) == 1:
            return ArrayResults(self._batches[0])
        keys = list(self._batches[0])
        merged = ArrayResults({k: np.concatenate([b[k] for b in self._batches]) for k in keys})
        self._batches = [dict(merged)]  # keep the concatenation: compute() may be called again
        return merged

    @property
    def num_results(self) -> int:
        """How many per-sample results this rank holds."""
        if self._batches:
            return sum(int(next(iter(b.values())).shape[0]) for b in self._batches)
        return len(self._results)

    def reset(self) -> None:
        """Drop the accumulated results."""
        self._results = []
        self._batches = []
        self._index_parts = []
        self._running = None

    def __call__(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        """Stateless: compute the metric of this one call's inputs, locally, leaving the state alone."""
        saved = (self._results, self._batches, self._index_parts, self._running)
        self._results, self._batches, self._index_parts, self._running = [], [], [], None
        try:
            self.add(*args, **kwargs)
            return self._compute_here(None)
        finally:
            self._results, self._batches, self._index_parts, self._running = saved

    # -- indices ---------------------------------------------------------------

    def _index_flag(self) -> str:
        """``'all'``, ``'none'``, ``'mixed'`` (indices on some add() calls only) or ``'empty'`` (nothing added)."""
        n = self.num_results
        if n == 0:
            return "empty"
        given = [idx is not None for _, idx in self._index_parts]
        if all(given) and sum(c for c, _ in self._index_parts) == n:
            return "all"
        return "none" if not any(given) else "mixed"

    def _local_indices(self) -> np.ndarray:
        parts = [idx for _, idx in self._index_parts if idx is not None]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

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
        if self._running is None or not self._batches:
            return reduce_rows(self._state_specs, None)
        return self._running

    def _last_rows(self, m: int) -> ArrayResults:
        """The last ``m`` samples' rows (``m`` at most :attr:`num_results`), read from the last batches only."""
        taken: List[Dict[str, np.ndarray]] = []
        need = m
        for batch in reversed(self._batches):
            if need <= 0:
                break
            n = int(next(iter(batch.values())).shape[0])
            take = min(n, need)
            taken.append({k: v[n - take :] for k, v in batch.items()})
            need -= take
        taken.reverse()
        return ArrayResults({k: np.concatenate([b[k] for b in taken]) for k in taken[0]})

    def _local_rows(self) -> Optional[ArrayResults]:
        """A state metric's per-sample rows on this rank (``None``: none added)."""
        rows = self._local_results() if self._batches else None
        return rows if isinstance(rows, ArrayResults) else None

    @property
    def _is_state_metric(self) -> bool:
        return bool(self._state_specs) and not self._results

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
          dataset index is counted once, by the lowest rank holding it (an
          ``all_reduce(min)`` of an int32 owner array: ``4 * (max index + 1)``
          bytes per rank), at its first occurrence there;
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
        were added than ``size + world_size - 1`` without indices.
        """
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
                raise ValueError(f"{self.name}.compute(size={size!r}): size must be a non-negative int or None")
            size = int(size)
        backend = self.dist_comm
        if not backend.is_initialized or backend.world_size == 1:
            return self._compute_here(size)
        question = self._question(size)
        flag = self._index_flag()
        indices = self._local_indices() if flag == "all" else None
        top = int(indices.max()) if indices is not None and indices.size else -1
        if self._is_state_metric:
            return self._compute_state(backend, question, size, flag, indices, top)
        # the question rides in the header: ranks computing a different metric, configuration,
        # collect mode or size all raise CollectiveMismatchError instead of answering rank 0's question
        with asking(question):
            layout = backend.all_gather_object((self.num_results, flag, top))
        keep, indices = self._selection(backend, question, size, layout, indices)
        return self._gather_and_compute(backend, question, size, keep, indices)

    def _selection(self, backend: BaseDistBackend, question: Dict[str, Any], size: Optional[int],
                   layout: List[Tuple[int, str, int]], indices: Optional[np.ndarray]
                   ) -> Tuple[Optional[np.ndarray], Optional[np.ndarray]]:
        """This rank's samples to count (``None``: all) and, when the ranks gave indices, its indices."""
        rank, ws = backend.rank, backend.world_size
        counts = [int(c) for c, _, _ in layout]
        if not check_layout(layout, self.name):
            warn_sharding(counts, self.dist_collect_mode, size, self.name)
            return kept_by_size(counts, rank, self.dist_collect_mode, size), None
        own = np.zeros(0, dtype=np.int64) if indices is None else indices
        claims = np.full(max(m for _, _, m in layout) + 1, ws, dtype=np.int32)
        claims[own] = rank
        with asking(question):
            owner = backend.all_reduce(claims, op="min")
        return owned_first(own, owner, rank), own

    def _compute_state(self, backend: BaseDistBackend, question: Dict[str, Any], size: Optional[int], flag: str,
                       indices: Optional[np.ndarray], top: int) -> Dict[str, Any]:
        """The state path: normally one int64 ``all_reduce`` carrying the layout, the state and the last rows.

        The first reduction carries every rank's count, index flag and
        largest index (in its own slots), the int64 sums over all its rows,
        and -- when every statistic is an int64 sum and it fits
        :data:`_TAIL_BUDGET` -- its last ``world_size - 1`` rows, so that the
        padding ``size`` cuts (at most ``world_size - 1`` samples a rank under
        ``DistributedSampler``) is subtracted without a second round. Otherwise
        (indices, min / max / float statistics, more to drop) a second round
        reduces the rows each rank keeps.
        """
        rank, ws = backend.rank, backend.world_size
        specs = self._state_specs
        n = self.num_results
        sums_only = all((s.dtype, s.reduction) == ("int64", "sum") for s in specs)
        width = sum(int(np.prod(s.shape, dtype=np.int64)) for s in specs) + 1  # + the sample count
        tail = ws - 1 if sums_only and ws * (ws - 1) * width * 8 <= _TAIL_BUDGET else 0
        head = np.zeros(3 * ws, dtype=np.int64)
        head[[rank, ws + rank, 2 * ws + rank]] = n, _FLAGS.index(flag), top
        parts = [head]
        if sums_only:
            parts.append(pack(specs, self._whole_state())[("int64", "sum")])
            last = np.zeros((ws, tail, width), dtype=np.int64)
            m = min(tail, n)
            if m:
                rows_m = self._last_rows(m)
                last[rank, tail - m:] = [pack(specs, self._reduce_state(rows_m, np.array([i])))[("int64", "sum")]
                                          for i in range(m)]
            parts.append(last.ravel())
        with asking(question):
            first = backend.all_reduce(np.concatenate(parts), op="sum")
        layout = [(int(first[r]), _FLAGS[int(first[ws + r])], int(first[2 * ws + r])) for r in range(ws)]
        counts = [c for c, _, _ in layout]
        by_index = check_layout(layout, self.name)  # raises on every rank when only some gave indices
        if size is not None and size > sum(counts) and not by_index:
            _warn_short(self.name, size, sum(counts))
        if sums_only and not by_index:
            dropped = [c - kept_count(counts, r, self.dist_collect_mode, size) for r, c in enumerate(counts)]
            if max(dropped) <= tail:
                warn_sharding(counts, self.dist_collect_mode, size, self.name)
                total = first[3 * ws : 3 * ws + width].copy()
                last_all = first[3 * ws + width :].reshape(ws, tail, width)
                for r, d in enumerate(dropped):
                    total -= last_all[r, tail - d :].sum(axis=0)
                return self.compute_metric(unpack(specs, {("int64", "sum"): total}))
        keep, _ = self._selection(backend, question, size, layout, indices)
        state = self._whole_state() if keep is None else self._reduce_state(self._local_rows(), keep)
        with asking(question):
            packed = {key: backend.all_reduce(flat, op=key[1]) for key, flat in pack(specs, state).items()}
        return self.compute_metric(unpack(specs, packed))

    def _compute_here(self, size: Optional[int]) -> Dict[str, Any]:
        """:meth:`compute` in one process: duplicates of an index dropped (results in index order), or ``size``."""
        check_layout([(self.num_results, self._index_flag(), -1)], self.name)
        if self._index_flag() == "all":
            indices = self._local_indices()
            keep = owned_first(indices, np.zeros(int(indices.max()) + 1, dtype=np.int64), 0)
            keep = keep[np.argsort(indices[keep], kind="stable")]
            if self._is_state_metric:
                return self.compute_metric(self._reduce_state(self._local_rows(), keep))
            return self.compute_metric(_select(self._local_results(), keep))
        if self._is_state_metric:
            n = self.num_results
            if size is not None and size > n:
                _warn_short(self.name, size, n)
            sel = kept_by_size([n], 0, self.dist_collect_mode, size)
            rows = self._local_rows()
            return self.compute_metric(self._reduce_state(rows, sel))
        return self.compute_metric(_truncate(self._local_results(), size, self.name))

    def _gather_and_compute(self, backend: BaseDistBackend, question: Dict[str, Any], size: Optional[int],
                            keep: Optional[np.ndarray], indices: Optional[np.ndarray]) -> Dict[str, Any]:
        """The per-sample path: what this rank keeps goes to rank 0, which computes and broadcasts the result."""
        computes = backend.rank == 0
        # the safe codec moves plain data only: array results travel as a plain dict, and an error
        # report's pickled exception is never unpickled (a hostile rank 0 could run code with it)
        plain = _plain_data_only(backend)
        # rank 0 keeps its own array results out of the gather (no serialized copy of them): they go
        # straight from its batches to their places in the output (see _assemble)
        own = computes and _sendable_batches(self._batches)
        local: Any
        if own:
            local = None
        elif keep is not None:
            local = _select(self._local_results(), keep)
        elif computes or plain or not 1 < len(self._batches) <= _MAX_SENT_BATCHES:
            local = self._local_results()
        else:
            # the ranks that only send do not merge their batches first: the frame takes them as they
            # are, and rank 0 joins them while decoding (their peak memory stays ~1x their results)
            local = _ArrayBatches(self._batches)
        if plain and isinstance(local, ArrayResults):
            local = dict(local)
        payload = local if indices is None or own else (local, indices if keep is None else indices[keep])
        try:
            with asking(question):
                gathered = backend.gather_object(payload, dst=0)
        except _SHARED_FAILURES:
            raise  # every rank of the group raises these together
        except Exception as exc:
            # a failure of this rank alone (e.g. rank 0 could not decode a peer's results): tell the
            # others, who would otherwise wait in the broadcast below for the whole timeout
            if computes:
                _broadcast_failure(backend, exc)
            raise
        if computes:
            assert gathered is not None
            try:
                if indices is not None:
                    mine = indices if keep is None else indices[keep]
                    gathered = [(None, mine) if own and r == 0 else g for r, g in enumerate(gathered)]
                received = [g if indices is None else g[0] for g in gathered]
                parts = [ArrayResults(p) if plain and type(p) is dict else p for p in received]
                if own:
                    parts[0] = _ArrayBatches(self._batches)
                by_index = None if indices is None else [np.asarray(i, dtype=np.int64) for _, i in gathered]
                del gathered, received
                # each output column built once, in its final order, from the received arrays (views of
                # the receive buffer) and rank 0's own batches; the received ones are released before
                # compute_metric runs
                assembled = _assemble(parts, keep if own else None, by_index, self.dist_collect_mode, self.name)
                if assembled is not None:
                    del parts
                    collected = assembled if indices is not None else _truncate(assembled, size, self.name)
                elif indices is None:
                    collected = _truncate(_collect(parts, self.dist_collect_mode, self.name), size, self.name)
                else:
                    assert by_index is not None
                    order = np.argsort(np.concatenate(by_index), kind="stable")
                    collected = _select(_collect(parts, "cat", self.name), order)
                del assembled, by_index
                result = self.compute_metric(collected)
            except Exception as exc:
                backend.broadcast_object(("error", _pack_exception(exc)), src=0)
                raise
            backend.broadcast_object(("ok", result), src=0)
            return result
        status, value = backend.broadcast_object(None, src=0)
        if status == "error":
            raise _unpack_exception(value, self.name, trusted=not plain)
        return value  # type: ignore[no-any-return]


#: Index flags as the state path's first reduction carries them (see BaseMetric._index_flag).
_FLAGS = ("empty", "none", "all", "mixed")
#: Bytes of last rows the state path's first reduction may carry (see BaseMetric._compute_state).
_TAIL_BUDGET = 2048


def _accepting_indices(add: Callable[..., None]) -> Callable[..., None]:
    """``add`` that also takes ``indices=`` (one dataset index per sample it adds), checked and kept."""

    @functools.wraps(add)
    def add_with_indices(self: BaseMetric, *args: Any, indices: Any = None, **kwargs: Any) -> None:
        if self._adding:  # a subclass's add() calling super().add(): the outermost call keeps the indices
            add(self, *args, **kwargs)
            return
        idx = None if indices is None else as_indices(indices, f"{self.name}.add(indices=...)")
        nb, nr, before = len(self._batches), len(self._results), self.num_results
        self._adding = True
        try:
            add(self, *args, **kwargs)
        finally:
            self._adding = False
        added = self.num_results - before
        if idx is not None and idx.shape[0] != added:
            self._batches, self._results = self._batches[:nb], self._results[:nr]  # keep nothing of it
            raise ValueError(f"{self.name}.add(): indices= has {idx.shape[0]} dataset indices for a batch of "
                             f"{added} samples; pass one index per sample")
        if added:
            self._index_parts.append((added, idx))

    add_with_indices._mmeval_indices = True  # type: ignore[attr-defined]
    return add_with_indices


def _warn_short(name: str, size: int, n: int) -> None:
    warnings.warn(f"{name}.compute(size={size}): only {n} results were collected; computing on all {n}",
                  RuntimeWarning, stacklevel=4)


def _select(results: Any, keep: np.ndarray) -> Any:
    """The results at ``keep`` (a boolean mask or positions), arrays or a list."""
    if isinstance(results, ArrayResults):
        return results.take(keep)
    positions = np.flatnonzero(keep) if keep.dtype == bool else keep
    return [results[int(i)] for i in positions]


# --------------------------------------------------------------------------
# collection
# --------------------------------------------------------------------------

#: Ranks that only send their array results send up to this many batches unmerged.
_MAX_SENT_BATCHES = 1024


class _ArrayBatches:
    """A rank's array results as the batches it kept (each a dict of same-length columns).

    Sending the batches as they are spares the sending rank a concatenated copy
    of its results (each batch array travels out-of-band, copied once into the
    transport's buffer); the receiving rank gets them back as an
    :class:`_ArrayBatches` of views of its receive buffer, which
    :func:`_assemble` copies once, straight to their places in the output.
    """

    __slots__ = ("batches",)

    def __init__(self, batches: List[Dict[str, np.ndarray]]) -> None:
        self.batches = batches

    def __reduce__(self) -> Any:
        keys = tuple(self.batches[0])
        arrays = [batch[k] for k in keys for batch in self.batches]  # key-major
        return _join_batches, (keys, len(self.batches), *arrays)


def _join_batches(keys: Sequence[str], count: int, *arrays: np.ndarray) -> _ArrayBatches:
    """Inverse of :class:`_ArrayBatches.__reduce__`: the batches again, their arrays as received (not copied)."""
    return _ArrayBatches([{k: arrays[i * count + b] for i, k in enumerate(keys)} for b in range(count)])


def _sendable_batches(batches: List[Dict[str, np.ndarray]]) -> bool:
    """Whether ``batches`` are array results of plain dtypes (every codec carries them: rank 0 may keep them)."""
    return bool(batches) and all(
        a.dtype.kind in "biufcmM" and a.dtype.fields is None for batch in batches for a in batch.values()
    )


def _pieces(part: Any) -> Optional[List[Mapping[str, np.ndarray]]]:
    """A rank's array results as the pieces they arrived in; ``None`` for object results (a list)."""
    if isinstance(part, _ArrayBatches):
        return list(part.batches)
    if isinstance(part, dict):
        return [part]
    return None


def _rows(piece: Mapping[str, np.ndarray]) -> int:
    return int(next(iter(piece.values())).shape[0])


def _kept_spans(pieces: List[Mapping[str, np.ndarray]], keep: Optional[np.ndarray]
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


class _Placement:
    """Where each rank's j-th kept row goes in the output (dataset order), without a permutation of all rows.

    ``'cat'``: rank after rank. ``'unzip'``: round-robin over the ranks that
    have rows; rows below the smallest count are a strided slice, the rest
    (uneven shards) are placed by :func:`~mmeval.core.sample_index` arithmetic.
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
        nonzero = [c for c in counts if c]
        self.ranks = len(nonzero)
        self.even = min(nonzero) if nonzero else 0  # rows below this are dealt one per rank with rows

    def spans(self, rank: int, a: int, b: int) -> List[Tuple[Union[slice, np.ndarray], slice]]:
        """(output positions, span of rows a..b) pairs covering this rank's kept rows ``a:b``."""
        off = int(self.offsets[rank])
        if self.sorted is not None and self.by_index is not None:
            return [(np.searchsorted(self.sorted, self.by_index[rank][a:b]), slice(0, b - a))]
        if self.dest is not None:
            return [(self.dest[off + a : off + b], slice(0, b - a))]
        if self.mode == "cat":
            return [(slice(off + a, off + b), slice(0, b - a))]
        out: List[Tuple[Union[slice, np.ndarray], slice]] = []
        mid = min(max(a, self.even), b)
        if mid > a:
            before = sum(1 for c in self.counts[:rank] if c)
            k = self.ranks
            out.append((slice(a * k + before, (mid - 1) * k + before + 1, k), slice(0, mid - a)))
        if b > mid:
            j = np.arange(mid, b, dtype=np.int64)
            pos = np.zeros_like(j)
            for r, c in enumerate(self.counts):
                pos += np.minimum(j, c)
                if r < rank:
                    pos += j < c
            out.append((pos, slice(mid - a, b - a)))
        return out


def _assemble(parts: List[Any], own_keep: Optional[np.ndarray], by_index: Optional[List[np.ndarray]], mode: str,
              name: str) -> Optional[ArrayResults]:
    """Every rank's array results in dataset order, each column allocated once and filled in place.

    ``parts[r]`` is rank ``r``'s results: a dict / :class:`ArrayResults` (one
    piece), an :class:`_ArrayBatches` (its batches; received ones are views
    of the receive buffer) or a list (object results). ``own_keep`` selects
    the rows of ``parts[0]`` to count (``None``: all; the others arrive
    already selected). With ``by_index`` (each rank's dataset indices of its
    rows) the output is in index order, else in ``mode`` order. Returns
    ``None`` when no rank has array results (object results: see
    :func:`_collect`). The result equals ``_collect`` (then ``_select`` by
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
    for k in keys:
        arrays = [piece[k] for p in sources for piece in p]
        trailing = {a.shape[1:] for a in arrays}
        if len(trailing) > 1:
            raise ValueError(f"{name}: column {k!r} has different per-sample shapes on different ranks "
                             f"({sorted(trailing)}); every rank must keep the same shapes")
        out[k] = np.empty((total, *arrays[0].shape[1:]), dtype=np.result_type(*arrays))
    place = _Placement(counts, mode, by_index)
    for r, rank_spans in enumerate(spans):
        j = 0
        for piece, sel in rank_spans:
            n = _span_rows(sel)
            for dest, part in place.spans(r, j, j + n):
                src = sel[part] if isinstance(sel, np.ndarray) else slice(sel.start + part.start,
                                                                          sel.start + part.stop)
                for k in keys:
                    out[k][dest] = piece[k][src]
            j += n
    return ArrayResults(out)


def _span_rows(sel: Union[slice, np.ndarray]) -> int:
    """How many rows a span (a slice or positions) of a piece selects."""
    return len(sel) if isinstance(sel, np.ndarray) else int(sel.stop - sel.start)



def _truncate(results: Union[List[Any], ArrayResults], size: Optional[int], name: str) -> Any:
    if size is None:
        return results
    n = len(results)
    if size > n:
        warnings.warn(
            f"{name}.compute(size={size}): only {n} results were collected; computing on all {n}",
            RuntimeWarning,
            stacklevel=3,
        )
        return results
    if isinstance(results, ArrayResults):
        return results.take(slice(0, size))
    return results[:size]


def _collect(parts: Sequence[Any], mode: str, name: str) -> Union[List[Any], ArrayResults]:
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
        perm = _unzip_permutation(counts)
        return ArrayResults({k: v[perm] for k, v in cols.items()})
    lists = [list(p) if not isinstance(p, list) else p for p in parts]
    if mode == "cat":
        return list(itertools.chain.from_iterable(lists))
    return list(_round_robin(lists))


def _round_robin(lists: List[List[Any]]) -> Iterator[Any]:
    """Item j of every rank in rank order, for j = 0, 1, ...; exhausted ranks drop out."""
    counts = [len(p) for p in lists]
    if len(set(counts)) == 1:
        for group in zip(*lists):
            yield from group
        return
    active = list(range(len(lists)))
    for j in range(max(counts)):
        if any(counts[r] <= j for r in active):
            active = [r for r in active if counts[r] > j]
        for r in active:
            yield lists[r][j]


def _unzip_permutation(counts: List[int]) -> np.ndarray:
    """Permutation putting rank-concatenated samples into round-robin order."""
    ws = len(counts)
    total = sum(counts)
    # key of item j on rank r is j * ws + r: round-robin order is key order
    keys = np.concatenate([np.arange(c, dtype=np.int64) * ws + r for r, c in enumerate(counts)])
    span = max(counts) * ws
    if span <= 2 * total:  # near-balanced: counting placement, linear
        where = np.full(span, -1, dtype=np.int64)
        where[keys] = np.arange(total, dtype=np.int64)
        return where[where >= 0]
    return np.argsort(keys, kind="stable")


# --------------------------------------------------------------------------
# errors of compute_metric
# --------------------------------------------------------------------------


#: Collective errors that every rank of the group raises together (nothing more to tell the others).
def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is small plain data whose ``repr`` is the same on every rank."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if depth < 2 and isinstance(value, (tuple, list)) and len(value) <= 64:
        return all(_plain(v, depth + 1) for v in value)
    if depth < 2 and isinstance(value, dict) and len(value) <= 64:
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _plain_data_only(backend: BaseDistBackend) -> bool:
    """Whether the backend's codec carries plain data only (then no arbitrary object or pickled exception)."""
    codec = getattr(backend, "wire_codec", None)
    return bool(getattr(codec, "plain_data_only", False))


_SHARED_FAILURES = (RemoteSerializationError, CollectiveMismatchError, CollectiveTimeoutError, CollectiveFailedError)


def _broadcast_failure(backend: BaseDistBackend, exc: BaseException) -> None:
    try:
        backend.broadcast_object(("error", _pack_exception(exc)), src=0)
    except Exception as second:  # the others are gone too: keep the original error
        logger.debug("mmeval: could not tell the other ranks about %r: %s", exc, second)


def _pack_exception(exc: BaseException) -> Dict[str, Any]:
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


def _unpack_exception(packed: Mapping[str, Any], name: str, trusted: bool = True) -> BaseException:
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
    return RemoteMetricError(
        f"{packed['type']}: {packed['message']} ({note})", packed["type"], packed["message"]
    )
