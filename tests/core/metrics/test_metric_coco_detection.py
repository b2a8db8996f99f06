"""COCODetection against pycocotools' COCOeval on the same data, single-process and over 2 and 3 ranks."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Dict, List

import numpy as np
import pytest
from coco_reference import coco_json, cocoeval, detections
from hub_backend import run_ranks
from metric_helpers import compute_sharded, same

from mmeval.core.errors import MetricArgumentError, MissingExtraError
from mmeval.metrics.coco_detection import COCODetection

pytest.importorskip("pycocotools")

C = 5
CLASSES = [f"cls{i}" for i in range(C)]
META = {"classes": CLASSES}
DET_ITEMS = ["mAP", "mAP_50", "mAP_75", "mAP_s", "mAP_m", "mAP_l"]
TOL = 1e-12


def _stats(result: Dict[str, Any], metric: str, nums=(1, 10, 100)) -> np.ndarray:
    if metric == "proposal":
        return np.array([result[k] for k in [f"AR@{n}" for n in nums] + [f"AR_{s}@{nums[2]}" for s in "sml"]])
    return np.array([result[f"{metric}_{k}"] for k in DET_ITEMS])


def _want(ev: Any, metric: str) -> np.ndarray:
    return ev.stats[6:] if metric == "proposal" else ev.stats[:6]


def _run(preds, gts, batch: int = 9, **kwargs: Any) -> Dict[str, Any]:
    metric = COCODetection(dataset_meta=META, print_results=False, **kwargs)
    for s in range(0, len(preds), batch):
        metric.add(preds[s : s + batch], gts[s : s + batch])
    return metric.compute()


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"iou_thrs": [0.3, 0.5, 0.75, 0.9]},
        {"proposal_nums": (1, 2, 3)},
        {"proposal_nums": (3, 1, 100)},
    ],
    ids=["default", "iou_thrs", "small-maxdets", "unsorted-maxdets"],
)
def test_bbox_and_proposal_equal_cocoeval(kwargs):
    """Crowd regions (30 %), every area range, maxDets cutting detections, empty images, classes without ground
    truth: every stat and each class's AP equal pycocotools'."""
    preds, gts = detections(45, C, seed=3, crowd=0.3)
    got = _run(preds, gts, metric=["bbox", "proposal"], classwise=True, **kwargs)
    nums = kwargs.get("proposal_nums", (1, 10, 100))
    for metric in ("bbox", "proposal"):
        ev = cocoeval(coco_json(gts, CLASSES), preds, CLASSES, metric, kwargs.get("iou_thrs"), nums)
        assert np.abs(_stats(got, metric, nums) - _want(ev, metric)).max() <= TOL, (metric, got, ev.stats)
    ev = cocoeval(coco_json(gts, CLASSES), preds, CLASSES, "bbox", kwargs.get("iou_thrs"), nums)
    for k, name in enumerate(CLASSES):
        p = ev.eval["precision"][:, :, k, 0, -1]
        want = float(np.mean(p[p > -1])) if (p > -1).any() else float("nan")
        value = got[f"bbox_{name}_precision"]
        assert (math.isnan(want) and math.isnan(value)) or abs(value - want) <= TOL
    assert math.isnan(got[f"bbox_{CLASSES[-1]}_precision"])  # the class without ground truth


@pytest.mark.parametrize(
    "group,categories,cells,recall,chunk,slice_",
    [(1, 1, 4, 1, 1, 3), (7, 2, 100, 300, 5, 50), (50, 3, 1 << 16, 1 << 13, 1 << 12, 7)],
)
def test_the_working_sizes_do_not_change_a_number(monkeypatch, group, categories, cells, recall, chunk, slice_):
    """The accumulation's category groups, its row slices, the ranking's and the joining's chunks and the
    matching's slices only bound the memory: any sizes give the very same result (dict equality) as the
    defaults, and pycocotools' stats -- the images added in reverse id order too (ranked and joined again)."""
    from mmeval.metrics import coco_accumulate, coco_detection, coco_parts, coco_ranking

    preds, gts = detections(45, C, seed=3, crowd=0.3)
    want = _run(preds, gts, metric=["bbox", "proposal"], classwise=True)
    monkeypatch.setattr(coco_accumulate, "GROUP_DETECTIONS", group)
    monkeypatch.setattr(coco_accumulate, "GROUP_CATEGORIES", categories)
    monkeypatch.setattr(coco_accumulate, "INTERPOLATE_CELLS", cells)
    monkeypatch.setattr(coco_accumulate, "RECALL_CELLS", recall)
    monkeypatch.setattr(coco_ranking, "RANK_CHUNK", chunk)
    monkeypatch.setattr(coco_parts, "JOIN_DETECTIONS", chunk)
    monkeypatch.setattr(coco_detection, "MATCH_SLICE", slice_)
    monkeypatch.setattr(coco_detection, "SUMMARIZE_EVERY", 2 * slice_)
    reverse = _run(preds[::-1], gts[::-1], metric=["bbox", "proposal"], classwise=True)
    assert reverse == want or all(
        reverse[k] == want[k] or (math.isnan(reverse[k]) and math.isnan(want[k])) for k in want
    )
    got = _run(preds, gts, metric=["bbox", "proposal"], classwise=True)
    assert got == want or all(got[k] == want[k] or (math.isnan(got[k]) and math.isnan(want[k])) for k in want)
    ev = cocoeval(coco_json(gts, CLASSES), preds, CLASSES, "bbox")
    assert np.abs(_stats(got, "bbox") - _want(ev, "bbox")).max() <= TOL


def test_recall_points_are_reached_where_pycocotools_finds_them():
    """The fewest true positives reaching each recall point, for every ground-truth count up to 40,000 (and
    0): the very index pycocotools' search of the recall points in ``tp / npig`` gives."""
    from mmeval.metrics.coco_accumulate import REC_THRS, _fewest_tps

    npig = np.r_[0, np.arange(40_000), 123_457].reshape(-1, 2)
    got = _fewest_tps(npig)
    for k, a in zip(*np.nonzero(npig)):
        n = int(npig[k, a])
        assert np.array_equal(got[k, a], np.searchsorted(np.arange(n + 1) / n, REC_THRS, side="left")), n
    assert not got[npig == 0].any()


@pytest.mark.parametrize("polygons", [False, True], ids=["rle", "polygons"])
def test_segm_equals_cocoeval(polygons):
    # 60 images of seed 0: masks whose areas pycocotools' area() of a list would overflow (uint8)
    preds, gts = (
        detections(24, C, seed=5, masks=True, polygons=True) if polygons else detections(60, C, seed=0, masks=True)
    )
    got = _run(preds, gts, metric=["segm", "bbox"])
    for metric in ("segm", "bbox"):
        ev = cocoeval(coco_json(gts, CLASSES), preds, CLASSES, metric)
        assert np.abs(_stats(got, metric) - _want(ev, metric)).max() <= TOL, (metric, got, ev.stats)


def test_segm_mask_scores_and_box_area():
    preds, gts = detections(16, C, seed=6, masks=True)
    for p in preds:
        p["mask_scores"] = np.round(p["scores"][::-1].copy(), 2)
    got = _run(preds, gts, metric="segm", gt_mask_area=False)
    ev = cocoeval(coco_json(gts, CLASSES, mask_area=False), preds, CLASSES, "segm")
    assert np.abs(_stats(got, "segm") - _want(ev, "segm")).max() <= TOL


def test_add_runs_no_garbage_collection_pass():
    """Each mask becomes a small RLE dict kept until its batch is matched: add() builds thousands of
    containers, and with the collector on they set off passes that walk every object of the process (a
    framework's import leaves ~10^5). add() pauses the collector, restores it, and the result is unchanged."""
    import gc

    preds, gts = detections(60, C, seed=0, masks=True)
    for p in preds:  # ~20 masks an image: more containers than the young generation's threshold
        for key in ("bboxes", "scores", "labels"):
            p[key] = np.concatenate([p[key]] * 10)
        p["masks"] = list(p["masks"]) * 10
    passes: List[int] = []

    def count(phase: str, info: Dict[str, Any]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    metric = COCODetection(dataset_meta=META, print_results=False, metric="segm")
    assert gc.isenabled()
    gc.collect()
    gc.callbacks.append(count)
    try:
        metric.add(preds, gts)
    finally:
        gc.callbacks.remove(count)
    assert gc.isenabled()
    # no pass at all; where the interpreter has frozen objects of its own (Python 3.12), the pause cannot
    # move the new ones to the old generation, and re-enabling sets off one young pass over them
    assert all(g == 0 for g in passes) and len(passes) <= (1 if gc.get_freeze_count() else 0), passes
    ev = cocoeval(coco_json(gts, CLASSES), preds, CLASSES, "segm")
    assert np.abs(_stats(metric.compute(), "segm") - _want(ev, "segm")).max() <= TOL


def test_ann_file_and_images_never_added(tmp_path):
    """Ground truths from a COCO json (annotation order, float areas, an id 0): every image of the file counts,
    the ones never added too (their objects are misses), as in pycocotools."""
    preds, gts = detections(30, C, seed=7)
    js = coco_json(gts, CLASSES)
    rng = np.random.default_rng(0)
    rng.shuffle(js["annotations"])
    js["annotations"][0]["id"] = 0  # pycocotools: a match with annotation id 0 counts as no match
    for ann in js["annotations"]:
        ann["area"] *= 0.9
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(js))
    added = preds[:24]
    metric = COCODetection(ann_file=str(path), metric=["bbox", "proposal"], dataset_meta=META, print_results=False)
    metric.add_predictions(added[:10])
    metric.add(added[10:], [{}] * 14)
    got = metric.compute()
    for m in ("bbox", "proposal"):
        ev = cocoeval(js, added, CLASSES, m)
        assert np.abs(_stats(got, m) - _want(ev, m)).max() <= TOL, (m, got, ev.stats)


def test_images_without_ids_are_their_dataset_positions():
    preds, gts = detections(20, C, seed=8)
    for p, g in zip(preds, gts):
        del p["img_id"], g["img_id"]
    got = _run(preds, gts)
    ev = cocoeval(coco_json(gts, CLASSES), preds, CLASSES, "bbox")
    assert np.abs(_stats(got, "bbox") - _want(ev, "bbox")).max() <= TOL


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_images_sharing_an_img_id_rank_by_what_they_are_not_by_arrival(seed):
    """Pairs of images sharing an img_id, 2-decimal scores (ties): one process fed them shuffled gives the
    in-order answer bit for bit (issue 32 item 5: mAP_75 moved by 0.29 % with the order); unique ids keep
    pycocotools' order (the tests above)."""
    preds, gts = detections(24, C, seed=46)
    for i in range(1, len(preds), 2):  # the second of a pair: the first's detections (every score tied), its own truths
        preds[i] = {**preds[i - 1], "bboxes": preds[i - 1]["bboxes"] + 1.0}
        preds[i]["img_id"] = gts[i]["img_id"] = gts[i - 1]["img_id"]
    want = _run(preds, gts)
    perm = np.random.default_rng(seed).permutation(len(preds))
    got = _run([preds[i] for i in perm], [gts[i] for i in perm])
    assert same(got, want)


def test_float32_scores_and_no_detection_anywhere():
    preds, gts = detections(20, C, seed=9, float32=True)
    got = _run(preds, gts)
    ev = cocoeval(coco_json(gts, CLASSES), preds, CLASSES, "bbox")
    assert np.abs(_stats(got, "bbox") - _want(ev, "bbox")).max() <= TOL
    empty = [{"img_id": g["img_id"], "bboxes": np.zeros((0, 4)), "scores": [], "labels": []} for g in gts]
    assert _run(empty, gts) == {}  # MMEval: the whole dataset's results are empty


def test_metric_items_and_stateless_call():
    preds, gts = detections(12, C, seed=10)
    metric = COCODetection(dataset_meta=META, metric_items=["mAP_50", "mAP_s"], print_results=False)
    metric.add(preds[:3], gts[:3])
    got = metric(preds, gts)
    ev = cocoeval(coco_json(gts, CLASSES), preds, CLASSES, "bbox")
    assert list(got) == ["bbox_mAP_50", "bbox_mAP_s"]
    assert abs(got["bbox_mAP_50"] - ev.stats[1]) <= TOL and abs(got["bbox_mAP_s"] - ev.stats[3]) <= TOL
    assert metric.num_results == 3  # the call left the state alone


def test_result_files(tmp_path):
    preds, gts = detections(6, C, seed=11, masks=True)
    prefix = str(tmp_path / "res")
    got = _run(preds, gts, metric=["bbox", "segm"], outfile_prefix=prefix)
    assert "bbox_mAP" in got
    boxes = json.loads((tmp_path / "res.bbox.json").read_text())
    assert len(boxes) == sum(len(p["labels"]) for p in preds)
    assert (tmp_path / "res.segm.json").exists()
    (tmp_path / "res.bbox.json").unlink()
    assert _run(preds, gts, metric="bbox", format_only=True, outfile_prefix=prefix) == {}
    assert (tmp_path / "res.bbox.json").exists()


def test_bad_arguments():
    for kwargs in (
        {"metric": "xxx"},
        {"metric": []},
        {"iou_thrs": 1},
        {"iou_thrs": [1.5]},
        {"proposal_nums": (1, 2)},
        {"classwise": "yes"},
        {"format_only": True},
        {"metric_items": ["mAP_xl"]},
        {"ann_file": "/nonexistent.json"},
    ):
        with pytest.raises(MetricArgumentError, match="COCODetection"):
            COCODetection(**kwargs)
    with pytest.raises(KeyError):  # MMEval's exception types still catch them
        COCODetection(metric="xxx")
    with pytest.raises(TypeError):
        COCODetection(iou_thrs=1)
    preds, gts = detections(3, C, seed=12)
    metric = COCODetection(dataset_meta=META)
    bad: List[Any] = [
        (preds[0], gts[0]),  # dicts, not sequences
        ([{**preds[0], "bboxes": np.zeros((2, 3))}], gts[:1]),
        ([{**preds[0], "labels": np.full(len(preds[0]["labels"]), C)}], gts[:1]),
        ([{**preds[0], "scores": np.full(len(preds[0]["labels"]), np.nan)}], gts[:1]),
        ([{k: v for k, v in preds[0].items() if k != "bboxes"}], gts[:1]),
        ([{**preds[0], "img_id": 99}], gts[:1]),
        (preds[:2], gts[:1]),
    ]
    for args in bad:
        with pytest.raises(MetricArgumentError):
            metric.add(*args)
    assert metric.num_results == 0
    with pytest.raises(MetricArgumentError, match="classes"):
        COCODetection().add(preds, gts)


def test_missing_pycocotools(monkeypatch):
    preds, gts = detections(4, C, seed=13, masks=True)
    monkeypatch.setitem(sys.modules, "pycocotools", None)
    monkeypatch.setitem(sys.modules, "pycocotools.mask", None)
    bbox_only = [{k: v for k, v in g.items() if k != "masks"} for g in gts]
    assert "bbox_mAP" in _run(preds, bbox_only)  # bbox needs no field library
    with pytest.raises(MissingExtraError, match="coco"):
        _run(preds, gts, metric="segm")


# -- over real ranks ------------------------------------------------------------------------------------------------

N = 41


def _data():
    return detections(N, C, seed=21, masks=True)


def shard_worker(backend, n):
    preds, gts = _data()

    def make(**kw):
        return COCODetection(metric=["bbox", "segm", "proposal"], dataset_meta=META, print_results=False, **kw)

    def add(metric, idx):
        for s in range(0, len(idx), 4):
            chunk = idx[s : s + 4]
            metric.add([preds[i] for i in chunk], [gts[i] for i in chunk])

    out = compute_sharded(backend, n, make, add)
    # indices=: a shuffled order padded by wrapping, plus duplicates; each image counted once
    rng = np.random.default_rng(backend.world_size)
    order = [int(i) for i in rng.permutation(n)] + [0, 5, 5]
    order += order[: -len(order) % backend.world_size]
    metric = make(dist_backend=backend)
    mine = order[backend.rank :: backend.world_size]
    for s in range(0, len(mine), 5):
        chunk = mine[s : s + 5]
        metric.add([preds[i] for i in chunk], [gts[i] for i in chunk], indices=chunk)
    out["indices"] = metric.compute()
    return out


@pytest.mark.parametrize("ws", [2, 3])
def test_ranks_equal_one_process(ws):
    preds, gts = _data()
    want = _run(preds, gts, metric=["bbox", "segm", "proposal"])
    for m in ("bbox", "segm", "proposal"):
        ev = cocoeval(coco_json(gts, CLASSES), preds, CLASSES, m)
        assert np.abs(_stats(want, m) - _want(ev, m)).max() <= TOL
    out = run_ranks(shard_worker, ws, N, timeout=120)
    for rank in range(ws):
        status, value = out[rank]
        assert status == "ok", value
        for scheme in ("padded", "uneven", "cat", "indices"):
            assert value[scheme] == want, (rank, scheme)


def dense_images(n: int, seed: int, per: int = 100, classes: int = C) -> Any:
    """COCO-like density: ``per`` detections and 3-12 objects an image (most detections are background)."""
    rng = np.random.default_rng(seed)
    preds, gts = [], []
    for i in range(n):
        m = int(rng.integers(3, 13))
        xy = rng.uniform(0, 500, (m, 2))
        g = np.concatenate([xy, xy + rng.uniform(8, 150, (m, 2))], 1)
        labels = rng.integers(0, classes - 1, m)
        src = rng.integers(0, m, per)
        d = g[src] + rng.normal(0, 6, (per, 4))
        d[:, 2:] = np.maximum(d[:, 2:], d[:, :2] + 1)
        preds.append(
            {
                "img_id": seed * 10_000 + i,
                "bboxes": d,
                "scores": rng.random(per),
                "labels": np.where(rng.random(per) < 0.7, labels[src], rng.integers(0, classes, per)),
            }
        )
        gts.append({"img_id": seed * 10_000 + i, "bboxes": g, "labels": labels, "ignore_flags": rng.random(m) < 0.05})
    return preds, gts


def _bytes_worker(backend, n):
    import warnings

    from mmeval.core.hooks import enable_comm_stats

    stats = enable_comm_stats(print_at_exit=False)
    out = {}
    for dtype in (np.float64, np.float32):
        for images in (n, 2 * n):
            preds, gts = dense_images(images, seed=backend.rank + 1)
            metric = COCODetection(dataset_meta=META, print_results=False, dist_backend=backend)
            metric.add([{**p, "scores": p["scores"].astype(dtype)} for p in preds], gts)
            metric._summarize_pending()
            stats.reset()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                metric.compute()
            out[dtype.__name__, images] = (
                sum(r["bytes_sent"] for r in stats.rows()),
                sum(len(p["labels"]) for p in preds),
            )
    return out


def test_bytes_sent_per_detection():
    """Each rank accumulates its own share of the categories (k % 2 == rank), so a rank sends the other its
    images' summaries of the other's categories only, never a box: per detection 8 (a state word) + 1 (the
    category) + 8 or 4 (the score: float32 values take 4) bytes, for about half the detections, plus ~21 bytes
    an image (its place, id and count) and the ground-truth counts per category. Measured as the bytes added
    by n more images of COCO-like density (the collectives' fixed slots cancel), on both ranks."""
    out = run_ranks(_bytes_worker, 2, 20, timeout=120)
    for rank in range(2):
        status, got = out[rank]
        assert status == "ok", got
        for dtype, limit in (("float64", 11.0), ("float32", 9.0)):
            (b1, d1), (b2, d2) = got[dtype, 20], got[dtype, 40]
            per_det = (b2 - b1) / (d2 - d1)
            print(f"rank {rank}, {dtype} scores: {per_det:.2f} bytes sent per detection")
            assert per_det <= limit, (rank, dtype, per_det)


def _live_memory_worker(backend, n, classes):
    import tracemalloc
    import warnings

    preds, gts = dense_images(n, seed=backend.rank + 1, per=200, classes=classes)
    meta = {"classes": [f"c{i}" for i in range(classes)]}
    metric = COCODetection(dataset_meta=meta, print_results=False, dist_backend=backend)
    metric.add(preds, gts)
    metric._summarize_pending()
    mine = sum(len(r[0] if isinstance(r, tuple) else r) for r in metric._local_results())
    del preds, gts
    # numpy >= 2 imports numpy.ma on the first np.unique() (~1 MB of module objects): a one-time import, not
    # compute()'s working memory; the pure matching calls np.unique() in add(), the native one does not
    import numpy.ma  # noqa: F401

    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = metric.compute()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return mine, peak, result["bbox_mAP"]


@pytest.mark.parametrize("classes", [5, 80, 1203])
def test_live_memory_in_compute_follows_the_summaries(classes):
    """compute() at world size 2 holds, at its peak, at most twice the world's packed summaries beyond what
    the rank held before (Python's and numpy's allocations, tracemalloc; the hub transport's buffers included):
    its own summaries split by category owner, the part it receives, its categories' ranking and the
    accumulation's working rows -- never the world's boxes, nor arrays of (thresholds x categories x areas x
    maxDets x recall points)."""
    out = run_ranks(_live_memory_worker, 2, 200, classes, timeout=180)
    got = [value for status, value in (out[0], out[1]) if status == "ok"]
    assert len(got) == 2, out
    world = sum(mine for mine, _, _ in got)
    assert got[0][2] == got[1][2]
    for rank, (_, peak, _) in enumerate(got):
        print(f"rank {rank}: traced peak in compute() {peak / 2**20:.2f} MB, world's summaries {world / 2**20:.2f} MB")
        assert peak <= 2 * world, (rank, peak, world)


def _long_tail_data(n: int = 60, classes: int = 40) -> Any:
    """Detections whose classes follow a long tail (class k weighs 1/(k+1)**0.9, as in the LVIS-like benchmark)."""
    rng = np.random.default_rng(5)
    weights = 1 / np.arange(1, classes + 1) ** 0.9
    preds, gts = [], []
    for i in range(n):
        m, per = int(rng.integers(2, 8)), 30
        xy = rng.uniform(0, 300, (m, 2))
        g = np.concatenate([xy, xy + rng.uniform(10, 120, (m, 2))], 1)
        g_labels = rng.choice(classes, m, p=weights / weights.sum())
        src = rng.integers(0, m, per)
        d = g[src] + rng.normal(0, 5, (per, 4))
        d[:, 2:] = np.maximum(d[:, 2:], d[:, :2] + 1)
        labels = np.where(rng.random(per) < 0.8, g_labels[src], rng.choice(classes, per, p=weights / weights.sum()))
        preds.append({"img_id": i, "bboxes": d, "scores": rng.random(per), "labels": labels})
        gts.append({"img_id": i, "width": 500, "height": 500, "bboxes": g, "labels": g_labels})
    return preds, gts


def _long_tail_worker(backend):
    preds, gts = _long_tail_data()
    names = [f"c{k}" for k in range(40)]
    metric = COCODetection(dataset_meta={"classes": names}, print_results=False, dist_backend=backend)
    accumulated = []
    part = metric._compute_part

    def spy(parts):
        out = part(parts)
        accumulated.append([int(k) for k in out["cats"]])
        return out

    metric._compute_part = spy
    mine = list(range(len(preds)))[backend.rank :: backend.world_size]
    metric.add([preds[i] for i in mine], [gts[i] for i in mine])
    return metric.compute(size=len(preds)), accumulated


def test_long_tailed_classes_are_dealt_by_their_detections():
    """The ranks accumulate about the same number of detections even when a few classes hold most of them
    (categories dealt by the world's detections per category, not k % world_size), with the same result."""
    preds, gts = _long_tail_data()
    names = [f"c{k}" for k in range(40)]
    want = COCODetection(dataset_meta={"classes": names}, print_results=False)
    want.add(preds, gts)
    want_result = want.compute()
    ev = cocoeval(coco_json(gts, names), preds, names, "bbox")
    assert np.abs(np.array([want_result[f"bbox_{k}"] for k in DET_ITEMS]) - ev.stats[:6]).max() <= TOL
    per_class = np.bincount(np.concatenate([p["labels"] for p in preds]), minlength=40)
    ws = 3
    out = run_ranks(_long_tail_worker, ws, timeout=120)
    shares, dealt = [], []
    for rank in range(ws):
        status, value = out[rank]
        assert status == "ok", value
        result, accumulated = value
        assert result == want_result, rank
        assert len(accumulated) == 1
        dealt += accumulated[0]
        shares.append(int(per_class[accumulated[0]].sum()))
    assert sorted(dealt) == list(range(40))  # every class accumulated once
    modulo = [int(per_class[r::ws].sum()) for r in range(ws)]
    assert max(shares) / np.mean(shares) <= 1.05 < max(modulo) / np.mean(modulo), (shares, modulo)
