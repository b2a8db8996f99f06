"""COCO results files as pycocotools users hold them, read into :class:`~mmeval.metrics.COCODetection`.

A COCO *results* json is a list of detections, one dict each: ``image_id``,
``category_id``, ``score``, and ``bbox`` (``[x, y, w, h]``) and / or
``segmentation`` (an RLE dict) -- what ``COCO.loadRes`` reads and what
detectors write. :func:`add_results` groups such a list by image (the
file's order) and adds it to a metric built with ``ann_file``; a
segmentation result without ``bbox`` gets its mask's bounding box, as
``loadRes`` gives it. :func:`clean_xywh` writes a box back without the noise
of the ``x2 - x1`` subtraction.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from ..core.errors import MetricArgumentError, MetricArgumentKeyError
from .extras import import_extra

if TYPE_CHECKING:  # pragma: no cover
    from .coco_detection import COCODetection
    from .coco_inputs import Annotations, Categories

__all__ = ["add_results", "clean_xywh", "read_results", "with_mask_boxes", "write_results"]

#: images added to the metric at once (each add() checks a batch of images)
BATCH_IMAGES = 512

ResultsLike = Union[str, "os.PathLike[str]", Sequence[Dict[str, Any]]]


def read_results(results: ResultsLike) -> List[Dict[str, Any]]:
    """The detections of a COCO results json (a path) or of its list of dicts, checked to be a list of dicts."""
    if isinstance(results, (str, os.PathLike)):
        path = os.fspath(results)
        if not os.path.isfile(path):
            raise MetricArgumentError(f"COCODetection.add_results(): {path!r} is not a readable file")
        with open(path) as f:
            try:
                results = json.load(f)
            except ValueError as exc:
                raise MetricArgumentError(f"COCODetection.add_results(): {path!r} is not json: {exc}") from None
    if isinstance(results, dict) or not isinstance(results, (list, tuple)):
        raise MetricArgumentError(
            "COCODetection.add_results(): results must be a COCO results json (a path) or its list of dicts "
            f"(image_id, category_id, score, bbox and/or segmentation), got {type(results).__name__}"
        )
    for j, det in enumerate(results):
        if not isinstance(det, dict):
            raise MetricArgumentError(f"COCODetection.add_results(): results[{j}] must be a dict, got {det!r}")
        for key in ("image_id", "category_id", "score"):
            if key not in det:
                raise MetricArgumentKeyError(
                    f"COCODetection.add_results(): results[{j}] has no {key!r}; a COCO result needs image_id, "
                    f"category_id, score and bbox or segmentation"
                )
        if "bbox" not in det and "segmentation" not in det:
            raise MetricArgumentKeyError(
                f"COCODetection.add_results(): results[{j}] has neither 'bbox' nor 'segmentation'"
            )
    return list(results)


def _predictions(
    metric: "COCODetection",
    dets: List[Dict[str, Any]],
    ann: Optional["Annotations"],
    categories: Callable[[], "Categories"],
) -> List[Dict[str, Any]]:
    """One ``add_predictions()`` dict per image of ``dets`` (the order each image first appears in)."""
    cats = categories()
    known = {c["id"] for c in ann.categories} if ann is not None else set()
    segm = "segm" in metric.metrics
    by_image: Dict[int, List[Dict[str, Any]]] = {}
    for j, det in enumerate(dets):
        cat = det["category_id"]
        if cat not in known:
            raise MetricArgumentError(
                f"COCODetection.add_results(): results[{j}]['category_id']={cat!r} is no category of ann_file "
                f"{metric.ann_file!r} (its ids: {sorted(known)})"
            )
        if cat not in cats.label_of:  # a category outside dataset_meta's classes: not evaluated, as pycocotools
            continue
        if segm and "segmentation" not in det:
            raise MetricArgumentKeyError(
                f"COCODetection.add_results(): metric 'segm' needs results[{j}]['segmentation'] (an RLE dict)"
            )
        by_image.setdefault(det["image_id"], []).append(det)
    mask_api: Any = None
    preds = []
    for img_id, group in by_image.items():
        if mask_api is None and any("bbox" not in d for d in group):
            mask_api = import_extra("pycocotools.mask", "COCODetection")
        xywh = np.array(
            [d["bbox"] if "bbox" in d else mask_api.toBbox(_rle(d["segmentation"])) for d in group], dtype=np.float64
        ).reshape(len(group), 4)
        pred: Dict[str, Any] = {
            "img_id": img_id,
            "bboxes": np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1),
            "scores": np.array([d["score"] for d in group], dtype=np.float64),
            "labels": np.array([cats.label_of[d["category_id"]] for d in group], dtype=np.int64),
        }
        if segm:
            pred["masks"] = [_rle(d["segmentation"]) for d in group]
        preds.append(pred)
    return preds


def _rle(segm: Any) -> Any:
    """A result's segmentation as pycocotools' mask API takes it (compressed counts as bytes)."""
    if isinstance(segm, dict) and isinstance(segm.get("counts"), str):
        return {"size": segm["size"], "counts": segm["counts"].encode()}
    return segm


def add_results(
    metric: "COCODetection", results: ResultsLike, ann: Optional["Annotations"], categories: Callable[[], "Categories"]
) -> int:
    """Add the detections of a COCO results json (path) or list to ``metric`` (built with ``ann_file``).

    ``ann``: the metric's annotations read from ``ann_file`` (``None``: none); ``categories``: gives
    its categories (called once ``ann`` is known to be there) -- the metric hands them over.

    Every detection's ``image_id`` must be an image of the ``ann_file`` and its
    ``category_id`` a category of it; detections of a category outside
    ``dataset_meta['classes']`` (when given) are left out, as pycocotools
    leaves out categories not in ``params.catIds``. For ``'segm'`` every
    detection needs ``segmentation``; ``bbox`` may be absent (the mask's box
    is used, as ``COCO.loadRes`` does). Returns the number of images added.
    Under several ranks, give each rank a share of the images (one rank may
    add them all): every detection added counts once.
    """
    if ann is None:
        raise MetricArgumentError(
            "COCODetection.add_results() needs ann_file: a results json names images and categories by their "
            "ids in the annotation file; build COCODetection(ann_file=...)"
        )
    preds = _predictions(metric, read_results(results), ann, categories)
    for lo in range(0, len(preds), BATCH_IMAGES):
        metric.add_predictions(preds[lo : lo + BATCH_IMAGES])
    return len(preds)


def _short(start: float, length: float) -> float:
    """``length`` as the shortest decimal (up to 15 digits) that puts the far edge where ``start + length`` does."""
    for digits in (6, 10, 15):
        value = float(f"{length:.{digits}g}")
        if start + value == start + length:
            return value
    return length


def clean_xywh(xywh: Sequence[float]) -> List[float]:
    """A box ``[x, y, w, h]`` to write: ``w`` and ``h`` without the subtraction's float noise.

    ``x2 - x1`` leaves ``14.819999999999993`` where the boxes said ``25.12`` and
    ``10.3``; the written width is the shortest decimal of up to 15 digits
    whose far edge ``x + w`` is exactly the evaluated box's (``14.82`` here),
    else the width as computed. ``x`` and ``y`` are written as given.
    """
    x, y, w, h = (float(v) for v in xywh)
    return [x, y, _short(x, w), _short(y, h)]


def with_mask_boxes(pred: Any) -> Any:
    """``pred`` (an ``add()`` prediction) with ``bboxes`` from its ``masks`` when it has masks and no boxes.

    Each box is its mask's bounding box (pycocotools' ``toBbox``, as ``COCO.loadRes``
    gives a segmentation result), as ``x1, y1, x2, y2``, for RLE dicts and binary arrays. Anything else
    (polygon masks among them) is returned as is.
    """
    if not isinstance(pred, dict) or "bboxes" in pred or not isinstance(pred.get("masks"), (list, tuple)):
        return pred
    if any(isinstance(m, list) for m in pred["masks"]):  # polygons need the image's size: add() asks for boxes
        return pred
    mask_api = import_extra("pycocotools.mask", "COCODetection")
    boxes = []
    for m in pred["masks"]:
        if isinstance(m, dict) and "counts" in m and "size" in m:
            rle = _rle(m)
            if isinstance(rle["counts"], list):
                rle = mask_api.frPyObjects(rle, *(int(v) for v in rle["size"]))
        else:
            rle = mask_api.encode(np.asfortranarray(np.asarray(m, dtype=np.uint8)))
        boxes.append(mask_api.toBbox(rle))
    xywh = np.array(boxes, dtype=np.float64).reshape(len(boxes), 4)
    return {**pred, "bboxes": np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1)}


def write_results(prefix: str, records: List[Any], ids: Optional[np.ndarray], category_ids: Sequence[int]) -> None:
    """MMEval's result files: ``{prefix}.bbox.json`` (and ``{prefix}.segm.json`` when the images have masks).

    ``records``: per image (dataset order) its kept detections -- ``(img_id, xywh, scores, labels,
    mask_scores, rles)`` -- or None; an image without an ``img_id`` is written with ``ids[pos]`` (else its
    position); a label ``l`` is written as ``category_ids[l]``."""
    bbox: List[Dict[str, Any]] = []
    segm: Optional[List[Dict[str, Any]]] = None
    for pos, rec in enumerate(records):
        if rec is None:
            continue
        img_id, xywh, scores, labels, seg_scores, rles = rec
        image_id = img_id if img_id is not None else (int(ids[pos]) if ids is not None else pos)
        for b, s, lab in zip(xywh.tolist(), scores.tolist(), labels.tolist()):
            bbox.append({"image_id": image_id, "bbox": clean_xywh(b), "score": s, "category_id": category_ids[lab]})
        if rles is not None:
            segm = [] if segm is None else segm
            ms = (seg_scores if seg_scores is not None else scores).tolist()
            for b, s, lab, r in zip(xywh.tolist(), ms, labels.tolist(), rles):
                counts = r["counts"].decode() if isinstance(r["counts"], bytes) else r["counts"]
                segm.append(
                    {
                        "image_id": image_id,
                        "bbox": clean_xywh(b),
                        "score": s,
                        "category_id": category_ids[lab],
                        "segmentation": {"size": list(r["size"]), "counts": counts},
                    }
                )
    with open(f"{prefix}.bbox.json", "w") as f:
        json.dump(bbox, f)
    if segm is not None:
        with open(f"{prefix}.segm.json", "w") as f:
            json.dump(segm, f)
