"""Issue 15's figures: what a metric's ``compute()`` moves and holds, against its yardstick, in one run.

Per rank, in one process group (torch_cpu: spawned gloo ranks; mpi4py: under ``mpiexec``):

* ``accuracy_state`` -- ``Accuracy(topk=(1, 5))`` over ``--accuracy-samples`` samples of 10 float32
  scores per rank (1,000,000 by default): bytes this rank sends during ``compute()`` (the comm-stats
  hook), and ``compute()``'s time against a raw all-gather of the scores' bytes (interleaved, the
  slowest rank's time, median over iterations). Targets: <= 4 KiB sent, independent of the number of
  samples (measured at two sample counts); time <= 0.05x the raw all-gather.
* ``mean_iou_state`` -- ``MeanIoU`` with 150 classes over ``--iou-images`` label maps of 512x512 per
  rank (1,000 by default): bytes sent during ``compute()`` against one int64 150x150 confusion
  matrix (target <= 1.1x).
* ``per_sample_memory`` -- a per-sample metric over ``--ap-samples`` samples of 20 float32 scores and
  20 int64 labels per rank: rank 0's peak extra memory during ``compute()`` (VmHWM after minus VmRSS
  before, peak reset through ``/proc/self/clear_refs``) against the world's results (target <= 1.5x).
  Twice: a metric whose ``compute_metric`` costs nothing (the collection itself: gather, decode, put
  in dataset order, drop the padding), and ``AveragePrecision`` (its own ranking allocates too; info).

Run::

    python benchmarks/metrics.py --backend torch_cpu --world-size 2 --out /tmp/m.json
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import warnings
from typing import Any, Dict, List, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common
from compute import Comm, launch

CLASSES = 10
IOU_CLASSES = 150
IOU_SIDE = 512
AP_CLASSES = 20


def _sent_during(fn: Any, *fn_args: Any, **fn_kwargs: Any) -> Any:
    """``fn(*fn_args, **fn_kwargs)``'s result and the bytes this rank sent meanwhile (the comm-stats hook)."""
    from mmeval.core.hooks import enable_comm_stats

    stats = enable_comm_stats(print_at_exit=False)
    stats.reset()
    out = fn(*fn_args, **fn_kwargs)
    sent = sum(row["bytes_sent"] for row in stats.rows())
    calls = stats.calls
    stats.reset()
    return out, int(sent), int(calls)


def accuracy_state(comm: Comm, args: argparse.Namespace, backend: str) -> List[Dict[str, Any]]:
    from mmeval import Accuracy

    records = []
    for samples in (args.accuracy_samples // 10, args.accuracy_samples):
        rng = np.random.default_rng(11 + comm.rank)
        metric = Accuracy(topk=(1, 5), dist_backend=backend)
        batch = 10_000
        scores = rng.random((batch, CLASSES), dtype=np.float32)
        for _ in range(0, samples, batch):
            labels = rng.integers(0, CLASSES, batch)
            metric.add(scores, labels)
        comm.barrier()
        _, sent, calls = _sent_during(metric.compute, size=samples * comm.ws)
        raws = comm.raw_all_gather(samples * CLASSES * 4) if samples == args.accuracy_samples else {}
        names = ["compute", *raws]
        times: Dict[str, List[float]] = {n: [] for n in names}
        for it in range(args.iters + 1):
            k = it % len(names)
            for name in names[k:] + names[:k]:
                gc.collect()
                comm.barrier()
                t0 = time.perf_counter()
                out = metric.compute(size=samples * comm.ws) if name == "compute" else raws[name]()
                dt = comm.max(time.perf_counter() - t0)
                del out
                if it:  # the first round warms up
                    times[name].append(dt)
        rec: Dict[str, Any] = {
            "kind": "metrics",
            "case": "accuracy_state",
            "backend": backend,
            "ws": comm.ws,
            "samples_per_rank": samples,
            "classes": CLASSES,
            "sent_bytes_per_rank": comm.gather_floats(float(sent)),
            "collectives": calls,
            "compute_s": common.median(times["compute"]),
        }
        if raws:
            rec["raw_all_gather_s"] = common.median(times["raw"])
            rec["raw_bytes_per_rank"] = samples * CLASSES * 4
        records.append(rec)
        del metric
    return records


def mean_iou_state(comm: Comm, args: argparse.Namespace, backend: str) -> List[Dict[str, Any]]:
    from mmeval import MeanIoU

    rng = np.random.default_rng(21 + comm.rank)
    # a pool of realistic maps: blocks of one class, 5% of the pixels ignored (255), predictions 80% right
    pool = []
    for _ in range(8):
        coarse = rng.integers(0, IOU_CLASSES, (IOU_SIDE // 32, IOU_SIDE // 32))
        label = np.kron(coarse, np.ones((32, 32), dtype=np.int64))
        label[rng.random(label.shape) < 0.05] = 255
        pred = np.where(rng.random(label.shape) < 0.8, label, rng.integers(0, IOU_CLASSES, label.shape))
        pred[pred == 255] = 0
        pool.append((pred[None], label[None]))
    metric = MeanIoU(num_classes=IOU_CLASSES, dist_backend=backend)
    t0 = time.perf_counter()
    for i in range(args.iou_images):
        pred, label = pool[i % len(pool)]
        metric.add(pred, label)
    add_s = comm.max(time.perf_counter() - t0)
    comm.barrier()
    t0 = time.perf_counter()
    _, sent, calls = _sent_during(metric.compute, size=args.iou_images * comm.ws)
    dt = comm.max(time.perf_counter() - t0)
    return [
        {
            "kind": "metrics",
            "case": "mean_iou_state",
            "backend": backend,
            "ws": comm.ws,
            "images_per_rank": args.iou_images,
            "classes": IOU_CLASSES,
            "side": IOU_SIDE,
            "sent_bytes_per_rank": comm.gather_floats(float(sent)),
            "collectives": calls,
            "confusion_matrix_bytes": IOU_CLASSES * IOU_CLASSES * 8,
            "compute_s": dt,
            "add_s": add_s,
        }
    ]


def _scores_kept(**kwargs: Any) -> Any:
    """A per-sample metric whose compute_metric costs nothing: what remains is the collection itself."""
    from mmeval.core import BaseMetric

    class ScoresKept(BaseMetric):
        def add(self, predictions: Any, labels: Any) -> None:  # type: ignore[override]
            self._add_batch(scores=predictions, labels=labels)

        def compute_metric(self, results: Any) -> Dict[str, float]:
            return {"samples": float(len(results))}

    return ScoresKept(**kwargs)


def per_sample_memory(comm: Comm, args: argparse.Namespace, backend: str) -> List[Dict[str, Any]]:
    from mmeval import AveragePrecision

    records = []
    for metric_name, make in (("collection only", _scores_kept), ("AveragePrecision", AveragePrecision)):
        records.append(_per_sample_memory(comm, args, backend, metric_name, make))
    return records


def _per_sample_memory(
    comm: Comm, args: argparse.Namespace, backend: str, metric_name: str, make: Any
) -> Dict[str, Any]:
    n = args.ap_samples
    rng = np.random.default_rng(31 + comm.rank)
    scores = rng.random((n, AP_CLASSES), dtype=np.float32)
    labels = (rng.random((n, AP_CLASSES)) < 0.2).astype(np.int64)
    world_bytes = (scores.nbytes + labels.nbytes) * comm.ws
    peaks, times = [], []
    for it in range(args.iters + 1):
        metric = make(dist_backend=backend)
        for start in range(0, n, 1000):
            metric.add(scores[start : start + 1000], labels[start : start + 1000])
        gc.collect()
        comm.barrier()
        before = common.vm_status().get("VmRSS", 0)
        common.reset_peak_rss()
        t0 = time.perf_counter()
        out = metric.compute(size=n * comm.ws)
        dt = comm.max(time.perf_counter() - t0)
        peak = common.vm_status().get("VmHWM", 0) - before
        del out, metric
        if it:
            peaks.append(comm.gather_floats(float(peak)))
            times.append(dt)
    per_rank = [float(np.median([p[r] for p in peaks])) for r in range(comm.ws)]
    return {
        "kind": "metrics",
        "case": "per_sample_memory",
        "metric": metric_name,
        "backend": backend,
        "ws": comm.ws,
        "samples_per_rank": n,
        "classes": AP_CLASSES,
        "world_results_bytes": world_bytes,
        "peak_extra_bytes_per_rank": per_rank,
        "compute_s": common.median(times),
    }


def run_rank(comm: Comm, args: argparse.Namespace, backend: str) -> List[Dict[str, Any]]:
    warnings.simplefilter("ignore")
    records: List[Dict[str, Any]] = []
    for case in args.cases:
        records += {
            "accuracy_state": accuracy_state,
            "mean_iou_state": mean_iou_state,
            "per_sample_memory": per_sample_memory,
        }[case](comm, args, backend)
        for rec in records if comm.rank == 0 else []:
            if rec["case"] == case:
                extra = {
                    k: rec[k]
                    for k in ("sent_bytes_per_rank", "peak_extra_bytes_per_rank", "compute_s", "raw_all_gather_s")
                    if k in rec
                }
                print(f"  {case} {rec.get('metric', '')} {backend} ws={comm.ws}: {extra}", flush=True)
    return records


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("torch_cpu", "mpi4py"), default="torch_cpu")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--cases", nargs="+", default=["accuracy_state", "mean_iou_state", "per_sample_memory"])
    parser.add_argument("--accuracy-samples", type=int, default=1_000_000)
    parser.add_argument("--iou-images", type=int, default=1000)
    parser.add_argument("--ap-samples", type=int, default=200_000)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", default=None)
    return launch(__file__, parser.parse_args(argv), argv, run_rank)


if __name__ == "__main__":
    sys.exit(main())
