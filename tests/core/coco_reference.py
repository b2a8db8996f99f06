"""Shared by the COCO detection tests: synthetic COCO-like images and pycocotools' COCOeval on the same data."""

from __future__ import annotations

import contextlib
import copy
import io
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

W = H = 160


def detections(
    n: int = 40,
    num_classes: int = 5,
    seed: int = 0,
    masks: bool = False,
    polygons: bool = False,
    crowd: float = 0.1,
    float32: bool = False,
) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """``n`` images (``img_id`` 3 * i + 1, dealt in a shuffled order) of small / medium / large objects.

    0-6 objects per image (1 image in 8 has none), some crowd (``ignore_flags``); the last class never
    has a ground truth. A detector finds most objects (jittered box, sometimes twice, sometimes the wrong
    class), adds background boxes; 1 image in 7 has no detection. Scores are rounded to 2 decimals so
    that ties occur. With ``masks``, every box carries an RLE mask (the ground truths' as polygons with
    ``polygons``).
    """
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n) * 3 + 1
    preds, gts = [], []
    for i in range(n):
        m = 0 if rng.random() < 1 / 8 else int(rng.integers(1, 7))
        size = rng.choice([14.0, 45.0, 110.0], m) * rng.uniform(0.7, 1.3, m)
        xy = rng.uniform(0, W - size[:, None], (m, 2)) if m else np.zeros((0, 2))
        aspect = rng.uniform(0.6, 1.4, m)
        boxes = np.concatenate([xy, xy + np.stack([size, size * aspect], 1)], axis=1) if m else np.zeros((0, 4))
        boxes = np.clip(boxes, 0, W - 1)
        labels = rng.integers(0, num_classes - 1, m)
        flags = (rng.random(m) < crowd).astype(np.int64)
        pb, ps, pl = [], [], []
        if rng.random() >= 1 / 7:
            for box, lab, s in zip(boxes, labels, size):
                for copy_ in range(1 + int(rng.random() < 0.2)):
                    if copy_ == 0 and rng.random() < 0.15:
                        continue
                    pb.append(np.clip(box + rng.normal(0, 0.07 * s + 0.5, 4), 0, W - 1))
                    ps.append(rng.uniform(0.4, 1.0) if copy_ == 0 else rng.uniform(0.2, 0.9))
                    pl.append(lab if rng.random() < 0.9 else rng.integers(0, num_classes))
            for _ in range(int(rng.integers(0, 5))):
                s = rng.uniform(5, 90)
                x, y = rng.uniform(0, W - s, 2)
                pb.append(np.clip(np.array([x, y, x + s, y + s * rng.uniform(0.5, 1.5)]), 0, W - 1))
                ps.append(rng.uniform(0.05, 0.7))
                pl.append(rng.integers(0, num_classes))
        pred = {
            "img_id": int(ids[i]),
            "bboxes": np.array(pb, dtype=np.float64).reshape(-1, 4),
            "scores": np.round(np.array(ps, dtype=np.float64), 2),
            "labels": np.array(pl, dtype=np.int64),
        }
        if float32:
            pred["scores"] = pred["scores"].astype(np.float32)
        gt = {"img_id": int(ids[i]), "width": W, "height": H, "bboxes": boxes, "labels": labels, "ignore_flags": flags}
        if masks:
            pred["masks"] = [_box_rle(b, rng) for b in pred["bboxes"]]
            gt["masks"] = [_box_polygon(b) if polygons else _box_rle(b, rng) for b in boxes]
        preds.append(pred)
        gts.append(gt)
    return preds, gts


def _box_rle(box: np.ndarray, rng: Any) -> Dict[str, Any]:
    from pycocotools import mask as mask_util

    m = np.zeros((H, W), dtype=np.uint8)
    x1, y1, x2, y2 = (int(v) for v in box)
    m[y1 : y2 + 1, x1 : x2 + 1] = rng.random((y2 - y1 + 1, x2 - x1 + 1)) > 0.25
    return mask_util.encode(np.asfortranarray(m))  # type: ignore[no-any-return]


def _box_polygon(box: np.ndarray) -> List[List[float]]:
    x1, y1, x2, y2 = (float(v) for v in box)
    cx = (x1 + x2) / 2
    return [[x1, y1, cx, y1 + 0.2 * (y2 - y1), x2, y1, x2, y2, x1, y2]]


def coco_json(gts: Sequence[Dict[str, Any]], classes: Sequence[str], mask_area: bool = True) -> Dict[str, Any]:
    """The ground truths as a COCO json (MMEval 0.2.1's conversion: area = box w * h, or the mask's area)."""
    from pycocotools import mask as mask_util

    images, anns = [], []
    for idx, g in enumerate(gts):
        img_id = g.get("img_id", idx)
        images.append({"id": img_id, "width": g["width"], "height": g["height"], "file_name": ""})
        for j in range(len(g["labels"])):
            b = [float(v) for v in np.asarray(g["bboxes"][j], dtype=np.float64)]
            bbox = [b[0], b[1], b[2] - b[0], b[3] - b[1]]
            ann = {
                "id": len(anns) + 1,
                "image_id": img_id,
                "bbox": bbox,
                "category_id": int(g["labels"][j]),
                "iscrowd": int(g.get("ignore_flags", np.zeros(len(g["labels"])))[j]),
                "area": bbox[2] * bbox[3],
            }
            if "masks" in g:
                seg = copy.deepcopy(g["masks"][j])
                if isinstance(seg, dict):
                    if mask_area:
                        ann["area"] = float(mask_util.area(seg))
                    seg["counts"] = seg["counts"].decode() if isinstance(seg["counts"], bytes) else seg["counts"]
                elif mask_area:
                    ann["area"] = float(
                        mask_util.area(mask_util.merge(mask_util.frPyObjects(seg, g["height"], g["width"])))
                    )
                ann["segmentation"] = seg
            anns.append(ann)
    return {
        "images": images,
        "annotations": anns,
        "categories": [{"id": i, "name": name} for i, name in enumerate(classes)],
    }


def cocoeval(
    gt_json: Dict[str, Any],
    preds: Sequence[Dict[str, Any]],
    classes: Sequence[str],
    metric: str,
    iou_thrs: Optional[Sequence[float]] = None,
    max_dets: Sequence[int] = (1, 10, 100),
) -> Any:
    """pycocotools' COCOeval (quiet) on ``gt_json`` and ``preds`` as MMEval 0.2.1 feeds it; the evaluated object."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = copy.deepcopy(gt_json)
        gt.createIndex()
        cat_ids = gt.getCatIds(catNms=list(classes))
        dets = []
        for idx, p in enumerate(preds):
            scores = p.get("mask_scores", p["scores"]) if metric == "segm" else p["scores"]
            for j in range(len(p["labels"])):
                b = [float(v) for v in np.asarray(p["bboxes"][j], dtype=np.float64)]
                d = {
                    "image_id": p.get("img_id", idx),
                    "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]],
                    "score": float(scores[j]),
                    "category_id": cat_ids[int(p["labels"][j])],
                }
                if metric == "segm":
                    seg = dict(p["masks"][j])
                    seg["counts"] = seg["counts"].decode() if isinstance(seg["counts"], bytes) else seg["counts"]
                    d["segmentation"] = seg
                    d.pop("bbox")
                dets.append(d)
        dt = gt.loadRes(dets)
        ev = COCOeval(gt, dt, "bbox" if metric == "proposal" else metric)
        ev.params.catIds = cat_ids
        ev.params.imgIds = gt.getImgIds()
        ev.params.maxDets = list(max_dets)
        if iou_thrs is not None:
            ev.params.iouThrs = np.array(iou_thrs)
        if metric == "proposal":
            ev.params.useCats = 0
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev
