"""all_gather of a 64 MB numpy payload at world size 2: mmeval's torch_cpu vs torch's all_gather_object vs raw gloo.

Run::

    python benchmarks/bench_torch_allgather.py            # 2 spawned ranks, gloo on 127.0.0.1
    python benchmarks/bench_torch_allgather.py --profile  # + cProfile of mmeval's call on rank 0

The workers run with ``MALLOC_MMAP_THRESHOLD_=65536`` (set in the environment
before they are spawned): glibc's adaptive mmap threshold otherwise makes
timings depend on the order the methods run in.

Methods, interleaved in one run (each iteration runs every method once, in a
rotating order), each preceded by a barrier:

* ``mmeval TorchCPUDist.all_gather_object`` -- ``{"data": array, "rank": r}``;
* ``torch.distributed.all_gather_object`` -- the same dict;
* ``raw all_gather_into_tensor (alloc)`` -- a uint8 tensor of the array's
  bytes, into a receive tensor allocated each time (what an object collective
  has to do: the received objects live in fresh memory);
* ``raw all_gather_into_tensor (prealloc)`` -- the same into a receive tensor
  allocated once (the floor).

A time is the slowest rank's (MAX over ranks) per iteration; the table shows
medians and ratios to both raw variants.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import socket
import sys
import time
from datetime import timedelta
from typing import Any, Callable, Dict, List

import numpy as np

MB = 2**20
RAW_ALLOC = "raw all_gather_into_tensor (alloc)"
RAW_PREALLOC = "raw all_gather_into_tensor (prealloc)"
OURS = "mmeval TorchCPUDist.all_gather_object"
TORCHS = "torch.distributed.all_gather_object"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def worker(rank: int, ws: int, port: int, args: argparse.Namespace) -> None:
    """One rank: check every method's result, then time them interleaved; rank 0 prints the table."""
    import torch
    import torch.distributed as dist

    from mmeval_torch import TorchCPUDist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws,
                            timeout=timedelta(seconds=600))
    nbytes = args.mb * MB
    data = np.random.default_rng(rank).integers(0, 255, nbytes, dtype=np.uint8)
    payload = {"data": data, "rank": rank}
    backend = TorchCPUDist(timeout=600)
    tensor = torch.from_numpy(data)
    prealloc = torch.empty(nbytes * ws, dtype=torch.uint8)
    gather_into = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def ours() -> Any:
        return backend.all_gather_object(payload)

    def torchs() -> Any:
        out: List[Any] = [None] * ws
        dist.all_gather_object(out, payload)
        return out

    def raw_alloc() -> Any:
        recv = torch.empty(nbytes * ws, dtype=torch.uint8)
        gather_into(recv, tensor)
        return recv

    def raw_prealloc() -> Any:
        gather_into(prealloc, tensor)
        return prealloc

    methods: Dict[str, Callable[[], Any]] = {OURS: ours, TORCHS: torchs, RAW_ALLOC: raw_alloc,
                                             RAW_PREALLOC: raw_prealloc}
    names = list(methods)

    # correctness first
    expect = [np.random.default_rng(r).integers(0, 255, nbytes, dtype=np.uint8) for r in range(ws)]
    for name in (OURS, TORCHS):
        got = methods[name]()
        assert [g["rank"] for g in got] == list(range(ws)), name
        assert all(np.array_equal(g["data"], e) for g, e in zip(got, expect)), name
        del got
    for name in (RAW_ALLOC, RAW_PREALLOC):
        got = methods[name]().numpy()
        assert all(np.array_equal(got[r * nbytes : (r + 1) * nbytes], e) for r, e in enumerate(expect)), name
        del got
    del expect

    times: Dict[str, List[float]] = {n: [] for n in names}
    worst = torch.zeros(1, dtype=torch.float64)
    for it in range(args.warmup + args.iters):
        order = names[it % len(names) :] + names[: it % len(names)]
        for name in order:
            dist.barrier()
            t0 = time.perf_counter()
            out = methods[name]()
            dt = time.perf_counter() - t0
            del out
            worst[0] = dt
            dist.all_reduce(worst, op=dist.ReduceOp.MAX)
            if it >= args.warmup:
                times[name].append(float(worst[0]))

    if args.profile:
        prof = cProfile.Profile()
        for _ in range(5):
            dist.barrier()
            prof.enable()
            ours()
            prof.disable()
        if rank == 0:
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(18)
            print("\ncProfile of 5 x mmeval TorchCPUDist.all_gather_object on rank 0:\n" + text.getvalue())

    if rank == 0:
        base = float(np.median(times[RAW_ALLOC]))
        floor = float(np.median(times[RAW_PREALLOC]))
        print(
            f"\nall_gather of a {args.mb} MiB numpy payload, world size {ws}, {args.iters} iterations "
            f"(median of per-iteration max over ranks); torch {torch.__version__}, gloo on 127.0.0.1, "
            f"MALLOC_MMAP_THRESHOLD_={os.environ.get('MALLOC_MMAP_THRESHOLD_', 'unset')}, "
            f"{os.cpu_count()} CPUs\n"
        )
        print(f"| method | median ms | min ms | vs {RAW_ALLOC} | vs {RAW_PREALLOC} |")
        print("|---|---|---|---|---|")
        for name in names:
            med = float(np.median(times[name]))
            print(f"| {name} | {med * 1e3:.1f} | {min(times[name]) * 1e3:.1f} | {med / base:.2f}x | "
                  f"{med / floor:.2f}x |")
        sys.stdout.flush()
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="payload size in MiB (default 64)")
    parser.add_argument("--iters", type=int, default=21, help="timed iterations per method")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="also cProfile mmeval's call on rank 0")
    args = parser.parse_args()

    # the workers inherit these when spawned: pin the allocator, keep gloo on loopback, one thread per rank
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch.multiprocessing as mp

    print(f"$ MALLOC_MMAP_THRESHOLD_=65536 {sys.executable} {' '.join(sys.argv)}", flush=True)
    mp.spawn(worker, args=(args.world_size, _free_port(), args), nprocs=args.world_size, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
