"""The pose metrics (PCK, MPII's PCKh, JHMDB's PCK, AUC, EPE, NME) against references written from the definitions.

The references below work keypoint by keypoint with Python loops: a keypoint counts when it is
visible and its instance's size has no zero (a negative size counts as 1e6, MMEval's convention);
its distance is the Euclidean norm of (pred - gt) / size, stored as float32 as MMEval stores it
(so a threshold compares in float32). Then one process, MMEval's documented numbers, bad arguments,
and 2 / 3 real hub ranks (padded, uneven, contiguous shards) with the bytes compute() moves.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest
from hub_backend import run_ranks
from metric_helpers import assert_all_rejected, compute_sharded, same

from mmeval.core.errors import MetricArgumentError
from mmeval.metrics import (
    JhmdbPCKAccuracy,
    KeypointAUC,
    KeypointEndPointError,
    KeypointNME,
    MpiiPCKAccuracy,
    PCKAccuracy,
)
from mmeval.metrics.keypoint_auc import keypoint_auc_accuracy
from mmeval.metrics.keypoint_epe import keypoint_epe_accuracy
from mmeval.metrics.keypoint_nme import keypoint_nme_accuracy
from mmeval.metrics.pck_accuracy import keypoint_pck_accuracy
from mmeval.metrics.utils import calc_distances, distance_acc

Sample = Tuple[Dict[str, Any], Dict[str, Any]]

SIZE_KEYS = ("bbox_size", "head_size", "torso_size")


@functools.cache
def pose_data(
    n: int, k: int, seed: int = 0, multi: bool = True, degenerate: bool = True
) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """``n`` samples of ``k`` 2-D keypoints: MMEval's prediction / ground-truth dicts.

    Integer pixel coordinates and offsets (so distances tie with thresholds now
    and then), about 20 % of the keypoints invisible; with ``multi`` a sample
    holds 0, 1 or 2 instances; with ``degenerate`` some sizes have a zero (the
    instance is left out) or a negative value (it counts as 1e6). Sizes:
    ``bbox_size`` / ``head_size`` / ``torso_size`` (n, 2), ``box_size`` (n, 1).
    """
    rng = np.random.default_rng(seed)
    preds, gts = [], []
    for i in range(n):
        m = int(rng.integers(0, 3)) if multi else 1
        gt = rng.integers(0, 64, (m, k, 2)).astype(np.float64)
        pred = gt + rng.integers(-9, 10, (m, k, 2))
        g: Dict[str, Any] = {"coords": gt, "mask": rng.random((m, k)) < 0.8}
        for key in SIZE_KEYS:
            size = rng.integers(8, 48, (m, 2)).astype(np.float64)
            if degenerate and i % 9 == 4:
                size[:, 1] = 0.0
            if degenerate and i % 11 == 6:
                size[:, 0] = -5.0
            g[key] = size
        g["box_size"] = rng.integers(0 if degenerate else 4, 48, (m, 1)).astype(np.float64)
        preds.append({"coords": pred})
        gts.append(g)
    return preds, gts


# -- references, from the definitions -------------------------------------------------------------


def ref_distance(pred: Sequence[float], gt: Sequence[float], size: Sequence[float]) -> Optional[np.float32]:
    """The normalised distance of one keypoint, or None when its instance's size has a zero."""
    if any(s == 0 for s in size):
        return None
    sizes = [s if s > 0 else 1e6 for s in size] * (len(pred) if len(size) == 1 else 1)
    total = 0.0
    for p, g, s in zip(pred, gt, sizes):
        total += ((p - g) / s) ** 2
    return np.float32(math.sqrt(total))


def ref_keypoint_distances(preds, gts, size_of, shift: float = 0.0) -> List[List[np.float32]]:
    """Per keypoint, the distances of every instance where it is visible and counted."""
    k = gts[0]["coords"].shape[1]
    out: List[List[np.float32]] = [[] for _ in range(k)]
    for p, g in zip(preds, gts):
        for inst in range(g["coords"].shape[0]):
            size = size_of(g, inst)
            for j in range(k):
                if not g["mask"][inst, j]:
                    continue
                d = ref_distance([c + shift for c in p["coords"][inst, j]], list(g["coords"][inst, j]), list(size))
                if d is not None:
                    out[j].append(d)
    return out


def ref_pck_per_keypoint(dists: List[List[np.float32]], thr: float) -> List[Optional[float]]:
    """Each keypoint's fraction of distances below ``thr`` (compared in float32), None where it has none."""
    return [sum(1 for d in ds if d < np.float32(thr)) / len(ds) if ds else None for ds in dists]


def ref_pck(dists: List[List[np.float32]], thr: float) -> float:
    """The mean over keypoints that have distances of their PCK (0 when none has)."""
    per = [a for a in ref_pck_per_keypoint(dists, thr) if a is not None]
    return sum(per) / len(per) if per else 0.0


def ref_item(item: str):
    return lambda g, inst: g[f"{item}_size"][inst]


def ref_pck_accuracy(preds, gts, thr: float, items: Sequence[str]) -> Dict[str, float]:
    names = {"bbox": "PCK", "head": "PCKh", "torso": "tPCK"}
    return {
        f"{names[i]}@{thr}": ref_pck(ref_keypoint_distances(preds, gts, ref_item(i)), thr)
        for i in ("bbox", "head", "torso")
        if i in items
    }


def ref_mpii(preds, gts, thr: float) -> Dict[str, float]:
    """MPII's report: PCKh (predictions moved by +1) per joint group, and weighted by visible counts without
    pelvis and thorax (joints 6, 7); -100 for a joint no instance counts; PCKh@0.1 from float32 percentages."""
    dists = ref_keypoint_distances(preds, gts, ref_item("head"), shift=1.0)
    pckh = [100.0 * a if a is not None else -100.0 for a in ref_pck_per_keypoint(dists, thr)]
    at_01 = [float(np.float32(100.0 * a)) if a is not None else -100.0 for a in ref_pck_per_keypoint(dists, 0.1)]
    visible = [sum(int(g["mask"][i, j]) for g in gts for i in range(g["mask"].shape[0])) for j in range(16)]
    joints = [j for j in range(16) if j not in (6, 7)]
    total = sum(visible[j] for j in joints)
    out = {"Head": pckh[9]}
    for name, (a, b) in {
        "Shoulder": (12, 13),
        "Elbow": (11, 14),
        "Wrist": (10, 15),
        "Hip": (2, 3),
        "Knee": (1, 4),
        "Ankle": (0, 5),
    }.items():
        out[name] = (pckh[a] + pckh[b]) / 2
    out["PCKh"] = sum(pckh[j] * visible[j] / total for j in joints)
    out["PCKh@0.1"] = sum(at_01[j] * visible[j] / total for j in joints)
    return out


def ref_jhmdb(preds, gts, thr: float, item: str) -> Dict[str, float]:
    """JHMDB's report: PCK per joint group (-1 for a joint no instance counts) and the mean."""
    dists = ref_keypoint_distances(preds, gts, ref_item(item))
    acc = [a if a is not None else -1.0 for a in ref_pck_per_keypoint(dists, thr)]
    suffix = "PCK" if item == "bbox" else "tPCK"
    out = {f"Head {suffix}": acc[2]}
    for name, (a, b) in {
        "Sho": (3, 4),
        "Elb": (7, 8),
        "Wri": (11, 12),
        "Hip": (5, 6),
        "Knee": (9, 10),
        "Ank": (13, 14),
    }.items():
        out[f"{name} {suffix}"] = (acc[a] + acc[b]) / 2
    out[f"Mean {suffix}"] = ref_pck(dists, thr)
    return out


def ref_auc(preds, gts, norm_factor: float, num_thrs: int) -> float:
    dists = ref_keypoint_distances(preds, gts, lambda g, inst: [norm_factor])
    return sum(ref_pck(dists, i / num_thrs) for i in range(num_thrs)) / num_thrs


def ref_mean_error(preds, gts, size_of) -> float:
    dists = [float(d) for ds in ref_keypoint_distances(preds, gts, size_of) for d in ds]
    return math.fsum(dists) / max(1, len(dists))


def ref_interocular(a: int, b: int):
    return lambda g, inst: [math.dist(g["coords"][inst, a], g["coords"][inst, b])]


def close(got: Dict[str, Any], want: Dict[str, float], rel: float = 1e-12) -> None:
    assert list(got) == list(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=rel, abs=1e-12), key


def added(metric: Any, preds, gts, batch: int = 7) -> Any:
    for s in range(0, len(preds), batch):
        metric.add(preds[s : s + batch], gts[s : s + batch])
    return metric


# -- one process: equal to the references ---------------------------------------------------------


@pytest.mark.parametrize("thr", [0.05, 0.1, 0.2, 0.35])
def test_pck_accuracy_equals_the_reference(thr):
    preds, gts = pose_data(60, 5)
    items = ["bbox", "head", "torso"]
    got = added(PCKAccuracy(thr=thr, norm_item=items), preds, gts).compute()
    close(got, ref_pck_accuracy(preds, gts, thr, items))
    assert got == PCKAccuracy(thr=thr, norm_item=items)(preds, gts)  # one add() or several: the same counts


@pytest.mark.parametrize("thr", [0.1, 0.5])
def test_mpii_pckh_equals_the_reference(thr):
    preds, gts = pose_data(60, 16, seed=1, degenerate=False)
    got = added(MpiiPCKAccuracy(thr=thr, norm_item=["bbox", "head"]), preds, gts).compute()
    assert next(iter(got)) == f"PCK@{thr}"  # then the report; PCKh@{thr} itself is not one of its keys
    assert got[f"PCK@{thr}"] == pytest.approx(ref_pck_accuracy(preds, gts, thr, ["bbox"])[f"PCK@{thr}"], rel=1e-12)
    close({k: v for k, v in got.items() if k != f"PCK@{thr}"}, ref_mpii(preds, gts, thr))


def test_jhmdb_pck_equals_the_reference():
    preds, gts = pose_data(60, 15, seed=2)
    got = added(JhmdbPCKAccuracy(thr=0.2, norm_item=["bbox", "head", "torso"]), preds, gts).compute()
    want = {
        "PCK@0.2": ref_pck_accuracy(preds, gts, 0.2, ["bbox"])["PCK@0.2"],
        "PCKh@0.2": ref_pck_accuracy(preds, gts, 0.2, ["head"])["PCKh@0.2"],
        **ref_jhmdb(preds, gts, 0.2, "bbox"),
        **ref_jhmdb(preds, gts, 0.2, "torso"),
    }
    close(got, want)


@pytest.mark.parametrize(("norm_factor", "num_thrs"), [(30, 20), (12.5, 7), (20, 4)])
def test_keypoint_auc_equals_the_reference(norm_factor, num_thrs):
    preds, gts = pose_data(60, 6, seed=3)
    got = added(KeypointAUC(norm_factor=norm_factor, num_thrs=num_thrs), preds, gts).compute()
    close(got, {f"AUC@{num_thrs}": ref_auc(preds, gts, norm_factor, num_thrs)})


def test_epe_and_nme_equal_the_reference():
    preds, gts = pose_data(60, 6, seed=4)
    close(
        added(KeypointEndPointError(), preds, gts).compute(), {"EPE": ref_mean_error(preds, gts, lambda g, inst: [1.0])}
    )
    close(
        added(KeypointNME("use_norm_item", norm_item="box_size"), preds, gts).compute(),
        {"NME": ref_mean_error(preds, gts, lambda g, inst: list(g["box_size"][inst]))},
    )
    meta = {"dataset_name": "mine", "keypoint_id2name": {i: f"kp{i}" for i in range(6)}}
    close(
        added(KeypointNME("keypoint_distance", keypoint_indices=[1, 4], dataset_meta=meta), preds, gts).compute(),
        {"NME": ref_mean_error(preds, gts, ref_interocular(1, 4))},
    )


def test_mmeval_functions_give_the_metrics_values():
    preds, gts = pose_data(40, 15, seed=5, multi=False)
    p = np.concatenate([x["coords"] for x in preds])
    g = np.concatenate([x["coords"] for x in gts])
    mask = np.concatenate([x["mask"] for x in gts])
    bbox = np.concatenate([x["bbox_size"] for x in gts])
    acc, avg, cnt = keypoint_pck_accuracy(p, g, mask, 0.2, bbox)
    assert avg == PCKAccuracy(thr=0.2)(preds, gts)["PCK@0.2"] and cnt == 15
    dists = ref_keypoint_distances(preds, gts, ref_item("bbox"))
    assert acc.tolist() == pytest.approx([a if a is not None else -1 for a in ref_pck_per_keypoint(dists, 0.2)])
    assert [distance_acc(d, 0.2) for d in calc_distances(p, g, mask, bbox)] == acc.tolist()
    assert keypoint_auc_accuracy(p, g, mask, 30, 20) == KeypointAUC()(preds, gts)["AUC@20"]
    assert keypoint_epe_accuracy(p, g, mask) == KeypointEndPointError()(preds, gts)["EPE"]
    box = np.concatenate([x["box_size"] for x in gts])
    assert (
        keypoint_nme_accuracy(p, g, mask, np.tile(box, (1, 2)))
        == KeypointNME("use_norm_item", norm_item="box_size")(preds, gts)["NME"]
    )


def test_calc_distances_leaves_the_sizes_alone_and_marks_what_does_not_count():
    p = np.array([[[3.0, 4.0], [1.0, 1.0]], [[0.0, 0.0], [2.0, 0.0]]])
    g = np.zeros_like(p)
    sizes = np.array([[2.0, -1.0], [0.0, 5.0]])
    before = sizes.copy()
    d = calc_distances(p, g, np.array([[True, False], [True, True]]), sizes)
    assert d.dtype == np.float32 and d.shape == (2, 2)
    assert d[0, 0] == np.float32(math.hypot(1.5, 4 / 1e6)) and d[1, 0] == -1 and (d[:, 1] == -1).all()
    assert np.array_equal(sizes, before)
    assert distance_acc(np.array([-1.0, -1.0])) == -1


def test_several_instances_per_sample_or_none_count_as_instances():
    preds, gts = pose_data(30, 4, seed=6, multi=True)
    assert {g["coords"].shape[0] for g in gts} == {0, 1, 2}
    flat_p = [{"coords": p["coords"][i : i + 1]} for p, g in zip(preds, gts) for i in range(g["coords"].shape[0])]
    flat_g = [{key: v[i : i + 1] for key, v in g.items()} for g in gts for i in range(g["coords"].shape[0])]
    for make in (lambda: PCKAccuracy(norm_item=["bbox", "torso"]), KeypointAUC, KeypointEndPointError):
        assert added(make(), preds, gts).compute() == added(make(), flat_p, flat_g).compute()


def test_inputs_as_lists_and_integer_masks_read_like_arrays():
    preds, gts = pose_data(10, 4, seed=7, multi=False)
    as_lists = [{k: v.tolist() for k, v in g.items()} for g in gts]
    for g in as_lists:
        g["mask"] = [[int(x) for x in row] for row in g["mask"]]
    pl = [{"coords": p["coords"].tolist()} for p in preds]
    assert PCKAccuracy()(pl, as_lists) == PCKAccuracy()(preds, gts)


# -- MMEval's documented numbers -----------------------------------------------------------------


def _five_keypoints() -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """MMEval's AUC / EPE docstring data: five keypoints, the third one invisible."""
    pred = np.array([[[10.0, 4.0], [10.0, 18.0], [0.0, 0.0], [40.0, 40.0], [20.0, 10.0]]])
    gt = np.array([[[10.0, 0.0], [10.0, 10.0], [0.0, -1.0], [30.0, 30.0], [0.0, 10.0]]])
    return [{"coords": pred}], [{"coords": gt, "mask": np.array([[True, True, False, True, True]])}]


def test_mmeval_docstring_examples():
    preds, gts = _five_keypoints()
    assert KeypointAUC(norm_factor=20, num_thrs=4)(preds, gts) == {"AUC@4": 0.375}
    assert KeypointEndPointError()(preds, gts) == {"EPE": 11.535533905029297}
    rng = np.random.default_rng(8)
    kp = rng.random((1, 15, 2)) * 10
    visible = np.ones((1, 15), bool)
    same_kp = (
        [{"coords": kp}],
        [{"coords": kp, "mask": visible, "bbox_size": rng.random((1, 2)) * 10, "torso_size": rng.random((1, 2)) * 10}],
    )
    assert PCKAccuracy(thr=0.5, norm_item="bbox")(*same_kp) == {"PCK@0.5": 1.0}
    jhmdb = JhmdbPCKAccuracy(thr=0.2, norm_item="torso")(*same_kp)
    assert list(jhmdb) == [f"{j} tPCK" for j in ("Head", "Sho", "Elb", "Wri", "Hip", "Knee", "Ank", "Mean")]
    assert set(jhmdb.values()) == {1.0}
    kp16 = rng.random((1, 16, 2)) * 10
    mpii = MpiiPCKAccuracy(thr=0.3, norm_item="head")(
        [{"coords": kp16}],
        [{"coords": kp16 + 1.0, "mask": np.ones((1, 16), bool), "head_size": rng.random((1, 2)) * 10}],
    )
    assert mpii == {
        "Head": 100.0,
        "Shoulder": 100.0,
        "Elbow": 100.0,
        "Wrist": 100.0,
        "Hip": 100.0,
        "Knee": 100.0,
        "Ankle": 100.0,
        "PCKh": 100.0,
        "PCKh@0.1": 100.0,
    }
    nme = KeypointNME(
        norm_mode="use_norm_item", norm_item="box_size", dataset_meta={"dataset_name": "aflw", "num_keypoints": 19}
    )
    got = nme(
        [{"coords": np.zeros((1, 19, 2))} for _ in range(2)],
        [
            {"coords": np.zeros((1, 19, 2)) + 0.5, "mask": np.ones((1, 19), bool), "box_size": np.ones((1, 1)) * i * 20}
            for i in range(2)
        ],
    )
    assert got["NME"] == pytest.approx(0.03535533892480951, rel=1e-7)  # MMEval sums float32 distances in float32


def test_mmeval_results_idiom_and_per_sample_pairs():
    preds, gts = pose_data(20, 5, seed=9)
    metric = added(KeypointAUC(norm_factor=25, num_thrs=5), preds, gts)
    want = metric.compute()
    assert metric.compute_metric(metric._results) == want
    assert metric.compute_metric(list(zip(preds, gts))) == want
    metric._results = []
    assert metric.num_results == 0
    added(metric, preds, gts)
    assert metric.compute_metric(metric._results) == want
    with pytest.raises(MetricArgumentError, match="cleared"):
        metric._results = [1]


def test_mpii_zero_head_size_is_left_out_at_every_threshold():
    """MMEval 0.2.1 left such an instance out of PCKh but counted it in PCKh@0.1 (a size its first pass had
    overwritten in place with 1e6); here it is left out of both, so PCKh@0.1 is PCKh at thr=0.1."""
    preds, gts = pose_data(30, 16, seed=10, multi=False)
    assert any((g["head_size"] == 0).any() for g in gts)
    got = MpiiPCKAccuracy(thr=0.1)(preds, gts)
    assert got["PCKh@0.1"] == pytest.approx(got["PCKh"], rel=1e-6)  # float32 percentages in PCKh@0.1


# -- bad arguments and inputs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: PCKAccuracy(thr="0.2"), "thr"),
        (lambda: PCKAccuracy(thr=float("nan")), "thr"),
        (lambda: PCKAccuracy(norm_item="hand"), "norm_item 'hand'"),
        (lambda: PCKAccuracy(norm_item=[]), "norm_item"),
        (lambda: PCKAccuracy(num_keypoints=0), "num_keypoints"),
        (lambda: MpiiPCKAccuracy(num_keypoints=17), "16"),
        (lambda: JhmdbPCKAccuracy(num_keypoints=10), "15 joints"),
        (lambda: KeypointAUC(norm_factor=0), "norm_factor"),
        (lambda: KeypointAUC(norm_factor="30"), "norm_factor"),
        (lambda: KeypointAUC(num_thrs=0), "num_thrs"),
        (lambda: KeypointAUC(num_thrs=2.5), "num_thrs"),
        (lambda: KeypointNME(norm_mode="pixels"), "norm_mode"),
        (lambda: KeypointNME(norm_mode="use_norm_item"), "norm_item"),
        (lambda: KeypointNME(norm_mode="keypoint_distance", keypoint_indices=[0, 1, 2]), "pair"),
    ],
)
def test_bad_arguments_raise_metric_argument_error(make, match):
    with pytest.raises(MetricArgumentError, match=match) as info:
        make()
    assert isinstance(info.value, AssertionError)


def test_mmeval_key_errors_stay_key_errors():
    for make in (lambda: PCKAccuracy(norm_item="hand"), lambda: KeypointNME(norm_mode="pixels")):
        with pytest.raises(KeyError):
            make()
    with pytest.raises(KeyError, match="DEFAULT_KEYPOINT_INDICES"):
        KeypointNME("keypoint_distance", dataset_meta={"dataset_name": "coco"})(*pose_data(2, 5)[:2])


def test_bad_inputs_raise_naming_them_and_keep_nothing():
    preds, gts = pose_data(4, 5, multi=False)
    bad_mask = [dict(gts[0], mask=np.full((1, 5), 2))]
    no_bbox = [{k: v for k, v in gts[0].items() if k != "bbox_size"}]
    wide = [dict(gts[0], bbox_size=np.ones((1, 3)))]
    assert_all_rejected(
        PCKAccuracy(),
        [
            ((preds[0], gts[0]), "sequence"),
            ((preds[:2], gts[:1]), "2 predictions but 1 groundtruths"),
            (([{"kp": 1}], gts[:1]), r"predictions\[0\] has no 'coords'"),
            (([{"coords": np.zeros((1, 4, 2))}], gts[:1]), "same shape"),
            (([preds[0]], [dict(gts[0], mask=np.ones((1, 4), bool))]), "mask"),
            (([preds[0]], bad_mask), "booleans"),
            (([preds[0]], no_bbox), "expected normalized factor 'bbox_size'"),
            (([preds[0]], wide), "bbox_size"),
            (
                ([preds[0], {"coords": np.zeros((1, 6, 2))}], [gts[0], dict(gts[1], coords=np.zeros((1, 6, 2)))]),
                "same keypoints",
            ),
        ],
    )
    metric = PCKAccuracy()
    metric.add(preds[:2], gts[:2])
    six = pose_data(2, 6)
    with pytest.raises(MetricArgumentError, match="counts 5"):
        metric.add(*six)
    assert metric.num_results == 2
    with pytest.raises(MetricArgumentError, match="16 joints"):
        MpiiPCKAccuracy().add(preds, gts)
    with pytest.raises(MetricArgumentError, match="cannot be None"):
        KeypointNME("keypoint_distance", keypoint_indices=[0, 1]).add(preds, gts)
    meta = {"dataset_name": "coco", "keypoint_id2name": {0: "nose", 1: "eye"}}
    with pytest.raises(MetricArgumentError, match="does not contain the required 4-th keypoint"):
        KeypointNME("keypoint_distance", keypoint_indices=[0, 4], dataset_meta=meta).add(preds, gts)


# -- over real ranks ------------------------------------------------------------------------------

#: every pose metric on its data: name -> (class, kwargs, (k, seed))
CASES: Dict[str, Tuple[Any, Dict[str, Any], Tuple[int, int]]] = {
    "PCKAccuracy": (PCKAccuracy, {"thr": 0.15, "norm_item": ["bbox", "head", "torso"]}, (5, 11)),
    "MpiiPCKAccuracy": (MpiiPCKAccuracy, {"thr": 0.3, "norm_item": ["head", "bbox"]}, (16, 12)),
    "JhmdbPCKAccuracy": (JhmdbPCKAccuracy, {"thr": 0.2, "norm_item": ["bbox", "torso"]}, (15, 13)),
    "KeypointAUC": (KeypointAUC, {"norm_factor": 24, "num_thrs": 10}, (5, 14)),
    "KeypointEndPointError": (KeypointEndPointError, {}, (5, 15)),
    "KeypointNME": (KeypointNME, {"norm_mode": "use_norm_item", "norm_item": "box_size"}, (5, 16)),
}


def case_data(name: str, n: int) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    k, seed = CASES[name][2]
    return pose_data(n, k, seed)


def _shard_worker(backend: Any, n: int) -> Dict[str, Any]:
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # uneven / cat shards without size: the ShardingWarning
        for name, (cls, kwargs, _) in CASES.items():
            preds, gts = case_data(name, n)

            def add(metric: Any, idx: List[int], preds=preds, gts=gts) -> None:
                for s in range(0, len(idx), 7):
                    metric.add([preds[i] for i in idx[s : s + 7]], [gts[i] for i in idx[s : s + 7]])

            out[name] = compute_sharded(backend, n, lambda cls=cls, kwargs=kwargs, **kw: cls(**kwargs, **kw), add)
    return out


@pytest.mark.parametrize("ws", [2, 3])
def test_distributed_equals_single_process_exactly(ws):
    n = 61  # neither 2 nor 3 divides it: padding and uneven shards both happen
    want = {}
    for name, (cls, kwargs, _) in CASES.items():
        want[name] = added(cls(**kwargs), *case_data(name, n)).compute()
    out = run_ranks(_shard_worker, ws, n, timeout=120)
    for rank in range(ws):
        status, value = out[rank]
        assert status == "ok", value
        for name in CASES:
            for scheme in ("padded", "uneven", "cat"):
                assert same(value[name][scheme], want[name]), (rank, name, scheme, value[name][scheme], want[name])


def _bytes_worker(backend: Any, n: int) -> Dict[str, Any]:
    from mmeval.core.hooks import enable_comm_stats

    stats = enable_comm_stats(print_at_exit=False)
    out: Dict[str, Any] = {}
    for name, (cls, kwargs, _) in CASES.items():
        for per_rank in (n, 4 * n):
            preds, gts = case_data(name, per_rank * 2)
            metric = cls(**kwargs, dist_backend=backend)
            idx = list(range(backend.rank, 2 * per_rank, 2))
            metric.add([preds[i] for i in idx], [gts[i] for i in idx])
            stats.reset()
            metric.compute(size=2 * per_rank - 1)  # DistributedSampler's padding: one sample dropped
            out[(name, per_rank)] = stats.rows()
    return out


def test_compute_moves_the_same_bytes_for_n_and_4n_samples():
    n = 15
    out = run_ranks(_bytes_worker, 2, n, timeout=120)
    for rank in range(2):
        status, got = out[rank]
        assert status == "ok", got
        for name in CASES:
            few, many = got[(name, n)], got[(name, 4 * n)]
            assert [(r["op"], r["calls"], r["bytes_sent"]) for r in few] == [
                (r["op"], r["calls"], r["bytes_sent"]) for r in many
            ], (name, few, many)
            assert all(r["op"] == "all_reduce" for r in few), (name, few)


def _empty_rank_worker(backend: Any, k: Optional[int]) -> Any:
    metric = PCKAccuracy(num_keypoints=k, dist_backend=backend)
    if backend.rank == 0:
        metric.add(*pose_data(3, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return metric.compute()


def test_a_rank_without_samples_needs_num_keypoints_and_else_every_rank_says_so():
    out = run_ranks(_empty_rank_worker, 2, 5, timeout=60)
    want = PCKAccuracy()(*pose_data(3, 5))
    assert out[0] == out[1] == ("ok", want)
    out = run_ranks(_empty_rank_worker, 2, None, timeout=60)
    for rank in range(2):
        status, (_, message, _) = out[rank]
        assert status == "error" and "num_keypoints" in message, out[rank]
