"""OIDMeanAP against a reference written from the Open Images challenge rules (class hierarchy, group-of boxes,
image-level labels), MMEval 0.2.1's documented numbers, get_relation_matrix, and over 2 and 3 ranks."""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
from metric_helpers import assert_all_rejected, assert_ranks_match, compute_sharded
from test_metric_voc_map import _add

from mmeval.core.errors import MetricArgumentError
from mmeval.metrics.oid_map import OIDMeanAP, get_relation_matrix

# 0 animal (1 dog, 2 cat), 3 vehicle (4 car (5 toy car))
NUM_CLASSES = 6
PARENTS = {1: [0], 2: [0], 4: [3], 5: [4, 3]}
RELATION = np.eye(NUM_CLASSES)
for _child, _parents in PARENTS.items():
    RELATION[_child, _parents] = 1


def oid_detections(n: int = 80, seed: int = 0) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Open-Images-like synthetic data on 300x300 images: 0-5 objects of leaf or inner classes, about 1 in 4 a
    group-of box (a crowd, larger) that the detector answers with a few boxes inside it (and sometimes one for the
    whole group); image-level labels verify a few more classes (present or absent). The detector jitters, misses,
    duplicates, confuses classes (some of them not annotated in the image: to be filtered) and adds background
    boxes. Scores are continuous (no ties)."""
    rng = np.random.default_rng(seed)
    preds, gts = [], []
    for _ in range(n):
        m = 0 if rng.random() < 1 / 8 else int(rng.integers(1, 6))
        instances, pb, ps, pl = [], [], [], []
        for _ in range(m):
            group = bool(rng.random() < 0.25)
            size = rng.uniform(80, 160) if group else rng.choice([20.0, 50.0, 110.0]) * rng.uniform(0.7, 1.3)
            x, y = rng.uniform(0, 300 - size, 2)
            box = np.array([x, y, x + size, y + size * rng.uniform(0.6, 1.0)])
            label = int(rng.choice([1, 2, 4, 5, 0, 3], p=[0.25, 0.2, 0.25, 0.1, 0.1, 0.1]))
            instances.append({"bbox": box.tolist(), "bbox_label": label, "is_group_of": group})
            found = []
            if group:
                for _ in range(int(rng.integers(0, 4))):
                    s = rng.uniform(10, 30)
                    u, v = rng.uniform(box[:2], box[2:] - s * 0.8)
                    found.append(np.array([u, v, u + s, v + s]))
                if rng.random() < 0.3:
                    found.append(box + rng.normal(0, 4, 4))
            else:
                for copy in range(1 + int(rng.random() < 0.15)):
                    if copy == 0 and rng.random() < 0.15:
                        continue
                    found.append(box + rng.normal(0, 0.08 * size + 1.0, 4))
            for k, b in enumerate(found):
                pb.append(b)
                ps.append(rng.uniform(0.5, 1.0) if k == 0 else rng.uniform(0.3, 0.9))
                pl.append(label if rng.random() < 0.85 else int(rng.integers(0, NUM_CLASSES)))
        for _ in range(int(rng.integers(0, 4))):
            s = rng.uniform(10, 100)
            x, y = rng.uniform(0, 300 - s, 2)
            pb.append(np.array([x, y, x + s, y + s * rng.uniform(0.5, 1.5)]))
            ps.append(rng.uniform(0.05, 0.7))
            pl.append(int(rng.integers(0, NUM_CLASSES)))
        preds.append(
            {
                "bboxes": np.array(pb, dtype=np.float64).reshape(-1, 4),
                "scores": np.array(ps),
                "labels": np.array(pl, dtype=np.int64),
            }
        )
        image_labels = rng.choice(NUM_CLASSES, int(rng.integers(0, 3)), replace=False)
        gts.append({"instances": instances, "image_level_labels": image_labels})
    return preds, gts


# -- the reference -------------------------------------------------------------------------------------


def ref_area(b):
    return (b[2] - b[0]) * (b[3] - b[1])


def ref_inter(a, b):
    iw, ih = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
    return iw * ih if iw > 0 and ih > 0 else 0.0


def ref_iou(a, b):
    inter = ref_inter(a, b)
    return inter / max(ref_area(a) + ref_area(b) - inter, 1e-6)


def ref_iof(det, group_box):
    return ref_inter(det, group_box) / max(ref_area(det), 1e-6)


def expand_image(pred, gt, relation, get_super, filter_labels):
    """The challenge's expansion of one image: ground truths and detections repeated for the ancestor classes,
    detections of classes the image is not annotated with dropped."""
    ancestors = {c: [a for a in range(len(relation)) if relation[c][a] and a != c] for c in range(len(relation))}
    objects = [(np.asarray(i["bbox"], dtype=float), i["bbox_label"], i["is_group_of"]) for i in gt["instances"]]
    if get_super:
        objects += [(b, a, g) for b, lab, g in list(objects) for a in ancestors[lab]]
    annotated = {lab for _, lab, _ in objects} | {int(c) for c in gt.get("image_level_labels", [])}
    dets = []
    for b, s, lab in zip(pred["bboxes"], pred["scores"], pred["labels"]):
        if lab in annotated or not filter_labels:
            dets.append((b, s, int(lab)))
        if get_super:
            dets += [(b, s, a) for a in ancestors[int(lab)] if a in annotated]
    return objects, dets


def ref_image_entries(dets, objects, cls, iou_thr, iof_thr, use_group):
    """(score, tp, fp) of one image and class as MMEval lists them: the detections not taken by a group-of box
    (VOC-matched to the ordinary boxes), then one entry per group-of box: a true positive at the score of the
    best detection it took, or a false positive of score 0 if it took none."""
    mine = sorted([(s, b) for b, s, lab in dets if lab == cls], key=lambda d: -d[0])
    ordinary = [b for b, lab, g in objects if lab == cls and not (g and use_group)]
    groups = [b for b, lab, g in objects if lab == cls and g and use_group]
    taken = [False] * len(ordinary)
    flags = []
    for s, b in mine:
        ious = [ref_iou(b, o) for o in ordinary]
        j = int(np.argmax(ious)) if ious else -1
        if ious and ious[j] >= iou_thr:
            flags.append((s, 0 if taken[j] else 1, 1 if taken[j] else 0))
            taken[j] = True
        else:
            flags.append((s, 0, 1))
    best_of_group: Dict[int, float] = {}
    entries = []
    for (s, b), (_, tp, fp) in zip(mine, flags):
        if not tp and groups:
            iofs = [ref_iof(b, g) for g in groups]
            j = int(np.argmax(iofs))
            if iofs[j] >= iof_thr:
                best_of_group[j] = max(best_of_group.get(j, -math.inf), s)
                continue
        entries.append((s, tp, fp))
    entries += [(best_of_group[j], 1, 0) if j in best_of_group else (0.0, 0, 1) for j in range(len(groups))]
    return entries, sum(1 for _, lab, _ in objects if lab == cls)


def ref_ap(entries, npos):
    """VOC2010+ AP: the area under the precision envelope."""
    entries = sorted(entries, key=lambda e: -e[0])
    ctp = np.cumsum([e[1] for e in entries])
    cfp = np.cumsum([e[2] for e in entries])
    rec = ctp / npos
    prec = ctp / np.maximum(ctp + cfp, np.finfo(np.float32).eps)
    mrec, mpre = [0.0, *rec, 1.0], [0.0, *prec, 0.0]
    for i in range(len(mpre) - 2, -1, -1):
        mpre[i] = max(mpre[i], mpre[i + 1])
    return sum((mrec[i + 1] - mrec[i]) * mpre[i + 1] for i in range(len(mrec) - 1) if mrec[i + 1] != mrec[i])


def reference(preds, gts, iou_thrs=(0.5,), iof_thrs=(0.5,), use_group=True, get_super=True, filter_labels=True):
    images = [expand_image(p, g, RELATION.tolist(), get_super, filter_labels) for p, g in zip(preds, gts)]
    means = []
    for iou_thr, iof_thr in zip(iou_thrs, iof_thrs):
        aps = []
        for cls in range(NUM_CLASSES):
            entries, npos = [], 0
            for objects, dets in images:
                e, k = ref_image_entries(dets, objects, cls, iou_thr, iof_thr, use_group)
                entries += e
                npos += k
            if npos:
                aps.append(ref_ap(entries, npos) if entries else 0.0)
        means.append(sum(aps) / len(aps))
    out = {f"AP{round(t * 100)}": m for t, m in zip(iou_thrs, means)}
    out["mAP"] = sum(means) / len(means)
    return out


# -- single process -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"iou_thrs": [0.5, 0.75], "iof_thrs": [0.5, 0.7]},
        {"use_group_of": False},
        {"get_supercategory": False},
        {"filter_labels": False},
    ],
)
def test_matches_open_images_reference(kwargs):
    preds, gts = oid_detections()
    metric = OIDMeanAP(num_classes=NUM_CLASSES, class_relation_matrix=RELATION, **kwargs)
    for s in range(0, len(preds), 16):
        metric.add(preds[s : s + 16], gts[s : s + 16])
    got = metric.compute()
    iou = kwargs.get("iou_thrs", [0.5])
    want = reference(
        preds,
        gts,
        iou,
        kwargs.get("iof_thrs", [0.5] * len(iou)),
        kwargs.get("use_group_of", True),
        kwargs.get("get_supercategory", True),
        kwargs.get("filter_labels", True),
    )
    assert list(got) == list(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    assert 0.2 < got["mAP"] < 0.95


def test_mmeval_documented_case():
    pred = {
        "bboxes": np.array([[27, 38, 173, 67], [46, 185, 227, 248], [153, 147, 250, 164], [0, 0, 0, 0]]),
        "scores": np.array([0.17, 0.20, 0.48, 0.50]),
        "labels": np.array([5, 6, 7, 8]),
    }
    gt = {
        "instances": [
            {"bbox": [27, 38, 173, 67], "bbox_label": 5, "is_group_of": False},
            {"bbox": [120, 185, 227, 248], "bbox_label": 6, "is_group_of": False},
            {"bbox": [153, 100, 250, 164], "bbox_label": 8, "is_group_of": True},
            {"bbox": [1, 1, 2, 2], "bbox_label": 8, "is_group_of": True},
        ],
        "image_level_labels": np.empty((0,)),
    }
    got = OIDMeanAP(num_classes=10, class_relation_matrix=np.eye(10))([pred], [gt])
    assert list(got) == ["AP50", "mAP"]
    assert got["mAP"] == pytest.approx(2 / 3, abs=1e-7)


def test_group_of_box_counts_once_at_its_best_detection():
    crowd = {"instances": [{"bbox": [0, 0, 100, 100], "bbox_label": 0, "is_group_of": True}]}
    inside = [[10, 10, 20, 20], [30, 30, 40, 40], [50, 50, 60, 60]]
    for fp_score, ap in ((0.85, 1.0), (0.95, 0.5)):
        pred = {
            "bboxes": np.array(inside + [[200, 200, 210, 210]], dtype=float),
            "scores": np.array([0.9, 0.8, 0.7, fp_score]),
            "labels": np.zeros(4, dtype=int),
        }
        metric = OIDMeanAP(num_classes=1, class_relation_matrix=np.eye(1), classwise=True)
        got = metric([pred], [crowd])
        assert got["mAP"] == ap
        assert got["classwise_result"][0]["num_gts"] == [[1]]
    # without group-of matching the crowd is one ordinary object none of the small boxes overlaps enough
    pred = {"bboxes": np.array(inside, dtype=float), "scores": np.array([0.9, 0.8, 0.7]), "labels": np.zeros(3, int)}
    assert OIDMeanAP(num_classes=1, class_relation_matrix=np.eye(1), use_group_of=False)([pred], [crowd])["mAP"] == 0


def test_scale_ranges_and_group_of_boxes():
    # a crowd (scale 100) and a small object (scale 10); range (0, 50) holds only the small one
    gt = {
        "instances": [
            {"bbox": [0, 0, 100, 100], "bbox_label": 0, "is_group_of": True},
            {"bbox": [200, 200, 210, 210], "bbox_label": 0, "is_group_of": False},
        ]
    }
    pred = {
        "bboxes": np.array([[10.0, 10, 20, 20], [200, 200, 210, 210]]),
        "scores": np.array([0.9, 0.8]),
        "labels": np.array([0, 0]),
    }
    got = OIDMeanAP(num_classes=1, class_relation_matrix=np.eye(1), scale_ranges=[(0, 50)])([pred], [gt])
    # every scale: the crowd takes the small box inside it (a true positive), the other is found: AP 1;
    # in (0, 50) the crowd is out of range and takes nothing, so the box inside it, in range, is a false positive
    # ranked first: precision 1/2 at the only recall step
    assert got == {"AP50": 1.0, "mAP@(0, 50)": 0.5, "mAP": 1.0}


def test_hierarchy_and_image_level_labels():
    box = [10.0, 10.0, 50.0, 50.0]
    gt = {"instances": [{"bbox": box, "bbox_label": 5, "is_group_of": False}], "image_level_labels": [1]}
    # a toy car found as a toy car is also a car and a vehicle; a dog (verified absent) is a false positive,
    # a cat (not annotated) is dropped
    pred = {
        "bboxes": np.array([box, [60, 60, 90, 90], [100, 100, 120, 120]]),
        "scores": np.array([0.9, 0.8, 0.7]),
        "labels": np.array([5, 1, 2]),
    }
    got = OIDMeanAP(num_classes=NUM_CLASSES, class_relation_matrix=RELATION, classwise=True)([pred], [gt])
    per_class = got["classwise_result"]
    assert [c["num_gts"][0][0] for c in per_class] == [0, 0, 0, 1, 1, 1]
    assert [c["num_dets"] for c in per_class] == [0, 1, 0, 1, 1, 1]
    assert got["mAP"] == 1.0
    flat = OIDMeanAP(num_classes=NUM_CLASSES, class_relation_matrix=RELATION, get_supercategory=False, classwise=True)(
        [pred], [gt]
    )
    assert [c["num_gts"][0][0] for c in flat["classwise_result"]] == [0, 0, 0, 0, 0, 1]


def test_relation_matrix_from_dataset_meta():
    box = [10.0, 10.0, 50.0, 50.0]
    pred = {"bboxes": np.array([box]), "scores": np.array([0.9]), "labels": np.array([4])}
    gt = {"instances": [{"bbox": box, "bbox_label": 4, "is_group_of": False}]}
    meta = {"classes": tuple("abcdef"), "relation_matrix": RELATION}
    assert OIDMeanAP(dataset_meta=meta)([pred], [gt]) == {"AP50": 1.0, "mAP": 1.0}
    old = OIDMeanAP(dataset_meta={"classes": tuple("abcdef"), "RELATION_MATRIX": RELATION})
    with pytest.warns(DeprecationWarning, match="relation_matrix"):
        assert old([pred], [gt])["mAP"] == 1.0
    with pytest.raises(RuntimeError, match="class_relation_matrix"):
        _ = OIDMeanAP(num_classes=6).class_relation_matrix
    with pytest.raises(RuntimeError, match="class_relation_matrix"):
        OIDMeanAP(num_classes=6).add([pred], [gt])


def test_get_relation_matrix(tmp_path):
    names = ["/m/animal", "/m/dog", "/m/cat", "/m/vehicle", "/m/car", "/m/toycar"]
    (tmp_path / "labels.csv").write_text("".join(f"{n},{n[3:].title()}\n" for n in names))
    tree = {
        "LabelName": "/m/entity",
        "Subcategory": [
            {"LabelName": "/m/animal", "Subcategory": [{"LabelName": "/m/dog"}, {"LabelName": "/m/cat"}]},
            {
                "LabelName": "/m/vehicle",
                "Subcategory": [{"LabelName": "/m/car", "Subcategory": [{"LabelName": "/m/toycar"}]}],
            },
            {"LabelName": "/m/animal", "Subcategory": [{"LabelName": "/m/toycar"}]},  # a second parent
            {"Part": "no LabelName: skipped"},
        ],
    }
    (tmp_path / "tree.json").write_text(json.dumps(tree))
    want = RELATION.copy()
    want[5, 0] = 1
    got = get_relation_matrix(str(tmp_path / "tree.json"), str(tmp_path / "labels.csv"))
    assert got.tolist() == want.tolist()
    # the same files as OIDMeanAP's arguments: the matrix, and their content in the question
    files = {"hierarchy_file": str(tmp_path / "tree.json"), "label_file": str(tmp_path / "labels.csv")}
    metric = OIDMeanAP(num_classes=NUM_CLASSES, **files)
    assert metric.class_relation_matrix.tolist() == want.tolist()
    assert metric._question(None)["hierarchy_file (content)"].startswith("sha256:")
    with pytest.raises(MetricArgumentError, match="hierarchy_file= and label_file= together"):
        OIDMeanAP(num_classes=NUM_CLASSES, hierarchy_file=files["hierarchy_file"])
    with pytest.raises(MetricArgumentError, match="class_relation_matrix= alone"):
        OIDMeanAP(num_classes=NUM_CLASSES, class_relation_matrix=RELATION, **files)
    with pytest.raises(MetricArgumentError, match=r"label_file=.*not a readable file"):
        OIDMeanAP(num_classes=NUM_CLASSES, hierarchy_file=files["hierarchy_file"], label_file="nowhere.csv")
    tree["Subcategory"].append({"LabelName": "/m/unknown"})
    (tmp_path / "tree.json").write_text(json.dumps(tree))
    with pytest.raises(MetricArgumentError, match="/m/unknown"):
        get_relation_matrix(str(tmp_path / "tree.json"), str(tmp_path / "labels.csv"))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"iof_thrs": [0.5, 0.6]}, "one threshold per IoU threshold"),
        ({"iof_thrs": 0}, r"iof_thrs must be a number in \(0, 1\]"),
        ({"iof_thrs": []}, "iof_thrs must be"),
        ({"use_group_of": "yes"}, "use_group_of must be True or False"),
        ({"filter_labels": None}, "filter_labels must be True or False"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(MetricArgumentError, match=match):
        OIDMeanAP(**kwargs)
    with pytest.raises(AssertionError):  # what MMEval 0.2.1 users catch
        OIDMeanAP(**kwargs)


def test_bad_inputs_name_the_field_and_keep_nothing():
    metric = OIDMeanAP(num_classes=NUM_CLASSES, class_relation_matrix=RELATION)
    box = [0.0, 0.0, 5.0, 5.0]
    pred = {"bboxes": np.array([box]), "scores": np.array([0.5]), "labels": np.array([0])}
    gt = {"instances": [{"bbox": box, "bbox_label": 1, "is_group_of": False}]}
    cases = [
        (([pred], []), "different lengths"),
        ((pred, gt), "must be sequences of dicts"),
        (([pred], [{"bboxes": [box]}]), r"groundtruths\[0\] has no 'instances'"),
        (([pred], [{"instances": [{"bbox": box}]}]), r"groundtruths\[0\]\['instances'\]\[0\] must be a dict with"),
        (([pred], [{"instances": [{"bbox": box[:3], "bbox_label": 0}]}]), r"\['bbox'\] must be 4 finite numbers"),
        (([pred], [{"instances": [{"bbox": box, "bbox_label": 6}]}]), r"bbox_label'\]: got label 6"),
        (([pred], [{**gt, "image_level_labels": [-1]}]), r"\['image_level_labels'\]: got label -1"),
        (([{**pred, "labels": np.array([9])}], [gt]), r"predictions\[0\]\['labels'\]: got label 9"),
        (([{"bboxes": np.array([box]), "labels": [0]}], [gt]), r"predictions\[0\] has no \['scores'\]"),
    ]
    assert_all_rejected(metric, cases)
    too_small = OIDMeanAP(num_classes=7, class_relation_matrix=RELATION)
    with pytest.raises(
        MetricArgumentError,
        match=r"class_relation_matrix must be square with at least num_classes = 7"
        r".*got \(6, 6\)",
    ):
        too_small.add([pred], [gt])
    not_square = OIDMeanAP(num_classes=5, class_relation_matrix=RELATION[:, :5])
    with pytest.raises(MetricArgumentError, match=r"must be square.*got \(6, 5\)"):
        not_square.add([pred], [gt])


def test_a_larger_hierarchy_evaluates_its_first_classes_as_mmeval_does() -> None:
    # MMEval 0.2.1's own test pairs num_classes=10 with the 601-class matrix: classes past num_classes are not
    # evaluated, so the result equals that of the hierarchy cut to the first num_classes classes
    rng = np.random.default_rng(3)
    big = np.eye(9, dtype=bool)
    big[:6, :6] |= RELATION.astype(bool)
    big[2, 7] = big[4, 8] = True  # ancestors past num_classes = 6
    dets, gts = [], []
    for _ in range(12):
        labels = rng.integers(0, NUM_CLASSES, 4)
        boxes = np.sort(rng.random((4, 4)) * 50, axis=1)[:, [0, 2, 1, 3]]
        boxes[:, 2:] += 5
        dets.append({"bboxes": boxes + rng.random((4, 4)), "scores": rng.random(4), "labels": labels})
        gts.append(
            {
                "instances": [
                    {"bbox": b.tolist(), "bbox_label": int(lab), "is_group_of": False} for b, lab in zip(boxes, labels)
                ],
                "image_level_labels": labels.tolist(),
            }
        )
    want = OIDMeanAP(num_classes=NUM_CLASSES, class_relation_matrix=RELATION)(dets, gts)
    assert OIDMeanAP(num_classes=NUM_CLASSES, class_relation_matrix=big)(dets, gts) == want


# -- distributed ---------------------------------------------------------------------------------------------

KW = {
    "num_classes": NUM_CLASSES,
    "class_relation_matrix": RELATION,
    "iou_thrs": [0.5, 0.75],
    "iof_thrs": [0.5, 0.7],
    "classwise": True,
}


def _make(**kwargs):
    return OIDMeanAP(**KW, **kwargs)


def shard_worker(backend, n):
    preds, gts = oid_detections(n)
    return compute_sharded(backend, n, _make, lambda m, idx: _add(m, preds, gts, idx))


@pytest.mark.parametrize("ws", [2, 3])
def test_distributed_equals_single_process_exactly(ws):
    n = 37
    preds, gts = oid_detections(n)
    single = OIDMeanAP(**KW)
    _add(single, preds, gts, list(range(n)))
    assert_ranks_match(shard_worker, ws, n, single.compute())


def meta_worker(backend, n):
    preds, gts = oid_detections(n)
    metric = OIDMeanAP(num_classes=NUM_CLASSES, dataset_meta={"relation_matrix": RELATION}, dist_backend=backend)
    if backend.rank == 0:  # the other ranks add nothing: they never read dataset_meta's matrix in add()
        _add(metric, preds, gts, list(range(n)))
    return metric.compute()


def test_ranks_that_added_nothing_agree_on_the_hierarchy():
    from hub_backend import run_ranks

    n = 9
    preds, gts = oid_detections(n)
    single = OIDMeanAP(num_classes=NUM_CLASSES, class_relation_matrix=RELATION)
    _add(single, preds, gts, list(range(n)))
    want = single.compute()
    out = run_ranks(meta_worker, 2, n, timeout=120)
    assert [out[r] for r in range(2)] == [("ok", want)] * 2, out
