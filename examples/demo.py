"""The main job: one evaluation, single-process and on every installed backend, in one table.

A small MLP is trained for a few seconds on scikit-learn's handwritten digits,
then evaluated on 541 held-out digits (a DataLoader with DistributedSampler;
541 divides by no world size used here, so shards are padded) with two
metrics of the two kinds mmeval has (docs/writing-a-metric.md):

* ``Accuracy(topk=(1, 3))``, a *state* metric: each rank counts its hits and
  ``compute()`` sums the counts (one small reduction, whatever the dataset size);
* ``AveragePrecision()`` (one-vs-rest mAP over the ten digits), a *per-sample*
  metric: ranking needs every score, so the scores are gathered to rank 0.

Beside them, a detection case: ``COCODetection()`` (COCO box AP, MMEval 0.2.1's
metric) over 250 synthetic COCO-like images (``benchmarks/coco_data.py``: 20
detections, ~7.5 ground truths, 10 classes each; dealt like the digits, padded),
matched on the rank that holds each image: ``compute()`` moves a few bytes per
detection, never the boxes.

Each runs:

* single process (``non_dist``);
* ``torch_cpu``: ``torch.multiprocessing.spawn`` with 4 processes over gloo;
* ``mpi4py``: ``mpiexec -n 3``;
* ``torch_horovod`` / ``tf_horovod``: ``horovodrun -np 2 --gloo`` when installed.

Every distributed row must equal the single-process row (top-1, top-3, mAP
and the twelve COCO stats); the demo exits 1 if one does not (or if a run fails).

Units: top-1 and top-3 are fractions (e.g. 0.9079) and mAP is a percentage
(e.g. 91.8213); COCO AP is a fraction. Each metric keeps MMEval 0.2.1's unit for compatibility
(docs/metrics.md lists every metric's). Bytes moved come from mmeval's
communication-stats hook (rank 0's sent + received). The model's outputs are
raw logits, so Accuracy gets ``thrs=None`` (its default ``thrs=0.0`` counts a
top-k hit only when the true class's score is > 0).

Above the table, the demo lists the installed backends and says which it runs
and why it skips the others. The weights and the ranks' results go to a
temporary directory removed at exit; progress bars show only on a terminal.

Run: ./tools/run-tox -e demo        (the README's run command: builds the env)
     python examples/demo.py --plan (the listing only; needs mmeval-core alone)
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
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "digits_dist_eval"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "benchmarks"))  # coco_data: the synthetic detection set

#: Accuracy's threshold. The model outputs raw logits: ``thrs=None`` ranks them
#: as they are. Accuracy's default ``thrs=0.0`` would count a top-k hit only
#: when the true class's score is > 0, which lowers top-3 on logits.
THRS = None
THRS_NOTE = (
    "Accuracy(topk=(1, 3), thrs=None): the MLP's raw logits are ranked as they are. Accuracy's default "
    "thrs=0.0 counts a top-k hit only when the true class's score is > 0; pass thrs=None for raw logits."
)


#: The table's units: each metric keeps MMEval 0.2.1's (Accuracy: fractions; AveragePrecision: percentages).
UNITS_NOTE = (
    "units: top-1 and top-3 are fractions (0-1), mAP a percentage (0-100), COCO AP a fraction, "
    "as in MMEval 0.2.1 (kept for compatibility; docs/metrics.md)"
)

#: The detection case: synthetic COCO-like images (benchmarks/coco_data.py), small enough to take well under a second.
DETECTION_IMAGES = 250


def detection_case(rank: int, world_size: int, backend: str) -> Any:
    """COCODetection over this rank's share of the synthetic images (round robin, padded), added in batches of 8."""
    import coco_data

    from mmeval import COCODetection

    spec = coco_data.Spec(images=DETECTION_IMAGES, classes=10, dets_per_image=20)
    preds, gts = coco_data.mmeval_inputs(
        coco_data.make_images(spec, coco_data.shard_ids(spec.images, rank, world_size))
    )
    metric = COCODetection(
        dataset_meta={"classes": coco_data.class_names(spec)}, print_results=False, dist_backend=backend
    )
    for start in range(0, len(preds), 8):
        metric.add(preds[start : start + 8], gts[start : start + 8])
    return metric, spec.images


def evaluate(rank: int, world_size: int, backend: str, out_path: Optional[str]) -> Dict[str, Any]:
    """Evaluate this rank's shard with ``backend``; rank 0 writes the result to ``out_path``."""
    import torch
    from digits_common import get_eval_dataloader, get_model, progress

    from mmeval import Accuracy, AveragePrecision
    from mmeval.core.hooks import enable_comm_stats

    stats = enable_comm_stats(print_at_exit=False)
    start = time.perf_counter()
    loader, total = get_eval_dataloader(rank, world_size)
    model = get_model()
    accuracy = Accuracy(topk=(1, 3), thrs=THRS, dist_backend=backend)  # state: hit counts
    average_precision = AveragePrecision(dist_backend=backend)  # per-sample: scores, ranked globally
    with torch.no_grad():
        # a bar on rank 0 of a terminal only: on a pipe it would leave carriage-return residue
        for images, labels in progress(loader, rank, desc=f"{backend} x{world_size}", leave=False):
            logits = model(images)
            accuracy.add(predictions=logits, labels=labels)
            average_precision.add(
                predictions=logits.softmax(dim=1), labels=torch.nn.functional.one_hot(labels, logits.shape[1])
            )
    detection, images = detection_case(rank, world_size, backend)  # per-sample, matched where the images are
    moved = {}
    result = {}
    for name, metric, size in (
        ("accuracy", accuracy, total),
        ("mAP", average_precision, total),
        ("coco", detection, images),
    ):
        before = stats.total_bytes
        result.update(metric.compute(size=size))
        moved[name] = stats.total_bytes - before
    row = {
        "backend": backend,
        "world_size": world_size,
        "result": result,
        "seconds": time.perf_counter() - start,
        "bytes": moved,
    }
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
    parser.add_argument("--plan", action="store_true", help="list the backends and what the demo would do; run nothing")
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

    me = os.path.abspath(__file__)
    plans: List[Tuple[str, int, Callable[[str], None]]] = [
        ("torch_cpu", 4, lambda out: run_torch(4, out)),
        (
            "mpi4py",
            3,
            lambda out: run_launched(
                [_launcher("mpiexec") or "mpiexec", "-n", "3", sys.executable, me, "--worker", "mpi4py", "--out", out]
            ),
        ),
        (
            "torch_horovod",
            2,
            lambda out: run_launched(
                [
                    _launcher("horovodrun") or "horovodrun",
                    "-np",
                    "2",
                    "--gloo",
                    "-H",
                    "localhost:2",
                    "--network-interfaces",
                    "lo",
                    sys.executable,
                    me,
                    "--worker",
                    "torch_horovod",
                    "--out",
                    out,
                ]
            ),
        ),
        (
            "tf_horovod",
            2,
            lambda out: run_launched(
                [
                    _launcher("horovodrun") or "horovodrun",
                    "-np",
                    "2",
                    "--gloo",
                    "-H",
                    "localhost:2",
                    "--network-interfaces",
                    "lo",
                    sys.executable,
                    me,
                    "--worker",
                    "tf_horovod",
                    "--out",
                    out,
                ]
            ),
        ),
    ]
    skip_reasons = {name: skip_reason(name) for name, _ws, _run in plans}
    print_backends(plans, skip_reasons)
    if args.plan:
        return 0
    from digits_common import MODEL_ENV, save_model, train_model

    rows: List[Dict[str, Any]] = []
    failures: List[str] = []
    # the model file and the ranks' results live in a directory removed at exit
    with tempfile.TemporaryDirectory(prefix="mmeval-demo-") as tmp:
        t = time.perf_counter()
        os.environ[MODEL_ENV] = save_model(train_model(), os.path.join(tmp, "digits_mlp.pt"))
        print(f"trained the MLP on the digits in {time.perf_counter() - t:.1f}s\n{THRS_NOTE}\n", flush=True)
        rows.append(evaluate(0, 1, "non_dist", None))
        for name, _ws, run in plans:
            if skip_reasons[name]:
                continue
            out = os.path.join(tmp, f"{name}.json")
            try:
                run(out)
                with open(out) as fh:
                    rows.append(json.load(fh))
            except Exception as exc:
                failures.append(f"{name}: {exc}")
        del os.environ[MODEL_ENV]

    reference = rows[0]["result"]
    print(
        "bytes moved = rank 0's sent + received in compute(): Accuracy (state) / AveragePrecision (per-sample) / "
        f"COCODetection ({DETECTION_IMAGES} images x 20 detections: a compact summary per detection)"
    )
    print(UNITS_NOTE)
    print(
        f"{'backend':<14} {'world':>5} {'top-1':>8} {'top-3':>8} {'mAP %':>8} {'COCO AP':>8} {'wall s':>7} "
        f"{'bytes moved':>30}  same as single-process"
    )
    for row in rows:
        same = row["result"] == reference
        if not same:
            failures.append(f"{row['backend']}: {row['result']} != {reference}")
        moved = f"{row['bytes']['accuracy']:,} / {row['bytes']['mAP']:,} / {row['bytes']['coco']:,}"
        print(
            f"{row['backend']:<14} {row['world_size']:>5} {row['result']['top1']:>8.4f} {row['result']['top3']:>8.4f} "
            f"{row['result']['mAP']:>8.4f} {row['result']['bbox_mAP']:>8.4f} {row['seconds']:>7.2f} {moved:>30}  "
            f"{'yes' if same else 'NO'}"
        )
    skipped = [f"{name} ({reason})" for name, reason in skip_reasons.items() if reason]
    if skipped:
        print("\nskipped: " + "; ".join(skipped))
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    print("\nevery distributed run equals the single-process evaluation")
    return 0


def skip_reason(name: str) -> Optional[str]:
    """Why the demo cannot run backend ``name`` here, or None when it can."""
    if not installed(name):
        return "its plugin is not installed"
    if name.endswith("horovod") and not _horovod_usable(name):
        framework = "torch" if name.startswith("torch") else "tensorflow"
        return f"Horovod for {framework} is not built here: bash tools/build_horovod.sh {framework} builds it"
    return None


def print_backends(plans: List[Tuple[str, int, Callable[[str], None]]], skip_reasons: Dict[str, Optional[str]]) -> None:
    """The installed backends (as ``mmeval backends`` lists them) and what the demo does with each."""
    from mmeval.core.dist import backend_infos

    planned = {name: ws for name, ws, _run in plans}
    rows: List[Tuple[str, str, str]] = []
    for info in backend_infos(refresh=True):
        dist = f"{info.distribution or '-'} {info.version or ''}".strip()
        if info.status != "ok":
            use = f"not usable: {info.status}"
        elif info.name == "non_dist":
            use = "runs: single process, the reference row"
        elif info.name not in planned:
            use = "not used by this demo"
        elif skip_reasons.get(info.name):
            use = f"skipped: {skip_reasons[info.name]}"
        else:
            use = f"runs: {planned[info.name]} processes"
        rows.append((info.name, dist, use))
    listed = {name for name, _dist, _use in rows}
    rows += [
        (name, "-", f"skipped: {reason}") for name, reason in skip_reasons.items() if reason and name not in listed
    ]
    widths = [max(len(r[i]) for r in rows + [("backend", "distribution", "")]) for i in range(2)]
    print("mmeval backends (the installed ones, as `mmeval backends` lists them) and what this demo does with each:")
    print(f"  {'backend':<{widths[0]}}  {'distribution':<{widths[1]}}  in this demo")
    for name, dist, use in rows:
        print(f"  {name:<{widths[0]}}  {dist:<{widths[1]}}  {use}")
    print(flush=True)


def _horovod_usable(name: str) -> bool:
    module = "horovod.torch" if name == "torch_horovod" else "horovod.tensorflow"
    code = f"import {module}"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120).returncode == 0


if __name__ == "__main__":
    sys.exit(main())
