"""COCO detection metrics (MMEval 0.2.1's ``COCODetection``), matched on the rank that holds each image.

Each image's detections are matched to its ground truths where the image was
added (IoU with the crowd rule, pycocotools' greedy matching per category,
area-range and crowd ignores, ``maxDets``), vectorised over many images at a
time; what moves in ``compute()`` is one packed summary per image (a score,
a category and a base-3 word of true / false positive / ignored per IoU
threshold and area range for each detection; a category and area-range
ignore bits per ground truth). The computing rank accumulates and summarizes
exactly as pycocotools' ``COCOeval.accumulate`` / ``summarize`` do.

The parts: :mod:`.coco_arguments` (the arguments checked), :mod:`.coco_inputs`
and :mod:`.coco_inputs_batched` (the checked inputs and an annotation file),
:mod:`.coco_matching` (the matching), :mod:`.coco_summaries` (the per-image
summaries packed and read back), :mod:`.coco_compute` (the in-parts hooks of
``compute()``), :mod:`.coco_parts` (the summaries split by category owner and
joined again), :mod:`.coco_ranking` and
:mod:`.coco_accumulate` (rank, accumulate and summarize),
:mod:`.coco_results` (results files read and written).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from ..core._gc import gc_paused
from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError
from .coco_arguments import check_arguments, check_items, item_names, read_ann_file
from .coco_categories import category_ids_by_name
from .coco_compute import COCOComputesInParts, summary_blobs
from .coco_curves import COCOCurves, plot_coco_curves
from .coco_inputs import Annotations, Categories
from .coco_inputs_batched import read_images
from .coco_native import release_pooled
from .coco_results import ResultsLike, add_results, with_mask_boxes, write_results
from .coco_summaries import summarize_images

__all__ = ["COCODetection"]

logger = logging.getLogger("mmeval")

#: pending detections (summed over images) at which add() summarizes what waits (bounds the memory held)
SUMMARIZE_EVERY = 4_096
#: detections matched at once (summed over images): the matching's working memory (~1 KB per detection
#: for boxes: the IoU pairs and their orders, ~8 MB at most) follows this, not how many images wait; above
#: SUMMARIZE_EVERY, so a summary at add() is one call of the matching (its numpy cost is fixed per call)
MATCH_SLICE = 8_192


class COCODetection(COCOComputesInParts, BaseMetric):
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
    (indices into ``dataset_meta['classes']``, else the ``ann_file``'s categories), ``img_id``, and for ``'segm'``
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

    #: attributes naming files whose content shapes the answer: the question carries their digest (mmeval.core.identity)
    question_files = ("ann_file",)
    #: Set ``metric.keep_curves = True`` (on every rank: it is part of the question) before ``compute()`` to keep
    #: the precision-recall curves (:attr:`pr_curves`, :meth:`plot`; :mod:`mmeval.metrics.coco_curves`).
    keep_curves: bool = False

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
        metrics, thrs, nums = check_arguments(
            metric, iou_thrs, proposal_nums, classwise, format_only, outfile_prefix, gt_mask_area, print_results
        )
        self.metrics: List[str] = metrics
        self.classwise = bool(classwise)
        self.proposal_nums: List[int] = [int(n) for n in nums]
        self.iou_thrs: np.ndarray = thrs
        self.metric_items: Optional[List[str]] = check_items(metric_items, self.proposal_nums)
        self.format_only = bool(format_only)
        self.outfile_prefix = outfile_prefix
        self.gt_mask_area = bool(gt_mask_area)
        self.backend_args = backend_args
        self.print_results = bool(print_results)
        self.ann_file = ann_file
        self._ann: Optional[Annotations] = read_ann_file(ann_file)
        self._cats: Optional[Categories] = None
        self._pending_dets = 0
        self._cat_dets: Optional[np.ndarray] = None  # detections added per category (see _part_loads)

    # -- configuration -------------------------------------------------------------

    def _item_names(self) -> Dict[str, int]:
        """MMEval's item name -> index into pycocotools' 12 stats (AR names from ``proposal_nums`` as given)."""
        return item_names(self.proposal_nums)

    @property
    def classes(self) -> List[str]:
        """The class names (``dataset_meta['classes']``; without it, every category of ``ann_file`` in its order)."""
        meta = self.dataset_meta or {}
        classes = meta.get("classes", meta.get("CLASSES"))
        if classes is None and self._ann is not None:
            return [c["name"] for c in self._ann.categories]
        if classes is None:
            raise MetricArgumentError(
                f"COCODetection: dataset_meta={self.dataset_meta!r} has no 'classes'; pass "
                f"dataset_meta={{'classes': (...)}}"
            )
        return list(classes)

    def _categories(self) -> "Categories":
        if self._cats is None:
            classes = self.classes
            if self._ann is not None:
                ids = category_ids_by_name(self._ann.categories, classes, self.ann_file)
                names = {c["id"]: c["name"] for c in self._ann.categories}
            else:
                ids = list(range(len(classes)))
                names = dict(enumerate(classes))
            self._cats = Categories(ids, names)
        return self._cats

    def _question(self, size: Optional[int]) -> Dict[str, Any]:
        question = super()._question(size)
        question["iou_thrs"] = [float(t) for t in self.iou_thrs]
        try:  # the classes shape the labels' categories: a rank with other dataset_meta is a mismatch, named so
            question["dataset_meta['classes']"] = tuple(str(c) for c in self.classes)
        except MetricArgumentError:
            question["dataset_meta['classes']"] = None
        return question

    @property
    def pr_curves(self) -> Optional[Dict[str, COCOCurves]]:
        """Per metric, the curves of the last ``compute()`` (:class:`~mmeval.metrics.coco_curves.COCOCurves`:
        pycocotools' ``eval['precision'][:, :, :, 0, -1]``); ``None`` without ``keep_curves = True`` or on
        a rank other than 0 under several ranks."""
        return self.__dict__.get("_pr_curves")

    def plot(self, metric: Optional[str] = None, ax: Any = None, classes: Optional[Sequence[int]] = None) -> Any:
        """Draw the precision-recall curves of the last ``compute()`` per IoU threshold (0.5, 0.75 and the mean
        over thresholds, each averaged over the categories); returns matplotlib's ``(fig, ax)``.

        ``metric``: ``'bbox'``, ``'segm'`` or ``'proposal'`` (default the first computed); ``ax``: draw on this
        matplotlib Axes; ``classes``: average over these category positions only. Needs
        ``keep_curves = True`` before ``compute()`` and runs on rank 0 (any process alone); matplotlib is
        imported here (the ``plot`` extra: ``pip install 'mmeval-core[plot]'``).
        """
        curves = self.pr_curves
        if curves is None:
            raise MetricArgumentError(
                "COCODetection.plot(): no curves kept; set metric.keep_curves = True (on every rank) before "
                "compute(). The curves stay on rank 0 under several ranks"
            )
        return plot_coco_curves(curves, metric, ax, classes)

    def reset(self) -> None:
        super().reset()
        self._pending_dets = 0
        self._cat_dets = None
        self._cats = None  # dataset_meta may have changed: read the classes again at the next add()
        release_pooled()  # the memory the kernels kept for the masks' runs of the evaluation that ended

    # -- add -----------------------------------------------------------------------

    def add(self, predictions: Sequence[Dict[str, Any]], groundtruths: Sequence[Dict[str, Any]]) -> None:
        """Add one prediction dict and one ground-truth dict per image (see the class docstring)."""
        if (
            isinstance(predictions, dict)
            or isinstance(groundtruths, dict)
            or not isinstance(predictions, Sequence)
            or not isinstance(groundtruths, Sequence)
        ):
            raise MetricArgumentError(
                f"COCODetection.add(): predictions and groundtruths must be sequences of dicts "
                f"(one per image), got {type(predictions).__name__} and "
                f"{type(groundtruths).__name__}"
            )
        if len(predictions) != len(groundtruths):
            raise MetricArgumentError(
                f"COCODetection.add(): {len(predictions)} predictions but {len(groundtruths)} "
                f"groundtruths; give one of each per image"
            )
        if "segm" in self.metrics:  # a segmentation without boxes: its masks' boxes, as COCO.loadRes gives them
            predictions = [with_mask_boxes(p) for p in predictions]
        cats = self._categories()
        # each mask's RLE dict lives until its batch is matched: unpaused, the collector walks a framework's
        # ~10^5 objects again and again meanwhile (segm: a third of add() with torch imported); no cycles here
        with gc_paused():
            images = read_images(
                predictions,
                groundtruths,
                cats,
                self.metrics,
                self._ann,
                self.ann_file,
                self.gt_mask_area,
                keep_records=self.outfile_prefix is not None,
            )
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

    def add_results(self, results: ResultsLike) -> int:
        """Add a COCO results json (a path) or its list of dicts (needs ``ann_file``); the images added.

        See :func:`mmeval.metrics.coco_results.add_results`.
        """
        return add_results(self, results, self._ann, self._categories)

    def _summarize_pending(self) -> None:
        super()._summarize_pending()
        self._pending_dets = 0

    # -- the work on the holding rank ---------------------------------------------------

    def _summarize(self, samples: List[Any]) -> List[Any]:
        """Match every image of ``samples`` (on this rank) and pack each one's summary (see the module docstring)."""
        return summarize_images(
            samples,
            self.metrics,
            self._categories(),
            self._ann is not None,
            self.iou_thrs,
            max(self.proposal_nums),
            self.format_only,
            MATCH_SLICE,
        )

    def compute_metric(self, results: Sequence[Any]) -> Dict[str, Any]:
        """The COCO stats of every image's summary, in dataset order (see :meth:`_summarize`).

        The very computation of the ranks' partitioned path, in one part.
        """
        if not len(results):
            raise ValueError("COCODetection.compute_metric: no results to compute on (nothing was added)")
        # the records for the result files ride with the summaries only where they are written
        records = [r[1] if isinstance(r, tuple) else None for r in results] if self.outfile_prefix is not None else []
        if self.format_only:
            self._write_results(records, None)
            logger.info("COCODetection: results are saved in %s", os.path.dirname(str(self.outfile_prefix)))
            return {}
        blobs = summary_blobs(results)
        if self.outfile_prefix is not None:
            meta = self._packed(blobs).column(0).reshape(-1, 2)
            self._write_results(records, np.where(meta[:, 1] != 0, meta[:, 0], np.arange(len(blobs))))
        positions = np.arange(len(blobs), dtype=np.int64)
        return self._combine_parts([self._compute_part(self._partition(blobs, positions, 1))])

    def _write_results(self, records: List[Any], ids: Optional[np.ndarray]) -> None:
        """MMEval's result files: ``{outfile_prefix}.bbox.json`` (and ``.segm.json`` with masks)."""
        write_results(str(self.outfile_prefix), records, ids, self._categories().ids)
