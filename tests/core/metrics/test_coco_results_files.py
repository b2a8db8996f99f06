"""COCO results files the way pycocotools users work (issue 35, item 3), against pycocotools on the same files.

``COCODetection(ann_file=...)`` alone (the categories from the file, no dataset_meta), a COCO results json
(a path or its list of dicts) with boxes, with segmentations and with segmentations only; result files
written without the float noise of ``x2 - x1``; and the version policy for MMEval-compatibility checks.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np
import pytest
from coco_reference import coco_json, detections

from mmeval.core.errors import MetricArgumentError
from mmeval.metrics.coco_detection import COCODetection

pytest.importorskip("pycocotools")

C = 5
CLASSES = [f"cls{i}" for i in range(C)]
#: the file's category ids: not 0..C-1, and listed out of order (a label is a position in the file's list)
CAT_IDS = [17, 3, 42, 8, 25]
ITEMS = ["mAP", "mAP_50", "mAP_75", "mAP_s", "mAP_m", "mAP_l"]


def _ann_file(tmp_path: Path, gts: Sequence[Dict[str, Any]]) -> Path:
    js = coco_json(gts, CLASSES)
    js["categories"] = [{"id": CAT_IDS[i], "name": name} for i, name in enumerate(CLASSES)]
    for ann in js["annotations"]:
        ann["category_id"] = CAT_IDS[ann["category_id"]]
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(js))
    return path


def _results(preds: Sequence[Dict[str, Any]], boxes: bool = True, masks: bool = False) -> List[Dict[str, Any]]:
    """The detections as a detector writes a COCO results json: xywh with two decimals, RLE counts as str."""
    out = []
    for p in preds:
        for j in range(len(p["labels"])):
            x1, y1, x2, y2 = (float(v) for v in p["bboxes"][j])
            det: Dict[str, Any] = {
                "image_id": p["img_id"],
                "category_id": CAT_IDS[int(p["labels"][j])],
                "score": float(p["scores"][j]),
            }
            if boxes:
                det["bbox"] = [round(x1, 2), round(y1, 2), round(x2 - x1, 2), round(y2 - y1, 2)]
            if masks:
                rle = p["masks"][j]
                det["segmentation"] = {"size": list(rle["size"]), "counts": rle["counts"].decode()}
            out.append(det)
    return out


def _pycocotools(ann_file: Path, results: Any, iou_type: str) -> np.ndarray:
    """pycocotools' own path: COCO(ann_file), loadRes(results), COCOeval over every image and category."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(ann_file))
        ev = COCOeval(gt, gt.loadRes(results), iou_type)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return np.asarray(ev.stats[:6])


def _stats(result: Dict[str, Any], metric: str) -> np.ndarray:
    return np.array([result[f"{metric}_{k}"] for k in ITEMS])


def test_ann_file_alone_and_a_results_json_path_equal_pycocotools(tmp_path):
    preds, gts = detections(40, C, seed=3)
    ann = _ann_file(tmp_path, gts)
    res = tmp_path / "results.bbox.json"
    res.write_text(json.dumps(_results(preds)))
    metric = COCODetection(ann_file=str(ann), print_results=False)  # no dataset_meta
    assert metric.classes == CLASSES
    assert metric.add_results(str(res)) == sum(1 for p in preds if len(p["labels"]))
    got = _stats(metric.compute(), "bbox")
    want = _pycocotools(ann, str(res), "bbox")
    assert np.abs(got - want).max() <= 1e-12, (got, want)
    # the list of dicts is the same input; a subset of classes evaluates those only, as catIds does
    again = COCODetection(ann_file=ann, print_results=False)
    again.add_results(json.loads(res.read_text()))
    assert np.array_equal(_stats(again.compute(), "bbox"), got)


def test_a_class_subset_leaves_the_other_categories_out_as_pycocotools_catids(tmp_path):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    preds, gts = detections(30, C, seed=4)
    ann = _ann_file(tmp_path, gts)
    results = _results(preds)
    metric = COCODetection(ann_file=ann, dataset_meta={"classes": CLASSES[1:4]}, print_results=False)
    metric.add_results(results)
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(ann))
        ev = COCOeval(gt, gt.loadRes(results), "bbox")
        ev.params.catIds = gt.getCatIds(catNms=CLASSES[1:4])
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    assert np.abs(_stats(metric.compute(), "bbox") - ev.stats[:6]).max() <= 1e-12


@pytest.mark.parametrize("with_boxes", [True, False])
def test_segm_results_with_and_without_boxes_equal_pycocotools(tmp_path, with_boxes):
    from pycocotools import mask as mask_util

    from mmeval.metrics.coco_results import _rle

    preds, gts = detections(30, C, seed=5, masks=True)
    ann = _ann_file(tmp_path, gts)
    results = _results(preds, boxes=with_boxes, masks=True)
    metric = COCODetection(ann_file=ann, metric=["bbox", "segm"], print_results=False)
    metric.add_results(results)
    got = metric.compute()
    for iou_type in ("bbox", "segm"):  # loadRes gives a box-less segmentation its mask's box, and so does add
        given = json.loads(json.dumps(results))
        if iou_type == "segm":  # a detection's area is its mask's, as MMEval and mmdet evaluate segm (they drop
            for det in given:  # the boxes: loadRes would take a result's area from its box when it has one)
                det.pop("bbox", None)
        else:  # boxes evaluated with their boxes' areas: a box-less result's box is its mask's, given to loadRes
            for det in given:  # as such (on a box-less segmentation result loadRes would take the mask's area)
                det.setdefault("bbox", mask_util.toBbox(_rle(det["segmentation"])).tolist())
        want = _pycocotools(ann, given, iou_type)
        assert np.abs(_stats(got, iou_type) - want).max() <= 1e-12, iou_type


def test_add_takes_segm_predictions_without_boxes(tmp_path):
    preds, gts = detections(20, C, seed=6, masks=True)
    ann = _ann_file(tmp_path, gts)
    boxless = [{k: v for k, v in p.items() if k != "bboxes"} for p in preds]
    metric = COCODetection(ann_file=ann, metric="segm", print_results=False)
    metric.add_predictions(boxless)
    want = _pycocotools(ann, json.loads(json.dumps(_results(preds, boxes=False, masks=True))), "segm")
    assert np.abs(_stats(metric.compute(), "segm") - want).max() <= 1e-12


def test_the_written_results_round_trip_without_float_noise(tmp_path):
    preds, gts = detections(20, C, seed=7, masks=True)
    ann = _ann_file(tmp_path, gts)
    results = _results(preds, masks=True)
    prefix = tmp_path / "out"
    metric = COCODetection(
        ann_file=ann, metric=["bbox", "segm"], outfile_prefix=str(prefix), format_only=True, print_results=False
    )
    metric.add_results(results)
    assert metric.compute() == {}
    for suffix in ("bbox", "segm"):
        written = json.loads((tmp_path / f"out.{suffix}.json").read_text())
        # the values as given, in the file's order: no 14.819999999999993 for 14.82
        assert [d["bbox"] for d in written] == [d["bbox"] for d in results]
        assert [(d["image_id"], d["category_id"], d["score"]) for d in written] == [
            (d["image_id"], d["category_id"], d["score"]) for d in results
        ]
    # boxes given as corners: the width written is the shortest that puts the far edge back where it was
    box = np.array([[100.3, 10.3, 115.12, 48.15]])
    assert repr(115.12 - 100.3) == "14.820000000000007" and repr(48.15 - 10.3) == "37.849999999999994"
    metric = COCODetection(
        ann_file=ann, outfile_prefix=str(tmp_path / "corners"), format_only=True, print_results=False
    )
    metric.add_predictions([{"img_id": preds[0]["img_id"], "bboxes": box, "scores": [0.5], "labels": [0]}])
    metric.compute()
    (written,) = json.loads((tmp_path / "corners.bbox.json").read_text())
    # 100.3 + 14.82 == 100.3 + (115.12 - 100.3): the short width keeps the box; 10.3 + 37.85 is not
    # 10.3 + (48.15 - 10.3), so no shorter height keeps it, and the computed one is written
    assert written["bbox"] == [100.3, 10.3, 14.82, 48.15 - 10.3] and written["category_id"] == CAT_IDS[0]
    x, y, w, h = written["bbox"]  # read back, the far edges are the evaluated box's (x + (x2 - x), exactly)
    assert [x + w, y + h] == [100.3 + (115.12 - 100.3), 10.3 + (48.15 - 10.3)]


def test_results_files_are_checked_against_the_ann_file(tmp_path):
    preds, gts = detections(10, C, seed=8)
    ann = _ann_file(tmp_path, gts)
    good = _results(preds)
    with pytest.raises(MetricArgumentError, match="needs ann_file"):
        COCODetection(dataset_meta={"classes": CLASSES}).add_results(good)
    metric = COCODetection(ann_file=ann, print_results=False)
    with pytest.raises(MetricArgumentError, match=r"category_id.*=99 is no category of ann_file"):
        metric.add_results([dict(good[0], category_id=99)])
    with pytest.raises(MetricArgumentError, match="is not an image of ann_file"):
        metric.add_results([dict(good[0], image_id=10**6)])
    with pytest.raises(MetricArgumentError, match="has no 'score'"):
        metric.add_results([{k: v for k, v in good[0].items() if k != "score"}])
    with pytest.raises(MetricArgumentError, match="neither 'bbox' nor 'segmentation'"):
        metric.add_results([{k: v for k, v in good[0].items() if k != "bbox"}])
    with pytest.raises(MetricArgumentError, match="is not a readable file"):
        metric.add_results(str(tmp_path / "missing.json"))
    with pytest.raises(MetricArgumentError, match="list of dicts"):
        metric.add_results({"annotations": good})
    with pytest.raises(MetricArgumentError, match="needs results\\[0\\]\\['segmentation'\\]"):
        COCODetection(ann_file=ann, metric="segm").add_results(good)


def _ranks_worker(backend: Any, ann: str, results: List[Dict[str, Any]]) -> Any:
    metric = COCODetection(ann_file=ann, metric=["bbox", "segm"], print_results=False, dist_backend=backend)
    images = sorted({d["image_id"] for d in results})
    mine = set(images[backend.rank :: backend.world_size])  # each rank a share of the images
    metric.add_results([d for d in results if d["image_id"] in mine])
    return metric.compute()


def test_a_results_file_shared_among_ranks_equals_pycocotools(tmp_path):
    from hub_backend import run_ranks

    preds, gts = detections(30, C, seed=9, masks=True)
    ann = _ann_file(tmp_path, gts)
    results = _results(preds, boxes=False, masks=True)
    out = run_ranks(_ranks_worker, 3, str(ann), results, timeout=180)
    want = _pycocotools(ann, json.loads(json.dumps(results)), "segm")
    for rank in range(3):
        status, got = out[rank]
        assert status == "ok", got
        assert np.abs(_stats(got, "segm") - want).max() <= 1e-12
