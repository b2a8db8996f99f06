"""Input that a native library would never return from, or fail on naming nothing, is refused at add() (issue 32,
item 4): a garbage RLE ``counts`` (pycocotools' mask IoU spun for minutes on one), a polygon with a NaN vertex
(shapely's GEOSException named no argument). The RLE decoder is checked against pycocotools' own encoder."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmeval.core.errors import MetricArgumentError
from mmeval.metrics.utils.rle_check import check_rle, decode_rle_counts

mask_util = pytest.importorskip("pycocotools.mask")


def _segm_batch(counts, size=(20, 20), field="pred"):
    from mmeval.metrics.coco_detection import COCODetection

    good = mask_util.encode(np.asfortranarray(np.pad(np.ones((5, 5), np.uint8), ((2, 13), (2, 13)))))
    bad = {"size": list(size), "counts": counts}
    box = np.array([[2.0, 2.0, 7.0, 7.0]])
    pred = {"img_id": 1, "bboxes": box, "scores": np.array([0.9]), "labels": np.array([0])}
    gt = {"img_id": 1, "bboxes": box, "labels": np.array([0]), "width": 20, "height": 20}
    pred["masks"] = [bad if field == "pred" else good]
    gt["masks"] = [bad if field == "gt" else good]
    metric = COCODetection(metric="segm", dataset_meta={"classes": ("a",)}, print_results=False)
    return metric, pred, gt


def _other_size_rle() -> bytes:
    return mask_util.encode(np.asfortranarray(np.ones((10, 10), np.uint8)))["counts"]  # 100 pixels, not 400


@pytest.mark.parametrize("field,where", [("pred", "predictions[0]['masks'][0]"), ("gt", "groundtruths[0]['masks'][0]")])
@pytest.mark.parametrize("counts", [b"garbage!!", b"\x00\x01", b"0000000000o", "_other_size"])
def test_a_garbage_rle_is_refused_at_add_naming_the_field(field, where, counts):
    counts = _other_size_rle() if counts == "_other_size" else counts
    metric, pred, gt = _segm_batch(counts, field=field)
    with pytest.raises(MetricArgumentError) as caught:
        metric.add([pred], [gt])
    assert where + "['counts']" in str(caught.value), str(caught.value)
    assert metric.num_results == 0


def test_a_bad_rle_size_and_a_nan_polygon_are_refused_naming_the_field():
    metric, pred, gt = _segm_batch(b"", size=(-3, 4))
    with pytest.raises(MetricArgumentError, match=r"predictions\[0\]\['masks'\]\[0\]\['size'\]"):
        metric.add([pred], [gt])
    metric, pred, gt = _segm_batch(b"", size=(0, 0))
    gt["masks"] = [[[2.0, 2.0, 7.0, np.nan, 7.0, 7.0]]]
    pred["masks"] = [mask_util.encode(np.asfortranarray(np.zeros((20, 20), np.uint8)))]
    with pytest.raises(MetricArgumentError, match=r"groundtruths\[0\]\['masks'\]\[0\]\[0\] holds NaN"):
        metric.add([pred], [gt])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.floats(0, 1), st.integers(0, 2**31 - 1))
def test_the_decoder_reads_what_pycocotools_encodes(h, w, density, seed):
    m = (np.random.default_rng(seed).random((h, w)) < density).astype(np.uint8)
    rle = mask_util.encode(np.asfortranarray(m))
    flat = m.ravel(order="F")
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(flat)) + 1, [flat.size]])
    runs = ([0] if flat[0] else []) + np.diff(bounds).tolist()
    assert decode_rle_counts(rle["counts"]).tolist() == runs
    assert check_rle(rle, "m") == (h, w)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=40), st.integers(1, 30), st.integers(1, 30))
def test_any_bytes_are_either_a_valid_rle_of_the_size_or_refused(raw, h, w):
    """What check_rle accepts, pycocotools decodes to a mask of that size (never a run past it)."""
    rle = {"size": [h, w], "counts": raw}
    try:
        check_rle(rle, "m")
    except MetricArgumentError:
        return
    assert mask_util.decode(rle).shape == (h, w)
    assert int(mask_util.area(rle)) <= h * w


def test_a_value_longer_than_pycocotools_reads_in_32_bits_is_refused():
    """A run written in 7 characters: pycocotools' decoder shifts each 5-bit chunk in a 32-bit int, so a 7th
    chunk is read otherwise there; its encoder never writes one under 2**29 pixels. Refused, never read two ways."""
    seven = bytes([48 + (5 | 0x20)] + [48 + 0x20] * 5 + [48])  # 5, spelled in 7 chunks (zeros above)
    with pytest.raises(MetricArgumentError, match=r"m\['counts'\].*spans 7 characters.*32 bits"):
        check_rle({"size": [4, 5], "counts": b"375" + seven}, "m")
    with pytest.raises(MetricArgumentError, match=r"m\['size'\].*32 bits"):
        check_rle({"size": [2**16, 2**16], "counts": [2**32]}, "m")
    # the same runs in pycocotools' own spelling pass
    assert check_rle(mask_util.frPyObjects({"size": [4, 5], "counts": [3, 7, 5, 5]}, 4, 5), "m") == (4, 5)


def test_hmean_iou_refuses_a_nan_vertex_naming_the_polygon():
    pytest.importorskip("shapely")
    from mmeval import HmeanIoU

    metric = HmeanIoU()
    good = [0, 0, 10, 0, 10, 10, 0, 10]
    with pytest.raises(MetricArgumentError, match=r"batch_pred_polygons\[0\]\[1\].*finite"):
        metric.add([[good, [0, 0, 10, 0, float("nan"), 10]]], [np.array([0.9, 0.8])], [[good]], [np.array([False])])
    with pytest.raises(MetricArgumentError, match=r"batch_gt_polygons\[0\]\[0\].*finite"):
        metric.add([[good]], [np.array([0.9])], [[[0, 0, float("inf"), 0, 10, 10]]], [np.array([False])])
    assert metric.num_results == 0
