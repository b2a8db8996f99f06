"""``add(..., indices=...)``: the wrapper every metric's ``add()`` gets, keeping the batch's dataset indices.

``BaseMetric.__init_subclass__`` wraps each subclass's ``add``, handing the
wrapper how to find what a metric kept (a :class:`~mmeval.core.results.RankResults`);
the wrapper reads nothing else of the metric but its public ``name``,
``dist_backend`` and the class's ``float_inputs``, and shows ``indices=`` in the
signature (``inspect.signature``, ``help()``).
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable, Dict, Optional, Set

from ..inputs import as_indices, check_float_inputs
from ..results import RankResults
from .promises import adding_lock, refusal_of
from .refusals import adding_rank

__all__ = ["accepting_indices", "with_indices"]

#: The metrics (by id) whose wrapped ``add()`` runs in this thread: a subclass's ``add()`` calling
#: ``super().add()`` keeps the batch's indices once, in the outermost call (one add() at a time per metric).
_ADDING = threading.local()


def _adding() -> Set[int]:
    busy: Optional[Set[int]] = getattr(_ADDING, "metrics", None)
    if busy is None:
        busy = _ADDING.metrics = set()
    return busy


def accepting_indices(add: Callable[..., None], kept_of: Callable[[Any], RankResults]) -> Callable[..., None]:
    """``add`` that also takes ``indices=`` (one dataset index per sample it adds), checked and kept.

    ``kept_of(metric)`` is where the metric keeps what it added (read at each
    call: a stateless call swaps it).

    The wrapper's signature (``inspect.signature``, ``help()``) is ``add``'s
    with a keyword-only ``indices=None``. A refused batch (any exception from
    ``add``, or its indices refused) keeps nothing of it, and the refusal is
    remembered until :meth:`BaseMetric.reset`: :meth:`BaseMetric.compute` then
    fails on every rank instead of answering without the batch. Calls from
    several threads run one at a time (:func:`mmeval.core.sync.promises.adding_lock`).
    """

    signature = inspect.signature(add)

    @functools.wraps(add)
    def add_with_indices(self: Any, *args: Any, indices: Any = None, **kwargs: Any) -> None:
        with adding_lock(self):  # several threads: one add() at a time, each keeping its whole batch
            if id(self) in _adding():  # a subclass's add() calling super().add(): the outermost keeps the indices
                add(self, *args, **kwargs)
                return
            _add_and_keep(self, kept_of, add, signature, args, kwargs, indices)

    add_with_indices._mmeval_indices = True  # type: ignore[attr-defined]
    add_with_indices.__signature__ = with_indices(add)  # type: ignore[attr-defined]
    return add_with_indices


def _add_and_keep(
    self: Any,
    kept_of: Callable[[Any], RankResults],
    add: Callable[..., None],
    signature: inspect.Signature,
    args: Any,
    kwargs: Dict[str, Any],
    indices: Any,
) -> None:
    """Check the declared float inputs, run ``add`` and keep the batch's indices; any refusal keeps nothing of the
    batch and is remembered."""
    kept = kept_of(self)
    nb, nr, before, running = len(kept.batches), len(kept.objects), kept.num_results, kept.running
    try:
        idx = None if indices is None else as_indices(indices, f"{self.name}.add(indices=...)")
        declared = getattr(type(self), "float_inputs", None)
        if declared:  # what each float argument accepts, declared once on the class (mmeval.core.inputs.FloatInput)
            try:
                bound = signature.bind_partial(self, *args, **kwargs).arguments
            except TypeError:
                bound = {}  # add() itself raises, naming the argument
            check_float_inputs(self.name, declared, bound)
        busy = _adding()
        busy.add(id(self))
        try:
            add(self, *args, **kwargs)
        finally:
            busy.discard(id(self))
        added = kept.num_results - before
        if idx is not None and idx.shape[0] != added:
            raise ValueError(
                f"{self.name}.add(): indices= has {idx.shape[0]} dataset indices for a batch of "
                f"{added} samples; pass one index per sample"
            )
    except Exception as exc:  # remembered until reset(): compute() then raises on every rank (promises.py)
        if kept_of(self) is kept:
            kept.truncate(nb, nr)  # keep nothing of it
            kept.running = running
        kept_of(self).refusals.append(refusal_of(exc, self.name))
        raise
    if added:
        if kept.origin is None and not kept.index_parts:
            kept.origin = adding_rank(self.dist_backend)
        kept.index_parts.append((added, idx))


def with_indices(add: Callable[..., None]) -> inspect.Signature:
    """``add``'s signature with a keyword-only ``indices=None`` (before ``**kwargs``, if any)."""
    sig = inspect.signature(add)
    if "indices" in sig.parameters:
        return sig
    params = list(sig.parameters.values())
    new = inspect.Parameter("indices", inspect.Parameter.KEYWORD_ONLY, default=None)
    at = len(params) - 1 if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD else len(params)
    return sig.replace(parameters=[*params[:at], new, *params[at:]])
