"""Issues 21 and 34's figures: COCO detection mAP, ours beside pycocotools, faster-coco-eval, hotcoco,
ultrafast-pycocotools, torchmetrics and MMEval 0.2.1.

Same synthetic COCO-like data for every side (``coco_data.py``; cases ``bbox`` 5,000 images x 100
detections, ``lvis`` 1,203 classes x 300 detections, ``segm`` RLE masks; ``objects365`` -- 80k images,
365 classes, 15 detections an image -- only when named; ``--quick`` shrinks them). Two modes:

* ``--mode single`` (one process): pycocotools' ``COCOeval``, faster-coco-eval's ``COCOeval_faster``
  and the Rust tools hotcoco and ultrafast-pycocotools (one thread, ``--rust-threads``; and again on 2
  threads in a process of their own) -- ``evaluate()`` + ``accumulate()`` timed, building their ``COCO``
  objects and ``loadRes`` timed apart, their peak memory from building to the end --, and our
  ``COCODetection`` (``add()`` of every image, in batches of 8, then ``compute()``: the wait after the
  last ``add()``), iterations interleaved; ``--refs`` picks the sides;
* ``--mode dist`` (``--world-size`` ranks: spawned gloo ranks for ``torch_cpu``, ``mpiexec`` for
  ``mpi4py``): each rank builds its own shard (round robin, the last shard padded as
  ``DistributedSampler`` pads it; ``compute(size=n)`` drops the padding) and times ``add()`` and
  ``compute()`` (each the slowest rank's), the bytes each rank sends in ``compute()`` (the
  comm-stats hook) and rank 0's peak extra memory in ``compute()`` (ours: those two in
  :data:`MEMORY_ITERS` evaluations apart from the timed ones, since the heap trim that makes the
  peak measurable slows the compute() after it). ``--impl torchmetrics`` runs
  torchmetrics' ``MeanAveragePrecision(backend='faster_coco_eval')`` on the same (unpadded) shards
  (``update()`` + ``compute()``, which all-gathers every box to every rank); ``--impl mmeval021``
  runs MMEval 0.2.1's ``COCODetection`` with the Python of its own environment. Ours at world size 2
  is interleaved with each rank in turn evaluating the whole set alone (the other waiting): the
  single-process time under the same load, for the ws=2 / single ratio, and the same history (and
  heap) in every rank's process.

Every record keeps the 12 COCO stats it computed; ``report.py`` compares each with pycocotools' on
the same case. torchmetrics imports ``torchvision.ops.box_convert``; where torchvision cannot be
imported (no CPU build for this torch here) the benchmark puts a stand-in module with that one
function (the same arithmetic: ``x2 - x1``, ``y2 - y1``) in its place and says so in the record.

Run::

    python benchmarks/detection.py --mode single --quick --out /tmp/d1.json
    python benchmarks/detection.py --mode dist --backend torch_cpu --world-size 2 --impl ours torchmetrics
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import gc
import io
import logging
import os
import pickle
import sys
import time
import types
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import coco_data
import common
from compute import Comm, launch

#: MMEval 0.2.1's names of the 12 COCO stats, in ``COCOeval.stats`` order.
ITEMS = (
    "mAP",
    "mAP_50",
    "mAP_75",
    "mAP_s",
    "mAP_m",
    "mAP_l",
    "AR@1",
    "AR@10",
    "AR@100",
    "AR_s@100",
    "AR_m@100",
    "AR_l@100",
)
#: torchmetrics' names of the same stats.
TM_KEYS = (
    "map",
    "map_50",
    "map_75",
    "map_small",
    "map_medium",
    "map_large",
    "mar_1",
    "mar_10",
    "mar_100",
    "mar_small",
    "mar_medium",
    "mar_large",
)
BATCH = 8
#: dist mode, ours: evaluations measuring rank 0's peak memory and the bytes sent, apart from the timed ones
MEMORY_ITERS = 3
#: pycocotools' IoU and recall thresholds (float64), handed to torchmetrics so that it computes the same stats.
#: the single-process references: (C++, Python) pycocotools and faster-coco-eval, (Rust) hotcoco and
#: ultrafast-pycocotools (issue 34: ours per core against the fastest; they run on ``--rust-threads`` threads,
#: and again on 2 in a process of their own)
REFS = ("pycocotools", "faster-coco-eval", "hotcoco", "ultrafast-pycocotools")
RUST = ("hotcoco", "ultrafast-pycocotools")
COCO_IOU_THRS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True).tolist()
COCO_REC_THRS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True).tolist()


def _spec(case: str, args: argparse.Namespace) -> coco_data.Spec:
    spec = coco_data.CASES[case][1 if args.quick else 0]
    return dataclasses.replace(spec, images=args.images) if args.images else spec


def _iou_type(spec: coco_data.Spec) -> str:
    return "segm" if spec.masks else "bbox"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the evaluators' summaries (pycocotools prints them; MMEval 0.2.1 logs them)."""
    logging.disable(logging.INFO)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logging.disable(logging.NOTSET)


# --------------------------------------------------------------------------
# the evaluators
# --------------------------------------------------------------------------


def _cocoeval(
    lib: str, gt: Dict[str, Any], dt: List[Dict[str, Any]], iou: str
) -> Tuple[float, float, List[float], int]:
    """pycocotools', faster-coco-eval's, hotcoco's or ultrafast-pycocotools' evaluation: (build s, evaluate +
    accumulate s, 12 stats, peak extra bytes of the process from building its objects to the end of
    accumulate (VmHWM after a heap trim)). The Rust tools use ``RAYON_NUM_THREADS`` threads (``--rust-threads``)."""
    gt = copy.deepcopy(gt)  # pycocotools writes its RLEs (bytes) into the ground truths, which hotcoco refuses
    gc.collect()
    common.trim_heap()
    before = common.vm_status().get("VmRSS", 0)
    common.reset_peak_rss()
    t0 = time.perf_counter()
    with _quiet():
        if lib == "pycocotools":
            from pycocotools.coco import COCO
            from pycocotools.cocoeval import COCOeval

            coco = COCO()
            coco.dataset = gt
            coco.createIndex()
            res = coco.loadRes([dict(d) for d in dt])  # loadRes writes into the dicts
            ev = COCOeval(coco, res, iou)
        elif lib == "hotcoco":
            import hotcoco

            coco = hotcoco.COCO(gt)
            res = coco.load_res([dict(d) for d in dt])
            ev = hotcoco.COCOeval(coco, res, iou)
        elif lib == "ultrafast-pycocotools":
            import ultrafast_pycocotools

            coco = ultrafast_pycocotools.COCO(gt, verbose=False)
            res = coco.loadRes([dict(d) for d in dt])
            ev = ultrafast_pycocotools.COCOeval(coco, res, iou)
        else:
            from faster_coco_eval import COCO as FCOCO
            from faster_coco_eval import COCOeval_faster

            coco = FCOCO(gt)
            res = coco.loadRes([dict(d) for d in dt])
            ev = COCOeval_faster(coco, res, iou)
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        ev.evaluate()
        ev.accumulate()
        run = time.perf_counter() - t0
        peak = common.vm_status().get("VmHWM", 0) - before
        ev.summarize()
    return build, run, [float(x) for x in list(ev.stats)[:12]], peak


def _ours(spec: coco_data.Spec, backend: Optional[str]) -> Any:
    from mmeval.metrics import COCODetection

    kwargs: Dict[str, Any] = {
        "metric": _iou_type(spec),
        "metric_items": list(ITEMS),
        "dataset_meta": {"classes": coco_data.class_names(spec)},
    }
    if backend is not None:
        kwargs["dist_backend"] = backend
    try:
        return COCODetection(print_results=False, **kwargs)
    except TypeError:  # no print_results argument
        return COCODetection(**kwargs)


def _stats_of(result: Dict[str, Any], iou: str) -> List[float]:
    return [float(result[f"{iou}_{item}"]) for item in ITEMS]


def _add_all(metric: Any, preds: Sequence[Dict[str, Any]], gts: Sequence[Dict[str, Any]]) -> float:
    t0 = time.perf_counter()
    for start in range(0, len(preds), BATCH):
        metric.add(preds[start : start + BATCH], gts[start : start + BATCH])
    return time.perf_counter() - t0


def _measure_compute(
    metric: Any, size: Optional[int], count_bytes: bool, ready: Optional[Callable[[], None]] = None, memory: bool = True
) -> Tuple[Dict[str, Any], float, int, int]:
    """``compute()``'s result, seconds, peak extra bytes of this process (-1 unless ``memory``), and bytes
    sent (-1 when not counted).

    ``memory``: the heap is trimmed first (an earlier evaluation's freed memory would otherwise hide this
    one's peak) and VmHWM's rise is the peak. The trim makes ``compute()`` fault its heap back in (~8 ms of
    a 100 ms lvis compute() at ws=2), which an evaluation in a user's process does not pay: a timed
    evaluation compared with the one-process run beside it (which trims nothing) passes ``memory=False``.
    ``ready`` (several ranks: a barrier) runs just before the clock starts, so every rank's clock starts
    together: the collection before it takes longer on a rank holding more objects, and a rank that starts
    first would otherwise count its wait for the others in compute()."""
    gc.collect()
    before = 0
    if memory:
        common.trim_heap()
        before = common.vm_status().get("VmRSS", 0)
        common.reset_peak_rss()
    if ready is not None:
        ready()
    t0 = time.perf_counter()
    call: Callable[[], Dict[str, Any]] = (lambda: metric.compute(size=size)) if size is not None else metric.compute
    if count_bytes:
        from metrics import _sent_during

        with _quiet():
            result, sent, _calls = _sent_during(call)
    else:
        with _quiet():
            result = call()
        sent = -1
    dt = time.perf_counter() - t0
    peak = common.vm_status().get("VmHWM", 0) - before if memory else -1
    return result, dt, peak, sent


def _traced_compute_peak(metric: Any, size: Optional[int]) -> int:
    """The most bytes Python and numpy had allocated at once in ``compute()`` beyond what was held before it
    (``tracemalloc``; buffers a transport allocates in C, such as gloo's, are not counted).

    VmHWM (:func:`_measure_compute`) counts every page the process touched: in a process that evaluated
    something bigger before, glibc serves compute()'s requests from that freed (and trimmed) heap before it
    maps new memory, and the pages touched there stay counted after they are freed; this figure does not
    depend on what ran before."""
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        with _quiet():
            metric.compute(size=size)
        return int(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()


# --------------------------------------------------------------------------
# single process
# --------------------------------------------------------------------------


def run_single(args: argparse.Namespace) -> List[Dict[str, Any]]:
    records: List[Dict[str, Any]] = []
    for case in args.cases:
        spec = _spec(case, args)
        iou = _iou_type(spec)
        t0 = time.perf_counter()
        images = coco_data.make_images(spec, range(spec.images))
        gen_s = time.perf_counter() - t0
        preds, gts = coco_data.mmeval_inputs(images)
        gt_json, dt_json = coco_data.coco_gt(images, spec.classes), coco_data.coco_dt(images, iou)
        info = {
            "kind": "detection",
            "case": case,
            "iou_type": iou,
            "data": coco_data.summary(images),
            "classes": spec.classes,
            "generate_s": gen_s,
            "backend": "single process",
            "ws": 1,
        }
        del images
        refs = [r for r in args.refs if r in REFS and _importable(r)]
        base: Dict[str, Dict[str, List[float]]] = {name: {"build": [], "run": [], "peak": []} for name in refs}
        ours: Dict[str, List[float]] = {"add": [], "compute": [], "peak": []}
        stats: Dict[str, List[float]] = {}
        error: Optional[str] = None
        for it in range(args.iters):
            names = [n for n in refs if n != "pycocotools" or it < args.pycocotools_iters]
            names += ["ours"] if "ours" in args.refs else []
            for name in names[it % len(names) :] + names[: it % len(names)]:
                gc.collect()
                if name == "ours":
                    if error is not None:
                        continue
                    try:
                        metric = _ours(spec, None)
                        ours["add"].append(_add_all(metric, preds, gts))
                        # compute() is the wait after the last add(): timed without the heap trim that the
                        # peak needs (it faults the heap back in), except in the first evaluation (the peak's)
                        result, dt, peak, _ = _measure_compute(metric, None, False, memory=it == 0)
                    except Exception as exc:  # ours missing or failing: the others still run
                        error = f"{type(exc).__name__}: {exc}"
                        continue
                    ours["compute"].append(dt)
                    if peak >= 0:
                        ours["peak"].append(float(peak))
                    stats["ours"] = _stats_of(result, iou)
                    del metric, result
                else:
                    build, run, st, peak = _cocoeval(name, gt_json, dt_json, iou)
                    base[name]["build"].append(build)
                    base[name]["run"].append(run)
                    base[name]["peak"].append(float(peak))
                    stats[name] = st
        for name, t in base.items():
            records.append(
                {
                    **info,
                    "impl": name,
                    "threads": args.rust_threads if name in RUST else 1,
                    "build_s": common.median(t["build"]),
                    "eval_s": common.median(t["run"]),
                    "times_s": t["run"],
                    "peak_extra_bytes": common.median(t["peak"]),
                    "stats": stats.get(name),
                }
            )
        rec = {
            **info,
            "impl": "ours",
            "add_s": common.median(ours["add"]),
            "compute_s": common.median(ours["compute"]),
            "times_s": [a + c for a, c in zip(ours["add"], ours["compute"])],
            "peak_extra_bytes_per_rank": [common.median(ours["peak"])],
            "stats": stats.get("ours"),
        }
        if error is not None:
            rec["error"] = error
        if "ours" in args.refs:
            records.append(rec)
        if args.rust_threads == 1 and not args.no_rust2 and any(r in refs for r in RUST):
            records += _rust_threads(case, args, 2)
        _print(records[-(len(base) + 3) :])
        if "ours" in args.refs:
            _print_issue34(records, case)
    return records


def _rust_threads(case: str, args: argparse.Namespace, threads: int) -> List[Dict[str, Any]]:
    """The Rust tools on ``threads`` threads: in a process of their own (rayon sizes its pool once)."""
    import json
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rust.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--mode", "single", "--cases", case, "--refs", *RUST]
        cmd += ["--rust-threads", str(threads), "--iters", str(args.iters), "--out", out]
        cmd += ["--quick"] if args.quick else []
        cmd += ["--images", str(args.images)] if args.images else []
        env = {**os.environ, "RAYON_NUM_THREADS": str(threads)}
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=False)
        if done.returncode != 0 or not os.path.exists(out):
            return [{"kind": "detection", "case": case, "impl": "hotcoco", "error": f"{threads} threads: failed"}]
        with open(out) as f:
            recs = [r for r in json.load(f)["records"] if r.get("impl") in RUST]
    for r in recs:  # a row of their own in the report's table (keyed by case, impl, where, world size)
        r["backend"] = f"single process, {threads} threads"
    return recs


def _importable(ref: str) -> bool:
    """Whether reference ``ref``'s library is installed (the Rust tools are in the bench env, not the test envs)."""
    import importlib.util

    module = {"faster-coco-eval": "faster_coco_eval", "ultrafast-pycocotools": "ultrafast_pycocotools"}.get(ref, ref)
    return importlib.util.find_spec(module) is not None


def _print_issue34(records: Sequence[Dict[str, Any]], case: str) -> None:
    """Issue 34's single-process figures of ``case``: ours over the fastest Rust tool, and the wait after the
    last add() over that tool's evaluate + accumulate."""
    mine = [r for r in records if r.get("case") == case and r.get("impl") == "ours" and not r.get("error")]
    rust = [
        r
        for r in records
        if r.get("case") == case and r.get("impl") in RUST and r.get("threads") == 1 and "eval_s" in r
    ]
    if not mine or not rust:
        return
    fastest = min(rust, key=lambda r: r["eval_s"])
    total = mine[-1]["add_s"] + mine[-1]["compute_s"]
    print(
        f"  detection {case} per core: ours {total:.3f} s / {fastest['impl']} {fastest['eval_s']:.3f} s = "
        f"{total / fastest['eval_s']:.2f} (target <= 1.0); last add() -> result {mine[-1]['compute_s'] * 1e3:.1f} ms "
        f"= {mine[-1]['compute_s'] / fastest['eval_s']:.3f} of it (target <= 0.1)",
        flush=True,
    )


def _print(recs: Sequence[Dict[str, Any]]) -> None:
    for r in recs:
        if r.get("error"):
            print(f"  detection {r['case']} {r['impl']} {r['backend']} ws={r['ws']}: ERROR {r['error']}", flush=True)
            continue
        if "eval_s" in r:
            threads = f" ({r['threads']} threads)" if r.get("impl") in RUST else ""
            timing = f"build {r['build_s']:.2f}s, evaluate+accumulate {r['eval_s']:.3f}s{threads}"
        else:
            timing = f"add {r['add_s']:.3f}s + compute {r['compute_s']:.3f}s"
        extra = ""
        if r.get("bytes_per_det") is not None:
            extra += f", {r['bytes_per_det']:.1f} B/det sent"
        if r.get("peak_extra_bytes", -1) > 0:
            extra += f", peak extra {r['peak_extra_bytes'] / 2**20:.1f} MB (build to accumulate)"
        if r.get("peak_extra_bytes_per_rank"):
            extra += f", rank 0 peak extra {r['peak_extra_bytes_per_rank'][0] / 2**20:.1f} MB"
        st = r.get("stats")
        mAP = f", mAP {st[0]:.4f}" if st else ""
        print(f"  detection {r['case']} {r['impl']} {r['backend']} ws={r['ws']}: {timing}{extra}{mAP}", flush=True)


# --------------------------------------------------------------------------
# distributed
# --------------------------------------------------------------------------


def _torchvision_stand_in() -> bool:
    """Make ``torchvision.ops.box_convert`` importable for torchmetrics; ``True`` if a stand-in was needed."""
    import torchmetrics.detection.mean_ap as mean_ap

    try:
        import torchvision.ops  # noqa: F401

        return False
    except Exception:  # not installed, or a build for another torch (its C extension fails to load)
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
    import torch

    def box_convert(boxes: Any, in_fmt: str, out_fmt: str) -> Any:
        if in_fmt == out_fmt:
            return boxes.clone()
        if (in_fmt, out_fmt) != ("xyxy", "xywh"):
            raise NotImplementedError(f"stand-in box_convert: {in_fmt} -> {out_fmt}")
        x1, y1, x2, y2 = boxes.unbind(-1)
        return torch.stack((x1, y1, x2 - x1, y2 - y1), dim=-1)

    package, ops = types.ModuleType("torchvision"), types.ModuleType("torchvision.ops")
    ops.box_convert = box_convert  # type: ignore[attr-defined]
    package.ops = ops  # type: ignore[attr-defined]
    sys.modules["torchvision"], sys.modules["torchvision.ops"] = package, ops
    mean_ap._TORCHVISION_AVAILABLE = True  # type: ignore[attr-defined]
    return True


def _tm_inputs(images: Sequence[coco_data.Image]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """torchmetrics' inputs for the images (no masks: ``_tm_masks`` adds them batch by batch)."""
    import torch

    preds, target = [], []
    for im in images:
        preds.append(
            {
                "boxes": torch.from_numpy(im.det_boxes),
                "scores": torch.from_numpy(im.det_scores),
                "labels": torch.from_numpy(im.det_labels),
            }
        )
        box_area = [w * h for _x, _y, w, h in coco_data._xywh(im.gt_boxes)]  # MMEval's ground-truth areas
        target.append(
            {
                "boxes": torch.from_numpy(im.gt_boxes),
                "labels": torch.from_numpy(im.gt_labels),
                "iscrowd": torch.from_numpy(im.gt_crowd.astype(np.int64)),
                "area": torch.tensor(box_area, dtype=torch.float64),
            }
        )
    return preds, target


def _tm_masks(images: Sequence[coco_data.Image], preds: List[Dict[str, Any]], target: List[Dict[str, Any]]) -> None:
    """Add the dense boolean masks torchmetrics takes (what a model outputs) to one batch, and the masks' areas."""
    import torch
    from pycocotools import mask as mask_util

    for im, p, t in zip(images, preds, target):
        p["masks"] = torch.from_numpy(mask_util.decode(im.det_masks).transpose(2, 0, 1).astype(bool))
        t["masks"] = (
            torch.from_numpy(mask_util.decode(im.gt_masks).transpose(2, 0, 1).astype(bool))
            if im.gt_masks
            else torch.zeros((0, im.height, im.width), dtype=torch.bool)
        )
        t["area"] = torch.tensor([float(mask_util.area(m)) for m in im.gt_masks or []], dtype=torch.float64)


def _tm_state_bytes(metric: Any) -> int:
    """Bytes of the states torchmetrics all-gathers from this rank (tensors' bytes, pickled size of the rest)."""
    total = 0
    for name in metric._defaults:
        value = getattr(metric, name)
        for item in value if isinstance(value, list) else [value]:
            if hasattr(item, "element_size"):
                total += item.element_size() * item.numel()
            else:
                total += len(pickle.dumps(item, protocol=5))
    return total


def run_dist(comm: Comm, args: argparse.Namespace, backend: str) -> List[Dict[str, Any]]:
    warnings.simplefilter("ignore")
    records: List[Dict[str, Any]] = []
    if args.impl == ["mmeval021"] and backend == "mpi4py":
        os.environ.setdefault("OMPI_COMM_WORLD_SIZE", str(comm.ws))  # 0.2.1 only sees Open MPI (compute.py says why)
    for case in args.cases:
        spec = _spec(case, args)
        iou = _iou_type(spec)
        for impl in args.impl:
            pad = impl in ("ours", "mmeval021")
            ids = coco_data.shard_ids(spec.images, comm.rank, comm.ws, pad=pad)
            images = coco_data.make_images(spec, ids)
            dets = sum(len(im.det_scores) for im in images)
            world_dets = int(sum(comm.gather_floats(float(dets))))
            info: Dict[str, Any] = {
                "kind": "detection",
                "case": case,
                "iou_type": iou,
                "impl": impl,
                "backend": backend,
                "ws": comm.ws,
                "classes": spec.classes,
                "images": spec.images,
                "dets_per_rank": comm.gather_floats(float(dets)),
                "world_detections": world_dets,
            }
            try:
                rec = _dist_impl(comm, args, backend, impl, spec, images)
            except Exception as exc:
                rec = {"error": f"rank {comm.rank}: {type(exc).__name__}: {exc}"}
            bad = comm.gather_floats(1.0 if "error" in rec else 0.0)
            if any(bad) and "error" not in rec:
                rec = {"error": "another rank failed"}
            records.append({**info, **rec})
            if comm.rank == 0:
                _print(records[-1:])
            del images
            gc.collect()
    return records


def _dist_impl(
    comm: Comm, args: argparse.Namespace, backend: str, impl: str, spec: coco_data.Spec, images: List[coco_data.Image]
) -> Dict[str, Any]:
    iou = _iou_type(spec)
    notes: List[str] = []
    if impl == "torchmetrics":
        if _torchvision_stand_in():
            notes.append("torchvision.ops.box_convert stand-in (no torchvision build for this torch)")
        from torchmetrics.detection.mean_ap import MeanAveragePrecision

        preds, gts = _tm_inputs(images)

        def fresh() -> Any:
            # COCO's thresholds as pycocotools has them: torchmetrics' defaults are float32 linspaces
            # (0.0099999998 for 0.01), which move AP by ~1e-4 from COCOeval's on the same matches
            return MeanAveragePrecision(
                iou_type=iou,
                backend="faster_coco_eval",
                box_format="xyxy",
                iou_thresholds=COCO_IOU_THRS,
                rec_thresholds=COCO_REC_THRS,
            )

        def add(metric: Any) -> float:
            spent = 0.0
            for start in range(0, len(preds), BATCH):
                p = [dict(x) for x in preds[start : start + BATCH]]
                t = [dict(x) for x in gts[start : start + BATCH]]
                if iou == "segm":  # dense masks for this batch only (all of them at once: gigabytes), untimed
                    _tm_masks(images[start : start + BATCH], p, t)
                t0 = time.perf_counter()
                metric.update(p, t)
                spent += time.perf_counter() - t0
            return spent
    else:
        preds, gts = coco_data.mmeval_inputs(images)
        if impl == "ours":

            def fresh() -> Any:
                return _ours(spec, backend)
        else:  # MMEval 0.2.1 (this file runs with its environment's Python)

            def fresh() -> Any:
                from mmeval import COCODetection

                return COCODetection(
                    metric=iou,
                    metric_items=list(ITEMS),
                    print_results=False,
                    dataset_meta={"classes": coco_data.class_names(spec)},
                    dist_backend=backend,
                )

        def add(metric: Any) -> float:
            return _add_all(metric, preds, gts)

    adds, computes, peaks = [], [], []
    sent = -1
    state_bytes = 0
    summary_bytes = -1.0
    result: Dict[str, Any] = {}
    # torchmetrics and MMEval 0.2.1 take tens of seconds per evaluation at full size: one, not warmed up
    iters = args.iters if impl == "ours" else 1
    warmup = args.warmup if impl == "ours" else 0
    # ours on one process beside it, interleaved: each rank in turn evaluates the whole set alone while the
    # others wait (on a shared machine, single-process figures from another job ran under another load), and
    # every rank, not rank 0 only, so that every process evaluates at ws=2 with the same history: a rank that
    # never held the whole set has a smaller heap, and under the pinned allocator its compute() faulted 4x as
    # many pages (lvis: 6-11k against 1.5k, ~12 ms of a 100 ms compute()), and the slowest rank sets the time
    beside = impl == "ours" and comm.ws == 2 and not args.no_single_beside
    whole = coco_data.mmeval_inputs(coco_data.make_images(spec, range(spec.images))) if beside else None
    singles: List[float] = []
    for it in range(warmup + iters):
        if beside:
            assert whole is not None
            for r in range(comm.ws):
                comm.barrier()
                single_s = 0.0
                if comm.rank == r:
                    alone = _ours(spec, "non_dist")  # not the default: the group is up, only this rank runs it
                    t0 = time.perf_counter()
                    _add_all(alone, *whole)
                    with _quiet():
                        alone.compute()
                    single_s = time.perf_counter() - t0
                    del alone
                comm.idle_barrier()  # the others sleep meanwhile: an MPI barrier would keep a CPU busy
                single = comm.max(single_s)
                if it >= warmup:
                    singles.append(single)
        metric = fresh()
        comm.barrier()
        added = add(metric)
        if impl == "torchmetrics":
            state_bytes = _tm_state_bytes(metric)
        elif impl == "mmeval021":
            state_bytes = len(pickle.dumps(metric._results, protocol=pickle.HIGHEST_PROTOCOL))
        comm.barrier()
        size = spec.images if impl in ("ours", "mmeval021") else None
        # ours' timed evaluations trim nothing and count no bytes, as the one-process run beside them: its
        # memory and bytes are measured in evaluations of their own, below; the peers run once, both at once
        out, dt, peak, _ = _measure_compute(metric, size, count_bytes=False, ready=comm.barrier, memory=impl != "ours")
        if it == 0:
            result = out
            if impl == "ours":  # the compact summaries this rank made (kept after compute()), packed
                summary_bytes = float(sum(len(r[0] if isinstance(r, tuple) else r) for r in metric._local_results()))
        del metric, out
        worst_add, worst_compute = comm.max(added), comm.max(dt)
        if it >= warmup:
            adds.append(worst_add)
            computes.append(worst_compute)
            if impl != "ours":
                peaks.append(comm.gather_floats(float(peak)))
    if impl == "ours":  # rank 0's peak extra memory (VmHWM after a heap trim) and the bytes sent, untimed
        for it in range(MEMORY_ITERS):
            metric = fresh()
            comm.barrier()
            add(metric)
            comm.barrier()
            _, _, peak, sent_now = _measure_compute(metric, spec.images, count_bytes=it == 0, ready=comm.barrier)
            if it == 0:
                sent = sent_now
            peaks.append(comm.gather_floats(float(peak)))
            del metric
    traced = -1.0
    if impl == "ours":  # one more evaluation, untimed: the live bytes compute() holds at its peak (tracemalloc)
        metric = fresh()
        comm.barrier()
        add(metric)
        comm.barrier()
        traced = float(_traced_compute_peak(metric, spec.images))
        del metric
    stats = [float(result[k]) for k in TM_KEYS] if impl == "torchmetrics" else _stats_of(result, iou)
    dets = sum(len(im.det_scores) for im in images)
    rec: Dict[str, Any] = {
        "add_s": common.median(adds),
        "compute_s": common.median(computes),
        "times_s": [a + c for a, c in zip(adds, computes)],
        "stats": stats,
        "peak_extra_bytes_per_rank": [float(np.median([p[r] for p in peaks])) for r in range(comm.ws)],
    }
    if singles:
        rec["single_beside_s"] = common.median(singles)
    if summary_bytes >= 0:
        rec["summary_bytes_per_rank"] = comm.gather_floats(summary_bytes)
    if traced >= 0:
        rec["traced_peak_bytes_per_rank"] = comm.gather_floats(traced)
    if sent >= 0:
        sent_all = comm.gather_floats(float(sent))
        rec["sent_bytes_per_rank"] = sent_all
        rec["bytes_per_det"] = max(s / max(d, 1) for s, d in zip(sent_all, comm.gather_floats(float(dets))))
    if state_bytes:
        rec["gathered_bytes_per_rank"] = comm.gather_floats(float(state_bytes))
        rec["gathered_bytes_per_det"] = max(comm.gather_floats(float(state_bytes) / max(dets, 1)))
    if notes:
        rec["notes"] = notes
    return rec


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The command line (``main``'s, also for the smoke test)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("single", "dist"), default="single")
    parser.add_argument(
        "--impl",
        nargs="+",
        choices=("ours", "torchmetrics", "mmeval021"),
        default=["ours"],
        help="dist mode: what to run on the ranks",
    )
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=tuple(coco_data.CASES),
        default=[c for c in coco_data.CASES if c not in coco_data.HEAVY],
    )
    parser.add_argument("--quick", action="store_true", help="the small sizes (a smoke run)")
    parser.add_argument("--images", type=int, default=0, help="this many images in every case instead")
    parser.add_argument("--backend", choices=("torch_cpu", "mpi4py"), default="torch_cpu")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="dist mode: untimed iterations first")
    parser.add_argument("--pycocotools-iters", type=int, default=1, help="single mode: pycocotools is slow")
    parser.add_argument(
        "--refs", nargs="+", choices=(*REFS, "ours"), default=[*REFS, "ours"], help="single mode: what to run"
    )
    parser.add_argument("--rust-threads", type=int, default=1, help="single mode: the Rust tools' threads")
    parser.add_argument("--no-rust2", action="store_true", help="single mode: not the Rust tools on 2 threads too")
    parser.add_argument(
        "--no-single-beside",
        action="store_true",
        help="dist mode, ours at ws=2: do not also time rank 0 evaluating the whole set alone",
    )
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", default=None)
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.mode == "single":
        # before the Rust tools start their pools; OMP for faster-coco-eval
        os.environ["RAYON_NUM_THREADS"] = str(args.rust_threads)
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        records = run_single(args)
        if args.out:
            common.write_json(Path(args.out), {"meta": {"python": sys.executable}, "records": records})
        return 1 if any(r.get("error") for r in records) else 0
    return launch(__file__, args, argv, run_dist)


if __name__ == "__main__":
    sys.exit(main())
