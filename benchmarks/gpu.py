"""The CUDA part: torch_cuda (NCCL) against the raw torch.distributed calls, on one GPU.

Three ratios, each measured side by side in one process (world size 1: the machines lent for this
have one GPU, and NCCL refuses two ranks on one device):

- ``Accuracy.compute()`` on ``torch_cuda`` against one raw ``all_reduce`` of the same statistics
  (the per-k correct counts and the sample count) as a CUDA tensor;
- ``all_gather_object`` of 64 MB of CUDA tensors against a raw ``all_gather_into_tensor`` of 64 MB;
- ``COCODetection`` ``add()`` + ``compute()`` with CUDA tensors in ``add()`` against numpy inputs.

Each timing is the median of ``--repeats`` runs after a warm-up, CUDA synchronised around it.
Run on a CUDA machine: ``python benchmarks/gpu.py --out DIR`` (writes ``gpu.json`` and ``gpu.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from typing import Any, Callable, Dict, List

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def _median_seconds(fn: Callable[[], Any], repeats: int, sync: Callable[[], None]) -> float:
    fn()  # warm-up: first-call allocations, NCCL communicator set-up
    sync()
    times: List[float] = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def accuracy_against_all_reduce(repeats: int) -> Dict[str, Any]:
    """``Accuracy(topk=(1, 5)).compute()`` of 50,000 CUDA logits x 1,000 classes against the raw all_reduce."""
    import torch
    import torch.distributed as dist

    from mmeval import Accuracy
    from mmeval_torch import TorchCUDADist

    rng = np.random.default_rng(0)
    logits = torch.from_numpy(rng.standard_normal((50_000, 1000), dtype=np.float32)).cuda()
    labels = torch.from_numpy(rng.integers(0, 1000, 50_000)).cuda()
    backend = TorchCUDADist()
    metric = Accuracy(topk=(1, 5), dist_backend=backend)
    metric.add(logits, labels)

    def ours() -> None:
        metric.compute()

    stats = torch.tensor([1.0, 2.0, 50_000.0], dtype=torch.float64, device="cuda")  # two counts and n

    def raw() -> None:
        dist.all_reduce(stats)

    sync = torch.cuda.synchronize
    t_ours, t_raw = _median_seconds(ours, repeats, sync), _median_seconds(raw, repeats, sync)
    return {"ours_s": t_ours, "raw_s": t_raw, "ratio": t_ours / t_raw, "result": metric.compute()}


def all_gather_object_against_raw(repeats: int) -> Dict[str, Any]:
    """``all_gather_object`` of 64 MB of CUDA tensors (8 float32 tensors of 8 MB) against all_gather_into_tensor."""
    import torch
    import torch.distributed as dist

    from mmeval_torch import TorchCUDADist

    backend = TorchCUDADist()
    ws = backend.world_size
    obj = {f"t{i}": torch.full((2 * 1024 * 1024,), float(i), device="cuda") for i in range(8)}
    nbytes = sum(t.numel() * t.element_size() for t in obj.values())
    flat = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    out = torch.empty(nbytes * ws, dtype=torch.uint8, device="cuda")

    def ours() -> None:
        got = backend.all_gather_object(obj)
        assert got[0]["t7"].device.type == "cuda"

    def raw() -> None:
        dist.all_gather_into_tensor(out, flat)

    gathered: List[Any] = [None] * ws

    def torch_objects() -> None:  # torch's own object collective: pickles through host memory too
        dist.all_gather_object(gathered, obj)

    def host_round_trip() -> None:  # the floor of any object collective: the bytes to the host and back
        {k: t.cpu().cuda() for k, t in obj.items()}

    sync = torch.cuda.synchronize
    t_ours, t_raw = _median_seconds(ours, repeats, sync), _median_seconds(raw, repeats, sync)
    t_torch, t_floor = _median_seconds(torch_objects, repeats, sync), _median_seconds(host_round_trip, repeats, sync)
    return {
        "bytes": nbytes,
        "ours_s": t_ours,
        "raw_s": t_raw,
        "ratio": t_ours / t_raw,
        "torch_all_gather_object_s": t_torch,
        "ratio_to_torch_objects": t_ours / t_torch,
        "host_round_trip_s": t_floor,
        "ratio_to_host_round_trip": t_ours / t_floor,
    }


def coco_cuda_against_numpy(repeats: int, images: int) -> Dict[str, Any]:
    """COCODetection add() + compute() of ``images`` bbox images with CUDA tensors against numpy inputs."""
    import coco_data
    import torch

    from mmeval.metrics import COCODetection
    from mmeval_torch import TorchCUDADist

    spec = coco_data.Spec(images=images)
    preds, gts = coco_data.mmeval_inputs(coco_data.make_images(spec, range(images)))

    def on_cuda(d: Dict[str, Any]) -> Dict[str, Any]:
        return {k: torch.from_numpy(v).cuda() if isinstance(v, np.ndarray) else v for k, v in d.items()}

    cuda_preds, cuda_gts = [on_cuda(p) for p in preds], [on_cuda(g) for g in gts]
    meta = {"classes": coco_data.class_names(spec)}
    results: Dict[str, Any] = {}

    def run(p: List[Dict[str, Any]], g: List[Dict[str, Any]], key: str) -> Callable[[], None]:
        def once() -> None:
            metric = COCODetection(dataset_meta=meta, dist_backend=TorchCUDADist())
            for s in range(0, len(p), 8):
                metric.add(p[s : s + 8], g[s : s + 8])
            results[key] = metric.compute()

        return once

    sync = torch.cuda.synchronize
    t_cuda = _median_seconds(run(cuda_preds, cuda_gts, "cuda"), repeats, sync)
    t_numpy = _median_seconds(run(preds, gts, "numpy"), repeats, sync)
    same = results["cuda"] == results["numpy"]
    return {"images": images, "cuda_s": t_cuda, "numpy_s": t_numpy, "ratio": t_cuda / t_numpy, "same_result": same}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for gpu.json and gpu.md")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--coco-images", type=int, default=1000)
    args = parser.parse_args()

    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        print("gpu.py: CUDA is not available here; this part needs a GPU", file=sys.stderr)
        return 2
    torch.cuda.set_device(0)
    dist.init_process_group(
        "nccl", init_method="tcp://127.0.0.1:29561", rank=0, world_size=1, timeout=timedelta(seconds=120)
    )
    try:
        report = {
            "device": torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "world_size": dist.get_world_size(),
            "accuracy": accuracy_against_all_reduce(args.repeats),
            "all_gather_object_64mb": all_gather_object_against_raw(args.repeats),
            "coco_detection": coco_cuda_against_numpy(max(1, args.repeats // 2), args.coco_images),
        }
    finally:
        dist.destroy_process_group()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    acc, ag, coco = report["accuracy"], report["all_gather_object_64mb"], report["coco_detection"]
    lines = [
        f"Device: {report['device']}, torch {report['torch']}, NCCL {report['nccl']}, world size 1.",
        "",
        "| what | ours | raw / baseline | ratio |",
        "| --- | --- | --- | --- |",
        f"| `Accuracy.compute()` vs one `all_reduce` of its statistics | {acc['ours_s'] * 1e3:.3f} ms "
        f"| {acc['raw_s'] * 1e3:.3f} ms | {acc['ratio']:.1f}x |",
        f"| `all_gather_object` of 64 MB of CUDA tensors vs `all_gather_into_tensor` | {ag['ours_s'] * 1e3:.2f} ms "
        f"| {ag['raw_s'] * 1e3:.3f} ms | {ag['ratio']:.1f}x |",
        f"| `all_gather_object` of the same vs torch's `dist.all_gather_object` | {ag['ours_s'] * 1e3:.2f} ms "
        f"| {ag['torch_all_gather_object_s'] * 1e3:.2f} ms | {ag['ratio_to_torch_objects']:.2f}x |",
        f"| `all_gather_object` of the same vs the bytes to the host and back (`.cpu().cuda()`) "
        f"| {ag['ours_s'] * 1e3:.2f} ms | {ag['host_round_trip_s'] * 1e3:.2f} ms | {ag['ratio_to_host_round_trip']:.2f}x |",
        f"| COCODetection add()+compute(), {coco['images']} images: CUDA tensors vs numpy inputs "
        f"| {coco['cuda_s']:.3f} s | {coco['numpy_s']:.3f} s | {coco['ratio']:.2f}x (same result: {coco['same_result']}) |",
    ]
    with open(os.path.join(args.out, "gpu.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
