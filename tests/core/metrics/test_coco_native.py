"""mmeval-coco-native (native/coco/) against COCODetection's pure numpy path: the same numbers, bit for bit.

Runs where the optional distribution is installed (the ``coco-native`` tox env builds it with the
machine's C compiler); elsewhere it is skipped -- the pure path is then the one every other COCO test
checks against pycocotools. Each case runs the metric twice on the same data, ``MMEVAL_COCO_NATIVE=0``
(pure) and ``1`` (native), and also checks each kernel alone against its numpy counterpart.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np
import pytest
from coco_reference import coco_json, cocoeval, detections

from mmeval.metrics import coco_accumulate, coco_native
from mmeval.metrics.coco_detection import COCODetection

native = pytest.importorskip("mmeval_coco_native", reason="mmeval-coco-native is not installed in this env")
pytest.importorskip("pycocotools")

C = 6
CLASSES = [f"cls{i}" for i in range(C)]


def _run(monkeypatch, use: str, preds, gts, batch: int = 7, **kwargs: Any) -> Dict[str, Any]:
    monkeypatch.setenv("MMEVAL_COCO_NATIVE", use)
    assert (coco_native.kernels() is None) == (use == "0")
    metric = COCODetection(dataset_meta={"classes": CLASSES}, print_results=False, classwise=True, **kwargs)
    for s in range(0, len(preds), batch):
        metric.add(preds[s : s + batch], gts[s : s + batch])
    return metric.compute()


def _same(a: Dict[str, Any], b: Dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        x, y = np.asarray(a[k], dtype=float), np.asarray(b[k], dtype=float)
        assert np.array_equal(x, y, equal_nan=True), (k, a[k], b[k])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"metric": ["bbox", "proposal"]},
        {"metric": ["bbox", "proposal"], "iou_thrs": [0.3, 0.5, 0.75, 0.9], "proposal_nums": (3, 1, 100)},
        {"metric": ["bbox", "proposal"], "proposal_nums": (300, 100, 200)},
        {"metric": ["bbox", "segm"]},
    ],
    ids=["bbox-proposal", "thresholds-maxdets", "precision-at-two-maxdets", "segm"],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_native_equals_pure_bit_for_bit(monkeypatch, kwargs, seed):
    """Every stat and each class's AP: crowd regions, all area ranges, maxDets cutting, empty images."""
    preds, gts = detections(50, C, seed=seed, masks="segm" in kwargs["metric"], crowd=0.3)
    pure = _run(monkeypatch, "0", preds, gts, **kwargs)
    fast = _run(monkeypatch, "1", preds, gts, **kwargs)
    _same(pure, fast)
    ev = cocoeval(coco_json(gts, CLASSES), preds, CLASSES, "bbox", kwargs.get("iou_thrs"))
    assert abs(fast["bbox_mAP"] - ev.stats[0]) <= 1e-12


def test_tied_scores_duplicate_boxes_and_equal_ious(monkeypatch):
    """Ties in score (the ranking's place order), two detections on one object, equal IoUs (the last
    ground truth wins), an ignored twin of a ground truth."""
    box = np.array([[10.0, 10.0, 50.0, 50.0], [10.0, 10.0, 50.0, 50.0], [60.0, 60.0, 90.0, 95.0]])
    preds = [
        {"img_id": i, "bboxes": box[[0, 0, 2]], "scores": np.array([0.5, 0.5, 0.5]), "labels": np.array([1, 1, 2])}
        for i in range(4)
    ]
    gts = [
        {"img_id": i, "bboxes": box, "labels": np.array([1, 1, 2]), "ignore_flags": np.array([0, i % 2, 0])}
        for i in range(4)
    ]
    _same(_run(monkeypatch, "0", preds, gts), _run(monkeypatch, "1", preds, gts))


def test_ious_of_overflowing_boxes_match_as_the_pure_path_does(monkeypatch):
    """Finite boxes whose areas overflow to inf (IoUs of 0 and NaN: inf - inf): the kernel, with its shortcut
    past the thresholds above a detection's largest IoU, gives the pure path's stats."""
    rng = np.random.default_rng(9)
    preds, gts = [], []
    for i in range(20):
        box = rng.random((6, 4)) * 100
        box[:, 2:] += box[:, :2] + 5
        gt = box[:3] + rng.random((3, 4)) * 3
        box[:2] = gt[0] = [0.0, 0.0, 1e200, 1e200]
        labels = rng.integers(0, 2, 6)
        preds.append({"img_id": i, "bboxes": box, "scores": rng.random(6), "labels": labels})
        gts.append({"img_id": i, "bboxes": gt, "labels": np.array([labels[0], labels[1], 1])})
    with np.errstate(all="ignore"):
        _same(_run(monkeypatch, "0", preds, gts), _run(monkeypatch, "1", preds, gts))


def test_pairwise_sum_is_numpys():
    rng = np.random.default_rng(0)
    for n in [*range(0, 300), 1010, 4097]:
        a = rng.random(n) * rng.random(n) ** 3
        assert native.pairwise_sum(a) == a.sum()


def _rankings_agree(monkeypatch, scores, cats, lens, k_all: int) -> None:
    """The native ranking (order, places, bounds) equals the pure one on these detections."""
    monkeypatch.setenv("MMEVAL_COCO_NATIVE", "1")
    got = coco_accumulate.ranked(scores, cats, lens, k_all)
    monkeypatch.setenv("MMEVAL_COCO_NATIVE", "0")
    want = coco_accumulate.ranked(scores, cats, lens, k_all)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ranked_equals_the_pure_ranking(monkeypatch, dtype):
    """Ties (place order), 0.0 and -0.0 (equal), infinities, NaN of either sign (last), float32 and float64."""
    rng = np.random.default_rng(5)
    lens = rng.integers(0, 30, 40)
    n, k_all = int(lens.sum()), 9
    cats = np.concatenate([np.sort(rng.integers(0, k_all, int(m))) for m in lens]).astype(np.uint16)
    scores = (rng.integers(-2, 5, n) / 4).astype(dtype)  # many ties
    scores[::17] = np.nan
    scores[::19] = -np.nan
    scores[::13] = -0.0
    scores[::23] = np.inf
    scores[::29] = -np.inf
    scores[1::7] = rng.random(scores[1::7].shape[0])
    got = coco_accumulate.ranked(scores, cats, lens, k_all)
    monkeypatch.setenv("MMEVAL_COCO_NATIVE", "0")
    want = coco_accumulate.ranked(scores, cats, lens, k_all)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
    # many detections a category, scores over the whole range of the key (every radix digit differs somewhere)
    monkeypatch.setenv("MMEVAL_COCO_NATIVE", "1")
    lens = rng.integers(0, 200, 400)
    n = int(lens.sum())
    cats = np.concatenate([np.sort(rng.integers(0, k_all, int(m))) for m in lens]).astype(np.uint8)
    scores = np.concatenate([rng.random(n // 2), rng.standard_normal(n - n // 2) * 1e6]).astype(dtype)
    scores[::11] = scores[rng.integers(0, n, scores[::11].shape[0])]  # ties across categories and images
    # and scores in [1, 1.5): float32 keys that differ in their low 22 bits only -- an even number of passes
    for s in (scores, (1 + rng.random(n) / 2).astype(dtype)):
        _rankings_agree(monkeypatch, s, cats, lens, k_all)


def test_mask_area_and_iou_equal_pycocotools():
    """Random blobs, empty masks and full ones (areas past 2**16), crowd and not: pycocotools' area and iou."""
    from pycocotools import mask as mask_api

    rng = np.random.default_rng(7)
    h, w = 300, 400
    arrays = [np.zeros((h, w), np.uint8), np.ones((h, w), np.uint8)]
    for _ in range(30):
        m = np.zeros((h, w), np.uint8)
        y, x = rng.integers(0, h), rng.integers(0, w)
        m[y : y + rng.integers(1, 200), x : x + rng.integers(1, 300)] = 1
        m[rng.random((h, w)) < 0.05] ^= 1
        arrays.append(m)
    rles = [mask_api.encode(np.asfortranarray(m)) for m in arrays]
    for _ in range(6):  # runs of length 0 inside (a user's RLE may hold them): the same pixels, other runs
        cuts = np.sort(rng.integers(0, h * w, 40))
        runs_ = np.diff(np.r_[0, cuts, h * w])
        runs_[rng.integers(1, len(runs_) - 1, 5)] = 0
        runs_[-1] += h * w - runs_.sum()
        rles.append(mask_api.frPyObjects({"counts": runs_.tolist(), "size": [h, w]}, h, w))
    counts = [r["counts"] for r in rles]
    offsets = np.r_[0, np.cumsum([len(c) for c in counts])].astype(np.int64)
    runs = np.empty(int(offsets[-1]), np.uint32)
    starts = np.empty(len(rles) + 1, np.int64)
    area = np.empty(len(rles))
    native.rle_decode(b"".join(counts), offsets, runs, starts, area)
    assert area.tolist() == [float(mask_api.area(r)) for r in rles]
    a, b = (g.ravel().astype(np.int64) for g in np.meshgrid(np.arange(len(rles)), np.arange(len(rles))))
    for crowd in (0, 1):
        got = np.empty(a.shape[0])
        one = np.zeros(len(rles), np.int64)  # every mask's runs in one buffer
        native.rle_iou_parts(
            [runs], one, starts[:-1], starts[1:], area, a, b, np.full(a.shape[0], crowd, np.uint8), got
        )
        want = np.asarray(mask_api.iou(rles, rles, [crowd] * len(rles)))  # (dets, gts)
        assert np.array_equal(got, want[a, b])
        # rle_iou_parts: the same runs left in three buffers (each mask's runs where it lies in its own)
        cut = [0, 11, 20, len(rles)]
        parts = [runs[starts[c0] : starts[c1]].copy() for c0, c1 in zip(cut[:-1], cut[1:])]
        part = np.repeat(np.arange(3), np.diff(cut)).astype(np.int64)
        first = starts[np.array(cut[:-1])][part]
        split = np.empty(a.shape[0])
        args = (starts[:-1] - first, starts[1:] - first, area, a, b, np.full(a.shape[0], crowd, np.uint8), split)
        native.rle_iou_parts(parts, part, *args)
        assert np.array_equal(split, got)
        with pytest.raises(ValueError, match="outside"):
            native.rle_iou_parts(parts[:2], part, *args)


def _garbled(rng: np.random.Generator, good: bytes) -> bytes:
    """A compressed RLE string changed at random: a character replaced, cut, doubled or appended."""
    s = bytearray(good)
    kind = int(rng.integers(0, 5))
    at = int(rng.integers(0, max(len(s), 1)))
    if kind == 0 and s:
        s[at] = int(rng.integers(0, 256))
    elif kind == 1:
        del s[at:]
    elif kind == 2 and s:
        s.insert(at, s[at])
    elif kind == 3:
        s += bytes(rng.integers(48, 112, int(rng.integers(1, 16))).astype(np.uint8))
    else:
        s[at:at] = b"o" * int(rng.integers(1, 15))  # a value of many continued characters
    return bytes(s)


def test_rle_masks_passes_only_what_check_rle_passes():
    """The kernels' RLE pre-check (rle_masks) against the Python check_rle on valid and garbled masks: a mask
    it takes is one check_rle passes, given back as the pure path's dict, with pycocotools' area; every valid
    mask is taken; any other kind of mask is left (None) to the Python checks."""
    from pycocotools import mask as mask_api

    from mmeval.core.errors import MetricArgumentError
    from mmeval.metrics.utils.rle_check import check_rle

    rng = np.random.default_rng(11)
    h, w = 60, 80
    valid = []
    for _ in range(40):
        m = np.zeros((h, w), np.uint8)
        m[rng.integers(0, h) :, rng.integers(0, w) : rng.integers(0, w) + 1] = 1
        m[rng.random((h, w)) < 0.1] ^= 1
        valid.append(mask_api.encode(np.asfortranarray(m))["counts"])
    valid.append(mask_api.encode(np.asfortranarray(np.ones((h, w), np.uint8)))["counts"])
    masks: list = [{"size": [h, w], "counts": c} for c in valid]
    masks.append({"size": (h, w), "counts": valid[0].decode()})  # a str and a tuple: taken too
    masks += [{"size": [h, w], "counts": _garbled(rng, valid[int(rng.integers(0, 40))])} for _ in range(2000)]
    left = [
        {"size": [h, w], "counts": b""},  # no mask of 60 x 80
        {"size": [0, 0], "counts": b""},  # an empty mask of an empty size: taken (check_rle passes it)
        {"size": [h, w], "counts": [h * w]},  # uncompressed
        {"size": [float(h), w], "counts": valid[0]},
        {"size": [True, w], "counts": valid[0]},
        {"size": np.array([h, w]), "counts": valid[0]},
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        np.zeros((h, w), np.uint8),
        {"size": [h, w]},
    ]
    masks += left
    area = np.full(len(masks), -1.0)
    got = native.rle_masks(masks, area)
    assert len(got) == len(masks)
    assert all(g is not None for g in got[: len(valid) + 1])
    assert got[-len(left)] is None and got[-len(left) + 1] is not None
    assert all(g is None for g in got[-len(left) + 2 :])
    passed = 0
    for m, g, a in zip(masks, got, area.tolist()):
        try:
            check_rle(m, "m")
            passed += 1
        except (MetricArgumentError, KeyError, TypeError, IndexError):  # not an RLE dict at all
            assert g is None, m
            continue
        if g is not None:
            counts = m["counts"].encode() if isinstance(m["counts"], str) else m["counts"]
            assert g == {"size": list(m["size"]), "counts": counts} and type(g["size"]) is list
            assert a == float(mask_api.area(g))
    assert 0 < passed < len(masks)  # the garbled ones include both kinds


def test_rle_masks_runs_are_the_masks_decoded_once():
    """rle_masks_runs: rle_masks' dicts and areas, and the runs, run offsets and sizes rle_decode_masks gives for
    the same dicts (what the matching used to decode again); None for all three once one mask is left to
    Python; an empty list decodes to no run."""
    from pycocotools import mask as mask_api

    rng = np.random.default_rng(5)
    masks: list = []
    for _ in range(30):
        h, w = int(rng.integers(1, 50)), int(rng.integers(1, 50))
        m = (rng.random((h, w)) < rng.random()).astype(np.uint8)
        masks.append({"size": [h, w], "counts": mask_api.encode(np.asfortranarray(m))["counts"]})
    masks.append({"size": [0, 0], "counts": b""})
    masks.append(
        {"size": (7, 3), "counts": mask_api.encode(np.asfortranarray(np.ones((7, 3), np.uint8)))["counts"].decode()}
    )
    area = np.full(len(masks), -1.0)
    got, runs, offsets, hw = native.rle_masks_runs(masks, area)
    area_ref = np.full(len(masks), -2.0)
    assert got == native.rle_masks(masks, area_ref) and np.array_equal(area, area_ref)
    r_ref, o_ref, a_ref, hw_ref = native.rle_decode_masks(got)
    o = np.frombuffer(offsets, np.int64)
    assert np.array_equal(o, np.frombuffer(o_ref, np.int64))
    assert runs == r_ref[: 4 * int(o[-1])] and len(runs) == 4 * int(o[-1])
    assert hw[: 8 * len(masks)] == hw_ref[: 8 * len(masks)]
    assert np.array_equal(area, np.frombuffer(a_ref, np.float64)[: len(masks)])
    assert native.rle_masks_runs([], np.zeros(0))[1:3] == (b"", bytes(8))  # no run; offsets [0]
    assert native.rle_masks_runs(masks + [{"size": [2, 2], "counts": b"0{"}], np.zeros(len(masks) + 1))[1:] == (
        None,
        None,
        None,
    )


def test_rle_lists_runs_is_rle_masks_runs_of_each_list_in_one_call():
    """rle_lists_runs of many lists (lists and tuples, empty ones among them): each list's runs, run offsets
    (from 0), areas and sizes are what rle_masks_runs gives for it alone; None once one mask is one rle_masks
    leaves to Python (garbled, a polygon, a list-of-counts RLE)."""
    from pycocotools import mask as mask_api

    rng = np.random.default_rng(8)
    lists: list = []
    for j in range(12):
        one = []
        for _ in range(int(rng.integers(0, 6))):
            h, w = int(rng.integers(1, 40)), int(rng.integers(1, 40))
            m = (rng.random((h, w)) < rng.random()).astype(np.uint8)
            counts = mask_api.encode(np.asfortranarray(m))["counts"]
            one.append({"size": [h, w] if j % 2 else (h, w), "counts": counts if j % 3 else counts.decode()})
        lists.append(one if j % 4 else tuple(one))
    lists[5] = []
    runs, offsets, areas, hw, starts = native.rle_lists_runs(lists)
    runs, offsets = np.frombuffer(runs, np.uint32), np.frombuffer(offsets, np.int64)
    areas, hw, starts = np.frombuffer(areas), np.frombuffer(hw, np.int64), np.frombuffer(starts, np.int64)
    at = 0
    for j, one in enumerate(lists):
        area = np.zeros(len(one))
        _, r, o, h = native.rle_masks_runs(list(one), area)
        assert runs[starts[j] : starts[j + 1]].tobytes() == r
        assert offsets[at + j : at + j + len(one) + 1].tobytes() == o
        assert np.array_equal(areas[at : at + len(one)], area) and hw[at : at + len(one)].tobytes() == h[: 8 * len(one)]
        at += len(one)
    assert starts[-1] == runs.shape[0]
    for bad in (
        {"size": [2, 2], "counts": b"0{"},
        [[1.0, 1.0, 3.0, 1.0, 3.0, 3.0]],
        {"size": [1, 2], "counts": [0, 2]},
    ):
        assert native.rle_lists_runs(lists[:3] + [list(lists[3]) + [bad]]) is None
    assert native.rle_lists_runs([[{"size": [1, 1], "counts": b"01"}], "no list"]) is None


def test_rle_lists_runs_takes_what_check_rle_passes_with_rle_decodes_runs():
    """rle_lists_runs (its check decodes two one-character values at a time) on valid and garbled masks, one
    list each: it takes a mask check_rle passes (every valid one), with the runs rle_decode_masks' separate
    decoder gives and pycocotools' area, and refuses every mask check_rle refuses."""
    from pycocotools import mask as mask_api

    from mmeval.core.errors import MetricArgumentError
    from mmeval.metrics.utils.rle_check import check_rle

    rng = np.random.default_rng(21)
    valid = []
    for _ in range(60):
        h, w = int(rng.integers(1, 70)), int(rng.integers(1, 70))
        m = (rng.random((h, w)) < rng.random()).astype(np.uint8)
        m[: int(rng.integers(0, h + 1)), : int(rng.integers(0, w + 1))] ^= 1  # long runs: values of 2+ chars
        valid.append({"size": [h, w], "counts": mask_api.encode(np.asfortranarray(m))["counts"]})
    garbled = [{"size": v["size"], "counts": _garbled(rng, v["counts"])} for v in valid for _ in range(40)]
    taken = refused = 0
    for mask in valid + garbled:
        got = native.rle_lists_runs([[mask]])
        try:
            check_rle(mask, "m")
        except MetricArgumentError:
            assert got is None, mask
            refused += 1
            continue
        if mask in valid:
            assert got is not None, mask
        if got is None:  # a value of over 6 characters, say: left to Python, not wrong
            continue
        taken += 1
        runs, offsets, areas, hw, _ = got
        r_ref, o_ref, a_ref, hw_ref = native.rle_decode_masks([mask])
        assert bytes(runs) == r_ref[: 4 * int(np.frombuffer(o_ref, np.int64)[-1])] and offsets == o_ref, mask
        assert np.frombuffer(areas)[0] == np.frombuffer(a_ref)[0] == float(mask_api.area(mask))
        assert hw == hw_ref
    assert taken > len(valid) and refused > 100


def _rle_string(runs) -> bytes:
    """pycocotools' compressed RLE string of ``runs``, from rleToString's definition: each run past the third as
    its difference from the run two back, five bits a character (0x20: another follows), plus 48."""
    out = bytearray()
    for i, run in enumerate(runs):
        x = int(run) - (int(runs[i - 2]) if i > 2 else 0)
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = x != -1 if c & 0x10 else x != 0
            out.append((c | (0x20 if more else 0)) + 48)
    return bytes(out)


def test_rle_check_takes_sixteen_values_at_a_time_as_one():
    """The RLE check's step of sixteen one-character values (SSE2; four at a time elsewhere) against the
    runs and check_rle: runs of either parity at a block's start, large odd runs (sums near 2**32), a run going
    negative or the runs short of or past h * w (refused), and the odd runs' area."""
    from mmeval.core.errors import MetricArgumentError
    from mmeval.metrics.utils.rle_check import check_rle

    rng = np.random.default_rng(16)
    cases = []
    for trial in range(600):
        n = int(rng.integers(5, 90))
        # the odd runs large (up to 2**27: the runs' sum near 2**32 at 90 runs), or all small
        big = 2**27 if trial % 4 == 0 else 300
        runs = [int(rng.integers(0, 300)), int(rng.integers(0, big)), int(rng.integers(0, 300))]
        if trial % 3 == 0:
            runs.append(int(rng.integers(40, 400)))  # a fourth run of two characters: a block starts even
        while len(runs) < n:
            runs.append(max(0, runs[-2] + int(rng.integers(-16, 16))))  # one character each
        if trial % 5 == 0:  # a run below 0 inside the one-character values
            runs[int(rng.integers(3, len(runs)))] = -int(rng.integers(1, 5))
        hw = sum(runs) + (int(rng.integers(-3, 4)) if trial % 7 == 0 else 0)  # short of h * w or past it
        cases.append(({"size": [max(hw, 0), 1], "counts": _rle_string(runs)}, runs))
    taken = refused = 0
    for mask, runs in cases:
        got = native.rle_lists_runs([[mask]])
        try:
            check_rle(mask, "m")
        except MetricArgumentError:
            assert got is None, (mask, runs)
            refused += 1
            continue
        if got is None:  # a value past six characters: left to the Python check
            continue
        taken += 1
        dec, offsets, areas, _, _ = got
        assert np.frombuffer(dec, np.uint32)[: np.frombuffer(offsets, np.int64)[-1]].tolist() == runs
        assert np.frombuffer(areas)[0] == float(sum(runs[1::2]) % 2**32)
    assert taken > 200 and refused > 40


def test_runs_blocks_are_pooled_and_independent():
    """The runs rle_lists_runs gives live in pooled blocks: a block freed goes to the pool and the next batch's
    runs reuse its memory, never one still alive (two batches kept side by side keep their own runs); the
    pool stays within its bound and blocks_clear empties it."""
    from pycocotools import mask as mask_api

    native.blocks_clear()
    rng = np.random.default_rng(3)

    def batch() -> list:
        ms = []
        for _ in range(400):
            m = (rng.random((120, 160)) < 0.5).astype(np.uint8)
            ms.append({"size": [120, 160], "counts": mask_api.encode(np.asfortranarray(m))["counts"]})
        return ms

    one, two = batch(), batch()
    want_one = native.rle_decode_masks(one)[0]
    want_two = native.rle_decode_masks(two)[0]
    a = native.rle_lists_runs([one])[0]
    b = native.rle_lists_runs([two])[0]  # a alive: b has memory of its own
    assert isinstance(a, native.Block) and len(a) > 64 << 10
    assert bytes(a) == want_one[: len(a)] and bytes(b) == want_two[: len(b)]
    view = np.frombuffer(a, np.uint32)
    assert not view.flags.writeable
    del a
    assert native.blocks_pooled()[0] == 0  # the array still holds block a
    del view
    assert native.blocks_pooled()[0] == 1
    c = native.rle_lists_runs([two])[0]  # takes a's memory from the pool
    assert native.blocks_pooled()[0] == 0
    assert bytes(c) == bytes(b) and c.tobytes() == bytes(b)
    kept = [native.rle_lists_runs([one])[0] for _ in range(40)]
    del kept
    n, size = native.blocks_pooled()
    assert 0 < n <= 16 and size <= 32 << 20
    assert native.blocks_clear() == size and native.blocks_pooled() == (0, 0)


def test_reset_leaves_no_pooled_runs(monkeypatch):
    """The pool of mask runs lives for one evaluation: reset() after a segm compute() empties it, the stats
    unchanged by it."""
    preds, gts = detections(30, C, seed=4, masks=True, crowd=0.3)
    native.blocks_clear()
    monkeypatch.setenv("MMEVAL_COCO_NATIVE", "1")
    metric = COCODetection(metric="segm", dataset_meta={"classes": CLASSES}, print_results=False, classwise=True)
    for s in range(0, 30, 10):
        metric.add(preds[s : s + 10], gts[s : s + 10])
    metric._summarize_pending()  # the batches' runs matched and freed: into the pool
    assert native.blocks_pooled()[0] > 0
    result = metric.compute()
    metric.reset()
    assert native.blocks_pooled() == (0, 0)
    _same(result, _run(monkeypatch, "0", preds, gts, batch=10, metric="segm"))


def test_decoded_masks_are_the_given_masks():
    """A batch's masks kept as their runs (coco_mask_runs.DecodedMasks): each item a compressed RLE dict of the
    given mask's pixels and area, read by index, negative index and slice."""
    from pycocotools import mask as mask_api

    from mmeval.metrics.coco_mask_runs import DecodedMasks

    rng = np.random.default_rng(9)
    arrays = [
        (rng.random((int(rng.integers(1, 30)), int(rng.integers(1, 30)))) < 0.4).astype(np.uint8) for _ in range(9)
    ]
    from mmeval.metrics.coco_inputs_batched import _decoded_masks

    masks = [mask_api.encode(np.asfortranarray(a)) for a in arrays]
    # one batch of three images' lists (the second empty): each image's masks where the batch's runs hold them
    lists, d_at = [masks[:4], [], masks[4:]], [0, 4, 4, 9]
    got = _decoded_masks((lists, [None] * 3), d_at, [0, 0, 0, 0], True)
    assert got is not None and got[3:] == [None] * 3
    for runs, want_arrays, want in zip(got[:3], (arrays[:4], [], arrays[4:]), lists):
        decoded = DecodedMasks(runs)
        assert len(decoded) == len(want)
        for j, a in enumerate(want_arrays):
            assert np.array_equal(mask_api.decode(decoded[j]), a) and decoded[j]["size"] == list(a.shape)
            assert float(mask_api.area(decoded[j])) == float(mask_api.area(want[j])) == runs.area[j]
        if want:
            assert decoded[-1] == decoded[len(want) - 1] and decoded[1:3] == [decoded[1], decoded[2]]
        with pytest.raises(IndexError):
            decoded[len(want)]


@pytest.mark.parametrize("seed", [0, 1])
def test_segm_decodes_each_batch_in_one_call(monkeypatch, seed):
    """A batch of compressed RLE masks is checked and decoded by one rle_lists_runs call at add() (never mask
    list by mask list), and the stats are the pure path's bit for bit; with a garbled mask among them the
    batch is read list by list (the same stats where nothing is refused)."""
    preds, gts = detections(30, C, seed=seed, masks=True, crowd=0.3)
    pure = _run(monkeypatch, "0", preds, gts, metric="segm")
    calls = []
    lists_runs = native.rle_lists_runs
    monkeypatch.setattr(native, "rle_lists_runs", lambda lists: calls.append(len(lists)) or lists_runs(lists))

    def refuse(*args):
        raise AssertionError("a list of masks read alone")

    monkeypatch.setattr(native, "rle_masks_runs", refuse)
    _same(pure, _run(monkeypatch, "1", preds, gts, metric="segm"))
    assert calls and len(calls) == -(-30 // 7)


@pytest.mark.parametrize("seed", [0, 1])
def test_segm_reads_the_runs_of_add_and_equals_the_pure_path(monkeypatch, seed):
    """Compressed RLE masks are decoded once, at add(): the matching never calls rle_decode_masks for them, and
    the stats are the pure path's bit for bit; a polygon among them sends its image's lists back to the
    decoding at matching, with the same stats."""
    preds, gts = detections(40, C, seed=seed, masks=True, crowd=0.3)
    pure = _run(monkeypatch, "0", preds, gts, metric="segm")
    decoded = native.rle_decode_masks

    def refuse(rles):
        raise AssertionError("masks decoded again at matching")

    monkeypatch.setattr(native, "rle_decode_masks", refuse)
    _same(pure, _run(monkeypatch, "1", preds, gts, metric="segm"))
    calls = []
    monkeypatch.setattr(native, "rle_decode_masks", lambda rles: calls.append(len(rles)) or decoded(rles))
    i = next(i for i, g in enumerate(gts) if len(g["masks"]))
    h, w = gts[i]["masks"][0]["size"]
    gts = [dict(g) for g in gts]
    gts[i] = dict(gts[i], height=h, width=w, masks=[[[1.0, 1.0, 5.0, 1.0, 5.0, 5.0]]] + list(gts[i]["masks"][1:]))
    _same(_run(monkeypatch, "0", preds, gts, metric="segm"), _run(monkeypatch, "1", preds, gts, metric="segm"))
    assert calls  # that slice went through the decoding at matching


def test_refused_masks_are_named_the_same_way_with_the_kernels(monkeypatch):
    """A garbled RLE among good ones: the same error, naming the same mask, on both paths."""
    from mmeval.core.errors import MetricArgumentError

    preds, gts = detections(4, C, seed=3, masks=True)
    preds[2]["masks"][1] = dict(preds[2]["masks"][1], counts=b"0{")
    errors = []
    for use in ("0", "1"):
        monkeypatch.setenv("MMEVAL_COCO_NATIVE", use)
        metric = COCODetection(metric="segm", dataset_meta={"classes": CLASSES}, print_results=False, classwise=True)
        with pytest.raises(MetricArgumentError) as info:
            metric.add(preds, gts)
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "predictions[2]['masks'][1]" in errors[0]


def _kept_agrees(key: np.ndarray, score: np.ndarray, max_det: int) -> None:
    """native.kept against np.lexsort((place, -score, key)) and the first max_det of each key."""
    n = key.shape[0]
    order = np.lexsort((np.arange(n), -score, key))
    ks = key[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    want = order[rank < max_det]
    out = np.empty(n, dtype=np.int64)
    got = out[: native.kept(key.astype(np.int64), score, max_det, out)]
    assert np.array_equal(got, want)


@pytest.mark.parametrize("max_det", [1, 3, 100])
def test_kept_equals_the_pure_order_and_cut(max_det):
    """Ties of score (-0.0 and 0.0 among them) keep their places; NaN scores go last; a key of many
    detections (past the kernel's insertion sort); keys spanning far more values than detections, and
    negative ones (its merge sort of them all instead of a count by key)."""
    rng = np.random.default_rng(max_det)
    n = 3000
    key = np.sort(rng.integers(0, 40, n)) * 7 + rng.integers(0, 7, n)  # images in order, categories mixed
    score = rng.choice([0.0, -0.0, 0.25, 0.5, 0.5, 0.75, 1.0], n) * rng.choice([1.0, 1.0, 0.5], n)
    _kept_agrees(key, score, max_det)
    nan_score = np.where(rng.random(n) < 0.1, np.nan, score)
    _kept_agrees(key, nan_score, max_det)
    crowded = np.where(rng.random(n) < 0.3, 5, key)  # ~900 detections share key 5
    _kept_agrees(crowded, nan_score, max_det)
    _kept_agrees(key * 10**12 - 3 * 10**17, score, max_det)  # a span of ~3e14 values, negative keys
    _kept_agrees(np.zeros(0, dtype=np.int64), np.zeros(0), max_det)


def _accumulations_agree(monkeypatch, scores, cats, lens, states, npig, n_thr: int, max_dets) -> None:
    """The native accumulation (classwise AP and curves too) equals the pure one on these detections."""
    k_all = npig.shape[0]
    thrs = np.linspace(0.5, 0.95, n_thr)
    ranking = coco_accumulate.ranked(scores, cats, lens, k_all)
    fast_q = np.full((k_all, n_thr, 101), -1.0)
    fast = coco_accumulate.accumulate(ranking, states, npig, thrs, max_dets, True, fast_q)
    monkeypatch.setenv("MMEVAL_COCO_NATIVE", "0")
    pure_q = np.full((k_all, n_thr, 101), -1.0)
    pure = coco_accumulate.accumulate(ranking, states, npig, thrs, max_dets, True, pure_q)
    for f, p in zip((*fast, fast_q), (*pure, pure_q)):
        assert np.array_equal(f, p, equal_nan=True)


@pytest.mark.parametrize("n_thr", [10, 16, 20])
@pytest.mark.parametrize("max_dets", [(1, 10, 100), (1, 3, 5), (2, 7, 40)])
def test_accumulate_kernel_equals_the_pure_accumulation(monkeypatch, n_thr, max_dets):
    """native.accumulate (its bitmask pass at 40 and 64 rows, the byte-per-state pass past 64) against
    coco_accumulate's numpy path on random states: categories of 0 to ~300 detections (64-detection blocks and
    their ragged ends), images past the maxDets (detections no maxDet keeps), empty area ranges."""
    from mmeval.core.packed import trits_to_words

    rng = np.random.default_rng(n_thr * 100 + max_dets[-1])
    k_all, n_img = 7, 300
    lens = rng.integers(0, 12, n_img)
    cats = np.concatenate([np.sort(rng.integers(0, k_all, int(m))) for m in lens]).astype(np.uint8)
    n = int(lens.sum())
    scores = rng.choice([0.1, 0.2, 0.5, 0.9], n) + rng.random(n) * (rng.random(n) < 0.7)
    trits = rng.choice([0, 1, 2], size=(n, 4 * n_thr), p=[0.3, 0.3, 0.4]).astype(np.uint8)
    states = trits_to_words(trits)
    npig = rng.integers(0, 40, (k_all, 4))
    npig[2] = 0  # a category without ground truth
    npig[3, 1:] = 0  # one with some only at area 'all'
    _accumulations_agree(monkeypatch, scores, cats, lens, states, npig, n_thr, max_dets)


def _word_slot(word: int) -> int:
    """The slot of the accumulation kernel's cache of decoded state words that ``word`` lands in (its hash)."""
    return ((word * 0x9E3779B97F4A7C15) % 2**64) >> 56


@pytest.mark.parametrize("max_dets", [(1, 10, 100), (1, 3, 5)])
def test_accumulate_kernel_caches_nothing_stale(monkeypatch, max_dets):
    """The kernel's caches -- decoded state words (by a hash of the word), the recall points' needs (by the
    ground-truth count mod 64) and the maxDets that keep a whole category -- against the pure accumulation:
    a few distinct words, pairs of them sharing a cache slot in turn, the word 0 every slot starts with,
    counts sharing a needs slot (1, 65, 129, ...), categories of one detection an image and of many."""
    rng = np.random.default_rng(max_dets[1])
    n_thr, k_all, n_img = 10, 12, 500
    pool = [int(w) for w in rng.integers(1, 3**40, 50, dtype=np.uint64)]
    by_slot: Dict[int, int] = {}
    for w in rng.integers(1, 3**40, 300, dtype=np.uint64).tolist():  # ten pairs of words sharing a slot
        other = by_slot.setdefault(_word_slot(w), w)
        if other != w and len(pool) < 70:
            pool += [other, w]
    pool.append(0)
    # per image, categories of one detection (a maxDet of 1 keeps them all) and categories of many
    lens = rng.integers(0, 15, n_img)
    cats = np.concatenate(
        [
            np.sort(np.where(rng.random(int(m)) < 0.5, rng.integers(0, 4, int(m)), rng.integers(4, k_all, int(m))))
            for m in lens
        ]
    ).astype(np.uint8)
    few = np.flatnonzero(cats < 4)
    n = int(lens.sum())
    within = coco_accumulate.ranked(np.zeros(n), cats, lens, k_all)[1]
    keep = np.ones(n, dtype=bool)
    keep[few] = within[few] == 0  # categories 0-3: at most one detection an image
    lens = np.array([int(keep[a:b].sum()) for a, b in zip(np.r_[0, np.cumsum(lens)[:-1]], np.cumsum(lens))])
    cats, n = cats[keep], int(keep.sum())
    scores = rng.choice([0.1, 0.2, 0.5, 0.9], n) + rng.random(n) * (rng.random(n) < 0.7)
    # the words in runs (hits), the two of a slot in turn (a miss each time), the word 0 here and there
    pairs = [(a, b) for a in pool for b in pool if a != b and _word_slot(a) == _word_slot(b)]
    states = np.array(rng.choice(pool, n), dtype=np.uint64)
    a, b = pairs[0]
    states[::5] = np.where(np.arange(states[::5].shape[0]) % 2, a, b).astype(np.uint64)
    states[::7] = 0
    npig = rng.choice([0, 1, 65, 129, 2, 66, 3, 67], (k_all, 4))
    npig[:, 0] = np.maximum(npig[:, 0], 1)
    _accumulations_agree(monkeypatch, scores, cats, lens, states, npig, n_thr, max_dets)


def test_accumulate_kernel_refuses_recall_points_that_do_not_rise():
    """The kernel reads the envelope from the last recall point down (their needs rise with them): falling
    points are refused, not answered wrongly."""
    n = 4
    args = (
        np.arange(n, dtype=np.int32),
        np.zeros(n, dtype=np.int32),
        np.array([0, n], dtype=np.int64),
        np.zeros(n, dtype=np.uint64),
        np.ones(4, dtype=np.int64),
    )
    outs = (np.empty(10 * 4 * 1), np.empty(10 * 4 * 3, dtype=np.int32), None)
    ok = np.ascontiguousarray(coco_accumulate.REC_THRS)
    native.accumulate(*args, ok, 10, np.array([1, 10, 100]), np.array([2]), *outs)
    with pytest.raises(ValueError, match="recall points must rise"):
        native.accumulate(*args, ok[::-1].copy(), 10, np.array([1, 10, 100]), np.array([2]), *outs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ranked_equals_the_pure_ranking_at_every_category_size(monkeypatch, dtype):
    """Categories on both sides of the kernel's choice of radix digit (8 bits below 768 detections, 11 from
    there), and scores whose keys differ only in their high digits (the low passes skipped: an odd or an even
    number of passes) or not at all."""
    rng = np.random.default_rng(11)
    sizes = [1, 2, 3, 255, 256, 767, 768, 769, 2047, 2049, 5000]
    k_all = len(sizes)
    cats = np.repeat(np.arange(k_all), sizes)
    rng.shuffle(cats)
    n = cats.shape[0]
    lens = np.diff(np.r_[0, np.sort(rng.choice(np.arange(1, n), 300, replace=False)), n])
    starts = np.r_[0, np.cumsum(lens)[:-1]]
    cats = np.concatenate([np.sort(cats[a : a + m]) for a, m in zip(starts, lens)]).astype(np.uint16)
    for scores in (
        rng.random(n),
        2.0 ** rng.integers(-20, 20, n),  # float32 keys alike in their low 23 bits
        np.full(n, 0.5),
        rng.choice([0.25, 0.5, 0.75], n) * rng.choice([1.0, 1.0 + 2**-20], n),
    ):
        _rankings_agree(monkeypatch, scores.astype(dtype), cats, lens, k_all)


def test_gather_joins_the_summaries_columns_as_packed_columns_does():
    """native.gather against PackedColumns.column on blobs of bytes, bytearray and memoryview, empty rows
    included; a span past a blob is refused."""
    from mmeval.core.packed import PackedColumns, pack_arrays

    rng = np.random.default_rng(3)
    kinds = (bytes, bytearray, memoryview)
    blobs = [
        kinds[i % 3](pack_arrays(rng.random(m).astype(np.float32), rng.integers(0, 9, m).astype(np.uint8)))
        for i, m in enumerate(rng.integers(0, 20, 50))
    ]
    packed = PackedColumns(blobs, 2)
    for j in range(2):
        dtype, offsets, nbytes = packed.spans(j)
        out = np.empty(int(nbytes.sum()) // dtype.itemsize, dtype=dtype)
        native.gather(blobs, offsets, nbytes, out)
        assert np.array_equal(out, packed.column(j))
    with pytest.raises(ValueError, match="blob 0"):
        native.gather(blobs[:1], np.array([0], np.int64), np.array([10**6], np.int64), np.empty(10**6, np.uint8))


def test_pack_rows_gives_pack_manys_bytes():
    """pack_many joining its rows by native.pack_rows: the bytes of pack_arrays row by row (empty rows, every
    dtype the summaries hold, 1 to 6 columns); offsets past a column are refused."""
    from mmeval.core.packed import pack_arrays, pack_many

    rng = np.random.default_rng(11)
    dtypes = (np.float32, np.float64, np.uint8, np.uint16, np.uint64, np.int64)
    for trial in range(30):
        count, rows = int(rng.integers(1, 7)), int(rng.integers(0, 40))
        dts = [dtypes[i] for i in rng.integers(0, len(dtypes), count)]
        lengths = rng.integers(0, 9, (rows, count)) * (rng.random((rows, count)) < 0.8)
        cols = [(rng.random(int(lengths[:, j].sum())) * 200).astype(dt) for j, dt in enumerate(dts)]
        at = np.r_[[np.zeros(count, np.int64)], np.cumsum(lengths, axis=0)]
        want = [pack_arrays(*(c[at[i, j] : at[i + 1, j]] for j, c in enumerate(cols))) for i in range(rows)]
        assert pack_many(cols, lengths, native.pack_rows) == want, (trial, dts)
    with pytest.raises(ValueError, match="outside"):
        native.pack_rows(b"\0", 1, [b"ab"], np.array([0, 3], dtype=np.int64))


class _SubArray(np.ndarray):
    """An ndarray subclass: not a plain array."""


def _hostile_batch(rng: np.random.Generator, segm: bool) -> Any:
    """A batch of plain images, then some of them spoilt one way each: every dtype, strided views, ids of
    every kind, optional fields absent or None, values that fail a check, types that are not plain."""
    preds, gts = detections(int(rng.integers(1, 9)), C, seed=int(rng.integers(1 << 30)), masks=segm, crowd=0.3)
    dtypes = ["f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "q", "Q"]
    for p, g in zip(preds, gts):
        for d, key in ((p, "bboxes"), (p, "scores"), (p, "labels"), (g, "bboxes"), (g, "labels")):
            if rng.random() < 0.5:
                dt = dtypes[rng.integers(len(dtypes))]
                arr = np.asarray(d[key])
                if np.dtype(dt).kind in "iu" and key != "labels":
                    arr = np.round(arr)
                d[key] = arr.astype(dt)
            if rng.random() < 0.2 and d[key].ndim == 2:  # a strided view: every other column of a wider one
                wide = np.zeros((d[key].shape[0], 8), d[key].dtype)
                wide[:, ::2] = d[key]
                d[key] = wide[:, ::2]
        if rng.random() < 0.3:
            del g["ignore_flags"]
        elif rng.random() < 0.3:
            flags = np.asarray(g["ignore_flags"]) * (1, -1, 3, -0.0)[rng.integers(4)]  # any nonzero is crowd
            g["ignore_flags"] = flags.astype(("f8", "i1", "i4", "f4")[rng.integers(4)])
        pick = rng.integers(6)
        if pick == 0:
            p["img_id"] = np.int64(g["img_id"])
        elif pick == 1:
            g["img_id"] = np.uint16(g["img_id"])
        elif pick == 2:
            p["img_id"] = None
        elif pick == 3:
            del p["img_id"]
        if segm and rng.random() < 0.5:
            p["mask_scores"] = np.asarray(p["scores"], dtype=("f4", "f8", "u1")[rng.integers(3)])
    spoils = [
        lambda p, g: p.__setitem__("bboxes", p["bboxes"].astype(">f4")),
        lambda p, g: p.__setitem__("scores", p["scores"].astype(bool)),
        lambda p, g: p.__setitem__("labels", p["labels"].astype(object)),
        lambda p, g: p.__setitem__("labels", np.asarray(p["labels"], "f8") + 0.5),
        lambda p, g: p.__setitem__("labels", np.full(p["labels"].shape, C, "u8")),
        lambda p, g: g.__setitem__("labels", np.full(g["labels"].shape, -1, "i2")),
        lambda p, g: g.__setitem__("labels", np.full(g["labels"].shape, np.nan)),
        lambda p, g: g.__setitem__("bboxes", np.full(g["bboxes"].shape, np.inf, "f2")),
        lambda p, g: g.__setitem__("ignore_flags", None),
        lambda p, g: g.__setitem__("ignore_flags", np.full(g["labels"].shape, np.nan)),
        lambda p, g: g.__setitem__("ignore_flags", np.zeros((len(g["labels"]), 1))),
        lambda p, g: p.__setitem__("scores", p["scores"][:, None]),
        lambda p, g: p.__setitem__("bboxes", p["bboxes"][:, :3]),
        lambda p, g: p.__setitem__("img_id", True),
        lambda p, g: p.__setitem__("img_id", 1.0),
        lambda p, g: p.__setitem__("img_id", 10**30),
        lambda p, g: g.__setitem__("img_id", 10**30),
        lambda p, g: p.__setitem__("img_id", -7),
        lambda p, g: p.__setitem__("scores", p["scores"].view(_SubArray)),
        lambda p, g: p.__setitem__("scores", p["scores"].tolist()),
        lambda p, g: p.__setitem__("mask_scores", None),
        lambda p, g: p.pop("masks", None),
        lambda p, g: p.__setitem__("bboxes", np.datetime64("2020") + np.zeros((len(p["labels"]), 4), "i8")),
    ]
    for i in rng.choice(len(preds), size=min(len(preds), int(rng.integers(0, 3))), replace=False):
        spoils[int(rng.integers(len(spoils)))](preds[i], gts[i])  # one way per image
    if rng.random() < 0.05:
        preds[0] = type("Sub", (dict,), {})(preds[0])
    return preds, gts


@pytest.mark.parametrize("segm", [False, True])
def test_read_plain_is_the_pure_joining(segm):
    """The kernels' read_plain (one call an add()) gives what the pure _joined gives -- the same arrays, dtypes
    and bits, the same ids (ints), flags and masks -- or None exactly where it gives None, on 600 batches:
    plain ones of every dtype and id kind, strided views, and ones spoilt one way or another."""
    from mmeval.metrics import coco_inputs_batched as cib
    from mmeval.metrics.coco_inputs import Categories

    cats = Categories(list(range(C)), {i: f"c{i}" for i in range(C)})
    rng = np.random.default_rng(7)
    passed = 0
    for _ in range(600):
        preds, gts = _hostile_batch(rng, segm)
        want = cib._joined(preds, gts, cats, segm)
        got = native.read_plain(preds, gts, np.ndarray, np.integer, C, segm)
        assert (got is None) == (want is None)
        if want is None:
            continue
        passed += 1
        for x, y in zip(cib._native_joined(got), want):
            if isinstance(y, np.ndarray):
                assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
                assert x.flags.writeable
            elif y is None:
                assert x is None
            else:
                assert list(x) == list(y) and [type(v) for v in x] == [type(v) for v in y]
    assert 150 < passed < 550  # both kinds of batch were tried
    assert native.read_plain([], [], np.ndarray, np.integer, C, segm) is not None
    assert native.read_plain([{}], [], np.ndarray, np.integer, C, segm) is None


class _MeddlingId(np.int64):
    """An image id whose ``!=`` (and ``int()``) runs code that changes the batch: what a hostile caller can do
    between the steps of the reading."""

    meddle: Any = None

    def __ne__(self, other: Any) -> Any:
        type(self).meddle("ne")
        return np.int64(self) != other

    def __int__(self) -> int:
        type(self).meddle("int")
        return int(np.int64(self))


@pytest.mark.parametrize("segm", [False, True])
@pytest.mark.parametrize("when", ["ne", "int"])
@pytest.mark.parametrize(
    "act",
    [
        lambda p, g: p.pop("masks", None),
        lambda p, g: p.pop("bboxes", None),
        lambda p, g: p.__setitem__("mask_scores", np.ones(len(p["scores"]), np.float32)),
        lambda p, g: p.pop("mask_scores", None),
        lambda p, g: g.pop("masks", None),
        lambda p, g: p.clear(),
    ],
    ids=["del-masks", "del-boxes", "add-mask-scores", "del-mask-scores", "del-gt-masks", "clear"],
)
def test_read_plain_follows_the_pure_reading_when_ids_meddle(segm, when, act):
    """An id's ``!=`` or ``int()`` changing the dicts (of its own image and of an earlier one) while the batch is
    read: the kernel reads in the pure reading's order and holds what it read, so it gives what the pure
    reading gives (the same arrays or None, or the same exception) and never reads freed memory."""
    from mmeval.metrics import coco_inputs_batched as cib
    from mmeval.metrics.coco_inputs import Categories

    cats = Categories(list(range(C)), {i: f"c{i}" for i in range(C)})

    def batch() -> Any:
        preds, gts = detections(4, C, seed=3, masks=True)
        for p, g in zip(preds, gts):
            p["img_id"] = _MeddlingId(g["img_id"])
            if when == "int":
                del g["img_id"]  # the prediction's id is the image's: int() of it is taken
            if segm:
                p["mask_scores"] = np.asarray(p["scores"], np.float32)

        def meddle(point: str) -> None:
            if point == when:
                for i in (0, 2):
                    act(preds[i], gts[i])

        _MeddlingId.meddle = staticmethod(meddle)
        return preds, gts

    def outcome(read: Any) -> Any:
        preds, gts = batch()
        try:
            return read(preds, gts)
        except Exception as exc:  # the same exception either way
            return type(exc)

    want = outcome(lambda p, g: cib._joined(p, g, cats, segm))
    got = outcome(lambda p, g: native.read_plain(p, g, np.ndarray, np.integer, C, segm))
    if isinstance(want, type) or want is None:
        assert got == want or (got is None and want is None)
        return
    assert got is not None and not isinstance(got, type)
    for x, y in zip(cib._native_joined(got), want):
        if isinstance(y, np.ndarray):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
        elif y is None:
            assert x is None
        else:
            assert list(x) == list(y)
