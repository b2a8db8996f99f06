"""Synthetic COCO-like detection data for the detection benchmark (issue 21), in both input formats.

Every image is generated from its own seed (``(seed, image id)``), so a rank can build
exactly its shard and a reference process the whole set, and both see the same numbers.
An image has ``Poisson(gts_per_image)`` ground truths (a few percent crowd regions) whose
sizes follow COCO's spread over the small / medium / large area ranges, and
``dets_per_image`` detections: jittered copies of most ground truths (some duplicated, some
with a wrong label) scored high, the rest background boxes scored low, so AP lands mid-range.
Boxes and scores are float32 (what a detector hands over). With ``masks=True`` every box
also carries an RLE mask (a jittered octagon inside it, on small images).

The same images are returned as

* MMEval-style per-image dicts (``mmeval_inputs``: ``predictions`` with ``img_id``,
  ``bboxes`` (xyxy), ``scores``, ``labels``, ``masks``; ``groundtruths`` with ``img_id``,
  ``width``, ``height``, ``bboxes``, ``labels``, ``ignore_flags``, ``masks``), as MMEval
  0.2.1's ``COCODetection.add`` takes them;
* COCO json dicts (``coco_gt``, ``coco_dt``) for pycocotools and faster-coco-eval, converted
  the way MMEval 0.2.1 converts the dicts (xywh = ``[x1, y1, x2 - x1, y2 - y1]`` in float64,
  category id = label, ``iscrowd`` = ignore flag, ground-truth area = the mask's area when
  there are masks, else the box's; detections' segm results carry no ``bbox``).

Only numpy is needed, plus pycocotools' mask API for ``masks=True``; the module runs in
MMEval 0.2.1's environment too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

#: COCO's share of small (< 32^2), medium and large (> 96^2) objects, and their sqrt-area bounds.
SIZE_SHARES = (0.41, 0.34, 0.25)
SIZE_BOUNDS = ((6.0, 32.0), (32.0, 96.0), (96.0, 400.0))


@dataclass(frozen=True)
class Spec:
    """What to generate: ``images`` images of ``width`` x ``height`` with these rates."""

    images: int
    classes: int = 80
    dets_per_image: int = 100
    gts_per_image: float = 7.5
    crowd_share: float = 0.03
    masks: bool = False
    width: int = 640
    height: int = 480
    long_tail: bool = False
    seed: int = 0

    @property
    def label_probs(self) -> np.ndarray:
        """Class frequencies: uniform, or a Zipf-like long tail (LVIS's rare / common / frequent)."""
        if not self.long_tail:
            return np.full(self.classes, 1.0 / self.classes)
        weights = 1.0 / np.arange(1, self.classes + 1) ** 0.9
        return weights / weights.sum()  # type: ignore[no-any-return]


#: The benchmark's cases: full size and the ``--quick`` size. ``lvis`` has 2,000 images (LVIS v1 val has
#: 19,809): with 500 its 1,203 classes held ~5 ground truths each (LVIS: ~200), so the per-class work that
#: a second rank does not halve set its ws=2 ratio -- benchmarks/analysis.md has the figures at both sizes.
CASES: Dict[str, Tuple[Spec, Spec]] = {
    "bbox": (Spec(images=5000), Spec(images=300)),
    "lvis": (
        Spec(images=2000, classes=1203, dets_per_image=300, gts_per_image=12.0, long_tail=True),
        Spec(images=60, classes=1203, dets_per_image=300, gts_per_image=12.0, long_tail=True),
    ),
    "segm": (Spec(images=1000, masks=True, width=320, height=240), Spec(images=80, masks=True, width=320, height=240)),
    # Objects365 val's shape (issue 34): 80k images, 365 classes, ~15 detections and ~15 objects an image
    # (1.2M detections); a case of its own, not run by default (HEAVY)
    "objects365": (
        Spec(images=80_000, classes=365, dets_per_image=15, gts_per_image=15.0),
        Spec(images=2_000, classes=365, dets_per_image=15, gts_per_image=15.0),
    ),
}
#: cases the detection benchmark runs only when named (``--cases``): minutes, and pycocotools takes ~10 min
HEAVY = ("objects365",)


@dataclass
class Image:
    """One image's ground truths and detections (boxes xyxy, float32)."""

    img_id: int
    width: int
    height: int
    gt_boxes: np.ndarray
    gt_labels: np.ndarray
    gt_crowd: np.ndarray
    det_boxes: np.ndarray
    det_scores: np.ndarray
    det_labels: np.ndarray
    gt_masks: Optional[List[Dict[str, Any]]] = field(default=None)
    det_masks: Optional[List[Dict[str, Any]]] = field(default=None)


def _sizes(rng: np.random.Generator, n: int, spec: Spec) -> Tuple[np.ndarray, np.ndarray]:
    """Widths and heights of ``n`` boxes: COCO's small/medium/large shares, aspect ratios 1:2 to 2:1."""
    which = rng.choice(3, size=n, p=SIZE_SHARES)
    lo = np.array([b[0] for b in SIZE_BOUNDS])[which]
    hi = np.minimum(np.array([b[1] for b in SIZE_BOUNDS])[which], 0.9 * min(spec.width, spec.height))
    side = lo + (np.maximum(hi, lo + 1.0) - lo) * rng.random(n)
    aspect = np.exp(rng.uniform(np.log(0.5), np.log(2.0), n))
    w = np.minimum(side * np.sqrt(aspect), spec.width - 1.0)
    h = np.minimum(side / np.sqrt(aspect), spec.height - 1.0)
    return w, h


def _place(rng: np.random.Generator, w: np.ndarray, h: np.ndarray, spec: Spec) -> np.ndarray:
    x = rng.random(len(w)) * (spec.width - w)
    y = rng.random(len(h)) * (spec.height - h)
    return np.stack([x, y, x + w, y + h], axis=1)


def _clip(boxes: np.ndarray, spec: Spec) -> np.ndarray:
    boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0, spec.width)
    boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0, spec.height)
    boxes[:, 2] = np.maximum(boxes[:, 2], boxes[:, 0] + 1.0)
    boxes[:, 3] = np.maximum(boxes[:, 3], boxes[:, 1] + 1.0)
    return np.round(boxes, 2)


def make_image(spec: Spec, img_id: int) -> Image:
    """Image ``img_id`` of ``spec`` (the same wherever it is built)."""
    rng = np.random.default_rng([spec.seed, img_id])
    probs = spec.label_probs
    k = int(rng.poisson(spec.gts_per_image))
    gw, gh = _sizes(rng, k, spec)
    gt = _clip(_place(rng, gw, gh, spec), spec)
    gt_labels = rng.choice(spec.classes, size=k, p=probs)
    crowd = rng.random(k) < spec.crowd_share
    # detections: jittered copies of the ground truths (crowd regions get some inside them too)
    copies = np.repeat(np.arange(k), 1 + (rng.random(k) < 0.3))
    copies = copies[rng.random(len(copies)) < 0.85][: spec.dets_per_image]
    gw_c, gh_c = gt[copies, 2] - gt[copies, 0], gt[copies, 3] - gt[copies, 1]
    sigma = rng.uniform(0.01, 0.15, len(copies))[:, None]
    jitter = rng.normal(size=(len(copies), 4)) * sigma * np.stack([gw_c, gh_c, gw_c, gh_c], axis=1)
    tp = gt[copies] + jitter
    tp_labels = np.where(
        rng.random(len(copies)) < 0.9, gt_labels[copies], rng.choice(spec.classes, len(copies), p=probs)
    )
    tp_scores = rng.beta(4.0, 2.0, len(copies))
    n_bg = spec.dets_per_image - len(copies)
    bw, bh = _sizes(rng, n_bg, spec)
    bg = _place(rng, bw, bh, spec)
    bg_labels = rng.choice(spec.classes, size=n_bg, p=probs)
    bg_scores = rng.beta(1.2, 5.0, n_bg)
    det = _clip(np.concatenate([tp, bg]), spec)
    order = rng.permutation(spec.dets_per_image)  # a detector's output order is not sorted by truth
    image = Image(
        img_id=img_id,
        width=spec.width,
        height=spec.height,
        gt_boxes=gt.astype(np.float32),
        gt_labels=gt_labels.astype(np.int64),
        gt_crowd=crowd,
        det_boxes=det[order].astype(np.float32),
        det_scores=np.concatenate([tp_scores, bg_scores])[order].astype(np.float32),
        det_labels=np.concatenate([tp_labels, bg_labels])[order].astype(np.int64),
    )
    if spec.masks:
        image.gt_masks = _masks(rng, image.gt_boxes, spec)
        image.det_masks = _masks(rng, image.det_boxes, spec)
    return image


def _masks(rng: np.random.Generator, boxes: np.ndarray, spec: Spec) -> List[Dict[str, Any]]:
    """An RLE mask per box: an octagon inside it, corners cut by a random share (pycocotools' encoder)."""
    from pycocotools import mask as mask_util

    if not len(boxes):
        return []
    cut = rng.uniform(0.1, 0.35, (len(boxes), 1))
    x1, y1, x2, y2 = (boxes[:, i : i + 1].astype(np.float64) for i in range(4))
    w, h = (x2 - x1) * cut, (y2 - y1) * cut
    polys = np.concatenate(
        [x1 + w, y1, x2 - w, y1, x2, y1 + h, x2, y2 - h, x2 - w, y2, x1 + w, y2, x1, y2 - h, x1, y1 + h], axis=1
    )
    return list(mask_util.frPyObjects(polys.tolist(), spec.height, spec.width))


def make_images(spec: Spec, ids: Iterable[int]) -> List[Image]:
    """The images ``ids`` of ``spec``."""
    return [make_image(spec, int(i)) for i in ids]


def shard_ids(n: int, rank: int, world_size: int, pad: bool = True) -> List[int]:
    """Rank ``rank``'s image ids as a ``DistributedSampler(shuffle=False)`` deals them: round robin, the last
    ones padded with the first images of the set (``compute(size=n)`` drops them) unless ``pad=False``."""
    if not pad:
        return list(range(rank, n, world_size))
    total = -(-n // world_size) * world_size
    return [i % n for i in range(rank, total, world_size)]


# --------------------------------------------------------------------------
# MMEval-style dicts
# --------------------------------------------------------------------------


def mmeval_inputs(images: Sequence[Image]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """``(predictions, groundtruths)`` for ``COCODetection.add`` (MMEval 0.2.1's per-image dicts)."""
    preds, gts = [], []
    for im in images:
        pred: Dict[str, Any] = {
            "img_id": im.img_id,
            "bboxes": im.det_boxes,
            "scores": im.det_scores,
            "labels": im.det_labels,
        }
        gt: Dict[str, Any] = {
            "img_id": im.img_id,
            "width": im.width,
            "height": im.height,
            "bboxes": im.gt_boxes,
            "labels": im.gt_labels,
            "ignore_flags": im.gt_crowd.astype(np.int64),
        }
        if im.det_masks is not None:
            pred["masks"] = [dict(m) for m in im.det_masks]  # MMEval 0.2.1 rewrites counts in place
            gt["masks"] = [dict(m) for m in im.gt_masks or []]
        preds.append(pred)
        gts.append(gt)
    return preds, gts


def class_names(spec: Spec) -> Tuple[str, ...]:
    """``dataset_meta['classes']``: one name per label."""
    return tuple(f"class_{i}" for i in range(spec.classes))


# --------------------------------------------------------------------------
# COCO json
# --------------------------------------------------------------------------


def _xywh(boxes: np.ndarray) -> List[List[float]]:
    """MMEval 0.2.1's conversion: float64 values of the boxes, width and height by subtraction."""
    return [[b[0], b[1], b[2] - b[0], b[3] - b[1]] for b in boxes.tolist()]


def _json_rle(rle: Dict[str, Any]) -> Dict[str, Any]:
    counts = rle["counts"]
    return {"size": list(rle["size"]), "counts": counts.decode() if isinstance(counts, bytes) else counts}


def coco_gt(images: Sequence[Image], classes: int) -> Dict[str, Any]:
    """The ground truths as a COCO annotation dict (what MMEval 0.2.1 writes for ``ann_file=None``)."""
    from_masks = any(im.gt_masks is not None for im in images)
    area_of: Any = None
    if from_masks:
        from pycocotools import mask as mask_util

        area_of = mask_util.area
    anns: List[Dict[str, Any]] = []
    for im in images:
        for i, box in enumerate(_xywh(im.gt_boxes)):
            ann = {
                "id": len(anns) + 1,
                "image_id": im.img_id,
                "bbox": box,
                "iscrowd": int(im.gt_crowd[i]),
                "category_id": int(im.gt_labels[i]),
                "area": box[2] * box[3],
            }
            if im.gt_masks is not None:
                ann["area"] = float(area_of(im.gt_masks[i]))
                ann["segmentation"] = _json_rle(im.gt_masks[i])
            anns.append(ann)
    return {
        "images": [{"id": im.img_id, "width": im.width, "height": im.height, "file_name": ""} for im in images],
        "categories": [{"id": c, "name": f"class_{c}"} for c in range(classes)],
        "annotations": anns,
    }


def coco_dt(images: Sequence[Image], iou_type: str = "bbox") -> List[Dict[str, Any]]:
    """The detections as a COCO results list (segm results without ``bbox``, as MMEval 0.2.1 loads them)."""
    out: List[Dict[str, Any]] = []
    for im in images:
        scores, labels = im.det_scores.tolist(), im.det_labels.tolist()
        if iou_type == "segm":
            assert im.det_masks is not None, "segm needs Spec(masks=True)"
            out += [
                {"image_id": im.img_id, "category_id": labels[i], "score": scores[i], "segmentation": _json_rle(m)}
                for i, m in enumerate(im.det_masks)
            ]
        else:
            out += [
                {"image_id": im.img_id, "category_id": labels[i], "score": scores[i], "bbox": b}
                for i, b in enumerate(_xywh(im.det_boxes))
            ]
    return out


def summary(images: Sequence[Image]) -> Dict[str, float]:
    """Counts of the generated set (for the report)."""
    sizes = [(b[2] - b[0]) * (b[3] - b[1]) for im in images for b in im.gt_boxes.tolist()]
    area = np.array(sizes) if sizes else np.zeros(0)
    return {
        "images": len(images),
        "detections": int(sum(len(im.det_scores) for im in images)),
        "ground_truths": len(sizes),
        "crowd": int(sum(int(im.gt_crowd.sum()) for im in images)),
        "small": float(np.mean(area < 32**2)) if len(area) else 0.0,
        "large": float(np.mean(area > 96**2)) if len(area) else 0.0,
    }
