"""The base class of every mmeval metric."""

from __future__ import annotations

import itertools
import logging
import pickle
import sys
import warnings
from abc import ABCMeta, abstractmethod
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import numpy as np

from .dist import _validate_name, get_default_dist_backend, get_dist_backend
from .dist_backends.base_backend import BaseDistBackend
from .dist_backends.transport import asking
from .errors import (
    CollectiveFailedError,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    MMEvalError,
    RemoteSerializationError,
)

__all__ = ["BaseMetric", "ArrayResults", "RemoteMetricError"]

logger = logging.getLogger("mmeval")

_COLLECT_MODES = ("unzip", "cat")


class RemoteMetricError(MMEvalError, RuntimeError):
    """``compute_metric`` raised on the computing rank with an exception that could not be sent.

    ``remote_type`` and ``remote_message`` carry the original exception's
    qualified type name and message.
    """

    def __init__(self, message: str, remote_type: str = "", remote_message: str = "") -> None:
        super().__init__(message)
        self.remote_type = remote_type
        self.remote_message = remote_message


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
      Python object per sample -- the fast path.

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

    def __call__(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        """Stateless: compute the metric of this one call's inputs, locally, leaving the state alone."""
        saved = (self._results, self._batches)
        self._results, self._batches = [], []
        try:
            self.add(*args, **kwargs)
            return self.compute_metric(self._local_results())
        finally:
            self._results, self._batches = saved

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

        The results are gathered to rank 0 (only rank 0 holds the world's
        results), put in dataset order (``dist_collect_mode``), cut to the
        first ``size`` (dropping a sampler's padding), passed to
        :meth:`compute_metric` there, and the result is broadcast. If
        ``compute_metric`` raises, every rank raises the same exception type
        and message.
        """
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
                raise ValueError(f"{self.name}.compute(size={size!r}): size must be a non-negative int or None")
            size = int(size)
        backend = self.dist_comm
        if not backend.is_initialized or backend.world_size == 1:
            return self.compute_metric(_truncate(self._local_results(), size, self.name))
        computes = backend.rank == 0
        # the safe codec moves plain data only: array results travel as a plain dict, and an error
        # report's pickled exception is never unpickled (a hostile rank 0 could run code with it)
        plain = _plain_data_only(backend)
        # the ranks that only send do not merge their batches first: the frame takes them as they
        # are, and rank 0 joins them while decoding (their peak memory stays ~1x their results)
        local = self._local_results() if computes or plain or not 1 < len(self._batches) <= _MAX_SENT_BATCHES \
            else _ArrayBatches(self._batches)
        if plain and isinstance(local, ArrayResults):
            local = dict(local)  # type: ignore[assignment]
        try:
            # the question rides in the gather's header: ranks computing a different metric, configuration,
            # collect mode or size all raise CollectiveMismatchError instead of answering rank 0's question
            with asking(self._question(size)):
                gathered = backend.gather_object(local, dst=0)
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
            if plain:
                gathered = [ArrayResults(p) if type(p) is dict else p for p in gathered]
            try:
                collected = _collect(gathered, self.dist_collect_mode, self.name)
                result = self.compute_metric(_truncate(collected, size, self.name))
            except Exception as exc:
                backend.broadcast_object(("error", _pack_exception(exc)), src=0)
                raise
            backend.broadcast_object(("ok", result), src=0)
            return result
        status, value = backend.broadcast_object(None, src=0)
        if status == "error":
            raise _unpack_exception(value, self.name, trusted=not plain)
        return value  # type: ignore[no-any-return]


# --------------------------------------------------------------------------
# collection
# --------------------------------------------------------------------------

#: Ranks that only send their array results send up to this many batches unmerged.
_MAX_SENT_BATCHES = 1024


class _ArrayBatches:
    """A rank's array results as the batches it kept; unpickled as one :class:`ArrayResults`.

    Sending the batches as they are spares the sending rank a concatenated copy
    of its results (each batch array travels out-of-band, copied once into the
    transport's buffer); the receiving rank concatenates them while decoding.
    """

    __slots__ = ("batches",)

    def __init__(self, batches: List[Dict[str, np.ndarray]]) -> None:
        self.batches = batches

    def __reduce__(self) -> Any:
        keys = tuple(self.batches[0])
        arrays = [batch[k] for k in keys for batch in self.batches]  # key-major
        return _join_batches, (keys, len(self.batches), *arrays)


def _join_batches(keys: Sequence[str], count: int, *arrays: np.ndarray) -> ArrayResults:
    """Inverse of :class:`_ArrayBatches`: every key's batches concatenated."""
    return ArrayResults({k: np.concatenate(arrays[i * count : (i + 1) * count]) for i, k in enumerate(keys)})



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
