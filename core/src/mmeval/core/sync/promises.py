"""What ``add()`` and ``compute(size=)`` promise whatever the caller does: nothing is lost silently.

* A refused ``add()`` is remembered until ``reset()`` (:func:`refusal_of`): the
  next ``compute()`` raises on every rank, naming the rank, the metric and
  what the refusal named, instead of answering without the batch.
* ``add()`` called from several threads at once is serialized
  (:func:`adding_lock`): each call keeps its whole batch and its indices, in
  the order the calls took the lock -- never a sample lost to a race.
* More samples than ``size`` can explain (past ``size + world_size - 1``
  without ``indices=``) is refused on every rank (:func:`check_size_explains`):
  an earlier evaluation still held, a ``size`` that is not the dataset's, or a
  batch-level sharding.

The call sites are thin (the ``add()`` wrapper, :func:`mmeval.core.sync.ordering.warn_sharding`,
``BaseMetric.__call__``); the logic lives here.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, MutableMapping, Sequence

__all__ = ["adding_lock", "check_size_explains", "refusal_of"]

_LOCKS_GUARD = threading.Lock()
_LOCKS: "MutableMapping[Any, threading.RLock]" = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.RLock()  # metrics that cannot be weak keys (unhashable)


def adding_lock(metric: Any) -> "threading.RLock":
    """The lock every ``add()`` (and stateless call) of ``metric`` holds: one per metric, never pickled.

    Re-entrant, so a subclass's ``add()`` calling ``super().add()`` (or a
    stateless ``metric(...)`` calling ``add()``) in the same thread goes on.
    Kept outside the metric (a weak mapping) so that pickling and
    ``copy.deepcopy`` of a metric are unchanged.
    """
    with _LOCKS_GUARD:
        try:
            lock = _LOCKS.get(metric)
            if lock is None:
                lock = _LOCKS[metric] = threading.RLock()
            return lock
        except TypeError:  # unhashable (a subclass defining __eq__ only): one lock for all such metrics
            return _SHARED_LOCK


def refusal_of(exc: BaseException, name: str) -> str:
    """How a refused ``add()`` is remembered: the metric, the exception class and its message (naming the argument).

    Cut to 300 characters: it is shown to every rank by the next ``compute()``.
    """
    text = str(exc) if not isinstance(exc, KeyError) or not exc.args else str(exc.args[0])
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if name in text else f"{type(exc).__name__} in {name}.add(): {text}"


def check_size_explains(counts: Sequence[int], size: int, name: str) -> None:
    """Raise ``ValueError`` when the ranks hold more samples than ``size`` and a sampler's padding explain.

    A per-sample sampler pads at most ``world_size - 1`` samples; past
    ``size + world_size - 1`` (one process included: past ``size``), the extra
    samples are an earlier evaluation still held, a ``size`` that is not
    ``len(dataset)``, or a batch-level sharding (HF accelerate repeats whole
    batches) that only ``indices=`` counts exactly. Called with the same
    ``counts`` on every rank (after the layout exchange), so every rank raises
    the same error and none waits.
    """
    ws, total = len(counts), int(sum(counts))
    if total <= size + ws - 1:
        return
    where = f" on {ws} ranks, more than a per-sample sampler pads ({size} + {ws - 1})" if ws > 1 else ""
    raise ValueError(
        f"{name}.compute(size={size}): {total} samples were added{where}; answering on {size} of them would "
        f"answer another question. Call reset() after each compute() (results of an earlier evaluation are still "
        f"held), pass size=len(dataset), or, for a batch-level sharding (HF accelerate repeats whole batches), "
        f"pass indices= (the dataset indices) to add()"
    )
