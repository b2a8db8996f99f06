"""One rank of ``torchrun``: MMEngine's Evaluator, built from an mmdet-style config, evaluating mmeval metrics.

Usage: ``torchrun --nproc-per-node N mmengine_program.py OUT_DIR``. The config
(configs/mmdet_style_eval.py) names COCODetection and Accuracy through the ``MMEvalMetric`` adapter
(registered by its ``custom_imports``). The samples are dealt by MMEngine's own ``DefaultSampler``
(round robin, padded with the first samples) and handed to ``Evaluator.process`` as data elements
(``BaseDataElement`` / ``InstanceData``, as mmdet's and mmpretrain's samples are); ``Evaluator.evaluate``
runs with the dataset's size. Each rank writes ``OUT_DIR/rank<R>.json``: the evaluator's results, MMEngine's
view of the world (``mmengine.dist``), and the same metrics computed in this one process over the whole
dataset, without MMEngine.

torch.distributed is initialised here with gloo: MMEngine's ``init_dist('pytorch')`` calls
``torch.cuda.set_device``, which a CPU-only torch refuses; MMEngine's dist functions then use that group.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.dataset import DefaultSampler
from mmengine.dist import get_rank, get_world_size
from mmengine.evaluator import Evaluator
from mmengine.structures import BaseDataElement, InstanceData

from mmeval import Accuracy, COCODetection

N, CLASSES, BATCH = 23, 3, 4
CONFIG = Path(__file__).resolve().parent / "configs" / "mmdet_style_eval.py"


def dataset() -> List[Dict[str, Any]]:
    """``N`` images: ground-truth boxes (mmdet's raw ``instances``), detections near them and class scores."""
    rng = np.random.default_rng(35)
    images = []
    for i in range(N):
        m = int(rng.integers(1, 4))
        xy = rng.uniform(0, 60, (m, 2))
        gt = np.concatenate([xy, xy + rng.uniform(10, 40, (m, 2))], axis=1)
        gt_labels = rng.integers(0, CLASSES, m)
        jitter = rng.normal(0, 3, (m, 4))
        extra = rng.uniform(0, 80, (2, 4))
        extra[:, 2:] += extra[:, :2]
        scores = rng.random(CLASSES).astype(np.float32)
        label = int(rng.integers(0, CLASSES))
        scores[label] += 0.3
        images.append(
            {
                "img_id": 1000 + i,
                "ori_shape": (120, 100),
                "instances": [
                    {"bbox": [float(v) for v in b], "bbox_label": int(c), "ignore_flag": 0}
                    for b, c in zip(gt, gt_labels)
                ],
                "bboxes": np.concatenate([gt + jitter, extra]).astype(np.float32),
                "det_scores": rng.random(m + 2).astype(np.float32),
                "det_labels": np.concatenate([gt_labels, rng.integers(0, CLASSES, 2)]),
                "pred_score": scores / scores.sum(),
                "gt_label": label,
            }
        )
    return images


def data_sample(image: Dict[str, Any]) -> BaseDataElement:
    """One image as mmdet / mmpretrain hand it to the evaluator: metainfo, predicted instances, scores, label."""
    sample = BaseDataElement(metainfo={"img_id": image["img_id"], "ori_shape": image["ori_shape"]})
    sample.set_metainfo({"instances": image["instances"]})
    sample.pred_instances = InstanceData(
        bboxes=torch.from_numpy(image["bboxes"]),
        scores=torch.from_numpy(image["det_scores"]),
        labels=torch.from_numpy(image["det_labels"]),
    )
    sample.pred_score = torch.from_numpy(image["pred_score"])
    sample.gt_label = torch.tensor([image["gt_label"]])
    return sample


def alone(images: List[Dict[str, Any]], meta: Dict[str, Any]) -> Dict[str, Any]:
    """The two metrics over the whole dataset in this one process, without MMEngine."""
    coco = COCODetection(metric="bbox", print_results=False, dataset_meta=meta, dist_backend="non_dist")
    preds = [
        {"img_id": im["img_id"], "bboxes": im["bboxes"], "scores": im["det_scores"], "labels": im["det_labels"]}
        for im in images
    ]
    gts = [
        {
            "img_id": im["img_id"],
            "width": 100,
            "height": 120,
            "bboxes": np.array([i["bbox"] for i in im["instances"]]),
            "labels": np.array([i["bbox_label"] for i in im["instances"]]),
        }
        for im in images
    ]
    coco.add(preds, gts)
    acc = Accuracy(topk=(1, 3), thrs=None, dist_backend="non_dist")
    acc.add(np.stack([im["pred_score"] for im in images]), np.array([im["gt_label"] for im in images]))
    out = {f"coco/{k}": v for k, v in coco.compute().items()}
    out.update({f"acc/{k}": v for k, v in acc.compute().items()})
    return out


def main(out_dir: str) -> None:
    dist.init_process_group("gloo")
    cfg = Config.fromfile(str(CONFIG))  # imports custom_imports: the adapter registers 'MMEvalMetric'
    evaluator = Evaluator(cfg.val_evaluator)  # as Runner.build_evaluator does for a list of metrics
    meta = {"classes": tuple(f"class{c}" for c in range(CLASSES))}
    evaluator.dataset_meta = meta
    images = dataset()
    order = list(DefaultSampler(images, shuffle=False))  # this rank's share, padded to equal lengths
    epochs = []
    for _ in range(2):  # a second epoch must not see the first one's samples (MMEngine's metrics reset)
        for start in range(0, len(order), BATCH):
            batch = [data_sample(images[i]) for i in order[start : start + BATCH]]
            evaluator.process(data_samples=batch, data_batch=None)
        epochs.append(evaluator.evaluate(len(images)))
    report = {
        "mmengine_world": [get_rank(), get_world_size()],
        "seen": len(order),
        "epochs": epochs,
        "expected": alone(images, meta),
        "backends": sorted({type(m.metric).__name__ + ":" + m.metric.dist_comm.name for m in evaluator.metrics}),
    }
    with open(os.path.join(out_dir, f"rank{get_rank()}.json"), "w") as f:
        json.dump(report, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
