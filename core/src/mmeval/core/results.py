"""What one rank kept between ``reset()`` calls: its per-sample results, their dataset indices, a running state.

:class:`RankResults` is the one place a metric's accumulated data lives
(``BaseMetric`` holds one); :class:`ArrayResults` is how array results reach
``compute_metric``. The methods a metric keeps its data with -- object results,
array batches, declared statistics and their rows (:class:`KeepsResults`),
samples summarized later (:class:`KeepsSummaries`) -- are here too, inherited by
``BaseMetric``. Nothing here talks to other ranks.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .state import MetricState, StateSpec, check_rows, combine, declared, reduce_rows

__all__ = ["ArrayResults", "KeepsResults", "KeepsSummaries", "RankResults", "StateOfRows", "select", "state_over"]

#: How a metric turns the per-sample rows it counts into its declared states (``BaseMetric._state_of_rows``).
StateOfRows = Callable[["ArrayResults"], Dict[str, np.ndarray]]


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


def select(results: Any, keep: np.ndarray) -> Any:
    """The results at ``keep`` (a boolean mask or positions), arrays or a list."""
    if isinstance(results, ArrayResults):
        return results.take(keep)
    positions = np.flatnonzero(keep) if keep.dtype == bool else keep
    return [results[int(i)] for i in positions]


def state_over(
    specs: Sequence[StateSpec], rows: Optional["ArrayResults"], keep: Optional[np.ndarray], state_of_rows: StateOfRows
) -> MetricState:
    """A rank's state over the rows at ``keep`` (``None``: all), built by ``state_of_rows``; identities for none.

    Each declared statistic comes back in its declared dtype and shape (an
    ``exact_sum`` statistic with its exact accumulator), with ``num_samples``.
    """
    if rows is not None and keep is not None:
        rows = rows.take(keep)
    if rows is None or not len(rows):
        return reduce_rows(specs, None)
    reduced = state_of_rows(rows)
    state = MetricState(reduced)
    state.exact = dict(getattr(reduced, "exact", {}))  # exact_sum statistics keep their exact accumulators
    for spec in specs:
        state[spec.name] = np.asarray(state[spec.name], dtype=spec.dtype).reshape(spec.shape)
    state.num_samples = len(rows)
    return state


def _rows(batch: Dict[str, np.ndarray]) -> int:
    return int(next(iter(batch.values())).shape[0])


class RankResults:
    """One rank's accumulated data: exactly one of object results (``objects``) or array batches (``batches``).

    Attributes:
        objects: one Python object per sample (MMEval's ``self._results``).
        batches: array results, a dict of same-length columns per ``add()``.
        index_parts: ``(samples added, their dataset indices or None)`` per ``add()``.
        running: a state metric's state over every sample added, folded in at each
            ``add()`` (``None``: nothing folded yet), so ``compute()`` costs the
            same at a hundred samples and at a million.
        origin: ``(rank, world_size)`` of the process that added the first result
            (``None``: not known, or a single process). A metric pickled on one
            rank and restored on another carries it; ``compute()`` refuses to
            count such results a second time.
        refusals: why ``add()`` calls were refused since the last ``reset()``: a
            batch left out makes ``compute()`` fail on every rank instead of
            answering on fewer samples.
        pending: ``(position in objects, sample)`` of samples kept to be summarized later, in bulk
            (see :meth:`BaseMetric._keep_to_summarize`); their places in ``objects`` hold ``None``
            until then.
    """

    __slots__ = ("objects", "batches", "index_parts", "running", "origin", "refusals", "pending")

    def __init__(self) -> None:
        self.objects: List[Any] = []
        self.batches: List[Dict[str, np.ndarray]] = []
        self.index_parts: List[Tuple[int, Optional[np.ndarray]]] = []
        self.running: Optional[MetricState] = None
        self.origin: Optional[Tuple[int, int]] = None
        self.refusals: List[str] = []
        self.pending: List[Tuple[int, Any]] = []

    @property
    def num_results(self) -> int:
        """How many per-sample results this rank holds."""
        if self.batches:
            return sum(_rows(b) for b in self.batches)
        return len(self.objects)

    def add_batch(
        self,
        columns: Dict[str, Any],
        name: str,
        specs: Sequence[StateSpec],
        reduce: Callable[[ArrayResults], MetricState],
    ) -> None:
        """Keep one batch of array results (first axis: the sample), folding a state metric's state in.

        Every column must have the same length, and the same names and
        trailing shapes as earlier batches; a refused batch changes nothing.
        ``reduce`` gives the batch's state when ``specs`` (the declared
        statistics) are not empty.
        """
        if self.objects:
            raise TypeError(f"{name}: do not mix self._results.append(...) with _add_batch(...)")
        arrays = {k: np.asarray(v) for k, v in columns.items()}
        if not arrays:
            raise ValueError(f"{name}._add_batch() needs at least one column")
        lengths = {k: (a.shape[0] if a.ndim else None) for k, a in arrays.items()}
        if len(set(lengths.values())) != 1 or None in lengths.values():
            raise ValueError(f"{name}: columns must share their first (sample) axis, got lengths {lengths}")
        if self.batches:
            first = self.batches[0]
            if set(first) != set(arrays):
                raise ValueError(f"{name}: batch columns {sorted(arrays)} differ from earlier {sorted(first)}")
            for k, a in arrays.items():
                if a.shape[1:] != first[k].shape[1:]:
                    raise ValueError(
                        f"{name}: column {k!r} has per-sample shape {a.shape[1:]}, earlier batches {first[k].shape[1:]}"
                    )
        if specs:
            batch_state = reduce(ArrayResults(arrays))
            self.running = batch_state if self.running is None else combine(specs, self.running, batch_state)
        self.batches.append(arrays)

    def merged(self) -> Union[List[Any], ArrayResults]:
        """The results: the object list, or the batches as one :class:`ArrayResults` (kept merged)."""
        if not self.batches:
            return self.objects
        if len(self.batches) == 1:
            return ArrayResults(self.batches[0])
        keys = list(self.batches[0])
        merged = ArrayResults({k: np.concatenate([b[k] for b in self.batches]) for k in keys})
        self.batches = [dict(merged)]  # keep the concatenation: compute() may be called again
        return merged

    def rows(self) -> Optional[ArrayResults]:
        """A state metric's per-sample rows, merged (``None``: no array results kept)."""
        rows = self.merged() if self.batches else None
        return rows if isinstance(rows, ArrayResults) else None

    def whole_state(self, specs: Sequence[StateSpec]) -> MetricState:
        """The state over every sample kept (folded in at each ``add_batch``: no pass over the rows)."""
        if self.running is None or not self.batches:
            return reduce_rows(specs, None)
        return self.running

    def is_state(self, specs: Sequence[StateSpec]) -> bool:
        """Whether these results take the state path: statistics declared and no object results kept."""
        return bool(specs) and not self.objects

    # -- samples kept to be summarized later, in bulk, on this rank ------------------------------

    def keep_to_summarize(self, samples: List[Any], name: str) -> None:
        """Keep ``samples`` as object results whose summaries come later (see :meth:`summarize_pending`)."""
        if self.batches:
            raise TypeError(f"{name}: do not mix _add_batch(...) with objects kept to summarize")
        start = len(self.objects)
        self.objects.extend([None] * len(samples))
        self.pending.extend(zip(range(start, start + len(samples)), samples))

    def summarize_pending(self, summarize: Callable[[List[Any]], List[Any]], name: str) -> None:
        """Replace every pending sample by its summary, ``summarize(samples)`` over all of them at once."""
        if not self.pending:
            return
        positions = [pos for pos, _ in self.pending]
        summaries = summarize([sample for _, sample in self.pending])
        if len(summaries) != len(positions):
            raise RuntimeError(f"{name}._summarize() returned {len(summaries)} summaries for {len(positions)} samples")
        for pos, summary in zip(positions, summaries):
            self.objects[pos] = summary
        self.pending = []

    def last_rows(self, m: int) -> ArrayResults:
        """The last ``m`` samples' rows (``0 < m <=`` :attr:`num_results`), read from the last batches only."""
        taken: List[Dict[str, np.ndarray]] = []
        need = m
        for batch in reversed(self.batches):
            if need <= 0:
                break
            n = _rows(batch)
            take = min(n, need)
            taken.append({k: v[n - take :] for k, v in batch.items()})
            need -= take
        taken.reverse()
        return ArrayResults({k: np.concatenate([b[k] for b in taken]) for k in taken[0]})

    def index_flag(self) -> str:
        """``'all'``, ``'none'``, ``'mixed'`` (indices on some add() calls only) or ``'empty'`` (nothing added)."""
        n = self.num_results
        if n == 0:
            return "empty"
        given = [idx is not None for _, idx in self.index_parts]
        if all(given) and sum(c for c, _ in self.index_parts) == n:
            return "all"
        return "none" if not any(given) else "mixed"

    def indices(self) -> np.ndarray:
        """Every dataset index given to ``add()``, in the order the samples were added."""
        parts = [idx for _, idx in self.index_parts if idx is not None]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def truncate(self, batches: int, objects: int) -> None:
        """Forget what was added after there were ``batches`` batches and ``objects`` objects (a refused add)."""
        self.batches, self.objects = self.batches[:batches], self.objects[:objects]
        self.pending = [(pos, sample) for pos, sample in self.pending if pos < objects]

    def __setstate__(self, state: Any) -> None:
        """Restore a pickle (one made before ``pending`` existed included)."""
        slots = state[1] if isinstance(state, tuple) else state
        self.pending = []
        for key, value in (slots or {}).items():
            setattr(self, key, value)


class KeepsSummaries:
    """A metric's samples kept to be summarized later, in bulk, on the rank that holds them (the methods
    :class:`~mmeval.core.base_metric.BaseMetric` inherits; the data is :attr:`RankResults.pending`)."""

    _kept: RankResults

    @property
    def name(self) -> str:
        return type(self).__name__

    def _keep_to_summarize(self, samples: List[Any]) -> None:
        """Keep ``samples`` (one object each) to be turned into compact summaries later, in bulk, on this rank.

        Each sample counts as one object result at once (``indices=``,
        ``size`` and the order work as for ``self._results.append``); its
        summary replaces it when :meth:`_summarize_pending` runs: at the start
        of :meth:`compute` (before anything moves), of a stateless call, or
        whenever the metric calls it (e.g. once enough samples wait, to bound
        their memory). The metric implements :meth:`_summarize`.
        """
        self._kept.keep_to_summarize(samples, self.name)

    @property
    def _num_pending(self) -> int:
        """How many kept samples wait for :meth:`_summarize_pending`."""
        return len(self._kept.pending)

    def _summarize(self, samples: List[Any]) -> List[Any]:
        """One compact, picklable summary per sample of ``samples`` (what :meth:`compute_metric` then receives).

        Override it in a metric that calls :meth:`_keep_to_summarize`; it runs
        on the rank that holds the samples, over many of them at once.
        """
        raise NotImplementedError(f"{self.name} keeps samples to summarize but does not implement _summarize()")

    def _summarize_pending(self) -> None:
        """Replace every sample kept by :meth:`_keep_to_summarize` by its summary (:meth:`_summarize`)."""
        self._kept.summarize_pending(self._summarize, self.name)


class KeepsResults:
    """How a metric keeps what it adds, one of three ways (the methods
    :class:`~mmeval.core.base_metric.BaseMetric` inherits; the data is its :class:`RankResults`):

    * object results appended to :attr:`_results`;
    * array results, a batch at a time, with :meth:`_add_batch`;
    * declared statistics (:meth:`_declare_state` in ``__init__``) and one row per
      sample of each with :meth:`_add_rows`: the metric is then a state metric, whose
      state over the kept rows is :meth:`_reduce_state` (built by :meth:`_state_of_rows`).
    """

    #: what this rank kept since the last reset(): results, dataset indices, running state
    _kept: RankResults
    #: the declared statistics, in declaration order (empty: not a state metric)
    _state_specs: List[StateSpec]

    @property
    def name(self) -> str:
        return type(self).__name__

    # -- object and array results ------------------------------------------------------------------

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

    # -- declared statistics (state metrics) -------------------------------------------------------

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

        Rows stay on this rank until ``compute()``, which drops the padding
        and duplicates among them, reduces them and moves only the result.
        """
        check_rows(self._state_specs, rows, self.name)
        self._add_batch(**rows)

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
