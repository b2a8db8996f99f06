"""COCODetection's inputs as ``add()`` checks them, and an annotation file's ground truths.

The records one image becomes before it is matched (:class:`ImageInputs`, its
:class:`GroundTruths`; :func:`read_image` checks and converts one), the
evaluated categories (:class:`Categories`), a COCO json indexed by image
(:class:`Annotations`), the argument checks that name the offending key, and
each ground truth's area-range ignore flags. A whole batch of plain numpy arrays is read at once by
:mod:`.coco_inputs_batched`.
"""

from __future__ import annotations

import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.errors import MetricArgumentError, MetricArgumentKeyError
from ..core.inputs import to_numpy
from .coco_accumulate import AREA_RANGES
from .coco_mask_runs import BatchRuns, MaskRuns
from .coco_native import kernels
from .extras import import_extra
from .utils.rle_check import check_polygon_rings, check_rle


class Categories:
    """The evaluated category ids (``ids[label]``) and their positions in sorted order (pycocotools' K axis)."""

    def __init__(self, ids: List[int], names: Dict[int, str]) -> None:
        self.ids = ids
        self.names = names
        self.sorted_ids = sorted(set(ids))
        where = {c: i for i, c in enumerate(self.sorted_ids)}
        self.kpos = np.array([where[c] for c in ids], dtype=np.int64)
        #: category id -> its label (index into ``ids``)
        self.label_of = {c: i for i, c in enumerate(ids)}


class GroundTruths:
    """One image's ground truths: xywh boxes, label (index into the category ids), area, crowd, id != 0, masks."""

    __slots__ = ("xywh", "labels", "area", "crowd", "idnz", "rles", "runs")

    def __init__(
        self,
        xywh: np.ndarray,
        labels: np.ndarray,
        area: np.ndarray,
        crowd: np.ndarray,
        idnz: np.ndarray,
        rles: Optional[Sequence[Any]],
        runs: Optional["MaskRuns"] = None,
    ) -> None:
        self.xywh, self.labels, self.area, self.crowd, self.idnz, self.rles = xywh, labels, area, crowd, idnz, rles
        #: ``rles`` decoded once at ``add()`` by mmeval-coco-native (None: not decoded there)
        self.runs = runs


class ImageInputs:
    """One image as add() checked it, waiting to be matched on this rank."""

    __slots__ = ("img_id", "xywh", "scores", "det_labels", "seg_scores", "det_rles", "gts", "records", "det_runs")

    def __init__(
        self,
        img_id: Optional[int],
        xywh: np.ndarray,
        scores: np.ndarray,
        labels: np.ndarray,
        seg_scores: Optional[np.ndarray],
        det_rles: Optional[Sequence[Any]],
        gts: GroundTruths,
        records: Any,
        det_runs: Optional["MaskRuns"] = None,
    ) -> None:
        #: ``det_rles`` decoded once at ``add()`` by mmeval-coco-native (None: not decoded there)
        self.det_runs = det_runs
        self.img_id, self.xywh, self.scores, self.det_labels = img_id, xywh, scores, labels
        self.seg_scores, self.det_rles, self.gts, self.records = seg_scores, det_rles, gts, records


def image_records(im: ImageInputs) -> Any:
    if im.records is None:
        return (im.img_id, im.xywh, im.scores, im.det_labels, im.seg_scores, im.det_rles)
    xywh, scores, labels, seg_scores, rles = im.records
    return (im.img_id, xywh, scores, labels, seg_scores, rles)


class Annotations:
    """A COCO json's images, categories and annotations, indexed by image (as pycocotools' COCO orders them)."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self.categories: List[Dict[str, Any]] = list(data.get("categories", []))
        self.images: Dict[int, Dict[str, Any]] = {img["id"]: img for img in data.get("images", [])}
        self.by_image: Dict[int, List[Dict[str, Any]]] = {}
        for ann in data.get("annotations", []) or []:
            self.by_image.setdefault(ann["image_id"], []).append(ann)
        self._npig: Optional[np.ndarray] = None

    def image_gts(self, img_id: int, cats: Categories, masks: bool) -> GroundTruths:
        """The ground truths of ``img_id`` whose category is evaluated, in the json's order."""
        pos = cats.label_of
        anns = [a for a in self.by_image.get(img_id, []) if a["category_id"] in pos]
        m = len(anns)
        xywh = np.array([a["bbox"] for a in anns], dtype=np.float64).reshape(m, 4)
        labels = np.array([pos[a["category_id"]] for a in anns], dtype=np.int64)
        area = np.array([a["area"] for a in anns], dtype=np.float64)
        crowd = np.array([bool(a.get("iscrowd", 0)) for a in anns], dtype=bool)
        idnz = np.array([a["id"] != 0 for a in anns], dtype=bool)
        rles = None
        if masks and m:
            img = self.images[img_id]
            rles = [_ann_rle(a["segmentation"], img["height"], img["width"]) for a in anns]
        return GroundTruths(xywh, labels, area, crowd, idnz, rles)

    def npig(self, cats: Categories) -> np.ndarray:
        """Non-ignored ground truths per (sorted category, area range) over every image of the file."""
        if self._npig is None:
            pos = {c: i for i, c in enumerate(cats.sorted_ids)}
            anns = [a for img_id in self.images for a in self.by_image.get(img_id, []) if a["category_id"] in pos]
            k = np.array([pos[a["category_id"]] for a in anns], dtype=np.int64)
            bits = ignore_bits(
                np.array([float(a["area"]) for a in anns], dtype=np.float64),
                np.array([bool(a.get("iscrowd", 0)) for a in anns], dtype=bool),
            )
            out = np.zeros((len(cats.sorted_ids), len(AREA_RANGES)), dtype=np.int64)
            for r in range(len(AREA_RANGES)):
                np.add.at(out[:, r], k[(bits >> r) & 1 == 0], 1)
            self._npig = out
        return self._npig

    def __getstate__(self) -> Dict[str, Any]:
        return {"categories": self.categories, "images": self.images, "by_image": self.by_image, "_npig": self._npig}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)


def _ann_rle(segm: Any, h: int, w: int) -> Any:
    """pycocotools' ``COCO.annToRLE``: polygons and uncompressed RLE to compressed RLE (image size h x w)."""
    mask = import_extra("pycocotools.mask", "COCODetection")
    if isinstance(segm, list):
        return mask.merge(mask.frPyObjects(segm, h, w))
    if isinstance(segm["counts"], list):
        return mask.frPyObjects(segm, h, w)
    return {"size": list(segm["size"]), "counts": segm["counts"]}


def _img_id(value: Any, what: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        try:
            arr = to_numpy(value, what)
        except ValueError:
            arr = np.array(None)
        if arr.shape == () and arr.dtype.kind in "iu":
            return int(arr)
        raise MetricArgumentError(f"COCODetection.add(): {what} must be an int, got {value!r}")
    return int(value)


def _numbers(value: Any, what: str, n: Optional[int], width: Optional[int]) -> np.ndarray:
    """Finite numbers as float64: (n,) per box (``width=None``), or (any n, width) boxes."""
    arr = to_numpy(value, what)
    if arr.size == 0:
        arr = arr.reshape((0,) if width is None else (0, width))
    elif arr.ndim == 0 and width is None:
        arr = arr.reshape(-1)
    shape_ok = arr.ndim == 1 and arr.shape[0] == n if width is None else arr.ndim == 2 and arr.shape[1] == width
    if not shape_ok or (arr.size and arr.dtype.kind not in "biuf"):
        want = f"{n} numbers (one per box)" if width is None else f"numbers of shape (n, {width}) (x1, y1, x2, y2)"
        raise MetricArgumentError(
            f"COCODetection.add(): {what} must hold {want}, got shape {arr.shape} dtype {arr.dtype}"
        )
    out = arr.astype(np.float64)
    if not np.isfinite(out).all():
        raise MetricArgumentError(f"COCODetection.add(): {what} holds NaN or infinite values")
    return out


def _boxes(value: Any, what: str) -> np.ndarray:
    return _numbers(value, what, None, 4)


def _vector(value: Any, what: str, n: int) -> np.ndarray:
    return _numbers(value, what, n, None)


def _labels(value: Any, what: str, n: int, c: int) -> np.ndarray:
    arr = _vector(value, what, n)
    bad = (arr != np.floor(arr)) | (arr < 0) | (arr >= c)
    if bad.any():
        raise MetricArgumentError(
            f"COCODetection.add(): {what} holds {arr[bad][0]:g}; labels must be ints in "
            f"[0, {c - 1}] (indices into dataset_meta['classes'] that are evaluated)"
        )
    return arr.astype(np.int64)


def read_masks(value: Any, what: str, n: int, hw: Optional[Tuple[Any, Any]]) -> Tuple[List[Any], Optional[MaskRuns]]:
    """``n`` masks as compressed RLE dicts (RLE dicts, polygon lists with ``hw``, or binary (H, W) arrays), and
    their runs where mmeval-coco-native decoded them all (:data:`MaskRuns`)."""
    out, _, runs = read_masks_and_areas(value, what, n, hw)
    return out, runs


def read_masks_and_areas(
    value: Any, what: str, n: int, hw: Optional[Tuple[Any, Any]]
) -> Tuple[List[Any], Optional[np.ndarray], Optional[MaskRuns]]:
    """:func:`read_masks`' masks, every mask's area (pycocotools' ``area``) where the native pre-check gave them
    all, and then their runs as that pre-check decoded them (each mask decoded once, here)."""
    if not isinstance(value, (list, tuple)) or len(value) != n:
        raise MetricArgumentError(
            f"COCODetection.add(): {what} must be a list of {n} masks (one per box), got "
            f"{type(value).__name__} of {len(value) if hasattr(value, '__len__') else '?'}"
        )
    mask = import_extra("pycocotools.mask", "COCODetection")
    native = kernels()
    areas = np.zeros(n) if native is not None else None
    # the kernels' one call: each compressed RLE dict check_rle surely passes, as the dict below (None: not sure)
    # and, where it passed them all, their runs: the matching reads those instead of decoding the dicts again
    runs: Optional[MaskRuns] = None
    if native is not None and areas is not None and hasattr(native, "rle_masks_runs"):
        out, b_runs, b_off, b_hw = native.rle_masks_runs(value, areas)
        if b_runs is not None:
            runs = BatchRuns.one_list(b_runs, b_off, areas, b_hw, n)
    else:
        out = native.rle_masks(value, areas) if native is not None else [None] * n
    if None not in out:
        return out, areas, runs
    for j, m in enumerate(value):
        if out[j] is not None:
            continue
        if isinstance(m, dict) and "counts" in m and "size" in m:
            h, w = check_rle(m, f"COCODetection.add(): {what}[{j}]")  # before pycocotools' C code reads it
            if isinstance(m["counts"], list):
                out[j] = mask.frPyObjects(m, h, w)
            else:
                counts = m["counts"].encode() if isinstance(m["counts"], str) else m["counts"]
                out[j] = {"size": [h, w], "counts": counts}
        elif isinstance(m, list):
            if hw is None or hw[0] is None or hw[1] is None:
                raise MetricArgumentError(
                    f"COCODetection.add(): {what}[{j}] is a polygon, which needs the image's "
                    f"'height' and 'width' in the same dict"
                )
            check_polygon_rings(m, f"COCODetection.add(): {what}[{j}]")
            out[j] = mask.merge(mask.frPyObjects(m, int(hw[0]), int(hw[1])))
        else:
            arr = np.asarray(m)
            if arr.ndim != 2:
                raise MetricArgumentError(
                    f"COCODetection.add(): {what}[{j}] must be an RLE dict, a polygon list or a "
                    f"binary (H, W) array, got {type(m).__name__}"
                )
            out[j] = mask.encode(np.asfortranarray(arr.astype(np.uint8)))
    return out, None, None


def to_xywh(boxes: np.ndarray) -> np.ndarray:
    """(n, 4) xyxy boxes as COCO's xywh."""
    return np.stack([boxes[:, 0], boxes[:, 1], boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]], axis=1)


def read_image(
    pred: Any,
    gt: Any,
    i: int,
    cats: Categories,
    metrics: Sequence[str],
    ann: Optional[Annotations],
    ann_file: Any,
    gt_mask_area: bool,
    keep_records: bool,
) -> ImageInputs:
    """Image ``i`` of an ``add()``: its prediction and ground truths, checked and converted (nothing kept yet).

    The ground truths come from ``ann`` (the ``ann_file``, named in errors) when given, else from ``gt``;
    ``keep_records``: keep what the result files need.
    """
    if not isinstance(pred, dict) or not isinstance(gt, dict):
        raise MetricArgumentError(
            f"COCODetection.add(): predictions[{i}] and groundtruths[{i}] must be dicts, "
            f"got {type(pred).__name__} and {type(gt).__name__}"
        )
    what = f"predictions[{i}]"
    for key in ("bboxes", "scores", "labels"):
        if key not in pred:
            raise MetricArgumentKeyError(
                f"COCODetection.add(): {what} has no {key!r}; it needs 'bboxes', 'scores', "
                f"'labels' (and 'masks' for segm)"
            )
    boxes = _boxes(pred["bboxes"], f"{what}['bboxes']")
    k = boxes.shape[0]
    scores = _vector(pred["scores"], f"{what}['scores']", k)
    labels = _labels(pred["labels"], f"{what}['labels']", k, len(cats.ids))
    img_id = _img_id(pred.get("img_id"), f"{what}['img_id']")
    seg_scores = None
    det_rles: Optional[List[Any]] = None
    det_runs: Optional[MaskRuns] = None
    if "segm" in metrics:
        if "masks" not in pred:
            raise MetricArgumentKeyError(f"COCODetection.add(): metric 'segm' needs {what}['masks'] (one RLE per box)")
        det_rles, det_runs = read_masks(pred["masks"], f"{what}['masks']", k, None)
        if "mask_scores" in pred:
            seg_scores = _vector(pred["mask_scores"], f"{what}['mask_scores']", k)
    if ann is not None:
        if img_id is None:
            raise MetricArgumentError(
                f"COCODetection.add(): with ann_file every prediction needs 'img_id' (the "
                f"image's id in the ann_file); {what} has none"
            )
        if img_id not in ann.images and k:  # (an image without detections adds nothing: accepted)
            raise MetricArgumentError(
                f"COCODetection.add(): {what}['img_id']={img_id} is not an image of ann_file {ann_file!r}"
            )
        gts = ann.image_gts(img_id, cats, "segm" in metrics)
    else:
        gts = _read_gts(gt, f"groundtruths[{i}]", cats, "segm" in metrics, gt_mask_area)
        gid = _img_id(gt.get("img_id"), f"groundtruths[{i}]['img_id']")
        if img_id is not None and gid is not None and gid != img_id:
            raise MetricArgumentError(
                f"COCODetection.add(): predictions[{i}]['img_id']={img_id} but "
                f"groundtruths[{i}]['img_id']={gid}: one image, one id"
            )
        img_id = gid if gid is not None else img_id
    xywh = to_xywh(boxes)
    records = (xywh, scores, labels, seg_scores, det_rles) if keep_records else None
    return ImageInputs(img_id, xywh, scores, labels, seg_scores, det_rles, gts, records, det_runs)


def _read_gts(gt: Dict[str, Any], what: str, cats: Categories, segm: bool, gt_mask_area: bool) -> GroundTruths:
    """An image's ground truths given to ``add()`` (no ``ann_file``); ``segm``: masks are required."""
    for key in ("bboxes", "labels"):
        if key not in gt:
            raise MetricArgumentKeyError(
                f"COCODetection.add(): {what} has no {key!r}; without ann_file each ground "
                f"truth needs 'bboxes' and 'labels' (and 'masks' for segm)"
            )
    boxes = _boxes(gt["bboxes"], f"{what}['bboxes']")
    m = boxes.shape[0]
    labels = _labels(gt["labels"], f"{what}['labels']", m, len(cats.ids))
    crowd = (
        _vector(gt["ignore_flags"], f"{what}['ignore_flags']", m) != 0
        if "ignore_flags" in gt
        else np.zeros(m, dtype=bool)
    )
    xywh = to_xywh(boxes)
    area = xywh[:, 2] * xywh[:, 3]
    rles, runs = None, None
    if "masks" in gt and gt["masks"] is not None:
        rles, areas, runs = read_masks_and_areas(
            gt["masks"], f"{what}['masks']", m, (gt.get("height"), gt.get("width"))
        )
        if gt_mask_area and m and areas is not None:  # pycocotools' area of each, from the native pre-check
            area = areas
        elif gt_mask_area and m:
            area = rle_mask_areas(rles)
    elif segm and m:
        raise MetricArgumentKeyError(f"COCODetection.add(): metric 'segm' needs {what}['masks'] (one mask per box)")
    return GroundTruths(xywh, labels, area, crowd, np.ones(m, dtype=bool), rles, runs)


def ignore_bits(area: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    """Per ground truth, bit r set when it is ignored in area range r (crowd, or its area outside the range)."""
    bits = np.zeros(area.shape[0], dtype=np.uint8)
    for r, (lo, hi) in enumerate(AREA_RANGES):
        bits |= (crowd | (area < lo) | (area > hi)).astype(np.uint8) << r
    return bits


def outside_area_range(area: np.ndarray) -> np.ndarray:
    """(n, A) whether each area lies outside each range."""
    lo = np.array([r[0] for r in AREA_RANGES], dtype=np.float64)
    hi = np.array([r[1] for r in AREA_RANGES], dtype=np.float64)
    return (area[:, None] < lo) | (area[:, None] > hi)


def rle_mask_areas(rles: Sequence[Any]) -> np.ndarray:
    """pycocotools' area of each mask, one call each (its area() of a list overflows large masks' areas)."""
    mask = import_extra("pycocotools.mask", "COCODetection")
    return np.array([float(mask.area(r)) for r in rles], dtype=np.float64)


def __getattr__(name: str) -> Any:
    """``read_images`` lives in :mod:`.coco_inputs_batched` (which imports this module); still importable here."""
    if name == "read_images":
        from .coco_inputs_batched import read_images

        return read_images
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
