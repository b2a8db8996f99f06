"""COCODetection as a pycocotools user has their files (issue 32, item 8).

Labels map to an ``ann_file``'s categories by *name* (``dataset_meta['classes'][label]``), whatever order and ids
the file lists them in; a class name the file lacks is refused naming it; a rank that added no image takes part
(with and without ``ann_file``), over real ranks.
"""

from __future__ import annotations

import json
import warnings
from typing import Any, Dict, Optional

import numpy as np
import pytest
from coco_reference import coco_json, cocoeval, detections
from hub_backend import run_ranks

from mmeval.core.errors import MetricArgumentError
from mmeval.metrics.coco_detection import COCODetection

pytest.importorskip("pycocotools")

C = 5
CLASSES = [f"cls{i}" for i in range(C)]
TOL = 1e-12
ITEMS = ["mAP", "mAP_50", "mAP_75", "mAP_s", "mAP_m", "mAP_l"]


def _renumbered(js: Dict[str, Any], seed: int) -> Dict[str, Any]:
    """The same ground truths with other category ids (not 0..C-1), listed in a shuffled order."""
    rng = np.random.default_rng(seed)
    new_id = {c["id"]: int(v) for c, v in zip(js["categories"], rng.choice(np.arange(1, 100), len(js["categories"])))}
    out = json.loads(json.dumps(js))
    for ann in out["annotations"]:
        ann["category_id"] = new_id[ann["category_id"]]
    out["categories"] = [{"id": new_id[c["id"]], "name": c["name"]} for c in js["categories"]]
    rng.shuffle(out["categories"])
    return out


def test_two_categories_listed_against_id_order_score_perfect_detections_one(tmp_path):
    """The issue's case: classes in category-id order, a file listing [dog (id 2), cat (id 1)]."""
    box = np.array([[10.0, 10.0, 60.0, 60.0], [100.0, 100.0, 180.0, 160.0]])
    js = {
        "images": [{"id": 1, "width": 200, "height": 200}],
        "annotations": [
            {"id": 1, "image_id": 1, "bbox": [10, 10, 50, 50], "category_id": 1, "area": 2500, "iscrowd": 0},
            {"id": 2, "image_id": 1, "bbox": [100, 100, 80, 60], "category_id": 2, "area": 4800, "iscrowd": 0},
        ],
        "categories": [{"id": 2, "name": "dog"}, {"id": 1, "name": "cat"}],
    }
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(js))
    prefix = str(tmp_path / "out")
    metric = COCODetection(
        ann_file=str(path), dataset_meta={"classes": ("cat", "dog")}, print_results=False, outfile_prefix=prefix
    )
    metric.add_predictions([{"img_id": 1, "bboxes": box, "scores": np.array([0.9, 0.8]), "labels": np.array([0, 1])}])
    got = metric.compute()
    assert got["bbox_mAP"] == pytest.approx(1.0, abs=1e-12) and got["bbox_mAP_50"] == pytest.approx(1.0, abs=1e-12), got
    written = json.loads((tmp_path / "out.bbox.json").read_text())
    assert [d["category_id"] for d in written] == [1, 2]  # cat is id 1, dog id 2


@pytest.mark.parametrize("seed", [0, 1])
def test_shuffled_renumbered_categories_equal_cocoeval_by_name(tmp_path, seed):
    preds, gts = detections(40, C, seed=20 + seed)
    js = _renumbered(coco_json(gts, CLASSES), seed)
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(js))
    metric = COCODetection(ann_file=str(path), dataset_meta={"classes": CLASSES}, print_results=False)
    metric.add_predictions(preds)
    got = metric.compute()
    # pycocotools as its users feed it: each detection's category_id is the id of its class's name -- the
    # reference gets the file with its categories listed in class order, so that its label -> id is by name
    by_name = {c["name"]: c for c in js["categories"]}
    ordered = dict(js, categories=[by_name[name] for name in CLASSES])
    ev = cocoeval(ordered, preds, CLASSES, "bbox")
    assert np.abs(np.array([got[f"bbox_{k}"] for k in ITEMS]) - ev.stats[:6]).max() <= TOL, (got, ev.stats)


@pytest.mark.parametrize("wrong", ["Cls1", "cls9"])
def test_a_class_name_the_file_lacks_is_refused_naming_it(tmp_path, wrong):
    preds, gts = detections(4, C, seed=3)
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(coco_json(gts, CLASSES)))
    classes = list(CLASSES)
    classes[1] = wrong
    metric = COCODetection(ann_file=str(path), dataset_meta={"classes": classes}, print_results=False)
    with pytest.raises(MetricArgumentError, match=rf"classes'\]\[1\] = '{wrong}' is not a category name"):
        metric.add_predictions(preds)


# -- a rank that added no image ----------------------------------------------------------------------------------------


def _few_images_worker(backend: Any, n: int, ann: Optional[str], metric: str) -> Dict[str, Any]:
    preds, gts = detections(n, C, seed=5, masks=metric == "segm")
    m = COCODetection(
        ann_file=ann, metric=metric, dataset_meta={"classes": CLASSES}, print_results=False, dist_backend=backend
    )
    mine = list(range(backend.rank, n, backend.world_size))
    if mine:
        m.add([preds[i] for i in mine], [gts[i] for i in mine] if ann is None else [{}] * len(mine))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no size=: the ShardingWarning
        return m.compute()  # type: ignore[no-any-return]


@pytest.mark.parametrize("metric", ["bbox", "segm", "proposal"])
@pytest.mark.parametrize("with_ann", [False, True])
def test_a_rank_that_added_no_image_gives_the_one_process_answer(tmp_path, metric, with_ann):
    n, ws = 2, 3
    preds, gts = detections(n, C, seed=5, masks=metric == "segm")
    ann = None
    if with_ann:
        ann = str(tmp_path / "ann.json")
        with open(ann, "w") as f:
            json.dump(coco_json(gts, CLASSES), f)
    one = COCODetection(ann_file=ann, metric=metric, dataset_meta={"classes": CLASSES}, print_results=False)
    one.add(preds, gts if ann is None else [{}] * n)
    want = one.compute()
    out = run_ranks(_few_images_worker, ws, n, ann, metric, timeout=120)
    for rank in range(ws):
        status, got = out[rank]
        assert status == "ok", got
        assert got == want, (rank, got, want)
