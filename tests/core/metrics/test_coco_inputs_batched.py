"""COCODetection's batched input reading (coco_inputs.read_images) against reading image by image.

``read_images`` checks and converts a whole ``add()`` of plain numpy arrays at once; anything else, and
any batch with a bad value, goes image by image through ``read_image``. Both must give the same records
(every array's values and dtype) and the same error, naming the same image and field.
"""

from __future__ import annotations

from typing import Any, List

import numpy as np
import pytest
from coco_reference import detections

from mmeval.core.errors import MetricArgumentError
from mmeval.metrics.coco_inputs import Categories, ImageInputs, read_image, read_images

C = 6
CATS = Categories(list(range(C)), {i: f"c{i}" for i in range(C)})


def _one_by_one(preds: List[Any], gts: List[Any], metrics: List[str]) -> List[ImageInputs]:
    return [read_image(p, g, i, CATS, metrics, None, None, True, True) for i, (p, g) in enumerate(zip(preds, gts))]


def _arrays(im: ImageInputs) -> List[Any]:
    g = im.gts
    return [im.img_id, im.xywh, im.scores, im.det_labels, im.seg_scores, g.xywh, g.labels, g.area, g.crowd, g.idnz]


def _same(got: List[ImageInputs], want: List[ImageInputs]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        for x, y in zip(_arrays(a), _arrays(b)):
            if isinstance(y, np.ndarray):
                assert isinstance(x, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape
                assert np.array_equal(x, y)
            else:
                assert x == y and type(x) is type(y)
        assert a.det_rles == b.det_rles and a.gts.rles == b.gts.rles
        assert len(a.records) == len(b.records)


def _varied(masks: bool) -> Any:
    """The reference images, with dtypes, ids and optional fields varied from image to image."""
    preds, gts = detections(30, C, seed=4, masks=masks, crowd=0.3)
    for i, (p, g) in enumerate(zip(preds, gts)):
        p["bboxes"] = np.asarray(p["bboxes"], dtype=(np.float64, np.float32, np.float16)[i % 3])
        p["labels"] = np.asarray(p["labels"], dtype=(np.int64, np.uint8, np.int32)[i % 3])
        g["labels"] = np.asarray(g["labels"], dtype=(np.int64, np.int16)[i % 2])
        if i % 4 == 0:
            del g["ignore_flags"]
        if i % 5 == 0:
            p["img_id"] = np.int64(g["img_id"])
        if i % 6 == 0:
            p["img_id"] = None
        if masks and i % 2:
            p["mask_scores"] = np.asarray(p["scores"], dtype=np.float32)
    return preds, gts


@pytest.mark.parametrize("masks", [False, True])
def test_batched_reading_equals_image_by_image(monkeypatch, masks):
    pytest.importorskip("pycocotools")
    from mmeval.metrics import coco_inputs

    preds, gts = _varied(masks)
    metrics = ["bbox", "segm"] if masks else ["bbox"]
    want = _one_by_one(preds, gts, metrics)
    monkeypatch.setattr(coco_inputs, "read_image", None)  # the batched path alone reads these
    _same(read_images(preds, gts, CATS, metrics, None, None, True, True), want)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda p, g: p.__setitem__("bboxes", np.where(np.ones_like(p["bboxes"], bool), np.nan, p["bboxes"])),
        lambda p, g: p.__setitem__("labels", np.full_like(p["labels"], C)),
        lambda p, g: g.__setitem__("labels", np.full(g["labels"].shape, 0.5)),
        lambda p, g: g.__setitem__("ignore_flags", np.full(g["labels"].shape, np.inf)),
        lambda p, g: p.__setitem__("scores", p["scores"][:-1]),
        lambda p, g: p.__setitem__("img_id", 10**6),
        lambda p, g: p.__setitem__("bboxes", p["bboxes"].tolist()),
    ],
    ids=["nan-box", "label-out-of-range", "fractional-gt-label", "inf-flag", "short-scores", "id-mismatch", "list"],
)
def test_a_bad_image_is_named_as_image_by_image(spoil):
    """A bad value in image 17 (after good ones): the error image by image gives, or the same records."""
    preds, gts = detections(30, C, seed=5)
    i = next(j for j in range(17, 30) if len(preds[j]["labels"]) and len(gts[j]["labels"]))
    spoil(preds[i], gts[i])
    try:
        want = _one_by_one(preds, gts, ["bbox"])
    except MetricArgumentError as exc:
        with pytest.raises(MetricArgumentError) as info:
            read_images(preds, gts, CATS, ["bbox"], None, None, True, True)
        assert str(info.value) == str(exc) and f"[{i}]" in str(exc)
        return
    _same(read_images(preds, gts, CATS, ["bbox"], None, None, True, True), want)
