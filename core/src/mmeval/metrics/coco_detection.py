"""COCO detection metrics (MMEval 0.2.1's ``COCODetection``), matched on the rank that holds each image.

Each image's detections are matched to its ground truths where the image was
added (IoU with the crowd rule, pycocotools' greedy matching per category,
area-range and crowd ignores, ``maxDets``), vectorised over many images at a
time; what moves in ``compute()`` is one packed summary per image (a score,
a category and a base-3 word of true / false positive / ignored per IoU
threshold and area range for each detection; a category and area-range
ignore bits per ground truth). The computing rank accumulates and summarizes
exactly as pycocotools' ``COCOeval.accumulate`` / ``summarize`` do.
"""

from __future__ import annotations

import json
import logging
import numbers
import os
from functools import partial
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError, MetricArgumentKeyError, MetricArgumentTypeError
from ..core.inputs import to_numpy
from ..core.packed import PackedColumns, pack_arrays, trits_to_words
from .coco_accumulate import AREA_RANGES, FP, IGNORED, TP, combine_partials, runs, summarize_sums
from .coco_parts import join_parts, split_summaries
from .extras import import_extra

__all__ = ["COCODetection"]

logger = logging.getLogger("mmeval")

_METRICS = ("bbox", "segm", "proposal")
#: pending detections (summed over images) at which add() summarizes what waits (bounds the memory held)
SUMMARIZE_EVERY = 4_096
#: detections matched at once (summed over images): the matching's working memory (~1 KB per detection
#: for boxes: the IoU pairs and their orders) follows this, not how many images wait
MATCH_SLICE = 2_048


def _default_iou_thrs() -> np.ndarray:
    return np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1, endpoint=True)


class COCODetection(BaseMetric):
    """COCO detection AP / AR (``'bbox'``, ``'segm'``) and proposal AR (``'proposal'``), as pycocotools computes them.

    The names, arguments and result keys are MMEval 0.2.1's ``COCODetection``;
    every stat equals pycocotools' ``COCOeval`` on the same data.

    Args:
        ann_file: a COCO-format json file; the ground truths come from it (every
            image in it is evaluated, as pycocotools does), and ``add()`` needs
            only predictions (each with ``img_id``). ``None``: the ground truths
            come from the dicts given to ``add()``.
        metric: ``'bbox'``, ``'segm'``, ``'proposal'`` or a list of them.
        iou_thrs: a float or a list of floats (default ``0.5:0.05:0.95``).
        classwise: also return ``{metric}_{class}_precision`` (the AP of each category).
        proposal_nums: the three ``maxDets`` (default ``(1, 10, 100)``).
        metric_items: the result items to return (of ``mAP``, ``mAP_50``,
            ``mAP_75``, ``mAP_s``, ``mAP_m``, ``mAP_l``, ``AR@N``, ``AR_s@N``, ...).
        format_only: only write the results to ``{outfile_prefix}.bbox.json`` (and
            ``.segm.json``) and return ``{}``; needs ``outfile_prefix``.
        outfile_prefix: also write those files (the boxes then move to rank 0).
        gt_mask_area: without ``ann_file``, a ground truth with a mask has the
            mask's area (else its box's).
        backend_args: accepted for MMEval compatibility (``ann_file`` is a local path).
        print_results: log the results.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths)``, one dict per image. A prediction:
    ``bboxes`` (K, 4) ``x1, y1, x2, y2``, ``scores`` (K,), ``labels`` (K,)
    (indices into ``dataset_meta['classes']``), ``img_id``, and for ``'segm'``
    ``masks`` (K RLE dicts, or (H, W) binary arrays) and optionally
    ``mask_scores`` (K,). A ground truth (``ann_file=None``): ``img_id``,
    ``bboxes`` (M, 4), ``labels`` (M,), optionally ``ignore_flags`` (M,)
    (crowd regions), ``masks`` (M RLE dicts or polygon lists), ``width``,
    ``height`` (needed by polygons). Without ``img_id`` an image's id is its
    position in the dataset (MMEval's rule). Bad input raises
    :class:`~mmeval.core.errors.MetricArgumentError` naming the image and field.

    Where the work runs: each image is matched on the rank that added it
    (in bulk, at ``compute()`` or once enough detections wait); ``compute()``
    moves a packed summary per image: per detection its score (4 bytes when
    the scores are float32 values, else 8), its category (1 or 2 bytes) and one
    uint64 per 40 (IoU threshold, area range) pairs; per ground truth 3 bytes
    (none with ``ann_file``). pycocotools is needed for ``'segm'`` only
    (mask IoU and areas, extra ``coco``).

    Result keys (fractions, Python floats): ``{metric}_mAP``, ``_mAP_50``,
    ``_mAP_75``, ``_mAP_s``, ``_mAP_m``, ``_mAP_l`` for bbox / segm;
    ``AR@{n}`` ... ``AR_l@{n}`` for proposal; -1 where pycocotools gives -1
    (no ground truth in the range). ``{}`` when no image has a detection.

    Units: every AP / AR value is a fraction in [0, 1] (-1: no ground truth), as in MMEval 0.2.1 and
    pycocotools; ``{metric}_{class}_precision`` too (NaN: no ground truth of the class).
    """

    def __init__(
        self,
        ann_file: Optional[str] = None,
        metric: Union[str, List[str]] = "bbox",
        iou_thrs: Union[float, Sequence[float], None] = None,
        classwise: bool = False,
        proposal_nums: Sequence[int] = (1, 10, 100),
        metric_items: Optional[Sequence[str]] = None,
        format_only: bool = False,
        outfile_prefix: Optional[str] = None,
        gt_mask_area: bool = True,
        backend_args: Optional[Dict[str, Any]] = None,
        print_results: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        metrics = list(metric) if isinstance(metric, (list, tuple)) else [metric]
        for m in metrics:
            if m not in _METRICS:
                raise MetricArgumentKeyError(f"COCODetection: metric should be one of {list(_METRICS)} or a list of them, "
                                        f"got {m!r}")
        if not metrics:
            raise MetricArgumentError("COCODetection: metric is an empty list; give 'bbox', 'segm' or 'proposal'")
        if iou_thrs is None:
            thrs = _default_iou_thrs()
        elif isinstance(iou_thrs, float):
            thrs = np.array([iou_thrs])
        elif isinstance(iou_thrs, (list, tuple, np.ndarray)) and len(iou_thrs) and all(
                isinstance(t, (float, np.floating)) for t in iou_thrs):
            thrs = np.array(iou_thrs, dtype=np.float64)
        else:
            raise MetricArgumentTypeError(f"COCODetection: iou_thrs should be None, a float or a non-empty list of floats, "
                                     f"got {iou_thrs!r}")
        if not np.all((thrs >= 0) & (thrs <= 1)):
            raise MetricArgumentError(f"COCODetection: iou_thrs must lie in [0, 1], got {thrs.tolist()}")
        nums = list(proposal_nums) if isinstance(proposal_nums, (list, tuple, np.ndarray)) else None
        if nums is None or len(nums) != 3 or not all(
                isinstance(n, numbers.Integral) and not isinstance(n, bool) and int(n) >= 1 for n in nums):
            raise MetricArgumentError(f"COCODetection: proposal_nums must be three positive ints (the maxDets), "
                                      f"got {proposal_nums!r}")
        for flag_name, flag in (("classwise", classwise), ("format_only", format_only),
                                ("gt_mask_area", gt_mask_area), ("print_results", print_results)):
            if not isinstance(flag, (bool, np.bool_)):
                raise MetricArgumentError(f"COCODetection: {flag_name} must be True or False, got {flag!r}")
        if format_only and outfile_prefix is None:
            raise MetricArgumentError("COCODetection: format_only=True needs outfile_prefix (where the result "
                                      "files go); got outfile_prefix=None")
        self.metrics: List[str] = metrics
        self.classwise = bool(classwise)
        self.proposal_nums: List[int] = [int(n) for n in nums]
        self.iou_thrs: np.ndarray = thrs
        items = None if metric_items is None else list(metric_items)
        if items is not None:
            known = self._item_names()
            bad = [i for i in items if i not in known]
            if bad:
                raise MetricArgumentKeyError(f"COCODetection: metric item(s) {bad} are not supported; use some of "
                                        f"{list(known)}")
        self.metric_items: Optional[List[str]] = items
        self.format_only = bool(format_only)
        self.outfile_prefix = outfile_prefix
        self.gt_mask_area = bool(gt_mask_area)
        self.backend_args = backend_args
        self.print_results = bool(print_results)
        self.ann_file = ann_file
        self._ann: Optional[_Annotations] = None
        if ann_file is not None:
            if not isinstance(ann_file, (str, os.PathLike)) or not os.path.isfile(ann_file):
                raise MetricArgumentError(f"COCODetection: ann_file={ann_file!r} is not a readable file")
            with open(ann_file) as f:
                self._ann = _Annotations(json.load(f))
        self._cats: Optional[_Categories] = None
        self._pending_dets = 0
        self._cat_dets: Optional[np.ndarray] = None  # detections added per category (see _part_loads)

    # -- configuration -------------------------------------------------------------

    def _item_names(self) -> Dict[str, int]:
        """MMEval's item name -> index into pycocotools' 12 stats (AR names from ``proposal_nums`` as given)."""
        n = self.proposal_nums
        return {"mAP": 0, "mAP_50": 1, "mAP_75": 2, "mAP_s": 3, "mAP_m": 4, "mAP_l": 5, f"AR@{n[0]}": 6,
                f"AR@{n[1]}": 7, f"AR@{n[2]}": 8, f"AR_s@{n[2]}": 9, f"AR_m@{n[2]}": 10, f"AR_l@{n[2]}": 11}

    @property
    def classes(self) -> List[str]:
        """The class names (``dataset_meta['classes']``)."""
        meta = self.dataset_meta or {}
        classes = meta.get("classes", meta.get("CLASSES"))
        if classes is None:
            raise MetricArgumentError(f"COCODetection: dataset_meta={self.dataset_meta!r} has no 'classes'; pass "
                                      f"dataset_meta={{'classes': (...)}}")
        return list(classes)

    def _categories(self) -> "_Categories":
        if self._cats is None:
            classes = self.classes
            if self._ann is not None:
                ids = [c["id"] for c in self._ann.categories if c["name"] in classes]
                names = {c["id"]: c["name"] for c in self._ann.categories}
            else:
                ids = list(range(len(classes)))
                names = dict(enumerate(classes))
            self._cats = _Categories(ids, names)
        return self._cats

    def _question(self, size: Optional[int]) -> Dict[str, Any]:
        question = super()._question(size)
        question["iou_thrs"] = [float(t) for t in self.iou_thrs]
        return question

    def reset(self) -> None:
        super().reset()
        self._pending_dets = 0
        self._cat_dets = None
        self._cats = None  # dataset_meta may have changed: read the classes again at the next add()

    # -- add -----------------------------------------------------------------------

    def add(self, predictions: Sequence[Dict[str, Any]], groundtruths: Sequence[Dict[str, Any]]) -> None:
        """Add one prediction dict and one ground-truth dict per image (see the class docstring)."""
        if isinstance(predictions, dict) or isinstance(groundtruths, dict) or not isinstance(
                predictions, Sequence) or not isinstance(groundtruths, Sequence):
            raise MetricArgumentError(f"COCODetection.add(): predictions and groundtruths must be sequences of dicts "
                                      f"(one per image), got {type(predictions).__name__} and "
                                      f"{type(groundtruths).__name__}")
        if len(predictions) != len(groundtruths):
            raise MetricArgumentError(f"COCODetection.add(): {len(predictions)} predictions but {len(groundtruths)} "
                                      f"groundtruths; give one of each per image")
        cats = self._categories()
        images = [self._image(p, g, i, cats) for i, (p, g) in enumerate(zip(predictions, groundtruths))]
        self._keep_to_summarize(images)
        self._pending_dets += sum(im.det_labels.shape[0] for im in images)
        labels = [im.det_labels for im in images if im.det_labels.shape[0]]
        if labels:
            added = np.bincount(cats.kpos[np.concatenate(labels)], minlength=len(cats.sorted_ids))
            self._cat_dets = added if self._cat_dets is None else self._cat_dets + added
        if self._pending_dets >= SUMMARIZE_EVERY:
            self._summarize_pending()

    def add_predictions(self, predictions: Sequence[Dict[str, Any]]) -> None:
        """Add predictions only (the ground truths come from ``ann_file``)."""
        if self._ann is None:
            raise MetricArgumentError("COCODetection.add_predictions() needs ann_file; use add() otherwise")
        self.add(predictions, [{}] * len(predictions))

    def _summarize_pending(self) -> None:
        super()._summarize_pending()
        self._pending_dets = 0

    def _image(self, pred: Any, gt: Any, i: int, cats: "_Categories") -> "_Image":
        """One image's prediction and ground truths, checked and converted (nothing kept yet)."""
        if not isinstance(pred, dict) or not isinstance(gt, dict):
            raise MetricArgumentError(f"COCODetection.add(): predictions[{i}] and groundtruths[{i}] must be dicts, "
                                      f"got {type(pred).__name__} and {type(gt).__name__}")
        what = f"predictions[{i}]"
        for key in ("bboxes", "scores", "labels"):
            if key not in pred:
                raise MetricArgumentKeyError(f"COCODetection.add(): {what} has no {key!r}; it needs 'bboxes', 'scores', "
                                        f"'labels' (and 'masks' for segm)")
        boxes = _boxes(pred["bboxes"], f"{what}['bboxes']")
        k = boxes.shape[0]
        scores = _vector(pred["scores"], f"{what}['scores']", k, float)
        labels = _labels(pred["labels"], f"{what}['labels']", k, len(cats.ids))
        img_id = _img_id(pred.get("img_id"), f"{what}['img_id']")
        seg_scores = None
        det_rles: Optional[List[Any]] = None
        if "segm" in self.metrics:
            if "masks" not in pred:
                raise MetricArgumentKeyError(f"COCODetection.add(): metric 'segm' needs {what}['masks'] (one RLE per box)")
            det_rles = _masks(pred["masks"], f"{what}['masks']", k, None)
            if "mask_scores" in pred:
                seg_scores = _vector(pred["mask_scores"], f"{what}['mask_scores']", k, float)
        if self._ann is not None:
            if img_id is None:
                raise MetricArgumentError(f"COCODetection.add(): with ann_file every prediction needs 'img_id' (the "
                                          f"image's id in the ann_file); {what} has none")
            if img_id not in self._ann.images and k:  # (an image without detections adds nothing: accepted)
                raise MetricArgumentError(f"COCODetection.add(): {what}['img_id']={img_id} is not an image of "
                                          f"ann_file {self.ann_file!r}")
            gts = self._ann.image_gts(img_id, cats, "segm" in self.metrics)
        else:
            gts = self._gts_of(gt, f"groundtruths[{i}]", cats)
            gid = _img_id(gt.get("img_id"), f"groundtruths[{i}]['img_id']")
            if img_id is not None and gid is not None and gid != img_id:
                raise MetricArgumentError(f"COCODetection.add(): predictions[{i}]['img_id']={img_id} but "
                                          f"groundtruths[{i}]['img_id']={gid}: one image, one id")
            img_id = gid if gid is not None else img_id
        xywh = np.stack([boxes[:, 0], boxes[:, 1], boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]], axis=1)
        records = None
        if self.outfile_prefix is not None:
            records = (xywh, scores, labels, seg_scores, det_rles)
        return _Image(img_id, xywh, scores, labels, seg_scores, det_rles, gts, records)

    def _gts_of(self, gt: Dict[str, Any], what: str, cats: "_Categories") -> "_GroundTruths":
        for key in ("bboxes", "labels"):
            if key not in gt:
                raise MetricArgumentKeyError(f"COCODetection.add(): {what} has no {key!r}; without ann_file each ground "
                                        f"truth needs 'bboxes' and 'labels' (and 'masks' for segm)")
        boxes = _boxes(gt["bboxes"], f"{what}['bboxes']")
        m = boxes.shape[0]
        labels = _labels(gt["labels"], f"{what}['labels']", m, len(cats.ids))
        crowd = (_vector(gt["ignore_flags"], f"{what}['ignore_flags']", m, float) != 0
                 if "ignore_flags" in gt else np.zeros(m, dtype=bool))
        xywh = np.stack([boxes[:, 0], boxes[:, 1], boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]], axis=1)
        area = xywh[:, 2] * xywh[:, 3]
        rles = None
        if "masks" in gt and gt["masks"] is not None:
            hw = (gt.get("height"), gt.get("width"))
            rles = _masks(gt["masks"], f"{what}['masks']", m, hw)
            if self.gt_mask_area and m:
                mask = import_extra("pycocotools.mask", "COCODetection")
                area = np.array([float(mask.area(r)) for r in rles], dtype=np.float64)  # one call each (see above)
        elif "segm" in self.metrics and m:
            raise MetricArgumentKeyError(f"COCODetection.add(): metric 'segm' needs {what}['masks'] (one mask per box)")
        return _GroundTruths(xywh, labels, area, crowd, np.ones(m, dtype=bool), rles)

    # -- the work on the holding rank ---------------------------------------------------

    def _summarize(self, samples: List[Any]) -> List[Any]:
        """Match every image of ``samples`` (on this rank) and pack each one's summary (see the module docstring)."""
        images: List[_Image] = samples
        if self.format_only:
            return [(None, _records(im)) for im in images]
        cats = self._categories()
        sections: List[List[np.ndarray]] = [[] for _ in images]
        for lo, hi in runs([im.det_labels.shape[0] for im in images], MATCH_SLICE):
            for metric in self.metrics:
                per_image = _match_images(images[lo:hi], metric, cats, self.iou_thrs, max(self.proposal_nums))
                for s, arrays in zip(sections[lo:hi], per_image):
                    s.extend(arrays)
        out: List[Any] = []
        small = len(cats.ids) <= 255
        for im, arrays in zip(images, sections):
            meta = np.array([im.img_id if im.img_id is not None else 0, im.img_id is not None], dtype=np.int64)
            if self._ann is None:
                g = im.gts
                gt_cat = cats.kpos[g.labels].astype(np.uint8 if small else np.uint16)
                gt_ig = _ignore_bits(g.area, g.crowd)
            else:
                gt_cat, gt_ig = np.zeros(0, np.uint8), np.zeros(0, np.uint8)
            blob = pack_arrays(meta, *arrays, gt_cat, gt_ig)
            out.append(blob if im.records is None else (blob, _records(im)))
        return out

    # -- compute: every rank accumulates its share of the categories ----------------------

    def _computes_in_parts(self) -> bool:
        """Across ranks, each rank accumulates its share of the categories, dealt by the world's detections
        per category (:meth:`_part_loads`).

        Not when result files are written (every record goes to rank 0 then).
        """
        return not self.format_only and self.outfile_prefix is None

    def _packed(self, blobs: List[Any]) -> PackedColumns:
        """The summaries' columns (see :meth:`_summarize`): meta, three per metric, the ground truths' two."""
        return PackedColumns(blobs, 1 + 3 * len(self.metrics) + 2)

    def _part_loads(self) -> Optional[np.ndarray]:
        """This rank's detections per category (plus one: a category costs a little with none), counted at
        ``add()``: the core deals the categories to the ranks by them (:meth:`BaseMetric._part_loads`)."""
        if self._cat_dets is None:
            return np.ones(len(self._categories().sorted_ids), dtype=np.int64)
        return self._cat_dets + 1

    def _partition(self, results: List[Any], positions: np.ndarray, world_size: int,
                   owners: Optional[np.ndarray] = None) -> List[Any]:
        """This rank's image summaries split by category owner (see :func:`.coco_parts.split_summaries`).

        The columns are read one at a time (each detection column split, then dropped)."""
        blobs = [r[0] if isinstance(r, tuple) else r for r in results]
        cats = self._categories()
        packed = self._packed(blobs)
        meta = packed.column(0).reshape(-1, 2)

        def proposal_cats(j: int) -> np.ndarray:
            return np.zeros(int(packed.lengths[:, 2 + 3 * j].sum()), dtype=np.uint8)

        det_cols = [(packed.lengths[:, 1 + 3 * j], partial(packed.column, 1 + 3 * j),
                     packed.column(2 + 3 * j) if metric != "proposal" else proposal_cats(j),
                     partial(packed.column, 3 + 3 * j)) for j, metric in enumerate(self.metrics)]
        if self._ann is None:
            gt_cat, gt_ig = packed.column(packed.lengths.shape[1] - 2), packed.column(packed.lengths.shape[1] - 1)
        else:
            gt_cat, gt_ig = np.zeros(0, np.uint8), np.zeros(0, np.uint8)
        del results
        return split_summaries(np.asarray(positions, dtype=np.int64), meta[:, 0], meta[:, 1] != 0, det_cols,
                               gt_cat, gt_ig, len(cats.sorted_ids), world_size, owners,
                               [metric == "proposal" for metric in self.metrics])

    def _compute_part(self, parts: List[Any]) -> Any:
        """Accumulate this rank's categories from the parts every rank sent it."""
        cats = self._categories()
        npig = self._ann.npig(cats) if self._ann is not None else None
        part = join_parts(parts, len(self.metrics))
        parts.clear()  # the received arrays: joined now, their memory goes
        if part.duplicate_ids:
            logger.warning("COCODetection: several images share an img_id; each is evaluated as its own image "
                           "(pycocotools would merge them). Pass indices= to add() to count an image once.")
        return part.accumulate(self.metrics, npig, self.iou_thrs, sorted(self.proposal_nums), self.classwise)

    def _combine_parts(self, partials: List[Any]) -> Dict[str, Any]:
        """The COCO stats (and classwise rows) from every rank's accumulated categories."""
        cats = self._categories()
        if sum(int(n) for n in partials[0]["dets"]) == 0:
            logger.warning("COCODetection: the testing results of the whole dataset are empty")
            return {}
        thrs, nums = self.iou_thrs, sorted(self.proposal_nums)
        names = self._item_names()
        out: Dict[str, Any] = {}
        table: List[str] = []
        for j, metric in enumerate(self.metrics):
            k_eff = len(cats.sorted_ids) if metric != "proposal" else 1
            psum, tps, npig, classwise = combine_partials(partials, j, k_eff)
            stats = summarize_sums(psum, tps, npig, thrs, nums)
            if metric == "proposal":
                items = self.metric_items or [f"AR@{n}" for n in self.proposal_nums] + [
                    f"AR_{s}@{self.proposal_nums[2]}" for s in "sml"]
                for item in items:
                    out[item] = float(stats[names[item]])
            else:
                items = self.metric_items or ["mAP", "mAP_50", "mAP_75", "mAP_s", "mAP_m", "mAP_l"]
                for item in items:
                    out[f"{metric}_{item}"] = float(stats[names[item]])
                if self.classwise:
                    for idx, cat_id in enumerate(cats.sorted_ids):
                        out[f"{metric}_{cats.names[cat_id]}_precision"] = float(classwise[idx])
            table.append(f"{metric}: " + ", ".join(f"{key}={val:.4f}" for key, val in out.items()
                                                   if not isinstance(val, str)))
        if self.print_results:
            (self.logger or logger).info("COCODetection results:\n%s", "\n".join(table))
        return out

    def compute_metric(self, results: Sequence[Any]) -> Dict[str, Any]:
        """The COCO stats of every image's summary, in dataset order (see :meth:`_summarize`).

        The very computation of the ranks' partitioned path, in one part.
        """
        if not len(results):
            raise ValueError("COCODetection.compute_metric: no results to compute on (nothing was added)")
        records = [r[1] if isinstance(r, tuple) else None for r in results]
        if self.format_only:
            self._write_results(records, None)
            logger.info("COCODetection: results are saved in %s", os.path.dirname(str(self.outfile_prefix)))
            return {}
        blobs = [r[0] if isinstance(r, tuple) else r for r in results]
        if self.outfile_prefix is not None:
            meta = self._packed(blobs).column(0).reshape(-1, 2)
            self._write_results(records, np.where(meta[:, 1] != 0, meta[:, 0], np.arange(len(blobs))))
        positions = np.arange(len(blobs), dtype=np.int64)
        return self._combine_parts([self._compute_part(self._partition(list(blobs), positions, 1))])

    def _write_results(self, records: List[Any], ids: Optional[np.ndarray]) -> None:
        """MMEval's result files: ``{outfile_prefix}.bbox.json`` (and ``.segm.json`` with masks)."""
        cats = self._categories()
        bbox: List[Dict[str, Any]] = []
        segm: Optional[List[Dict[str, Any]]] = None
        for pos, rec in enumerate(records):
            if rec is None:
                continue
            img_id, xywh, scores, labels, seg_scores, rles = rec
            image_id = img_id if img_id is not None else (int(ids[pos]) if ids is not None else pos)
            for b, s, lab in zip(xywh.tolist(), scores.tolist(), labels.tolist()):
                bbox.append({"image_id": image_id, "bbox": b, "score": s, "category_id": cats.ids[lab]})
            if rles is not None:
                segm = [] if segm is None else segm
                ms = (seg_scores if seg_scores is not None else scores).tolist()
                for b, s, lab, r in zip(xywh.tolist(), ms, labels.tolist(), rles):
                    counts = r["counts"].decode() if isinstance(r["counts"], bytes) else r["counts"]
                    segm.append({"image_id": image_id, "bbox": b, "score": s, "category_id": cats.ids[lab],
                                 "segmentation": {"size": list(r["size"]), "counts": counts}})
        prefix = str(self.outfile_prefix)
        with open(f"{prefix}.bbox.json", "w") as f:
            json.dump(bbox, f)
        if segm is not None:
            with open(f"{prefix}.segm.json", "w") as f:
                json.dump(segm, f)


# -- inputs ------------------------------------------------------------------------------


class _Categories:
    """The evaluated category ids (``ids[label]``) and their positions in sorted order (pycocotools' K axis)."""

    def __init__(self, ids: List[int], names: Dict[int, str]) -> None:
        self.ids = ids
        self.names = names
        self.sorted_ids = sorted(set(ids))
        where = {c: i for i, c in enumerate(self.sorted_ids)}
        self.kpos = np.array([where[c] for c in ids], dtype=np.int64)
        #: category id -> its label (index into ``ids``)
        self.label_of = {c: i for i, c in enumerate(ids)}


class _GroundTruths:
    """One image's ground truths: xywh boxes, label (index into the category ids), area, crowd, id != 0, masks."""

    __slots__ = ("xywh", "labels", "area", "crowd", "idnz", "rles")

    def __init__(self, xywh: np.ndarray, labels: np.ndarray, area: np.ndarray, crowd: np.ndarray, idnz: np.ndarray,
                 rles: Optional[List[Any]]) -> None:
        self.xywh, self.labels, self.area, self.crowd, self.idnz, self.rles = xywh, labels, area, crowd, idnz, rles


class _Image:
    """One image as add() checked it, waiting to be matched on this rank."""

    __slots__ = ("img_id", "xywh", "scores", "det_labels", "seg_scores", "det_rles", "gts", "records")

    def __init__(self, img_id: Optional[int], xywh: np.ndarray, scores: np.ndarray, labels: np.ndarray,
                 seg_scores: Optional[np.ndarray], det_rles: Optional[List[Any]], gts: _GroundTruths,
                 records: Any) -> None:
        self.img_id, self.xywh, self.scores, self.det_labels = img_id, xywh, scores, labels
        self.seg_scores, self.det_rles, self.gts, self.records = seg_scores, det_rles, gts, records


def _records(im: _Image) -> Any:
    if im.records is None:
        return (im.img_id, im.xywh, im.scores, im.det_labels, im.seg_scores, im.det_rles)
    xywh, scores, labels, seg_scores, rles = im.records
    return (im.img_id, xywh, scores, labels, seg_scores, rles)


class _Annotations:
    """A COCO json's images, categories and annotations, indexed by image (as pycocotools' COCO orders them)."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self.categories: List[Dict[str, Any]] = list(data.get("categories", []))
        self.images: Dict[int, Dict[str, Any]] = {img["id"]: img for img in data.get("images", [])}
        self.by_image: Dict[int, List[Dict[str, Any]]] = {}
        for ann in data.get("annotations", []) or []:
            self.by_image.setdefault(ann["image_id"], []).append(ann)
        self._npig: Optional[np.ndarray] = None

    def image_gts(self, img_id: int, cats: _Categories, masks: bool) -> _GroundTruths:
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
        return _GroundTruths(xywh, labels, area, crowd, idnz, rles)

    def npig(self, cats: _Categories) -> np.ndarray:
        """Non-ignored ground truths per (sorted category, area range) over every image of the file."""
        if self._npig is None:
            pos = {c: i for i, c in enumerate(cats.sorted_ids)}
            anns = [a for img_id in self.images for a in self.by_image.get(img_id, []) if a["category_id"] in pos]
            k = np.array([pos[a["category_id"]] for a in anns], dtype=np.int64)
            bits = _ignore_bits(np.array([float(a["area"]) for a in anns], dtype=np.float64),
                                np.array([bool(a.get("iscrowd", 0)) for a in anns], dtype=bool))
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
        raise MetricArgumentError(f"COCODetection.add(): {what} must hold {want}, got shape {arr.shape} "
                                  f"dtype {arr.dtype}")
    out = arr.astype(np.float64)
    if not np.isfinite(out).all():
        raise MetricArgumentError(f"COCODetection.add(): {what} holds NaN or infinite values")
    return out


def _boxes(value: Any, what: str) -> np.ndarray:
    return _numbers(value, what, None, 4)


def _vector(value: Any, what: str, n: int, kind: type) -> np.ndarray:
    return _numbers(value, what, n, None)


def _labels(value: Any, what: str, n: int, c: int) -> np.ndarray:
    arr = _vector(value, what, n, int)
    bad = (arr != np.floor(arr)) | (arr < 0) | (arr >= c)
    if bad.any():
        raise MetricArgumentError(f"COCODetection.add(): {what} holds {arr[bad][0]:g}; labels must be ints in "
                                  f"[0, {c - 1}] (indices into dataset_meta['classes'] that are evaluated)")
    return arr.astype(np.int64)


def _masks(value: Any, what: str, n: int, hw: Optional[Tuple[Any, Any]]) -> List[Any]:
    """``n`` masks as compressed RLE dicts (RLE dicts, polygon lists with ``hw``, or binary (H, W) arrays)."""
    if not isinstance(value, (list, tuple)) or len(value) != n:
        raise MetricArgumentError(f"COCODetection.add(): {what} must be a list of {n} masks (one per box), got "
                                  f"{type(value).__name__} of {len(value) if hasattr(value, '__len__') else '?'}")
    mask = import_extra("pycocotools.mask", "COCODetection")
    out = []
    for j, m in enumerate(value):
        if isinstance(m, dict) and "counts" in m and "size" in m:
            h, w = (int(v) for v in m["size"])
            if isinstance(m["counts"], list):
                out.append(mask.frPyObjects(m, h, w))
            else:
                counts = m["counts"].encode() if isinstance(m["counts"], str) else m["counts"]
                out.append({"size": [h, w], "counts": counts})
        elif isinstance(m, list):
            if hw is None or hw[0] is None or hw[1] is None:
                raise MetricArgumentError(f"COCODetection.add(): {what}[{j}] is a polygon, which needs the image's "
                                          f"'height' and 'width' in the same dict")
            out.append(mask.merge(mask.frPyObjects(m, int(hw[0]), int(hw[1]))))
        else:
            arr = np.asarray(m)
            if arr.ndim != 2:
                raise MetricArgumentError(f"COCODetection.add(): {what}[{j}] must be an RLE dict, a polygon list or a "
                                          f"binary (H, W) array, got {type(m).__name__}")
            out.append(mask.encode(np.asfortranarray(arr.astype(np.uint8))))
    return out


# -- matching on the holding rank ------------------------------------------------------------


def _ignore_bits(area: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    """Per ground truth, bit r set when it is ignored in area range r (crowd, or its area outside the range)."""
    bits = np.zeros(area.shape[0], dtype=np.uint8)
    for r, (lo, hi) in enumerate(AREA_RANGES):
        bits |= ((crowd | (area < lo) | (area > hi)).astype(np.uint8) << r)
    return bits


def _outside(area: np.ndarray) -> np.ndarray:
    """(n, A) whether each area lies outside each range."""
    lo = np.array([r[0] for r in AREA_RANGES], dtype=np.float64)
    hi = np.array([r[1] for r in AREA_RANGES], dtype=np.float64)
    return (area[:, None] < lo) | (area[:, None] > hi)


def _box_iou_pairs(d: np.ndarray, g: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    """pycocotools' ``bbIou`` for pairs of xywh boxes, operation for operation (the same float64 results)."""
    da = d[:, 2] * d[:, 3]
    ga = g[:, 2] * g[:, 3]
    w = np.minimum(d[:, 2] + d[:, 0], g[:, 2] + g[:, 0]) - np.maximum(d[:, 0], g[:, 0])
    h = np.minimum(d[:, 3] + d[:, 1], g[:, 3] + g[:, 1]) - np.maximum(d[:, 1], g[:, 1])
    i = w * h
    u = np.where(crowd, da, da + ga - i)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = i / u
    return np.where((w > 0) & (h > 0), o, 0.0)


def _match_images(images: List[_Image], metric: str, cats: _Categories, thrs: np.ndarray, max_det: int
                  ) -> List[List[np.ndarray]]:
    """Match ``images`` for one metric; per image ``[scores, categories, state words]`` in summary order.

    Detections are kept per (image, category) -- per image for ``'proposal'`` --
    sorted by score (stable), the first ``max_det`` of each; ground truths in
    their given order. The greedy matching is pycocotools' ``evaluateImg``,
    run for every (IoU threshold, area range) at once over many groups.
    """
    use_cats = metric != "proposal"
    segm = metric == "segm"
    n_img = len(images)
    n_det = np.array([im.det_labels.shape[0] for im in images], dtype=np.int64)
    n_gt = np.array([im.gts.labels.shape[0] for im in images], dtype=np.int64)
    d_img = np.repeat(np.arange(n_img), n_det)
    g_img = np.repeat(np.arange(n_img), n_gt)
    d_lab = np.concatenate([im.det_labels for im in images]) if n_img else np.zeros(0, np.int64)
    g_lab = np.concatenate([im.gts.labels for im in images]) if n_img else np.zeros(0, np.int64)
    d_score = np.concatenate([im.seg_scores if segm and im.seg_scores is not None else im.scores for im in images])
    d_box = np.concatenate([im.xywh for im in images]).reshape(-1, 4)
    g_box = np.concatenate([im.gts.xywh for im in images]).reshape(-1, 4)
    g_area = np.concatenate([im.gts.area for im in images])
    g_crowd = np.concatenate([im.gts.crowd for im in images])
    g_idnz = np.concatenate([im.gts.idnz for im in images])
    d_local = np.arange(d_img.shape[0]) - np.repeat(np.cumsum(n_det) - n_det, n_det)
    k_total = len(cats.ids)
    # groups: (image, category) with use_cats, else the image; pycocotools' orders within them
    if use_cats:
        d_key = d_img * k_total + cats.kpos[d_lab]
        g_key = g_img * k_total + cats.kpos[g_lab]
        d_order = np.lexsort((d_local, -d_score, d_key))
        g_order = np.lexsort((np.arange(g_key.shape[0]), g_key))
    else:
        d_key, g_key = d_img, g_img
        d_order = np.lexsort((d_local, d_lab, -d_score, d_key))
        g_order = np.lexsort((np.arange(g_key.shape[0]), g_lab, g_key))
    d_key_s = d_key[d_order]
    starts = np.flatnonzero(np.r_[True, d_key_s[1:] != d_key_s[:-1]]) if d_key_s.size else np.zeros(0, np.int64)
    run = np.repeat(starts, np.diff(np.r_[starts, d_key_s.size]))
    rank = np.arange(d_key_s.size) - run
    kept = d_order[rank < max_det]  # detections kept, in (group, score) order
    d_key_k = d_key[kept]
    g_sorted = g_order
    g_key_s = g_key[g_sorted]
    # detection areas and outside flags
    if segm:
        mask = import_extra("pycocotools.mask", "COCODetection")
        all_rles = [r for im in images for r in (im.det_rles or [])]
        # one call per mask: pycocotools' area() of a list of masks overflows (a uint8 result) past 255 pixels
        d_area = np.array([float(mask.area(all_rles[i])) for i in kept], dtype=np.float64)
    else:
        d_area = d_box[kept, 2] * d_box[kept, 3]
    d_out = _outside(d_area)  # (n, A)
    n_thr, n_rng = thrs.shape[0], len(AREA_RANGES)
    matched = np.zeros((kept.shape[0], n_thr, n_rng), dtype=bool)
    to_ignored = np.zeros_like(matched)
    to_zero_id = np.zeros_like(matched)
    # pairs (detection, ground truth) of the same group
    lo = np.searchsorted(g_key_s, d_key_k, "left")
    hi = np.searchsorted(g_key_s, d_key_k, "right")
    cnt = hi - lo
    if cnt.sum():
        p_det = np.repeat(np.arange(kept.shape[0]), cnt)
        p_slot = np.arange(p_det.shape[0]) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        p_gt = g_sorted[np.repeat(lo, cnt) + p_slot]
        if segm:
            iou = _mask_iou_pairs(images, kept, p_det, p_gt, n_det, n_gt)
        else:
            iou = _box_iou_pairs(d_box[kept[p_det]], g_box[p_gt], g_crowd[p_gt])
        _greedy(iou, p_det, p_slot, p_gt, cnt, d_key_k, g_area, g_crowd, g_idnz, thrs,
                matched, to_ignored, to_zero_id)
    # (n, A, T) states: trit index a * T + t
    matched, to_ignored, to_zero_id = (x.transpose(0, 2, 1) for x in (matched, to_ignored, to_zero_id))
    effective = matched & ~to_zero_id
    ignored = (matched & to_ignored) | (~effective & d_out[:, :, None])
    state = np.full(matched.shape, FP, dtype=np.uint8)
    state[effective] = TP
    state[ignored] = IGNORED
    words = trits_to_words(state.reshape(kept.shape[0], n_rng * n_thr))
    small = len(cats.ids) <= 255
    d_cat = (cats.kpos[d_lab[kept]] if use_cats else np.zeros(kept.shape[0], np.int64)).astype(
        np.uint8 if small else np.uint16)
    scores = d_score[kept]
    if scores.size and np.array_equal(scores.astype(np.float32).astype(np.float64), scores):
        scores = scores.astype(np.float32)  # exact: 4 bytes a detection instead of 8
    # back to images: kept detections are in image order already (the group key starts with the image)
    per_img = np.bincount(d_img[kept], minlength=n_img)
    bounds = np.r_[0, np.cumsum(per_img)]
    return [[scores[bounds[i]:bounds[i + 1]], d_cat[bounds[i]:bounds[i + 1]], words[bounds[i]:bounds[i + 1]]]
            for i in range(n_img)]


def _mask_iou_pairs(images: List[_Image], kept: np.ndarray, p_det: np.ndarray, p_gt: np.ndarray,
                    n_det: np.ndarray, n_gt: np.ndarray) -> np.ndarray:
    """pycocotools' mask IoU (crowd rule included) of each (detection, ground truth) pair, one call per image."""
    mask = import_extra("pycocotools.mask", "COCODetection")
    det_start = np.cumsum(n_det) - n_det
    gt_start = np.cumsum(n_gt) - n_gt
    d_glob = kept[p_det]
    img = np.searchsorted(det_start, d_glob, "right") - 1
    out = np.zeros(p_det.shape[0], dtype=np.float64)
    order = np.argsort(img, kind="stable")
    bounds = np.flatnonzero(np.r_[True, img[order][1:] != img[order][:-1], True])
    for s, e in zip(bounds[:-1], bounds[1:]):
        sel = order[s:e]
        i = int(img[sel[0]])
        im = images[i]
        assert im.det_rles is not None and im.gts.rles is not None
        dl = d_glob[sel] - det_start[i]
        gl = p_gt[sel] - gt_start[i]
        ud, dinv = np.unique(dl, return_inverse=True)
        ug, ginv = np.unique(gl, return_inverse=True)
        m = mask.iou([im.det_rles[j] for j in ud], [im.gts.rles[j] for j in ug],
                     [int(im.gts.crowd[j]) for j in ug])
        out[sel] = np.asarray(m, dtype=np.float64).reshape(len(ud), len(ug))[dinv, ginv]
    return out


def _greedy(iou: np.ndarray, p_det: np.ndarray, p_slot: np.ndarray, p_gt: np.ndarray, cnt: np.ndarray,
            d_key: np.ndarray, g_area: np.ndarray, g_crowd: np.ndarray, g_idnz: np.ndarray,
            thrs: np.ndarray, matched: np.ndarray, to_ignored: np.ndarray, to_zero_id: np.ndarray) -> None:
    """pycocotools' greedy matching, every (threshold, area range) at once, over groups bucketed by size.

    A detection (by score) takes, among the ground truths of its group not yet
    taken (crowd ones stay available) with IoU >= min(t, 1 - 1e-10): the
    non-ignored one of largest IoU (the last on ties), else the ignored one of
    largest IoU (the last on ties).
    """
    n_thr, n_rng = thrs.shape[0], len(AREA_RANGES)
    thr = np.minimum(thrs, 1 - 1e-10)
    # only the detections with some candidate matter; groups = runs of equal d_key among them
    has = np.zeros(cnt.shape[0], dtype=bool)
    np.logical_or.at(has, p_det, iou >= thr.min())
    dets = np.flatnonzero(has)
    if not dets.size:
        return
    gkey = d_key[dets]
    gstart = np.flatnonzero(np.r_[True, gkey[1:] != gkey[:-1]])
    gsize = np.diff(np.r_[gstart, dets.size])
    group_of = np.repeat(np.arange(gstart.size), gsize)
    step_of = np.arange(dets.size) - np.repeat(gstart, gsize)
    n_g = cnt[dets[gstart]]  # ground truths per group
    # ground-truth attributes per group slot
    first_pair = np.cumsum(cnt) - cnt
    ig_all = _ignore_bits(g_area, g_crowd)
    pad = 1
    while pad < int(n_g.max()):
        pad *= 2
    buckets = np.minimum(np.ceil(np.log2(np.maximum(n_g, 1))).astype(np.int64), int(np.log2(pad)))
    for bk in np.unique(buckets):
        gsel = np.flatnonzero(buckets == bk)
        width = 1 << int(bk)
        order = gsel[np.argsort(-gsize[gsel], kind="stable")]  # most steps first: active groups are a prefix
        nb = order.shape[0]
        slot = np.empty(gstart.size, dtype=np.int64)
        slot[order] = np.arange(nb)
        steps = int(gsize[order[0]])
        table = np.full((nb, steps, width), -1.0)
        sel = np.isin(group_of, order)
        dsel = dets[sel]
        for_pairs = np.repeat(first_pair[dsel], cnt[dsel]) + (np.arange(cnt[dsel].sum())
                                                              - np.repeat(np.cumsum(cnt[dsel]) - cnt[dsel],
                                                                          cnt[dsel]))
        rows = slot[group_of[sel]]
        table[np.repeat(rows, cnt[dsel]), np.repeat(step_of[sel], cnt[dsel]), p_slot[for_pairs]] = iou[for_pairs]
        # ground truths of each group (the first detection's pairs list them all, in order)
        first = dets[gstart[order]]
        gt_ids = np.full((nb, width), -1, dtype=np.int64)
        rr = np.repeat(np.arange(nb), cnt[first])
        ss = np.arange(rr.shape[0]) - np.repeat(np.cumsum(cnt[first]) - cnt[first], cnt[first])
        gt_ids[rr, ss] = p_gt[np.repeat(first_pair[first], cnt[first]) + ss]
        real = gt_ids >= 0
        safe = np.where(real, gt_ids, 0)
        crowd = g_crowd[safe] & real  # (nb, W)
        ig = ((ig_all[safe][:, None, :] >> np.arange(n_rng)[None, :, None]) & 1).astype(bool)  # (nb, A, W)
        taken = np.zeros((nb, n_thr, n_rng, width), dtype=bool)
        sizes = gsize[order]
        for s in range(steps):
            n = int(np.count_nonzero(sizes > s))
            v = table[:n, s, :]  # (n, W)
            ok = (v[:, None, :] >= thr[None, :, None])[:, :, None, :]  # (n, T, 1, W)
            cand = ok & (~taken[:n] | crowd[:n, None, None, :])  # (n, T, A, W)
            igs = ig[:n, None, :, :]
            vv = v[:, None, None, :]
            reg = cand & ~igs
            score_reg = np.where(reg, vv, -1.0)[..., ::-1]
            m_reg = width - 1 - score_reg.argmax(axis=-1)
            has_reg = reg.any(axis=-1)
            ign = cand & igs
            score_ig = np.where(ign, vv, -1.0)[..., ::-1]
            m_ig = width - 1 - score_ig.argmax(axis=-1)
            has_ig = ign.any(axis=-1)
            m = np.where(has_reg, m_reg, m_ig)  # (n, T, A)
            got = has_reg | has_ig
            bi, ti, ai = np.nonzero(got)
            taken[bi, ti, ai, m[bi, ti, ai]] = True
            det_rows = dets[gstart[order[:n]] + s]
            matched[det_rows] = got
            to_ignored[det_rows] = got & ~has_reg
            gid = gt_ids[np.arange(n)[:, None, None], m]
            to_zero_id[det_rows] = got & ~g_idnz[np.where(gid >= 0, gid, 0)]


# -- accumulate and summarize on the computing rank ---------------------------------------------
