"""State metrics: declared sufficient statistics, reduced across ranks in one packed collective.

A metric declares each statistic (:class:`StateSpec`: name, per-sample shape,
dtype ``int64`` or ``float64``, reduction ``sum`` / ``min`` / ``max``) and, in
``add()``, keeps one *row* per sample for each (compact arrays, a batch at a
time). At ``compute()`` every rank selects the rows it must count (dropping a
sampler's padding, or duplicates of a dataset index), reduces them locally
(:func:`reduce_rows`), and the ranks combine their local states with one
``all_reduce`` per (dtype, reduction) group (:func:`pack` / :func:`unpack`):
normally exactly one collective, whose size is independent of the number of
samples.

Exactness: integer statistics are exact. Float sums are accumulated in
float64; the result may differ from one process's sum by the reordering of the
additions, at most about ``n * 2**-52`` relative to the sum of the absolute
values for ``n`` summed rows (a few ulps in practice). ``min`` and ``max`` are
exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

__all__ = [
    "REDUCTIONS",
    "MetricState",
    "StateSpec",
    "check_rows",
    "combine",
    "declared",
    "pack",
    "reduce_rows",
    "unpack",
]

#: The reductions a statistic may declare (the backends' ``all_reduce`` ops).
REDUCTIONS = ("sum", "min", "max")
_DTYPES = ("int64", "float64")


@dataclass(frozen=True)
class StateSpec:
    """One declared statistic: ``name``, per-sample ``shape``, ``dtype`` of the reduced value, ``reduction``."""

    name: str
    shape: Tuple[int, ...]
    dtype: str
    reduction: str

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"state name {self.name!r} must be a Python identifier")
        if self.dtype not in _DTYPES:
            raise ValueError(f"state {self.name!r}: dtype must be one of {list(_DTYPES)}, got {self.dtype!r}")
        if self.reduction not in REDUCTIONS:
            raise ValueError(
                f"state {self.name!r}: reduction must be one of {list(REDUCTIONS)}, got {self.reduction!r}"
            )
        if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in self.shape):
            raise ValueError(f"state {self.name!r}: shape must be a tuple of non-negative ints, got {self.shape!r}")

    def identity(self) -> np.ndarray:
        """The reduction's neutral value, filled to ``shape`` (0; the dtype's max for min, its min for max)."""
        dt = np.dtype(self.dtype)
        if self.reduction == "sum":
            return np.zeros(self.shape, dtype=dt)
        info = np.iinfo(dt) if dt.kind == "i" else np.finfo(dt)
        fill = info.max if self.reduction == "min" else info.min
        if dt.kind == "f":
            fill = np.inf if self.reduction == "min" else -np.inf
        return np.full(self.shape, fill, dtype=dt)


class MetricState(Dict[str, np.ndarray]):
    """The reduced statistics a state metric's ``compute_metric`` receives: name -> array.

    ``num_samples`` (also ``len()``) is the number of samples counted (after
    padding and duplicates were dropped), summed over every rank.
    """

    num_samples: int = 0

    def __len__(self) -> int:
        """The number of samples counted, like :class:`~mmeval.core.base_metric.ArrayResults` (not the keys)."""
        return self.num_samples


def declared(
    specs: Iterable[StateSpec], name: str, shape: Tuple[int, ...], dtype: str, reduction: str, metric: str
) -> StateSpec:
    """A new statistic's spec, refused when ``specs`` already declare ``name`` (or its fields are invalid)."""
    if any(s.name == name for s in specs):
        raise ValueError(f"{metric}: state {name!r} is declared twice")
    return StateSpec(name, tuple(int(d) for d in shape), dtype, reduction)


def check_rows(specs: Iterable[StateSpec], rows: Mapping[str, Any], metric: str) -> None:
    """Refuse per-sample ``rows`` that are not exactly the declared statistics, each of its declared shape."""
    by_name = {s.name: s for s in specs}
    if set(rows) != set(by_name):
        raise ValueError(
            f"{metric}._add_rows() needs exactly the declared states {sorted(by_name)}, got {sorted(rows)}"
        )
    for k, v in rows.items():
        if np.shape(v)[1:] != by_name[k].shape:
            raise ValueError(
                f"{metric}: rows of state {k!r} have per-sample shape {np.shape(v)[1:]}, declared {by_name[k].shape}"
            )


def reduce_rows(
    specs: Iterable[StateSpec], rows: Optional[Mapping[str, np.ndarray]], keep: Optional[np.ndarray] = None
) -> MetricState:
    """Reduce per-sample ``rows`` (name -> array of shape (n, *spec.shape)) over the samples, locally.

    ``keep`` (a boolean mask or an index array over the n samples) selects the
    rows counted; ``None`` counts them all. No rows (``rows`` None): every
    statistic is its reduction's identity.
    """
    state = MetricState()
    n = 0
    if rows:
        n = int(next(iter(rows.values())).shape[0])
        if keep is not None:
            keep = np.asarray(keep)
            n = int(np.count_nonzero(keep)) if keep.dtype == bool else int(keep.shape[0])
    for spec in specs:
        if rows is None or n == 0:
            state[spec.name] = spec.identity()
            continue
        col = np.asarray(rows[spec.name])
        if keep is not None:
            col = col[keep]
        if spec.reduction == "sum":
            state[spec.name] = col.sum(axis=0, dtype=spec.dtype)
        else:
            red = np.min if spec.reduction == "min" else np.max
            state[spec.name] = np.asarray(red(col, axis=0)).astype(spec.dtype)
    state.num_samples = n
    return state


def combine(specs: Iterable[StateSpec], a: MetricState, b: MetricState) -> MetricState:
    """The state of two disjoint sets of samples: ``a`` and ``b`` combined with each statistic's reduction."""
    out = MetricState()
    for spec in specs:
        if spec.reduction == "sum":
            out[spec.name] = np.add(a[spec.name], b[spec.name], dtype=spec.dtype)
        else:
            out[spec.name] = (np.minimum if spec.reduction == "min" else np.maximum)(a[spec.name], b[spec.name])
    out.num_samples = a.num_samples + b.num_samples
    return out


def _groups(specs: Iterable[StateSpec]) -> Dict[Tuple[str, str], List[StateSpec]]:
    out: Dict[Tuple[str, str], List[StateSpec]] = {}
    for spec in specs:
        out.setdefault((spec.dtype, spec.reduction), []).append(spec)
    out.setdefault(("int64", "sum"), [])  # the sample count rides in the int64 sum group
    return out


def pack(specs: Iterable[StateSpec], state: MetricState) -> Dict[Tuple[str, str], np.ndarray]:
    """One flat array per (dtype, reduction) group; the int64 sum group ends with ``num_samples``."""
    packed: Dict[Tuple[str, str], np.ndarray] = {}
    for (dtype, red), group in _groups(specs).items():
        parts = [np.asarray(state[s.name], dtype=dtype).ravel() for s in group]
        if (dtype, red) == ("int64", "sum"):
            parts.append(np.array([state.num_samples], dtype=np.int64))
        packed[(dtype, red)] = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
    return packed


def unpack(specs: Iterable[StateSpec], packed: Mapping[Tuple[str, str], np.ndarray]) -> MetricState:
    """Inverse of :func:`pack`."""
    state = MetricState()
    for key, group in _groups(specs).items():
        flat = packed[key]
        at = 0
        for s in group:
            size = int(np.prod(s.shape, dtype=np.int64))
            state[s.name] = flat[at : at + size].reshape(s.shape).astype(s.dtype, copy=True)
            at += size
        if key == ("int64", "sum"):
            state.num_samples = int(flat[at])
    return state
