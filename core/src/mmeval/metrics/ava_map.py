"""AVA frame-level action detection mAP (MMEval 0.2.1's ``AVAMeanAP``), matched on the rank holding the frame.

Every rank reads the ground truth (the AVA CSV files) itself; each frame's detections are matched
to its ground truths where the frame was added, and only a compact summary per detection (score,
class, true or false positive) moves to the rank that ranks them. The definition is the PASCAL VOC
one the AVA v2 challenge uses: IoU 0.5, per class, the area under the interpolated
precision-recall curve, the mean over classes with ground truth.
"""

from __future__ import annotations

import csv
import logging
import numbers
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError
from ..core.inputs import to_numpy
from ..core.packed import pack_arrays, unpack_arrays
from .detection_ap import average_precision
from .proposal_recall import box_iou

__all__ = ["AVAMeanAP"]

_log = logging.getLogger(__name__)

_Frame = Tuple[str, int]
#: a frame's summary is mmeval.core.packed's: its frame id (int32, -1: not annotated), then per detection its
#: score (float64) and class * 2 + true positive (int32) -- 12 bytes per detection, 14 for the frame
_F8, _I4 = np.dtype("<f8"), np.dtype("<i4")
#: the largest class id the summaries can carry
_MAX_CLASS_ID = 2**30 - 1


class _GroundTruth:
    """What every rank reads from the AVA files: the classes, the boxes per frame, the counts per class."""

    def __init__(
        self,
        categories: List[Dict[str, Any]],
        frames: Dict[_Frame, Tuple[np.ndarray, np.ndarray]],
        excluded: Set[_Frame],
    ) -> None:
        self.categories = categories
        self.class_ids = sorted({int(c["id"]) for c in categories})
        self.frames = frames
        self.frame_ids = {key: i for i, key in enumerate(frames)}
        self.frame_keys = list(frames)
        self.excluded = excluded
        counts: Dict[int, int] = {}
        for _, labels in frames.values():
            for label in labels.tolist():
                counts[label] = counts.get(label, 0) + 1
        self.num_gts = counts


def _frame_key(video_id: Any, timestamp: Any, what: str) -> _Frame:
    try:
        if isinstance(timestamp, (float, np.floating)) and float(timestamp) != int(timestamp):
            raise ValueError
        ts = int(timestamp)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: timestamp must be an integer (seconds), got {timestamp!r}") from None
    return str(video_id), ts


def read_label(label_file: str) -> Tuple[List[Dict[str, Any]], Set[int]]:
    """The label map of a ``pbtxt``-like file: ``[{'id': int, 'name': str}, ...]`` and the set of ids.

    A line ``  name: "..."`` names the class of the next ``  id: N`` (or ``  label_id: N``) line.
    """
    categories: List[Dict[str, Any]] = []
    name = ""
    with open(label_file) as f:
        for number, line in enumerate(f, 1):
            if line.startswith("  name:"):
                name = line.split('"')[1] if '"' in line else line.split(":", 1)[1].strip()
            elif line.startswith("  id:") or line.startswith("  label_id:"):
                try:
                    class_id = int(line.strip().split(" ")[-1])
                except ValueError:
                    raise ValueError(
                        f"AVAMeanAP: {label_file}, line {number}: a class id must be an int, got {line.strip()!r}"
                    ) from None
                if not 1 <= class_id <= _MAX_CLASS_ID:
                    raise ValueError(
                        f"AVAMeanAP: {label_file}, line {number}: class ids must lie in "
                        f"[1, {_MAX_CLASS_ID}] (AVA's are 1-based), got {class_id}"
                    )
                categories.append({"id": class_id, "name": name})
    if not categories:
        raise ValueError(f"AVAMeanAP: {label_file} holds no class (no '  id: N' or '  label_id: N' line)")
    return categories, {int(c["id"]) for c in categories}


def read_csv(
    csv_file: str, class_whitelist: Optional[Set[int]] = None
) -> Dict[_Frame, List[Tuple[float, int, float, float, float, float]]]:
    """The rows of an AVA CSV (``video_id, timestamp, x1, y1, x2, y2, action_id[, score]``) per frame.

    Rows whose action is not in ``class_whitelist`` (when given and not empty) are skipped; a row
    without a score scores 1. Each frame's rows ``(score, action_id, x1, y1, x2, y2)`` come by
    descending score (equal scores: file order).
    """
    frames: Dict[_Frame, List[Tuple[float, int, float, float, float, float]]] = {}
    with open(csv_file, newline="") as f:
        for number, row in enumerate(csv.reader(f), 1):
            if len(row) not in (7, 8):
                raise ValueError(
                    f"AVAMeanAP: {csv_file}, line {number}: an AVA row has 7 or 8 columns (video_id, "
                    f"timestamp, x1, y1, x2, y2, action_id[, score]), got {row!r}"
                )
            try:
                key = _frame_key(row[0], row[1], f"{csv_file}, line {number}")
                x1, y1, x2, y2 = (float(v) for v in row[2:6])
                action = int(row[6])
                score = float(row[7]) if len(row) == 8 else 1.0
            except ValueError as exc:
                raise ValueError(f"AVAMeanAP: {csv_file}, line {number}: {row!r} ({exc})") from None
            if class_whitelist and action not in class_whitelist:
                continue
            frames.setdefault(key, []).append((score, action, x1, y1, x2, y2))
    return {key: sorted(rows, key=lambda r: -r[0]) for key, rows in frames.items()}


def read_exclusions(exclude_file: str) -> Set[_Frame]:
    """The excluded frames of an AVA exclusion CSV (``video_id, timestamp`` rows)."""
    excluded: Set[_Frame] = set()
    with open(exclude_file, newline="") as f:
        for number, row in enumerate(csv.reader(f), 1):
            if len(row) != 2:
                raise ValueError(
                    f"AVAMeanAP: {exclude_file}, line {number}: an exclusion row has 2 columns "
                    f"(video_id, timestamp), got {row!r}"
                )
            excluded.add(_frame_key(row[0], row[1], f"{exclude_file}, line {number}"))
    return excluded


def _rounded(values: np.ndarray) -> np.ndarray:
    """Each value as MMEval writes it to its results CSV and reads it back: ``float('%.3f' % v)``."""
    return np.char.mod("%.3f", values).astype(np.float64) if values.size else values.astype(np.float64)


class AVAMeanAP(BaseMetric):
    """Frame-level mean average precision of AVA spatio-temporal action detection, at IoU 0.5.

    The names, arguments, ``add()`` inputs and result key are MMEval 0.2.1's ``AVAMeanAP``.

    Args:
        ann_file: the ground-truth CSV (``video_id, timestamp, x1, y1, x2, y2, action_id``).
        label_file: the label map (``  name: "..."`` / ``  id: N`` lines): the classes evaluated.
        exclude_file: a CSV of ``video_id, timestamp`` frames left out (their ground truths and
            detections), or ``None``.
        num_classes: accepted for MMEval compatibility (a positive int; MMEval does not use it either).
        custom_classes: a subset of the label map's ids: only these are evaluated, and ``add()``'s
            ``outputs[j]`` holds class ``custom_classes[j]`` (without it, class ``j + 1``).
        verbose: log the result (info level).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions)`` takes one dict per frame: ``video_id``, ``timestamp`` (an int) and
    ``outputs``, a list whose entry ``j`` is an (n, 5) array of ``x1, y1, x2, y2, score`` rows.

    Per frame, on the rank that holds it, at ``add()`` (the rank reads the files at its first
    ``add()``): every value is rounded to 3 decimals, as MMEval's CSV round trip does; classes
    outside the label map (or ``custom_classes``) and boxes without area are dropped; the
    detections are taken by descending score (equal scores: class, then row order) and, class by
    class, each is a true positive when the ground truth of its class in the frame it overlaps
    most has IoU >= 0.5 and was not taken by an earlier detection, else a false positive. The
    frame keeps 12 bytes per detection (score, class, flag) and 14 for the frame; that is what
    ``compute()`` moves (a per-sample metric: the ranking needs every detection). Ground-truth
    counts per class come from the files, on every rank.

    On the computing rank, per class with ground truth: the detections of every frame, ranked
    by descending score (equal scores: the frame later in ``ann_file`` first, then the later place
    in the frame -- the order MMEval's sort gives them when the frames come in file order; never the
    order they came in, so any sampler and world size give the same bits; frames without ground truth
    count as coming before every annotated one), make a precision-recall curve whose interpolated
    area is the class's AP (0 without a detection). Result: ``{'mAP@0.5IOU': mean AP}`` over the
    classes with ground truth (NaN when none), a Python float. A frame with ground truth given in
    two samples raises ``ValueError`` (MMEval would merge them; pass each frame once, or use
    ``compute(size=)`` / ``indices=`` against a sampler's padding).

    Units: ``mAP@0.5IOU`` is a fraction in [0, 1], as MMEval 0.2.1's.
    """

    #: attributes naming files whose content shapes the answer: the question carries their digest (mmeval.core.identity)
    question_files = ("ann_file", "label_file", "exclude_file")

    def __init__(
        self,
        ann_file: str,
        label_file: str,
        exclude_file: Optional[str] = None,
        num_classes: int = 81,
        custom_classes: Optional[List[int]] = None,
        verbose: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for name, path in (("ann_file", ann_file), ("label_file", label_file), ("exclude_file", exclude_file)):
            if not isinstance(path, str) and not (name == "exclude_file" and path is None):
                raise MetricArgumentError(f"AVAMeanAP: {name} must be a file path (str), got {path!r}")
        if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or num_classes < 1:
            raise MetricArgumentError(f"AVAMeanAP: num_classes must be a positive int, got {num_classes!r}")
        if custom_classes is not None and not (
            isinstance(custom_classes, (list, tuple))
            and custom_classes
            and all(isinstance(c, numbers.Integral) and not isinstance(c, bool) for c in custom_classes)
        ):
            raise MetricArgumentError(
                f"AVAMeanAP: custom_classes must be None or a non-empty list of class ids "
                f"(ints), got {custom_classes!r}"
            )
        if not isinstance(verbose, (bool, np.bool_)):
            raise MetricArgumentError(f"AVAMeanAP: verbose must be True or False, got {verbose!r}")
        self.ann_file: str = ann_file
        self.label_file: str = label_file
        self.exclude_file: Optional[str] = exclude_file
        self.num_classes = int(num_classes)
        #: as MMEval keeps it: ``[0] + custom_classes`` (entry ``j + 1`` is ``outputs[j]``'s class), or None
        self.custom_classes: Optional[List[int]] = (
            None if custom_classes is None else [0] + [int(c) for c in custom_classes]
        )
        self.verbose: bool = bool(verbose)
        self._gt: Optional[_GroundTruth] = None

    def _ground_truth(self) -> _GroundTruth:
        """The files' ground truth, read once per metric object."""
        if self._gt is None:
            categories, whitelist = read_label(self.label_file)
            if self.custom_classes is not None:
                custom = self.custom_classes[1:]
                unknown = sorted(set(custom) - whitelist)
                if unknown:
                    raise MetricArgumentError(
                        f"AVAMeanAP: custom_classes {unknown} are not in {self.label_file} "
                        f"(its ids: {sorted(whitelist)})"
                    )
                whitelist = set(custom)
                categories = [c for c in categories if c["id"] in whitelist]
            excluded = read_exclusions(self.exclude_file) if self.exclude_file is not None else set()
            frames = {}
            for key, rows in read_csv(self.ann_file, whitelist).items():
                if key in excluded:
                    continue
                table = np.asarray([r[2:] for r in rows], dtype=np.float64).reshape(-1, 4)
                frames[key] = (table, np.asarray([r[1] for r in rows], dtype=np.int64))
            self._gt = _GroundTruth(categories, frames, excluded)
        return self._gt

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_gt"] = None  # read again from the files where it is restored
        return state

    def add(self, predictions: Sequence[Dict[str, Any]]) -> None:
        """Match each frame's detections here and keep their summaries (see the class docstring)."""
        gt = self._ground_truth()
        whitelist = set(gt.class_ids)
        summaries = [self._frame_summary(i, pred, gt, whitelist) for i, pred in enumerate(predictions)]
        self._results.extend(summaries)

    def _frame_summary(self, i: int, pred: Any, gt: _GroundTruth, whitelist: Set[int]) -> bytes:
        what = f"AVAMeanAP.add: predictions[{i}]"
        if not isinstance(pred, dict) or not {"video_id", "timestamp", "outputs"} <= set(pred):
            raise ValueError(
                f"{what} must be a dict with 'video_id', 'timestamp' and 'outputs', got "
                f"{sorted(pred) if isinstance(pred, dict) else type(pred).__name__}"
            )
        key = _frame_key(pred["video_id"], pred["timestamp"], what)
        outputs = pred["outputs"]
        if not isinstance(outputs, (list, tuple)):
            raise ValueError(
                f"{what}['outputs'] must be a list of (n, 5) arrays, one per class, got {type(outputs).__name__}"
            )
        if self.custom_classes is not None and len(outputs) > len(self.custom_classes) - 1:
            raise ValueError(
                f"{what}['outputs'] holds {len(outputs)} classes but custom_classes only {len(self.custom_classes) - 1}"
            )
        rows, classes = [], []
        for j, out in enumerate(outputs):
            arr = to_numpy(out, f"{what}['outputs'][{j}]")
            if arr.size == 0:
                continue
            if arr.ndim != 2 or arr.shape[1] != 5 or arr.dtype.kind not in "iuf":
                raise ValueError(
                    f"{what}['outputs'][{j}] must be numbers of shape (n, 5) (x1, y1, x2, y2, score), "
                    f"got shape {arr.shape}, dtype {arr.dtype}"
                )
            if not np.isfinite(arr).all():
                raise ValueError(f"{what}['outputs'][{j}] holds NaN or infinite values")
            cls = self.custom_classes[j + 1] if self.custom_classes is not None else j + 1
            if cls in whitelist:
                rows.append(arr)
                classes.append(np.full(arr.shape[0], cls, dtype=np.int64))
        frame_id = gt.frame_ids.get(key, -1)
        if key in gt.excluded or not rows:
            return pack_arrays(np.asarray([frame_id], dtype=_I4), np.zeros(0, dtype=_F8), np.zeros(0, dtype=_I4))
        dets = _rounded(np.concatenate(rows).astype(np.float64))
        cls_of = np.concatenate(classes)
        order = np.argsort(-dets[:, 4], kind="stable")
        dets, cls_of = dets[order], cls_of[order]
        valid = (dets[:, 0] < dets[:, 2]) & (dets[:, 1] < dets[:, 3])
        dets, cls_of = dets[valid], cls_of[valid]
        tp = np.zeros(dets.shape[0], dtype=np.int32)
        if key in gt.frames:
            gt_boxes, gt_labels = gt.frames[key]
            for c in np.unique(cls_of).tolist():
                mine = np.flatnonzero(cls_of == c)
                theirs = gt_boxes[gt_labels == c]
                if not theirs.shape[0]:
                    continue
                iou = box_iou(dets[mine, :4], theirs, eps=None)
                best = iou.argmax(axis=1)
                taken = np.zeros(theirs.shape[0], dtype=bool)
                for row, (d, g) in enumerate(zip(mine.tolist(), best.tolist())):
                    if iou[row, g] >= 0.5 and not taken[g]:
                        tp[d], taken[g] = 1, True
        codes = cls_of * 2 + tp
        return pack_arrays(np.asarray([frame_id], dtype=_I4), dets[:, 4].astype(_F8), codes.astype(_I4))

    def compute_metric(self, results: Sequence[bytes]) -> Dict[str, float]:
        """The mAP of every frame's detection summaries (their order does not matter: see the class docstring)."""
        if not len(results):
            raise ValueError("AVAMeanAP.compute_metric: no results to compute on (nothing was added)")
        gt = self._ground_truth()
        lengths, (frame_column, scores, codes) = unpack_arrays(results, 3)
        frame_ids = frame_column.astype(np.int64)
        # each detection's frame (its row in the annotation file, -1: a frame without ground truth, whose
        # detections are all false positives) and its place in the frame: what ranks equal scores
        det_frame = np.repeat(frame_ids, lengths[:, 1])
        place = np.arange(scores.shape[0])
        annotated = frame_ids[frame_ids >= 0]
        uniq, counts = np.unique(annotated, return_counts=True)
        if (counts > 1).any():
            key = gt.frame_keys[int(uniq[counts > 1][0])]
            raise ValueError(
                f"AVAMeanAP: frame {key} was added {int(counts[counts > 1][0])} times: add each frame "
                f"once (a sampler's padding: compute(size=len(dataset)) or add(..., indices=))"
            )
        classes, tps = codes // 2, codes % 2
        aps = np.full(len(gt.class_ids), np.nan)  # NaN: a class without ground truth, left out of the mean
        for k, c in enumerate(gt.class_ids):
            num_gt = gt.num_gts.get(c, 0)
            if not num_gt:
                continue
            sel = classes == c
            # by descending score; equal scores: the later frame of the annotation file first, then the later
            # place in the frame (MMEval's reversed stable sort, given the frames in file order), never by arrival
            ranked = tps[sel][np.lexsort((place[sel], det_frame[sel], scores[sel]))[::-1]]
            cum_tp = np.cumsum(ranked)
            precision = cum_tp / np.arange(1, ranked.size + 1, dtype=np.float64)
            recall = cum_tp / float(num_gt)
            aps[k] = average_precision(recall, precision, "area")
        with np.errstate(invalid="ignore"):
            mean = float(np.nanmean(aps)) if not np.isnan(aps).all() else float("nan")
        result = {"mAP@0.5IOU": mean}
        if self.verbose:
            (self.logger or _log).info(f"AVAMeanAP: {result}")
        return result
