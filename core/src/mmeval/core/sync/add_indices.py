"""``add(..., indices=...)``: the wrapper every metric's ``add()`` gets, keeping the batch's dataset indices.

``BaseMetric.__init_subclass__`` wraps each subclass's ``add``; the wrapper
shows ``indices=`` in the signature (``inspect.signature``, ``help()``).
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable

from ..inputs import as_indices
from .refusals import adding_rank

if TYPE_CHECKING:
    from .protocols import IndexedMetric

__all__ = ["accepting_indices", "with_indices"]


def accepting_indices(add: Callable[..., None]) -> Callable[..., None]:
    """``add`` that also takes ``indices=`` (one dataset index per sample it adds), checked and kept.

    The wrapper's signature (``inspect.signature``, ``help()``) is ``add``'s
    with a keyword-only ``indices=None``. A refused batch keeps nothing of it,
    and a refusal of its indices is remembered until :meth:`BaseMetric.reset`:
    :meth:`BaseMetric.compute` then fails on every rank instead of answering
    without the batch.
    """

    @functools.wraps(add)
    def add_with_indices(self: "IndexedMetric", *args: Any, indices: Any = None, **kwargs: Any) -> None:
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
            message = (
                f"{self.name}.add(): indices= has {idx.shape[0]} dataset indices for a batch of "
                f"{added} samples; pass one index per sample"
            )
            kept.refusals.append(message)
            raise ValueError(message)
        if added:
            if kept.origin is None and not kept.index_parts:
                kept.origin = adding_rank(self)
            kept.index_parts.append((added, idx))

    add_with_indices._mmeval_indices = True  # type: ignore[attr-defined]
    add_with_indices.__signature__ = with_indices(add)  # type: ignore[attr-defined]
    return add_with_indices


def with_indices(add: Callable[..., None]) -> inspect.Signature:
    """``add``'s signature with a keyword-only ``indices=None`` (before ``**kwargs``, if any)."""
    sig = inspect.signature(add)
    if "indices" in sig.parameters:
        return sig
    params = list(sig.parameters.values())
    new = inspect.Parameter("indices", inspect.Parameter.KEYWORD_ONLY, default=None)
    at = len(params) - 1 if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD else len(params)
    return sig.replace(parameters=[*params[:at], new, *params[at:]])
