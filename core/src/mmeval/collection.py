"""Several metrics added together and computed in one exchange: :class:`MetricCollection`.

A collection's :meth:`~MetricCollection.compute` runs the metrics' sync at the
level of :mod:`mmeval.core.sync.state_path` and :mod:`mmeval.core.sync.gather`, once for
all of them:

1. one ``all_gather_object`` of every metric's layout (sample count, index
   flag, largest index, a digest of its indices), asking one question that
   covers every metric (its configuration, the collect mode, ``size``); a rank
   that refuses (a bad ``size``, a refused ``add()``, results restored from
   another rank) makes every rank raise in this collective;
2. where the ranks gave ``indices=``, one deduplication per distinct set of
   indices (the usual case -- one :meth:`~MetricCollection.add` fanned out to
   every metric -- is one set, one exchange);
3. the state metrics' states packed side by side into one ``all_reduce`` per
   (dtype, reduction) group -- normally exactly one, int64 sums;
4. the per-sample metrics' kept results in one ``gather_object`` to rank 0,
   which computes each of them and sends every result (or the exception one
   raised) back in one broadcast.

A metric that computes in parts when alone (``COCODetection``) is computed on
rank 0 from that one gather in a collection: the same numbers (its
``compute_metric`` is defined as its parts combined), one exchange instead of
its own rounds, rank 0 doing its work. Compute it alone to spread that work.
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from mmeval.core.base_metric import BaseMetric, taking_part
from mmeval.core.dist_backends.base_backend import BaseDistBackend
from mmeval.core.dist_backends.transport import asking
from mmeval.core.results import state_over
from mmeval.core.state import pack, unpack
from mmeval.core.sync.gather import answered_by_rank0, gather_to_rank0, plain_data_only, results_in_order, sent_results
from mmeval.core.sync.here import compute_here
from mmeval.core.sync.ordering import kept_samples
from mmeval.core.sync.protocols import Call, Participant
from mmeval.core.sync.refusals import refuse

__all__ = ["MetricCollection", "compute_collection"]

#: Each metric's samples to count and, by index, its indices (see :func:`~mmeval.core.sync.ordering.kept_samples`).
Kept = Mapping[str, Tuple[Optional[np.ndarray], Optional[np.ndarray]]]
#: One metric's part of the first exchange: (sample count, index flag, largest index, indices digest, state metric).
Layout = Tuple[int, str, int, str, bool]


class MetricCollection:
    """Several metrics fed together and computed in one exchange, with their keys prefixed.

    Args:
        metrics: ``{name: metric}``, or a sequence of metrics named by their
            class (``Accuracy``); names must be unique (use a dict for two of
            one class). Every metric must run on the same backend.
        prefix, postfix: added around every key of the result.
        separator: between a metric's name and its own keys: with the default
            ``'/'``, ``MetricCollection({"acc": Accuracy()}, prefix="val_")``
            returns ``{"val_acc/top1": ...}`` (MMEngine's ``name/key``
            style). ``None`` keeps the metrics' own keys, which must then not
            collide.

    :meth:`add` gives every metric the same inputs (``indices=`` included);
    for metrics that take different inputs, add to each through the
    collection (``collection["ap"].add(...)``): each keeps its own results and
    :meth:`compute` still syncs them all in one exchange (see
    :func:`compute_collection`).
    """

    def __init__(
        self,
        metrics: Union[Mapping[str, BaseMetric], Sequence[BaseMetric]],
        *,
        prefix: str = "",
        postfix: str = "",
        separator: Optional[str] = "/",
    ) -> None:
        if isinstance(metrics, Mapping):
            named = dict(metrics)
        else:
            named = {}
            for metric in metrics:
                if metric.name in named:
                    raise ValueError(
                        f"MetricCollection: two metrics are named {metric.name!r}; pass a dict "
                        f"{{name: metric}} to name them apart"
                    )
                named[metric.name] = metric
        if not named:
            raise ValueError("MetricCollection needs at least one metric")
        for key, metric in named.items():
            if not isinstance(key, str) or not key:
                raise TypeError(f"MetricCollection: metric names must be non-empty strings, got {key!r}")
            if not isinstance(metric, BaseMetric):
                raise TypeError(
                    f"MetricCollection: {key!r} is a {type(metric).__name__}, not an mmeval metric (BaseMetric)"
                )
        self._metrics = named
        self.prefix, self.postfix, self.separator = prefix, postfix, separator

    # -- a mapping of name -> metric ------------------------------------------------

    def __getitem__(self, name: str) -> BaseMetric:
        return self._metrics[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._metrics)

    def __len__(self) -> int:
        return len(self._metrics)

    def keys(self) -> List[str]:
        return list(self._metrics)

    def items(self) -> List[Tuple[str, BaseMetric]]:
        return list(self._metrics.items())

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {type(m).__name__}" for k, m in self._metrics.items())
        return f"MetricCollection({{{inner}}}, prefix={self.prefix!r}, postfix={self.postfix!r})"

    # -- the metric API ---------------------------------------------------------------

    def add(self, *args: Any, **kwargs: Any) -> None:
        """Give every metric the same batch (``indices=`` too): ``metric.add(*args, **kwargs)`` for each."""
        for metric in self._metrics.values():
            metric.add(*args, **kwargs)

    def reset(self) -> None:
        """Reset every metric."""
        for metric in self._metrics.values():
            metric.reset()

    @property
    def dataset_meta(self) -> Optional[Dict[str, Any]]:
        """The first metric's ``dataset_meta``; setting it sets every metric's."""
        return next(iter(self._metrics.values())).dataset_meta

    @dataset_meta.setter
    def dataset_meta(self, value: Optional[Dict[str, Any]]) -> None:
        for metric in self._metrics.values():
            metric.dataset_meta = value

    def compute(self, size: Optional[int] = None) -> Dict[str, Any]:
        """Every metric over every rank's results, in one exchange, as one flat dict of prefixed keys.

        ``size`` is the dataset's size, as for :meth:`BaseMetric.compute`. The
        same result reaches every rank; errors, refusals and question
        mismatches too (see :func:`compute_collection`).
        """
        return self.flatten(compute_collection(self._metrics, size))

    def flatten(self, results: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
        """``{name: {key: value}}`` as the flat dict :meth:`compute` returns (prefix, separator, postfix)."""
        out: Dict[str, Any] = {}
        for name, result in results.items():
            for key, value in result.items():
                flat = f"{self.prefix}{key if self.separator is None else name + self.separator + key}{self.postfix}"
                if flat in out:
                    raise ValueError(
                        f"MetricCollection: two metrics return the key {flat!r}; name them apart with "
                        f"separator='/' (the default)"
                    )
                out[flat] = value
        return out


def compute_collection(metrics: Mapping[str, BaseMetric], size: Optional[int] = None) -> Dict[str, Dict[str, Any]]:
    """``{name: metric.compute(size)}`` for every metric, synced in one exchange (see the module's docstring).

    Every metric must resolve to the same backend instance. Each result
    equals that metric's own ``compute(size)``; a sharding warning is raised
    once for the metrics that hold the same samples, naming the first. On
    several ranks, a rank that refuses raises ``ValueError`` naming its reason
    and its peers :class:`~mmeval.core.errors.CollectiveMismatchError` naming
    it, at once (as a metric alone does); ranks whose collections differ
    (other metrics, names, configurations, ``size``) raise
    ``CollectiveMismatchError``; an exception raised by a per-sample metric's
    ``compute_metric`` on rank 0 is raised on every rank, and one raised by a
    state metric's ``compute_metric`` (which runs on every rank, on the same
    state) after every collective, so no rank is left waiting.
    """
    names = list(metrics)
    if not names:
        raise ValueError("compute_collection() needs at least one metric")
    backend = _one_backend(metrics)
    members: Dict[str, Participant] = {}  # each metric as the sync reads it: plain data, its computation
    refusals: List[str] = []
    for name, metric in metrics.items():
        members[name] = taking_part(metric, size, backend)
        why = members[name].refused
        if why is not None:
            refusals.append(f"{name}: {why}")
    if not backend.is_initialized or backend.world_size == 1:
        if refusals:
            raise ValueError(refusals[0])
        return {name: compute_here(member, None if size is None else int(size)) for name, member in members.items()}
    question: Dict[str, Any] = {"collection": [[name, members[name].question(size)] for name in names]}
    if refusals:
        refuse(backend, f"rank {backend.rank}: {refusals[0]}", False, question)
    size = None if size is None else int(size)
    question = {"collection": [[name, members[name].question(size)] for name in names]}
    mine = [_layout(metrics[name], members[name]) for name in names]
    with asking(question):
        every: List[List[Layout]] = backend.all_gather_object(mine)
    per_metric: List[List[Layout]] = [
        [_as_layout(every[r][i]) for r in range(backend.world_size)] for i in range(len(names))
    ]
    sync = _Round(backend, question, members, size, per_metric)
    state_names = [n for i, n in enumerate(names) if _is_state(n, per_metric[i])]
    reduced = sync.reduce_states(state_names)
    results = sync.gather_and_compute([n for n in names if n not in state_names])
    for name in state_names:
        member = members[name]
        results[name] = member.computation.compute_metric(unpack(member.specs, reduced[name]))
    return {name: results[name] for name in names}


def _one_backend(metrics: Mapping[str, BaseMetric]) -> BaseDistBackend:
    """The backend every metric uses now; a ``ValueError`` (the same on every rank) when they differ."""
    backends = {name: metric.dist_comm for name, metric in metrics.items()}
    first = next(iter(backends.values()))
    others = [name for name, b in backends.items() if b is not first]
    if others:
        raise ValueError(
            f"MetricCollection: the metrics {others} run on another backend than {next(iter(backends))!r} "
            f"({first.name!r}); give every metric the same dist_backend to compute them in one exchange"
        )
    return first


def _layout(metric: BaseMetric, member: Participant) -> Layout:
    kept = member.kept
    flag = kept.index_flag()
    indices = kept.indices() if flag == "all" else None
    top = int(indices.max()) if indices is not None and indices.size else -1
    digest = (
        "" if indices is None else hashlib.blake2b(np.ascontiguousarray(indices).tobytes(), digest_size=16).hexdigest()
    )
    return (metric.num_results, flag, top, digest, member.is_state)


def _as_layout(received: Any) -> Layout:
    n, flag, top, digest, state = received  # a list after a codec that has no tuples
    return (int(n), str(flag), int(top), str(digest), bool(state))


def _is_state(name: str, layouts: List[Layout]) -> bool:
    """Whether ``name`` takes the state path: a state metric on every rank that added anything."""
    kinds = {bool(lay[4]) for lay in layouts if lay[0]} or {bool(layouts[0][4])}
    if len(kinds) > 1:
        raise ValueError(
            f"MetricCollection: {name!r} kept declared state on some ranks and object results on others; "
            f"add the same kind of results on every rank"
        )
    return kinds.pop()


class _Round:
    """One collection's exchange after the first collective: which samples count, the reduction, the gather."""

    def __init__(
        self,
        backend: BaseDistBackend,
        question: Dict[str, Any],
        metrics: Mapping[str, Participant],
        size: Optional[int],
        per_metric: List[List[Layout]],
    ) -> None:
        self.backend, self.question, self.metrics, self.size = backend, question, metrics, size
        self.kept = self._kept_per_metric(per_metric)

    def _kept_per_metric(self, per_metric: List[List[Layout]]) -> Kept:
        """Each metric's ``(keep, indices)`` as :func:`~mmeval.core.sync.ordering.kept_samples` gives them.

        Metrics with the same layout on every rank (and the same indices, by
        digest) share one answer: one deduplication exchange per set of indices.
        """
        done: Dict[Any, Tuple[Optional[np.ndarray], Optional[np.ndarray]]] = {}
        out = {}
        for (name, metric), layouts in zip(self.metrics.items(), per_metric):
            mode = metric.mode
            key = (mode, tuple(lay[:4] for lay in layouts))
            if key not in done:
                kept = metric.kept
                indices = kept.indices() if kept.index_flag() == "all" else None
                triples = [(lay[0], lay[1], lay[2]) for lay in layouts]
                done[key] = kept_samples(self.backend, self.question, triples, indices, mode, self.size, metric.name)
            out[name] = done[key]
        return out

    def reduce_states(self, names: List[str]) -> Dict[str, Dict[Tuple[str, str], np.ndarray]]:
        """The state metrics' kept states, packed side by side: one ``all_reduce`` per (dtype, reduction) group."""
        packs: Dict[str, Dict[Tuple[str, str], np.ndarray]] = {}
        for name in names:
            metric, keep = self.metrics[name], self.kept[name][0]
            kept, specs = metric.kept, metric.specs
            state = (
                kept.whole_state(specs)
                if keep is None
                else state_over(specs, kept.rows(), keep, metric.computation._state_of_rows)
            )
            packs[name] = pack(specs, state)
        out: Dict[str, Dict[Tuple[str, str], np.ndarray]] = {name: {} for name in names}
        for key in sorted({key for p in packs.values() for key in p}):
            flats = [packs[name][key] for name in names if key in packs[name]]
            with asking(self.question):
                total = self.backend.all_reduce(np.concatenate(flats), op=key[1])
            at = 0
            for name in names:
                if key in packs[name]:
                    width = packs[name][key].size
                    out[name][key] = total[at : at + width]
                    at += width
        return out

    def gather_and_compute(self, names: List[str]) -> Dict[str, Dict[str, Any]]:
        """The per-sample metrics' kept results in one gather to rank 0, which computes each; one broadcast back."""
        if not names:
            return {}
        metrics, kept, backend = self.metrics, self.kept, self.backend
        plain = plain_data_only(backend)
        sent = [sent_results(metrics[name].kept, backend, *kept[name]) for name in names]
        gathered = gather_to_rank0(backend, self.question, [payload for payload, _ in sent])
        owns = [own for _, own in sent]
        del sent
        box: List[List[List[Any]]] = [gathered] if gathered is not None else []
        del gathered

        def compute() -> Dict[str, Any]:
            every = [list(payloads) for payloads in box.pop()]
            out: Dict[str, Any] = {}
            for i, name in enumerate(names):
                metric, (keep, indices) = metrics[name], kept[name]
                part = [[rank_payloads[i] for rank_payloads in every]]
                for rank_payloads in every:  # this metric's received results go once it is computed
                    rank_payloads[i] = None
                try:
                    call = Call(metric.name, metric.mode, self.size, self.question)
                    results = results_in_order(metric.kept, call, part, owns[i], plain, keep, indices)
                    out[name] = metric.computation.compute_metric(results)
                except Exception as exc:
                    _name_the_metric(exc, name)
                    raise
            return out

        return answered_by_rank0(backend, "MetricCollection", plain, compute)


def _name_the_metric(exc: BaseException, name: str) -> None:
    if hasattr(exc, "add_note"):
        exc.add_note(f"(computing the metric {name!r} of a MetricCollection)")
