"""COCODetection per core, in CPU seconds: ours against hotcoco and ultrafast-pycocotools, one thread each.

On a shared machine (this project's 2 cores ran at load 20-45 while these were first measured) the wall clock
of a one-thread evaluation is mostly other processes' time; the CPU seconds of the process are not. Per
case (``coco_data.CASES``, full size unless ``--images``), interleaved, median of ``--iters``:

* ours: ``add()`` of every image (batches of ``detection.BATCH``) + ``compute()``, and of that the time
  reading the inputs (``coco_inputs_batched.read_images``), the rest of ``add()`` and ``compute()`` -- the wait
  after the last ``add()``;
* hotcoco 1.3.0 / ultrafast-pycocotools 0.1.14: ``evaluate()`` + ``accumulate()`` after loading.

``RAYON_NUM_THREADS=1`` is set before the Rust tools start (``--threads`` to change it). The 12 stats of
every side are compared with hotcoco's.

Run::

    python benchmarks/detection_cpu.py --cases bbox lvis segm
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import sys
import time
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import coco_data
from detection import BATCH, ITEMS


def _ours(spec: coco_data.Spec, preds: List[Any], gts: List[Any], reading: List[float]) -> Tuple[float, ...]:
    from mmeval.metrics import COCODetection

    iou = "segm" if spec.masks else "bbox"
    metric = COCODetection(
        metric=iou,
        metric_items=list(ITEMS),
        dataset_meta={"classes": coco_data.class_names(spec)},
        print_results=False,
    )
    reading[0] = 0.0
    t0 = time.process_time()
    for s in range(0, len(preds), BATCH):
        metric.add(preds[s : s + BATCH], gts[s : s + BATCH])
    t1 = time.process_time()
    result = metric.compute()
    t2 = time.process_time()
    return (t2 - t0, reading[0], t1 - t0 - reading[0], t2 - t1, *[float(result[f"{iou}_{k}"]) for k in ITEMS])


def _rust(lib: str, spec: coco_data.Spec, gt: Dict[str, Any], dt: List[Dict[str, Any]]) -> Tuple[float, ...]:
    iou = "segm" if spec.masks else "bbox"
    with contextlib.redirect_stdout(io.StringIO()):
        if lib == "hotcoco":
            import hotcoco

            coco = hotcoco.COCO(gt)
            ev = hotcoco.COCOeval(coco, coco.load_res([dict(d) for d in dt]), iou)
        else:
            import ultrafast_pycocotools

            coco = ultrafast_pycocotools.COCO(gt, verbose=False)
            ev = ultrafast_pycocotools.COCOeval(coco, coco.loadRes([dict(d) for d in dt]), iou)
        t0 = time.process_time()
        ev.evaluate()
        ev.accumulate()
        t = time.process_time() - t0
        ev.summarize()
    return (t, *[float(x) for x in list(ev.stats)[:12]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=tuple(coco_data.CASES), default=["bbox", "lvis", "segm"])
    parser.add_argument("--images", type=int, default=0)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import mmeval.metrics.coco_detection as cd

    reading = [0.0]
    read_images = cd.read_images

    def timed_read(*a: Any, **k: Any) -> Any:
        t0 = time.process_time()
        try:
            return read_images(*a, **k)
        finally:
            reading[0] += time.process_time() - t0

    cd.read_images = timed_read  # type: ignore[assignment]
    for case in args.cases:
        spec = coco_data.CASES[case][0]
        spec = dataclasses.replace(spec, images=args.images) if args.images else spec
        images = coco_data.make_images(spec, range(spec.images))
        preds, gts = coco_data.mmeval_inputs(images)
        gt, dt = coco_data.coco_gt(images, spec.classes), coco_data.coco_dt(images, "segm" if spec.masks else "bbox")
        del images
        runs: Dict[str, List[Tuple[float, ...]]] = {"ours": [], "hotcoco": [], "ultrafast-pycocotools": []}
        for it in range(args.iters):
            names = list(runs)
            for name in names[it % 3 :] + names[: it % 3]:
                if name == "ours":
                    runs[name].append(_ours(spec, preds, gts, reading))
                else:
                    runs[name].append(_rust(name, spec, gt, dt))
        med = {name: sorted(r)[len(r) // 2] for name, r in runs.items()}
        ours, hot, ufast = med["ours"], med["hotcoco"], med["ultrafast-pycocotools"]
        fastest = min(hot[0], ufast[0])
        diff = max(abs(a - b) for a, b in zip(ours[4:], hot[1:]))
        print(
            f"{case} ({spec.images} images), CPU s, {args.threads} Rust thread(s): ours {ours[0]:.3f} (reading the "
            f"inputs {ours[1]:.3f}, the rest of add() {ours[2]:.3f}, compute() {ours[3]:.3f}); hotcoco {hot[0]:.3f}; "
            f"ultrafast-pycocotools {ufast[0]:.3f}; ours / fastest {ours[0] / fastest:.2f}, without reading the "
            f"inputs {(ours[0] - ours[1]) / fastest:.2f}; last add() -> result / fastest {ours[3] / fastest:.3f}; "
            f"max |stat - hotcoco's| {diff:.1e}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
