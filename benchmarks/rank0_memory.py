"""Issue 33 item 5: rank 0's peak extra memory in a per-sample ``compute()``, the first call of a fresh process.

Every rank adds ``--samples`` samples of ``--classes`` float64 scores and 0/1
labels (in batches of 1,000) to a fresh metric (``AveragePrecision`` keeps
float64 scores and bool labels: 90 bytes a sample at 10 classes); around
``compute()`` rank 0 resets its peak RSS (``/proc/self/clear_refs``) and reads
``VmHWM`` after (tracemalloc does not see the transport's buffers). Peak extra
= ``VmHWM`` after minus ``VmRSS`` before, against the world's results (the
bytes every rank keeps, summed); target <= 1.5x on every backend.

Unlike ``metrics.py --cases per_sample_memory`` (the median of later calls,
after a warm-up), this is the *first* ``compute()`` of the process: a buffer
pooled by the transport across calls is counted, as a user's single
evaluation pays it. One metric per run (``--metric``), so nothing earlier in
the process has faulted in memory that the call reuses.

Run (one at a time; the figures are in docs/benchmarks.md and docs/reliability.md)::

    python benchmarks/rank0_memory.py --backend mpi4py --world-size 2 --samples 2000000
    python benchmarks/rank0_memory.py --backend torch_cpu --world-size 4 --metric collection
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
from metrics import _scores_kept


def run_rank(comm: Comm, args: argparse.Namespace, backend: str) -> List[Dict[str, Any]]:
    warnings.simplefilter("ignore")
    from mmeval import AveragePrecision

    n, c = args.samples, args.classes
    rng = np.random.default_rng(33 + comm.rank)
    scores = rng.random((n, c))
    labels = (rng.random((n, c)) < 0.2).astype(np.int64)
    metric = (AveragePrecision if args.metric == "AveragePrecision" else _scores_kept)(dist_backend=backend)
    for start in range(0, n, 1000):
        metric.add(scores[start : start + 1000], labels[start : start + 1000])
    del scores, labels
    # the world's results: what every rank keeps (AveragePrecision: float64 scores and bool labels)
    world_bytes = int(sum(comm.gather_floats(float(sum(a.nbytes for b in metric._kept.batches for a in b.values())))))
    gc.collect()
    common.trim_heap()
    comm.barrier()
    before = common.vm_status().get("VmRSS", 0)
    common.reset_peak_rss()
    t0 = time.perf_counter()
    metric.compute(size=n * comm.ws)
    dt = comm.max(time.perf_counter() - t0)
    peak = common.vm_status().get("VmHWM", 0) - before
    peaks = comm.gather_floats(float(peak))
    record = {
        "kind": "rank0_memory",
        "metric": args.metric,
        "backend": backend,
        "ws": comm.ws,
        "samples_per_rank": n,
        "classes": c,
        "world_results_bytes": world_bytes,
        "peak_extra_bytes_per_rank": peaks,
        "compute_s": dt,
    }
    if comm.rank == 0:
        print(
            f"{args.metric} {backend} ws={comm.ws} samples/rank={n} x {c}: rank 0 peak extra "
            f"{peaks[0] / 2**20:.1f} MiB / world's results {world_bytes / 2**20:.1f} MiB = "
            f"{peaks[0] / world_bytes:.2f}x (target <= 1.5x); other ranks "
            f"{[round(p / 2**20, 1) for p in peaks[1:]]} MiB; compute {dt:.2f} s",
            flush=True,
        )
    return [record]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("torch_cpu", "mpi4py"), default="mpi4py")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--metric", choices=("AveragePrecision", "collection"), default="AveragePrecision")
    parser.add_argument("--samples", type=int, default=2_000_000, help="samples per rank")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", default=None)
    return launch(__file__, parser.parse_args(argv), argv, run_rank)


if __name__ == "__main__":
    sys.exit(main())
