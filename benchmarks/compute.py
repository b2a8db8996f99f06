"""``BaseMetric.compute`` end to end: Accuracy over 100,000 samples per rank, wall time and peak memory per rank.

Every rank adds ``--samples`` samples (``--classes`` float32 scores and an
int64 label each, in batches of 1,000) to a fresh ``Accuracy(topk=(1, 5))``,
then ``compute()`` runs; its time is the slowest rank's. Around ``compute()``
each rank resets its peak RSS (``/proc/self/clear_refs``) and reads
``VmHWM`` after: the peak *extra* memory of the call, beside the bytes of the
rank's own results.

The same script runs both sides of the comparison:

* ``--impl ours``: this project (``ArrayResults``: gather to rank 0 only),
  interleaved with a raw all-gather of the scores' bytes (the issue's yardstick:
  a gloo ``all_gather_into_tensor`` / MPI ``Allgatherv`` of
  ``samples x classes x 4`` bytes per rank into a fresh buffer);
* ``--impl mmeval021``: MMEval 0.2.1 from PyPI, run with the Python of its own
  environment (``mmeval021_env.py``): same data, same calls. Its ``mpi4py``
  backend only counts itself initialized under Open MPI
  (``OMPI_COMM_WORLD_SIZE``); under MPICH this script sets that variable, as
  the baseline did, or its ``compute()`` would silently skip the gather.

Run::

    python benchmarks/compute.py --impl ours --backend torch_cpu --world-size 2
    .tox/bench-mmeval021/bin/python benchmarks/compute.py --impl mmeval021 --backend mpi4py --world-size 4
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common
from common import MALLOC_PIN

BATCH = 1000
TOPK = (1, 5)


def rank_data(rank: int, samples: int, classes: int) -> Dict[str, np.ndarray]:
    """Rank ``rank``'s scores (float32) and labels (int64); the same in both environments."""
    rng = np.random.default_rng(7 + rank)
    return {
        "scores": rng.random((samples, classes), dtype=np.float32),
        "labels": rng.integers(0, classes, samples).astype(np.int64),
    }


class Comm:
    """The few group operations the benchmark itself needs, over torch.distributed or MPI."""

    rank = 0
    ws = 1

    def barrier(self) -> None:
        raise NotImplementedError

    def idle_barrier(self) -> None:
        """A barrier whose waiting ranks sleep (an MPI barrier polls a CPU at full speed while it waits): for
        waiting while another rank is timed alone."""
        self.barrier()

    def max(self, value: float) -> float:
        raise NotImplementedError

    def gather_floats(self, value: float) -> List[float]:
        """``value`` of every rank (on every rank)."""
        raise NotImplementedError

    def raw_all_gather(self, nbytes: int) -> Dict[str, Callable[[], Any]]:
        """Raw all-gathers of ``nbytes`` per rank: into a fresh receive buffer (``raw``) and a preallocated one."""
        raise NotImplementedError

    def close(self) -> None:
        """Tear the group down."""


class TorchComm(Comm):
    def __init__(self, rank: int, ws: int, port: int) -> None:
        import torch
        import torch.distributed as dist

        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=timedelta(seconds=900)
        )
        self.torch, self.dist, self.rank, self.ws = torch, dist, rank, ws

    def barrier(self) -> None:
        self.dist.barrier()

    def max(self, value: float) -> float:
        t = self.torch.tensor([value], dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t[0])

    def gather_floats(self, value: float) -> List[float]:
        t = self.torch.zeros(self.ws, dtype=self.torch.float64)
        t[self.rank] = value
        self.dist.all_reduce(t)
        return [float(x) for x in t]

    def raw_all_gather(self, nbytes: int) -> Dict[str, Callable[[], Any]]:
        torch, dist = self.torch, self.dist
        src = torch.ones(nbytes, dtype=torch.uint8)
        pre = torch.empty(nbytes * self.ws, dtype=torch.uint8)
        into = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

        def raw() -> Any:  # numpy memory: huge pages, as mmeval's own buffers (torch.empty faults 4 KiB pages)
            recv = torch.from_numpy(np.empty(nbytes * self.ws, dtype=np.uint8))
            into(recv, src)
            return recv

        return {"raw": raw, "raw_prealloc": lambda: into(pre, src)}

    def close(self) -> None:
        self.dist.destroy_process_group()


class MPIComm(Comm):
    def __init__(self) -> None:
        from mpi4py import MPI

        self.MPI, self.comm = MPI, MPI.COMM_WORLD
        self.rank, self.ws = self.comm.Get_rank(), self.comm.Get_size()

    def barrier(self) -> None:
        self.comm.Barrier()

    def idle_barrier(self) -> None:
        request = self.comm.Ibarrier()
        while not request.Test():
            time.sleep(0.0005)

    def max(self, value: float) -> float:
        return float(self.comm.allreduce(value, op=self.MPI.MAX))

    def gather_floats(self, value: float) -> List[float]:
        return [float(x) for x in self.comm.allgather(value)]

    def raw_all_gather(self, nbytes: int) -> Dict[str, Callable[[], Any]]:
        MPI, comm, ws = self.MPI, self.comm, self.ws
        src = np.ones(nbytes, dtype=np.uint8)
        pre = np.empty(nbytes * ws, dtype=np.uint8)
        counts, displs = [nbytes] * ws, [r * nbytes for r in range(ws)]

        def raw() -> Any:
            recv = np.empty(nbytes * ws, dtype=np.uint8)
            comm.Allgatherv([src, MPI.BYTE], [recv, (counts, displs), MPI.BYTE])
            return recv

        return {"raw": raw, "raw_prealloc": lambda: comm.Allgatherv([src, MPI.BYTE], [pre, (counts, displs), MPI.BYTE])}


def _results_nbytes(metric: Any, impl: str) -> int:
    """Bytes of this rank's own accumulated results (arrays' bytes; pickled size for per-sample objects)."""
    if impl == "ours":
        return int(sum(a.nbytes for batch in metric._batches for a in batch.values()))
    import pickle

    return len(pickle.dumps(metric._results, protocol=5))


def run_rank(comm: Comm, args: argparse.Namespace, backend: str) -> List[Dict[str, Any]]:
    """Time ``compute()`` (and, for ours, the raw all-gather) interleaved; return records (rank 0's are complete)."""
    warnings.simplefilter("ignore")  # 0.2.1's torch backend warns on every call (ByteStorage.from_buffer)
    from mmeval import Accuracy

    if args.impl == "mmeval021" and backend == "mpi4py":
        os.environ.setdefault("OMPI_COMM_WORLD_SIZE", str(comm.ws))  # 0.2.1 only sees Open MPI (see the doc)
    data = rank_data(comm.rank, args.samples, args.classes)
    everything = [rank_data(r, args.samples, args.classes) for r in range(comm.ws)]
    order = np.argsort(np.concatenate([np.arange(args.samples) * comm.ws + r for r in range(comm.ws)]), kind="stable")
    all_scores = np.concatenate([d["scores"] for d in everything])[order]  # dataset order: round-robin ('unzip')
    all_labels = np.concatenate([d["labels"] for d in everything])[order]
    reference = Accuracy(topk=TOPK)(all_scores, all_labels)
    del everything, all_scores, all_labels, order

    def fresh() -> Any:
        metric = Accuracy(topk=TOPK, dist_backend=backend)
        t0 = time.perf_counter()
        for start in range(0, args.samples, BATCH):
            metric.add(data["scores"][start : start + BATCH], data["labels"][start : start + BATCH])
        return metric, time.perf_counter() - t0

    raws = comm.raw_all_gather(args.samples * args.classes * 4) if args.impl == "ours" else {}
    names = ["compute", *raws]
    times: Dict[str, List[float]] = {n: [] for n in names}
    add_s: List[float] = []
    peaks: List[List[float]] = []
    own = 0
    for it in range(args.warmup + args.iters):
        k = it % len(names)
        for name in names[k:] + names[:k]:
            metric: Any = None
            if name == "compute":
                metric, added = fresh()
                own = _results_nbytes(metric, args.impl)
            gc.collect()
            comm.barrier()
            before = common.vm_status().get("VmRSS", 0)
            common.reset_peak_rss()
            t0 = time.perf_counter()
            out = metric.compute() if name == "compute" else raws[name]()
            dt = time.perf_counter() - t0
            peak = common.vm_status().get("VmHWM", 0) - before
            if name == "compute" and it == 0:
                for key, want in reference.items():
                    assert abs(float(out[key]) - float(want)) < 1e-9, (key, out, reference)
            del out, metric
            worst = comm.max(dt)
            if it >= args.warmup:
                times[name].append(worst)
                if name == "compute":
                    peaks.append(comm.gather_floats(float(peak)))
                    add_s.append(comm.max(added))
    records = []
    for name in names:
        rec: Dict[str, Any] = {
            "kind": "compute",
            "impl": args.impl,
            "backend": backend,
            "ws": comm.ws,
            "method": name,
            "samples_per_rank": args.samples,
            "classes": args.classes,
            "times_s": times[name],
            "median_s": common.median(times[name]),
        }
        if name == "compute":
            per_rank = [float(np.median([p[r] for p in peaks])) for r in range(comm.ws)]
            rec.update(
                {
                    "peak_extra_bytes_per_rank": per_rank,
                    "own_results_bytes": own,
                    "add_median_s": common.median(add_s),
                    "result": {k: float(v) for k, v in reference.items()},
                }
            )
        else:
            rec["bytes"] = args.samples * args.classes * 4
        records.append(rec)
    if comm.rank == 0:
        print(
            f"  compute {args.impl:9s} {backend} ws={comm.ws}: "
            + " ".join(f"{r['method']}={r['median_s'] * 1e3:.1f}ms" for r in records)
            + f"  peak extra MB per rank {[round(x / 2**20, 1) for x in records[0]['peak_extra_bytes_per_rank']]}"
            + f" (own results {own / 2**20:.1f} MB)",
            flush=True,
        )
    return records


def _finish(comm: Comm, args: argparse.Namespace, records: List[Dict[str, Any]]) -> None:
    if comm.rank == 0 and args.out:
        import mmeval

        meta = {"mmeval_version": getattr(mmeval, "__version__", "?"), "python": sys.executable}
        common.write_json(Path(args.out), {"meta": meta, "records": records})


#: One rank's part of a benchmark: ``work(comm, args, backend_name)`` returns its records (rank 0's complete).
RankWork = Callable[[Comm, argparse.Namespace, str], List[Dict[str, Any]]]


def _torch_entry(rank: int, ws: int, port: int, job: Tuple[RankWork, argparse.Namespace]) -> None:
    """Entry point of a spawned rank: run ``work`` over a gloo group and write rank 0's records."""
    work, args = job
    comm = TorchComm(rank, ws, port)
    try:
        _finish(comm, args, work(comm, args, "torch_cpu"))
    finally:
        comm.close()


def launch(script: str, args: argparse.Namespace, argv: Optional[List[str]], work: RankWork) -> int:
    """Run ``work`` on ``args.world_size`` ranks of ``args.backend``: spawned gloo ranks, or under ``mpiexec``
    (``script`` relaunches itself there with ``argv``); every rank pinned like the rest of the suite."""
    os.environ.update(MALLOC_PIN)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.backend == "mpi4py":
        if not common.under_mpi_launcher():
            return common.relaunch_under_mpiexec(
                script, args.world_size, argv if argv is not None else sys.argv[1:], args.timeout
            )
        comm = MPIComm()
        _finish(comm, args, work(comm, args, "mpi4py"))
        return 0
    return common.spawn_torch_ranks(_torch_entry, args.world_size, (work, args), args.timeout)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=("ours", "mmeval021"), default="ours")
    parser.add_argument("--backend", choices=("torch_cpu", "mpi4py"), default="torch_cpu")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--samples", type=int, default=100_000, help="samples per rank")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", default=None)
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    return launch(__file__, parse_args(argv), argv, run_rank)


if __name__ == "__main__":
    sys.exit(main())
