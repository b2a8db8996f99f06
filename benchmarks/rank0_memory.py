"""Rank 0's peak extra memory in a per-sample ``compute()``, the first call of a fresh process.

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

Each backend's ranks start as its users start them: spawned gloo ranks
(torch_cpu), ``mpiexec`` (mpi4py), ``python -m paddle.distributed.launch``
(paddle_dist), one process per rank calling ``jax.distributed.initialize``
(jax), ``horovodrun --gloo`` (torch_horovod); the script relaunches itself
under the launcher. On the last three the benchmark's own few group operations
go through the mmeval backend itself.

Run (one at a time; the figures are in docs/benchmarks.md and docs/reliability.md)::

    python benchmarks/rank0_memory.py --backend mpi4py --world-size 2 --samples 2000000
    python benchmarks/rank0_memory.py --backend torch_cpu --world-size 4 --metric collection
    python benchmarks/rank0_memory.py --backend paddle_dist --world-size 2 --samples 2000000
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
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


class BackendComm(Comm):
    """The benchmark's few group operations over the mmeval backend being measured (its launcher started the ranks)."""

    def __init__(self, backend: str) -> None:
        from mmeval.core.dist import get_dist_backend

        self.backend = get_dist_backend(backend)
        self.rank, self.ws = self.backend.rank, self.backend.world_size

    def barrier(self) -> None:
        self.backend.barrier()

    def max(self, value: float) -> float:
        return max(self.gather_floats(value))

    def gather_floats(self, value: float) -> List[float]:
        return [float(x) for x in self.backend.all_gather_object(float(value))]


#: How each launched backend's rank tells it was started by its launcher, and joins its group.
_JAX_RANK = "MMEVAL_BENCH_JAX_RANK"


def _join(backend: str) -> bool:
    """Initialize the framework's group in a launched rank; ``False`` when this process is not one (relaunch)."""
    if backend == "paddle_dist":
        if "PADDLE_TRAINER_ID" not in os.environ:
            return False
        import paddle.distributed as dist

        dist.init_parallel_env()
    elif backend == "jax":
        if _JAX_RANK not in os.environ:
            return False
        import jax

        port, ws, rank = (int(x) for x in os.environ[_JAX_RANK].split(":"))
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=ws, process_id=rank)
    else:
        if "HOROVOD_RANK" not in os.environ:
            return False
        import horovod.torch as hvd

        hvd.init()
    return True


def _relaunch(args: argparse.Namespace, argv: List[str]) -> int:
    """Start ``args.world_size`` ranks of this script under the backend's own launcher; the launcher's status."""
    script, ws = os.path.abspath(__file__), str(args.world_size)
    env = {**os.environ, "PADDLE_DISTRI_BACKEND": "gloo", "GLOG_minloglevel": "2", "JAX_PLATFORMS": "cpu"}
    try:
        if args.backend == "paddle_dist":
            with tempfile.TemporaryDirectory(prefix="mmeval-rank0-") as logs:  # the launcher shows rank 0's log
                cmd = [sys.executable, "-m", "paddle.distributed.launch", "--log_dir", logs, "--nproc_per_node", ws]
                return subprocess.run([*cmd, script, *argv], env=env, timeout=args.timeout).returncode
        if args.backend == "jax":
            from mmeval.testing.ranks import free_port

            port = free_port()
            procs = [
                subprocess.Popen([sys.executable, script, *argv], env={**env, _JAX_RANK: f"{port}:{ws}:{r}"})
                for r in range(args.world_size)
            ]
            end = time.monotonic() + args.timeout
            try:
                return max(p.wait(timeout=max(end - time.monotonic(), 0.1)) for p in procs)
            finally:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
        cmd = ["horovodrun", "--gloo", "-np", ws, "-H", f"localhost:{ws}", sys.executable, script, *argv]
        return subprocess.run(cmd, env=env, timeout=args.timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"ranks exceeded {args.timeout:g}s and were killed", file=sys.stderr)
        return 124


#: Backends whose launcher starts the ranks (the others: benchmarks/compute.py's launch).
LAUNCHED = ("paddle_dist", "jax", "torch_horovod")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("torch_cpu", "mpi4py", *LAUNCHED), default="mpi4py")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--metric", choices=("AveragePrecision", "collection"), default="AveragePrecision")
    parser.add_argument("--samples", type=int, default=2_000_000, help="samples per rank")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.backend not in LAUNCHED:
        return launch(__file__, args, argv, run_rank)
    os.environ.update(common.MALLOC_PIN)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if not _join(args.backend):
        return _relaunch(args, list(argv if argv is not None else sys.argv[1:]))
    comm = BackendComm(args.backend)
    records = run_rank(comm, args, args.backend)
    if comm.rank == 0 and args.out:
        common.write_json(Path(args.out), {"meta": {"python": sys.executable}, "records": records})
    comm.barrier()  # every rank leaves together (jax's shutdown barrier, horovod's)
    return 0


if __name__ == "__main__":
    sys.exit(main())
