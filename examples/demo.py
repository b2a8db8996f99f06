"""The main job: one evaluation, single-process and on every installed backend, in one table.

A small MLP is trained for a few seconds on scikit-learn's handwritten digits,
then evaluated on 541 held-out digits (a DataLoader with DistributedSampler;
541 divides by no world size used here, so shards are padded) with
``Accuracy(topk=(1, 3))``:

* single process (``non_dist``);
* ``torch_cpu``: ``torch.multiprocessing.spawn`` with 4 processes over gloo;
* ``mpi4py``: ``mpiexec -n 3``;
* ``torch_horovod`` / ``tf_horovod``: ``horovodrun -np 2 --gloo`` when installed.

Every distributed row must equal the single-process row; the demo exits 1 if
one does not (or if a run fails). Bytes moved come from mmeval's
communication-stats hook (rank 0's sent + received).

Run: python examples/demo.py        (the README's run command sets up the env)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "digits_dist_eval"))


def evaluate(rank: int, world_size: int, backend: str, out_path: Optional[str]) -> Dict[str, Any]:
    """Evaluate this rank's shard with ``backend``; rank 0 writes the result to ``out_path``."""
    import torch
    import tqdm
    from digits_common import get_eval_dataloader, get_model

    from mmeval import Accuracy
    from mmeval.core.hooks import enable_comm_stats

    stats = enable_comm_stats(print_at_exit=False)
    start = time.perf_counter()
    loader, total = get_eval_dataloader(rank, world_size)
    model = get_model()
    accuracy = Accuracy(topk=(1, 3), dist_backend=backend)
    with torch.no_grad():
        for images, labels in tqdm.tqdm(loader, disable=rank != 0, desc=f"{backend} x{world_size}", leave=False):
            accuracy.add(predictions=model(images), labels=labels)
    result = accuracy.compute(size=total)
    row = {"backend": backend, "world_size": world_size, "result": result,
           "seconds": time.perf_counter() - start, "bytes": stats.total_bytes}
    if rank == 0 and out_path:
        with open(out_path, "w") as fh:
            json.dump(row, fh)
    return row


def _torch_worker(rank: int, world_size: int, port: int, out_path: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=world_size, rank=rank)
    try:
        evaluate(rank, world_size, "torch_cpu", out_path)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_torch(world_size: int, out_path: str) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_torch_worker, args=(world_size, _free_port(), out_path), nprocs=world_size, join=True)


def _launcher(name: str) -> Optional[str]:
    local = os.path.join(os.path.dirname(sys.executable), name)
    return local if os.path.exists(local) else shutil.which(name)


def run_launched(cmd: List[str], timeout: float = 600) -> None:
    proc = subprocess.run(cmd, timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {proc.returncode}:\n{proc.stdout[-3000:]}")


def installed(name: str) -> bool:
    from mmeval.core.dist import list_all_backends

    return name in list_all_backends()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # a rank started by a launcher
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker == "mpi4py":
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        evaluate(comm.Get_rank(), comm.Get_size(), "mpi4py", args.out)
        return 0
    if args.worker in ("torch_horovod", "tf_horovod"):
        if args.worker == "torch_horovod":
            import horovod.torch as hvd
        else:
            import horovod.tensorflow as hvd
        hvd.init()
        evaluate(hvd.rank(), hvd.size(), args.worker, args.out)
        return 0

    from digits_common import train_model

    print("$ mmeval backends", flush=True)
    subprocess.run([sys.executable, "-m", "mmeval", "backends"], check=False)
    t = time.perf_counter()
    model_path = train_model()
    print(f"\ntrained the MLP on the digits in {time.perf_counter() - t:.1f}s -> {model_path}\n", flush=True)
    os.environ["DIGITS_MODEL"] = model_path

    rows: List[Dict[str, Any]] = []
    failures: List[str] = []
    rows.append(evaluate(0, 1, "non_dist", None))
    tmp = tempfile.mkdtemp(prefix="mmeval-demo-")
    me = os.path.abspath(__file__)
    plans = [
        ("torch_cpu", 4, lambda out: run_torch(4, out)),
        ("mpi4py", 3, lambda out: run_launched([_launcher("mpiexec") or "mpiexec", "-n", "3", sys.executable, me,
                                                 "--worker", "mpi4py", "--out", out])),
        ("torch_horovod", 2, lambda out: run_launched([_launcher("horovodrun") or "horovodrun", "-np", "2", "--gloo",
                                                        "-H", "localhost:2", "--network-interfaces", "lo",
                                                        sys.executable, me, "--worker", "torch_horovod", "--out", out])),
        ("tf_horovod", 2, lambda out: run_launched([_launcher("horovodrun") or "horovodrun", "-np", "2", "--gloo",
                                                     "-H", "localhost:2", "--network-interfaces", "lo",
                                                     sys.executable, me, "--worker", "tf_horovod", "--out", out])),
    ]
    skipped = []
    for name, _ws, run in plans:
        if not installed(name):
            skipped.append(f"{name} (its plugin is not installed)")
            continue
        if name.endswith("horovod") and not _horovod_usable(name):
            skipped.append(f"{name} (Horovod for {'torch' if name.startswith('torch') else 'tensorflow'} is not built here)")
            continue
        out = os.path.join(tmp, f"{name}.json")
        try:
            run(out)
            with open(out) as fh:
                rows.append(json.load(fh))
        except Exception as exc:
            failures.append(f"{name}: {exc}")

    reference = rows[0]["result"]
    print(f"{'backend':<14} {'world':>5} {'top-1':>8} {'top-3':>8} {'wall s':>7} {'bytes moved':>12}  same as single-process")
    for row in rows:
        same = row["result"] == reference
        if not same:
            failures.append(f"{row['backend']}: {row['result']} != {reference}")
        print(f"{row['backend']:<14} {row['world_size']:>5} {row['result']['top1']:>8.4f} {row['result']['top3']:>8.4f} "
              f"{row['seconds']:>7.2f} {row['bytes']:>12,}  {'yes' if same else 'NO'}")
    if skipped:
        print("\nskipped: " + "; ".join(skipped))
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    print("\nevery distributed run equals the single-process evaluation")
    return 0


def _horovod_usable(name: str) -> bool:
    module = "horovod.torch" if name == "torch_horovod" else "horovod.tensorflow"
    code = f"import {module}"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120).returncode == 0


if __name__ == "__main__":
    sys.exit(main())
