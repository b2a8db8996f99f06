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

Exactness: integer statistics are exact, and so are ``min`` and ``max``. A
float statistic declared ``exact_sum`` is the correctly rounded sum of its
rows, the same bits at any world size, under any sharding and in any order:
each rank keeps the exact sum as int64 limbs (:mod:`mmeval.core.exact_sum`),
which ride in the int64 ``sum`` group and are rounded to float64 once, after
the ``all_reduce`` (the state's value is that rounding; the limbs are in
``MetricState.exact``). A plain float ``sum`` is accumulated in float64 and may
differ from one process's sum by the reordering of the additions (at most
about ``n * 2**-52`` relative to the sum of the absolute values of ``n`` rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from . import exact_sum

__all__ = [
    "EXACT_SUM",
    "REDUCTIONS",
    "MetricState",
    "StateSpec",
    "check_rows",
    "combine",
    "declared",
    "exact_of",
    "pack",
    "packed_as",
    "packed_width",
    "reduce_rows",
    "unpack",
]

#: The reductions a statistic may declare (the backends' ``all_reduce`` ops).
REDUCTIONS = ("sum", "min", "max")
#: The reduction of a float64 statistic summed exactly (:mod:`mmeval.core.exact_sum`): the same bits anywhere.
EXACT_SUM = "exact_sum"
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
        if self.reduction not in REDUCTIONS + (EXACT_SUM,):
            raise ValueError(
                f"state {self.name!r}: reduction must be one of {list(REDUCTIONS + (EXACT_SUM,))}, "
                f"got {self.reduction!r}"
            )
        if self.reduction == EXACT_SUM and self.dtype != "float64":
            raise ValueError(f"state {self.name!r}: reduction {EXACT_SUM!r} needs dtype 'float64', got {self.dtype!r}")
        if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in self.shape):
            raise ValueError(f"state {self.name!r}: shape must be a tuple of non-negative ints, got {self.shape!r}")

    def identity(self) -> np.ndarray:
        """The reduction's neutral value, filled to ``shape`` (0; the dtype's max for min, its min for max)."""
        dt = np.dtype(self.dtype)
        if self.reduction in ("sum", EXACT_SUM):
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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: name -> the exact accumulator (:mod:`mmeval.core.exact_sum`) of each ``exact_sum`` statistic
        self.exact: Dict[str, np.ndarray] = {}

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
            if spec.reduction == EXACT_SUM:
                _set_exact(state, spec, exact_sum.zeros(spec.shape))
            else:
                state[spec.name] = spec.identity()
            continue
        col = np.asarray(rows[spec.name])
        if keep is not None:
            col = col[keep]
        if spec.reduction == EXACT_SUM:
            _set_exact(state, spec, exact_sum.accumulate(col))
        elif spec.reduction == "sum":
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
        if spec.reduction == EXACT_SUM:
            _set_exact(out, spec, exact_sum.add(exact_of(a, spec), exact_of(b, spec)))
        elif spec.reduction == "sum":
            out[spec.name] = np.add(a[spec.name], b[spec.name], dtype=spec.dtype)
        else:
            out[spec.name] = (np.minimum if spec.reduction == "min" else np.maximum)(a[spec.name], b[spec.name])
    out.num_samples = a.num_samples + b.num_samples
    return out


def exact_of(state: Mapping[str, Any], spec: StateSpec) -> np.ndarray:
    """The exact accumulator of ``spec`` (an ``exact_sum`` statistic) in ``state``; a state that has only its
    float value (one a metric built itself) counts as one summand of that value."""
    acc = getattr(state, "exact", {}).get(spec.name)
    if acc is None:
        return exact_sum.accumulate(np.asarray(state[spec.name], dtype=np.float64).reshape((1,) + spec.shape))
    return np.asarray(acc, dtype=np.int64)


def _set_exact(state: MetricState, spec: StateSpec, acc: np.ndarray) -> None:
    state.exact[spec.name] = acc
    state[spec.name] = exact_sum.rounded(acc)


def packed_as(spec: StateSpec) -> Tuple[str, str]:
    """The (dtype, reduction) group whose ``all_reduce`` carries ``spec``: an ``exact_sum`` rides as int64 sums."""
    return ("int64", "sum") if spec.reduction == EXACT_SUM else (spec.dtype, spec.reduction)


def packed_width(spec: StateSpec) -> int:
    """How many values of its group ``spec`` takes in :func:`pack` (its size; times the limbs for an exact sum)."""
    size = int(np.prod(spec.shape, dtype=np.int64))
    return size * exact_sum.WIDTH if spec.reduction == EXACT_SUM else size


def _groups(specs: Iterable[StateSpec]) -> Dict[Tuple[str, str], List[StateSpec]]:
    out: Dict[Tuple[str, str], List[StateSpec]] = {}
    for spec in specs:
        out.setdefault(packed_as(spec), []).append(spec)
    out.setdefault(("int64", "sum"), [])  # the sample count rides in the int64 sum group
    return out


def pack(specs: Iterable[StateSpec], state: MetricState) -> Dict[Tuple[str, str], np.ndarray]:
    """One flat array per (dtype, reduction) group; the int64 sum group ends with ``num_samples``. An
    ``exact_sum`` statistic is its normalised accumulator's limbs and counts, in the int64 sum group."""
    packed: Dict[Tuple[str, str], np.ndarray] = {}
    for (dtype, red), group in _groups(specs).items():
        parts = [
            exact_sum.normalised(exact_of(state, s)).ravel()
            if s.reduction == EXACT_SUM
            else np.asarray(state[s.name], dtype=dtype).ravel()
            for s in group
        ]
        if (dtype, red) == ("int64", "sum"):
            parts.append(np.array([state.num_samples], dtype=np.int64))
        packed[(dtype, red)] = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
    return packed


def unpack(specs: Iterable[StateSpec], packed: Mapping[Tuple[str, str], np.ndarray]) -> MetricState:
    """Inverse of :func:`pack` (an ``exact_sum`` statistic rounded to float64 once, here)."""
    state = MetricState()
    for key, group in _groups(specs).items():
        flat = packed[key]
        at = 0
        for s in group:
            size = packed_width(s)
            if s.reduction == EXACT_SUM:
                _set_exact(state, s, flat[at : at + size].reshape(s.shape + (exact_sum.WIDTH,)).astype(np.int64))
            else:
                state[s.name] = flat[at : at + size].reshape(s.shape).astype(s.dtype, copy=True)
            at += size
        if key == ("int64", "sum"):
            state.num_samples = int(flat[at])
    return state
