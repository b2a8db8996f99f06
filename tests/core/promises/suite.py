"""The shared adversarial suite's tools: the case table (tests/metric_cases*.py) read once, its float fields found.

Every metric with a case in the table gets every promise test of this folder without writing one: a new
metric's case is all it takes. What a metric declares that the suite reads: its ``add()`` signature (the
argument names its errors must name), ``float_inputs`` (mmeval.core.inputs.FloatInput: where NaN has a
meaning), and whether its state holds float sums (declared ``exact_sum``: the same bits at any world size).
"""

from __future__ import annotations

import copy
import functools
import inspect
import os
import sys
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(os.path.dirname(HERE))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

import metric_cases  # noqa: E402

Path = Tuple[Any, ...]

#: the first samples of a case, one batch (what the suite adds, alters, refuses)
FIRST = metric_cases.BATCH


@functools.lru_cache(maxsize=1)
def payload() -> Dict[str, Dict[str, Any]]:
    """Every case with its one-process answer (``want``), built once per process."""
    return metric_cases.build_payload()


def first(case: Dict[str, Any]) -> List[int]:
    """The samples the suite adds, alters or refuses: one batch (fewer for a small case)."""
    return list(range(min(FIRST, case["n"])))


def make(case: Dict[str, Any], **kwargs: Any) -> Any:
    return metric_cases.metric_class(case["metric"])(**case["kwargs"], **kwargs)


def arg_names(case: Dict[str, Any]) -> List[str]:
    """The names of ``add()``'s positional arguments, in order (what a refusal must name)."""
    params = list(inspect.signature(make(case).add).parameters.values())
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def first_batch(case: Dict[str, Any]) -> List[Any]:
    return [metric_cases.take(values, first(case)) for values in case["inputs"]]


def float_paths(value: Any, path: Path = ()) -> Iterator[Path]:
    """The path of every non-empty numeric array of two or more dimensions, or float array, inside ``value`` (list
    indices, dict keys): every field a float -- a NaN -- can be given in (images as uint8 included; labels and
    masks of one dimension or bools are not)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from float_paths(v, path + (k,))
    elif isinstance(value, (list, tuple)) and value and not isinstance(value[0], (int, float, np.number)):
        for i, v in enumerate(value):
            yield from float_paths(v, path + (i,))
    elif isinstance(value, (np.ndarray, list, tuple)):
        arr = np.asarray(value)
        if arr.size and (arr.dtype.kind == "f" or (arr.dtype.kind in "iu" and arr.ndim >= 2)):
            yield path


def field_patterns(batch: List[Any]) -> List[Tuple[int, Path]]:
    """One place per distinct float field of the batch's arguments: ``(argument, path)``, list indices
    standing for any item (the first sample with that field is where a bad value goes)."""
    seen, out = set(), []
    for j, value in enumerate(batch):
        for path in float_paths(value):
            pattern = (j,) + tuple("*" if isinstance(p, int) else p for p in path)
            if pattern not in seen:
                seen.add(pattern)
                out.append((j, path))
    return out


def _with_bad(value: Any, bad: float) -> np.ndarray:
    arr = np.asarray(value)
    out = np.array(arr, dtype=arr.dtype if arr.dtype.kind == "f" else np.float64)
    out.flat[0] = bad
    return out


def with_value(batch: List[Any], j: int, path: Path, bad: float) -> List[Any]:
    """A copy of ``batch`` where the first element of the array at ``(j, path)`` is ``bad`` (ints become float64)."""
    out = copy.deepcopy(batch)
    if not path:
        out[j] = _with_bad(out[j], bad)
        return out
    holder = out[j]
    for p in path[:-1]:
        holder = holder[p]
    holder[path[-1]] = _with_bad(holder[path[-1]], bad)
    return out


def nan_meaning(declared: Any, path: Path) -> str:
    """Where NaN means something for the field at ``path`` of an argument declared ``declared`` ('' if nowhere)."""
    from mmeval.core.inputs import declared_specs

    if declared is None:
        return ""
    key = next((p for p in reversed(path) if isinstance(p, str)), None)
    for spec in declared_specs(declared):
        applies = (spec.keys is None or key in spec.keys) and key not in spec.skip_keys
        if applies and not spec.finite:
            return spec.nan_where or "?"
    return ""


def has_float_state(case: Dict[str, Any]) -> bool:
    """Whether the metric's state holds float sums (after a batch: some declare their state at the first add)."""
    metric = make(case)
    metric.add(*first_batch(case))
    return any(spec.dtype == "float64" for spec in metric._state_specs) and metric._is_state_metric


def where(path: Path) -> str:
    return "".join(f"[{p!r}]" for p in path)


# -- the rank side: every promise of every case in one launch per world size ------------------------------------------

#: shardings compared bit for bit with one process (metric_helpers.compute_sharded's three, metric_cases' shuffled
#: indices=, and a shuffled DistributedSampler with compute(size=n))
SHARDINGS = ("padded", "uneven", "cat", "indices", "sampler")


def sampler_order(n: int, ws: int, seed: int = 3) -> List[int]:
    """A shuffled DistributedSampler's order: a permutation padded by wrapping to a multiple of ``ws``."""
    order = [int(i) for i in np.random.default_rng(seed).permutation(n)]
    return order + order[: -n % ws]


def refused_batch(case: Dict[str, Any]) -> List[Any]:
    """A batch ``add()`` must refuse: a NaN in the first numeric field, else an object in place of the first input."""
    batch = first_batch(case)
    names = arg_names(case)
    declared = getattr(metric_cases.metric_class(case["metric"]), "float_inputs", {}) or {}
    for j, path in field_patterns(batch):
        if not nan_meaning(declared.get(names[j] if j < len(names) else ""), path):
            return with_value(batch, j, path, float("nan"))
    return [object(), *batch[1:]]


def _outcome(fn: Any) -> Tuple[str, Any]:
    try:
        return "ok", fn()
    except Exception as exc:
        return type(exc).__name__, str(exc)


def run_promises(backend: Any, cases: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """On every rank alike: each case under every sharding of :data:`SHARDINGS`, with a refusal on the last rank,
    and with the last rank adding nothing. Returns ``{case: {what: (status, value)}}``."""
    import warnings

    out: Dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, case in cases.items():
            out[name] = _case_promises(backend, case)
    return out


def _case_promises(backend: Any, case: Dict[str, Any]) -> Dict[str, Any]:
    rank, ws = backend.rank, backend.world_size
    n, inputs = case["n"], case["inputs"]
    got: Dict[str, Any] = {}
    sharded = _outcome(lambda: metric_cases.shard_results(backend, lambda **kw: make(case, **kw), inputs, n))
    for s in ("padded", "uneven", "cat", "indices"):
        got[s] = (sharded[0], sharded[1][s]) if sharded[0] == "ok" else sharded
    metric = make(case, dist_backend=backend)
    metric_cases.feed(metric, inputs, sampler_order(n, ws)[rank::ws])
    got["sampler"] = _outcome(lambda: metric.compute(size=n))
    refusing = make(case, dist_backend=backend)
    if rank == ws - 1 and ws > 1:
        try:
            refusing.add(*refused_batch(case))
        except Exception:
            pass
    metric_cases.feed(refusing, inputs, list(range(n))[rank::ws])
    got["refusal"] = _outcome(lambda: refusing.compute(size=n))
    empty = make(case, dist_backend=backend)
    if rank < ws - 1 or ws == 1:
        metric_cases.feed(empty, inputs, list(range(n))[rank :: max(ws - 1, 1)], with_indices=True)
    got["empty_rank"] = _outcome(empty.compute)
    return got
