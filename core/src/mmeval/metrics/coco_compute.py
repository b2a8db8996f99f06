"""COCODetection's compute across ranks: the in-parts hooks of :mod:`mmeval.core.sync.partitioned`.

Each rank splits its image summaries by category owner (:meth:`~COCOComputesInParts._partition`), accumulates
the categories it owns from the parts every rank sent it (:meth:`~COCOComputesInParts._compute_part`), and
rank 0 combines the ranks' accumulated categories into pycocotools' stats and MMEval's result keys
(:meth:`~COCOComputesInParts._combine_parts`). One process runs the same three steps in one part
(``COCODetection.compute_metric``). The splitting and joining themselves are :mod:`.coco_parts`, the
accumulation and the stats :mod:`.coco_accumulate`.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..core.packed import PackedColumns
from .coco_accumulate import combine_partials, summarize_sums
from .coco_curves import COCOCurves, combine_curves
from .coco_inputs import Annotations, Categories
from .coco_parts import join_parts
from .coco_summaries import partition_summaries

__all__ = ["COCOComputesInParts"]

logger = logging.getLogger("mmeval")


def summary_blobs(results: Sequence[Any]) -> List[Any]:
    """Each image's summary bytes: the results as they are, or each one's first item where the records for the
    result files ride along (``(blob, records)`` tuples). One pass over the types only when none is a tuple."""
    if not any(issubclass(t, tuple) for t in set(map(type, results))):
        return list(results)
    return [r[0] if isinstance(r, tuple) else r for r in results]


class COCOComputesInParts:
    """The partitioned-compute hooks of :class:`~mmeval.metrics.COCODetection` (a mixin: it reads the metric's
    arguments and the categories it declares below; ``COCODetection`` sets and defines them)."""

    metrics: List[str]
    classwise: bool
    proposal_nums: List[int]
    iou_thrs: np.ndarray
    metric_items: Optional[List[str]]
    format_only: bool
    outfile_prefix: Optional[str]
    print_results: bool
    keep_curves: bool
    logger: Optional[logging.Logger]
    _ann: Optional[Annotations]
    _cat_dets: Optional[np.ndarray]

    def _categories(self) -> Categories:
        """The evaluated categories (``COCODetection`` defines them from its classes)."""
        raise NotImplementedError

    def _item_names(self) -> Dict[str, int]:
        """MMEval's item name -> index into pycocotools' 12 stats (``COCODetection`` defines it)."""
        raise NotImplementedError

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

    def _partition(
        self, results: List[Any], positions: np.ndarray, world_size: int, owners: Optional[np.ndarray] = None
    ) -> List[Any]:
        """This rank's image summaries split by category owner (see :func:`.coco_parts.split_summaries`).

        The columns are read one at a time (each detection column split, then dropped)."""
        blobs = summary_blobs(results)
        del results
        packed = self._packed(blobs)
        return partition_summaries(
            blobs,
            packed,
            self.metrics,
            self._ann is not None,
            len(self._categories().sorted_ids),
            positions,
            world_size,
            owners,
        )

    def _compute_part(self, parts: List[Any]) -> Any:
        """Accumulate this rank's categories from the parts every rank sent it."""
        cats = self._categories()
        npig = self._ann.npig(cats) if self._ann is not None else None
        part = join_parts(parts, len(self.metrics))
        parts.clear()  # the received arrays: joined now, their memory goes
        if part.duplicate_ids:
            logger.warning(
                "COCODetection: several images share an img_id; each is evaluated as its own image "
                "(pycocotools would merge them). Pass indices= to add() to count an image once."
            )
        return part.accumulate(
            self.metrics, npig, self.iou_thrs, sorted(self.proposal_nums), self.classwise, bool(self.keep_curves)
        )

    def _combine_parts(self, partials: List[Any]) -> Dict[str, Any]:
        """The COCO stats (and classwise rows) from every rank's accumulated categories."""
        cats = self._categories()
        self.__dict__["_pr_curves"] = None
        if sum(int(n) for n in partials[0]["dets"]) == 0:
            logger.warning("COCODetection: the testing results of the whole dataset are empty")
            return {}
        thrs, nums = self.iou_thrs, sorted(self.proposal_nums)
        names = self._item_names()
        out: Dict[str, Any] = {}
        table: List[str] = []
        kept: Dict[str, COCOCurves] = {}
        for j, metric in enumerate(self.metrics):
            k_eff = len(cats.sorted_ids) if metric != "proposal" else 1
            psum, tps, npig, classwise = combine_partials(partials, j, k_eff, metric == "proposal")
            if self.keep_curves:
                ids = list(cats.sorted_ids) if metric != "proposal" else [-1]
                labels = [str(cats.names[i]) for i in ids] if metric != "proposal" else ["every category"]
                kept[metric] = combine_curves(partials, j, metric, thrs, ids, labels)
            stats = summarize_sums(psum, tps, npig, thrs, nums)
            if metric == "proposal":
                items = self.metric_items or [f"AR@{n}" for n in self.proposal_nums] + [
                    f"AR_{s}@{self.proposal_nums[2]}" for s in "sml"
                ]
                for item in items:
                    out[item] = float(stats[names[item]])
            else:
                items = self.metric_items or ["mAP", "mAP_50", "mAP_75", "mAP_s", "mAP_m", "mAP_l"]
                for item in items:
                    out[f"{metric}_{item}"] = float(stats[names[item]])
                if self.classwise:
                    for idx, cat_id in enumerate(cats.sorted_ids):
                        out[f"{metric}_{cats.names[cat_id]}_precision"] = float(classwise[idx])
            table.append(
                f"{metric}: " + ", ".join(f"{key}={val:.4f}" for key, val in out.items() if not isinstance(val, str))
            )
        if self.keep_curves:
            self.__dict__["_pr_curves"] = kept
        if self.print_results:
            (self.logger or logger).info("COCODetection results:\n%s", "\n".join(table))
        return out
