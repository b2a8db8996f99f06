"""Every metric on the real backends (issue 15 item 6): the cases, the shardings, and the comparison.

Shared by tests/torch/test_torch_metrics.py (torch_cpu), tests/mpi/test_mpi_metrics.py (mpi4py) and
tests/horovod/test_horovod_metrics.py (torch_horovod / tf_horovod), so that all three run the same
metrics on the same data against the same single-process results.

Two halves:

* parent side, :func:`build_payload` (needs scikit-learn): the data of every case, built by the core
  metric tests' own data functions (tests/core/test_metric_*.py: scikit-learn's digits and
  multilabel data, synthetic digit label maps and detections), and each case's single-process
  result (``non_dist``). :func:`write_payload` pickles it for programs started by a launcher.
* rank side, :func:`run_all` (numpy and mmeval only): every case under every sharding on one
  backend, each result compared on the rank with the single-process one. What comes back is plain
  data: ``{"<case>/<sharding>": None or a description of the difference}``.

Shardings of ``n`` samples over ``ws`` ranks (:data:`SHARDINGS`): ``padded`` (DistributedSampler's
round robin padded with the first samples, ``compute(size=n)``), ``uneven`` (round robin without
padding), ``cat`` (contiguous uneven blocks, ``dist_collect_mode='cat'``) -- all three from
tests/core/metric_helpers.compute_sharded -- and ``indices`` (a shuffled order padded by wrapping,
plus duplicates of random samples, dealt round robin, each batch added with ``indices=``, no
``size``). Counts must be equal, and floats too, bit for bit (:func:`difference`, issue 32 item 6: float
sums are exact, ``exact_sum``).
"""

from __future__ import annotations

import importlib
import os
import pickle
import sys
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CORE_TESTS = os.path.join(HERE, "core")
#: the core metric tests, whose data functions the case table imports (parent side)
METRIC_TESTS = os.path.join(CORE_TESTS, "metrics")
for _path in (HERE, CORE_TESTS, METRIC_TESTS):  # metric_helpers (rank side), the metric tests' data (parent side)
    if _path not in sys.path:
        sys.path.insert(0, _path)

from metric_helpers import compute_sharded  # noqa: E402

#: every sharding each case runs under, in order
SHARDINGS = ("padded", "uneven", "cat", "indices")
#: relative tolerance of float results (integer counts must be equal): none, every metric gives one process's bits
REL_TOL = 0.0
#: samples per add() call
BATCH = 7


def take(values: Any, idx: Sequence[int]) -> Any:
    """The samples of ``values`` (an array: first axis; a list: items) at ``idx``, in that order."""
    if isinstance(values, np.ndarray):
        return values[np.asarray(idx, dtype=np.int64)]
    return [values[i] for i in idx]


def feed(metric: Any, inputs: Sequence[Any], idx: Sequence[int], with_indices: bool = False) -> None:
    """``metric.add(...)`` the samples at ``idx`` of every input, :data:`BATCH` at a time (with ``indices=``)."""
    idx = list(idx)
    for s in range(0, len(idx), BATCH):
        chunk = idx[s : s + BATCH]
        args = [take(values, chunk) for values in inputs]
        if with_indices:
            metric.add(*args, indices=np.asarray(chunk, dtype=np.int64))
        else:
            metric.add(*args)


def metric_class(path: str) -> Any:
    """The class named ``"module:Class"``."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def indices_order(n: int, ws: int, seed: int = 15) -> List[int]:
    """A shuffled order of ``range(n)``, padded by wrapping to a multiple of ``ws``, plus ``ws + 1`` duplicates of
    random samples (so the total is not a multiple of ``ws`` either): what no per-sample sampler pads."""
    rng = np.random.default_rng(seed + ws)
    order = [int(i) for i in rng.permutation(n)]
    order += order[: -n % ws]
    order += [int(i) for i in rng.integers(0, n, ws + 1)]
    return order


# -- parent side ---------------------------------------------------------------------------------


def build_cases() -> Dict[str, Dict[str, Any]]:
    """Every case: ``{"metric": "module:Class", "kwargs": {...}, "inputs": [...], "n": int}``.

    The data come from the core metric tests (each already checked there against scikit-learn or a
    reference written from the definition), so these tests need scikit-learn in the parent process.
    """
    from test_metric_average_precision import multilabel_scores as ap_scores
    from test_metric_mean_iou import NUM_CLASSES as IOU_CLASSES
    from test_metric_mean_iou import digit_segmentation
    from test_metric_multi_label import C as ML_CLASSES
    from test_metric_multi_label import multilabel_scores
    from test_metric_single_label import digit_scores
    from test_metric_voc_map import KW as VOC_KW
    from test_metric_voc_map import detections

    n = 121  # no world size of 2 or 3 divides it: padding and uneven shards both happen
    digits, digit_labels = digit_scores()
    ml, ml_onehot = multilabel_scores()
    ml_lists = [[int(c) for c in np.flatnonzero(row)] for row in ml_onehot[:n]]
    tied, tied_onehot = ap_scores(decimals=1)
    tied_lists = [[int(c) for c in np.flatnonzero(row)] for row in tied_onehot[:n]]
    maps, map_labels = digit_segmentation(n)
    voc_n = 61
    dets, gts = detections(voc_n)
    classification = [digits[:n], digit_labels[:n]]
    items = ("precision", "recall", "f1-score", "support")
    return {
        "Accuracy": {
            "metric": "mmeval.metrics.accuracy:Accuracy",
            "kwargs": {"topk": (1, 3), "thrs": (None, 0.4)},
            "inputs": classification,
            "n": n,
        },
        "Accuracy-labels": {
            "metric": "mmeval.metrics.accuracy:Accuracy",
            "kwargs": {"topk": (1,)},
            "inputs": [digits[:n].argmax(axis=1), digit_labels[:n]],
            "n": n,
        },
        "SingleLabelMetric-macro": {
            "metric": "mmeval.metrics.single_label:SingleLabelMetric",
            "kwargs": {"thrs": (None, 0.4), "items": items, "average": "macro"},
            "inputs": classification,
            "n": n,
        },
        "SingleLabelMetric-classwise": {
            "metric": "mmeval.metrics.single_label:SingleLabelMetric",
            "kwargs": {"num_classes": 10, "items": items, "average": None},
            "inputs": [digits[:n].argmax(axis=1), digit_labels[:n]],
            "n": n,
        },
        "MultiLabelMetric-micro": {
            "metric": "mmeval.metrics.multi_label:MultiLabelMetric",
            "kwargs": {"num_classes": ML_CLASSES, "thr": 0.3, "items": items, "average": "micro"},
            "inputs": [ml[:n], ml_lists],
            "n": n,
        },
        "MultiLabelMetric-top2-classwise": {
            "metric": "mmeval.metrics.multi_label:MultiLabelMetric",
            "kwargs": {"num_classes": ML_CLASSES, "topk": 2, "items": items, "average": None},
            "inputs": [ml[:n], ml_onehot[:n]],
            "n": n,
        },
        "AveragePrecision": {
            "metric": "mmeval.metrics.average_precision:AveragePrecision",
            "kwargs": {},
            "inputs": [ml[:n], ml_lists],
            "n": n,
        },
        "AveragePrecision-ties-classwise": {
            "metric": "mmeval.metrics.average_precision:AveragePrecision",
            "kwargs": {"average": None},
            "inputs": [tied[:n], tied_lists],
            "n": n,
        },
        "MeanIoU": {
            "metric": "mmeval.metrics.mean_iou:MeanIoU",
            "kwargs": {"num_classes": IOU_CLASSES, "classwise_results": True},
            "inputs": [maps, map_labels],
            "n": n,
        },
        "VOCMeanAP": {
            "metric": "mmeval.metrics.voc_map:VOCMeanAP",
            "kwargs": dict(VOC_KW),
            "inputs": [dets, gts],
            "n": voc_n,
        },
    }


def case_modules() -> List[Any]:
    """The other case tables: every ``tests/metric_cases_<area>.py``, in name order.

    Each such module defines ``CASE_NAMES`` (a tuple) and ``build_cases()`` (parent side, returning
    the same kind of dict as :func:`build_cases` with exactly those keys), so that a metric family adds
    its cases without editing this file.
    """
    names = sorted(f[:-3] for f in os.listdir(HERE) if f.startswith("metric_cases_") and f.endswith(".py"))
    return [importlib.import_module(name) for name in names]


def all_cases() -> Dict[str, Dict[str, Any]]:
    """:func:`build_cases` followed by every case table of :func:`case_modules`."""
    cases = build_cases()
    for module in case_modules():
        more = module.build_cases()
        assert tuple(more) == tuple(module.CASE_NAMES), f"{module.__name__}: build_cases() keys != CASE_NAMES"
        clash = set(more) & set(cases)
        assert not clash, f"{module.__name__}: case names already used: {sorted(clash)}"
        cases.update(more)
    return cases


def build_payload() -> Dict[str, Dict[str, Any]]:
    """:func:`all_cases` with each case's single-process result (``non_dist``, all samples in order) as
    ``"want"``."""
    cases = all_cases()
    for case in cases.values():
        single = metric_class(case["metric"])(**case["kwargs"], dist_backend="non_dist")
        feed(single, case["inputs"], range(case["n"]))
        case["want"] = single.compute()
    return cases


def write_payload(path: str) -> Dict[str, Dict[str, Any]]:
    """Pickle :func:`build_payload` to ``path`` (for the ranks of a launcher) and return it."""
    payload = build_payload()
    with open(path, "wb") as f:
        pickle.dump(payload, f, protocol=pickle.HIGHEST_PROTOCOL)
    return payload


def read_payload(path: str) -> Dict[str, Dict[str, Any]]:
    with open(path, "rb") as f:
        return pickle.load(f)  # type: ignore[no-any-return]


# -- rank side -----------------------------------------------------------------------------------


def difference(got: Any, want: Any, path: str = "result") -> Optional[str]:
    """``None`` when ``got`` equals ``want``: same keys and lengths, integers and strings equal, floats equal to
    :data:`REL_TOL` relative (NaN equal to NaN); else where and how they differ."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or list(got) != list(want):
            return f"{path}: keys {list(got) if isinstance(got, dict) else type(got).__name__} != {list(want)}"
        for key in want:
            found = difference(got[key], want[key], f"{path}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(want, (list, tuple)) and not isinstance(got, np.ndarray):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return f"{path}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            found = difference(g, w, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(want, str) or isinstance(got, str):
        return None if got == want else f"{path}: {got!r} != {want!r}"
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"{path}: shape {g.shape} != {w.shape}"
    if w.dtype.kind in "biu" and g.dtype.kind in "biu":
        return None if np.array_equal(g, w) else f"{path}: counts {got!r} != {want!r}"
    if w.dtype.kind not in "biuf" or g.dtype.kind not in "biuf":
        return None if np.array_equal(g, w) else f"{path}: {got!r} != {want!r}"
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    if np.array_equal(np.isnan(g64), np.isnan(w64)):
        fin = ~np.isnan(w64)
        if np.all(np.abs(g64[fin] - w64[fin]) <= REL_TOL * np.abs(w64[fin])):
            return None
        return f"{path}: {got!r} != {want!r} (largest difference {np.max(np.abs(g64[fin] - w64[fin])):.3g})"
    return f"{path}: {got!r} != {want!r} (relative tolerance {REL_TOL:g})"


def shard_results(backend: Any, make: Callable[..., Any], inputs: Sequence[Any], n: int) -> Dict[str, Any]:
    """This rank's result of ``make(**kwargs)`` under every sharding of :data:`SHARDINGS`."""
    out = compute_sharded(backend, n, make, lambda metric, idx: feed(metric, inputs, idx))
    order = indices_order(n, backend.world_size)
    metric = make(dist_backend=backend)
    feed(metric, inputs, order[backend.rank :: backend.world_size], with_indices=True)
    out["indices"] = metric.compute()
    return out


def run_all(backend: Any, payload: Dict[str, Dict[str, Any]]) -> Dict[str, Optional[str]]:
    """Every case of ``payload`` under every sharding on ``backend`` (all ranks call it alike).

    Returns ``{"<case>/<sharding>": None}`` where the result equals the single-process one, else a
    description of the difference (or of what was raised: a raise fails every sharding of its case).
    """
    report: Dict[str, Optional[str]] = {}
    for name, case in payload.items():
        cls = metric_class(case["metric"])

        def make(_cls: Any = cls, _kw: Dict[str, Any] = case["kwargs"], **kwargs: Any) -> Any:
            return _cls(**_kw, **kwargs)

        try:
            results = shard_results(backend, make, case["inputs"], case["n"])
        except Exception:
            error = traceback.format_exc(limit=8)
            report.update({f"{name}/{s}": f"raised on rank {backend.rank}:\n{error}" for s in SHARDINGS})
            continue
        for sharding in SHARDINGS:
            found = difference(results[sharding], case["want"])
            report[f"{name}/{sharding}"] = None if found is None else f"rank {backend.rank}: {found}"
    return report


def case_failures(reports: Sequence[Dict[str, Optional[str]]], case: str) -> List[str]:
    """What went wrong for ``case`` on the ranks whose :func:`run_all` reports are ``reports`` (empty: all equal)."""
    problems = []
    for rank, report in enumerate(reports):
        keys = [k for k in report if k.split("/", 1)[0] == case]
        if len(keys) != len(SHARDINGS):
            problems.append(f"rank {rank} ran {len(keys)} shardings of {case}, not {len(SHARDINGS)}")
        problems += [f"{k}: {report[k]}" for k in keys if report[k] is not None]
    return problems


#: this file's case names (kept equal to build_cases' keys)
CORE_CASE_NAMES = (
    "Accuracy",
    "Accuracy-labels",
    "SingleLabelMetric-macro",
    "SingleLabelMetric-classwise",
    "MultiLabelMetric-micro",
    "MultiLabelMetric-top2-classwise",
    "AveragePrecision",
    "AveragePrecision-ties-classwise",
    "MeanIoU",
    "VOCMeanAP",
)
#: every case name, for parametrizing the tests without building the data (kept equal to all_cases' keys)
CASE_NAMES = CORE_CASE_NAMES + tuple(name for module in case_modules() for name in module.CASE_NAMES)
