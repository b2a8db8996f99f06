"""Which of a rank's samples to count: a sampler's padding past ``size``, and duplicates of a dataset index.

Everything here is local arithmetic on what every rank already knows after
one tiny exchange (each rank's sample count, whether it has indices, its
largest index): no result moves to decide it.
"""

from __future__ import annotations

import warnings
from typing import Any, List, Optional, Sequence

import numpy as np

from .errors import ShardingWarning

__all__ = ["ShardingWarning", "as_indices", "check_layout", "kept_by_size", "kept_count", "owned_first", "warn_sharding"]


def as_indices(value: Any, what: str = "indices") -> np.ndarray:
    """Dataset indices as a 1-D int64 array: a list, a numpy array, a tensor (``.cpu().numpy()``) or an array-like.

    Raises ``ValueError`` for anything but non-negative integers in one dimension.
    """
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch / paddle tensors, any device
        value = value.detach().cpu().numpy()
    elif hasattr(value, "numpy") and callable(value.numpy) and not isinstance(value, np.ndarray):
        value = value.numpy()  # eager TensorFlow tensors
    arr = np.asarray(value)
    if arr.size == 0:
        arr = arr.astype(np.int64)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one dataset index per sample, shape (N,); got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{what} must be integer dataset indices, got dtype {arr.dtype}")
    if arr.size and arr.min() < 0:
        raise ValueError(f"{what} must be non-negative dataset indices, got {int(arr.min())}")
    return arr.astype(np.int64, copy=False)


def _round_robin_positions(counts: Sequence[int], rank: int) -> np.ndarray:
    """Position of each of ``rank``'s samples in the round-robin merge of every rank's samples.

    Item j of rank r comes after every rank's first j items (``min(c, j)``
    each) and after item j of the ranks before r that have one: the order
    ``dist_collect_mode='unzip'`` puts results in, also for uneven counts.
    """
    j = np.arange(counts[rank], dtype=np.int64)
    pos = np.zeros_like(j)
    for r, c in enumerate(counts):
        pos += np.minimum(j, c)
        if r < rank:
            pos += j < c
    return pos


def kept_by_size(counts: Sequence[int], rank: int, mode: str, size: Optional[int]) -> Optional[np.ndarray]:
    """The mask of ``rank``'s samples that lie before ``size`` in dataset order; ``None`` keeps them all."""
    if size is None or size >= sum(counts):
        return None
    if mode == "cat":
        pos = sum(counts[:rank]) + np.arange(counts[rank], dtype=np.int64)
    else:
        pos = _round_robin_positions(counts, rank)
    return pos < size


def kept_count(counts: Sequence[int], rank: int, mode: str, size: Optional[int]) -> int:
    """How many of ``rank``'s samples :func:`kept_by_size` keeps (they are always its first ones)."""
    mask = kept_by_size(counts, rank, mode, size)
    return int(counts[rank]) if mask is None else int(np.count_nonzero(mask))


def owned_first(indices: np.ndarray, owner: np.ndarray, rank: int) -> np.ndarray:
    """Positions (ascending) of the samples this rank counts: its first occurrence of each index it owns.

    ``owner[i]`` is the lowest rank holding dataset index ``i`` (an
    ``all_reduce(min)`` of every rank's claims).
    """
    _, first = np.unique(indices, return_index=True)
    first.sort()
    return np.asarray(first[owner[indices[first]] == rank])


def check_layout(layout: List[Any], name: str) -> bool:
    """Whether the ranks gave indices, from every rank's ``(count, flag, max_index)``; raise if only some did.

    ``flag`` is ``'all'`` (every ``add()`` had indices), ``'none'``, ``'mixed'``
    or ``'empty'`` (nothing added). The same ``layout`` reaches every rank,
    so every rank raises the same error.
    """
    flags = [f for _, f, _ in layout]
    mixed = [r for r, f in enumerate(flags) if f == "mixed"]
    if mixed:
        raise ValueError(
            f"{name}.compute(): rank(s) {mixed} passed indices= to some add() calls and not others; "
            f"pass indices= to every add() on every rank, or to none"
        )
    given = {f for f in flags if f != "empty"}
    if given == {"all", "none"}:
        with_idx = [r for r, f in enumerate(flags) if f == "all"]
        without = [r for r, f in enumerate(flags) if f == "none"]
        raise ValueError(
            f"{name}.compute(): rank(s) {with_idx} passed indices= to add() and rank(s) {without} did not; "
            f"pass indices= on every rank, or on none"
        )
    return given == {"all"}


def warn_sharding(counts: Sequence[int], mode: str, size: Optional[int], name: str) -> None:
    """Warn (:class:`ShardingWarning`) where ``size`` cannot make the result exact (see its docstring)."""
    ws, total = len(counts), sum(counts)
    if ws <= 1:
        return
    if size is None and mode == "unzip":
        warnings.warn(
            f"{name}.compute() on {ws} ranks without size= or indices=: a DistributedSampler pads its shards "
            f"with repeated samples, which are counted. Pass compute(size=len(dataset)), or indices= to add()",
            ShardingWarning,
            stacklevel=3,
        )
    elif size is not None and total > size + ws - 1:
        warnings.warn(
            f"{name}.compute(size={size}): {total} samples were added on {ws} ranks, more than a per-sample "
            f"sampler pads ({size} + {ws - 1}); a batch-level sharding (HF accelerate) repeats whole batches, "
            f"which size= cannot drop exactly. Pass indices= (the dataset indices) to add()",
            ShardingWarning,
            stacklevel=3,
        )
