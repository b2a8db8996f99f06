"""Five metrics in one ``MetricCollection.compute()`` against the same five metrics' own ``compute()`` calls.

The five take one input (class scores and labels): ``Accuracy`` and ``SingleLabelMetric`` (state
metrics: counts reduced), ``MultiLabelMetric``, ``AveragePrecision`` macro and per class (per-sample
metrics: gathered to rank 0). Every rank adds its round-robin shard of ``samples`` per rank, then,
side by side in one process group:

* ``collection``: one ``MetricCollection.compute(size=...)``;
* ``separate``: each metric's ``compute(size=...)``, one after the other.

Per side: the collectives and bytes this rank sends during the call (the comm-stats hook; the most any
rank sent), and the call's time, the slowest rank's, median over ``--iters`` (data added again before
each; the two sides interleaved). The collection's results are checked equal to the separate ones.

Run::

    python benchmarks/collection.py --backend torch_cpu --world-size 2 --out /tmp/collection.json
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import warnings
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common
from compute import Comm, launch
from metrics import _sent_during

CLASSES = 10
#: samples per rank measured: a small evaluation (the rounds' latency dominates) and a larger one
SIZES = (1_000, 20_000)


def _metrics(backend: str) -> Dict[str, Any]:
    from mmeval import Accuracy, AveragePrecision, MultiLabelMetric, SingleLabelMetric

    return {
        "accuracy": Accuracy(topk=(1, 5), thrs=None, dist_backend=backend),
        "single_label": SingleLabelMetric(dist_backend=backend),
        "multi_label": MultiLabelMetric(num_classes=CLASSES, dist_backend=backend),
        "ap": AveragePrecision(dist_backend=backend),
        "ap_per_class": AveragePrecision(average=None, dist_backend=backend),
    }


def _measure(comm: Comm, backend: str, per_rank: int, iters: int) -> Dict[str, Any]:
    import numpy as np

    from mmeval import MetricCollection

    n = per_rank * comm.ws
    rng = np.random.default_rng(7)
    labels = rng.integers(0, CLASSES, n)
    scores = rng.random((n, CLASSES)).astype(np.float32)
    scores[np.arange(n), labels] += 0.5
    scores /= scores.sum(axis=1, keepdims=True)
    mine = np.arange(comm.rank, n, comm.ws)

    def fed() -> Dict[str, Any]:
        metrics = _metrics(backend)
        for metric in metrics.values():
            metric.add(scores[mine], labels[mine])
        return metrics

    def together(metrics: Dict[str, Any]) -> Dict[str, Any]:
        return MetricCollection(metrics).compute(size=n)

    def apart(metrics: Dict[str, Any]) -> Dict[str, Any]:
        return MetricCollection(metrics).flatten({k: m.compute(size=n) for k, m in metrics.items()})

    out: Dict[str, Any] = {"samples_per_rank": per_rank}
    sides = {"collection": together, "separate": apart}
    results: Dict[str, Any] = {}
    times: Dict[str, List[float]] = {side: [] for side in sides}
    cpu: Dict[str, List[float]] = {side: [] for side in sides}
    for side, call in sides.items():
        metrics = fed()
        comm.barrier()
        results[side], sent, calls = _sent_during(call, metrics)
        out[side] = {"sent_bytes": max(comm.gather_floats(float(sent))), "collectives": calls}
    for it in range(iters + 1):  # interleaved, A B then B A: a change of the machine's load hits both sides
        for side in list(sides)[:: 1 if it % 2 else -1]:
            metrics = fed()
            gc.collect()
            comm.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            sides[side](metrics)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            dt, dc = comm.max(dt), sum(comm.gather_floats(dc))
            if it:  # the first round warms up
                times[side].append(dt)
                cpu[side].append(dc)
    for side in sides:
        out[side]["compute_s"] = common.median(times[side])
        out[side]["cpu_s"] = common.median(cpu[side])
    out["equal"] = repr(results["collection"]) == repr(results["separate"])
    return out


def run_rank(comm: Comm, args: argparse.Namespace, backend: str) -> List[Dict[str, Any]]:
    warnings.simplefilter("ignore")
    records = []
    for per_rank in args.samples or (SIZES[:1] if args.quick else SIZES):
        rec = {"kind": "collection", "backend": backend, "ws": comm.ws, **_measure(comm, backend, per_rank, args.iters)}
        records.append(rec)
        if comm.rank == 0:
            print(f"  collection {backend} ws={comm.ws} {per_rank}/rank: {rec}", flush=True)
    return records


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("torch_cpu", "mpi4py"), default="torch_cpu")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--iters", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="the small evaluation only")
    parser.add_argument("--samples", type=int, nargs="*", help=f"samples per rank (default {SIZES})")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    return launch(__file__, args, argv, run_rank)


if __name__ == "__main__":
    sys.exit(main())
