"""COCODetection's precision-recall curves and ``plot()`` (issue 35, item 5).

The curves are pycocotools' own ``eval['precision'][:, :, :, 0, -1]`` (an independent reference: COCOeval
on the same data) to 1e-12, on one process and on 2 hub ranks (rank 0 holds them), on the pure numpy path
and, where mmeval-coco-native is installed (``tox -e coco-native``), on the C kernels; ``plot()`` draws
them with matplotlib's Agg backend.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Dict, Optional

import numpy as np
import pytest
from coco_reference import coco_json, cocoeval, detections
from hub_backend import run_ranks

from mmeval.core.errors import MetricArgumentError
from mmeval.metrics.coco_detection import COCODetection

pytest.importorskip("pycocotools")

C = 6
CLASSES = [f"cls{i}" for i in range(C)]
N = 37
TOL = 1e-12


def _paths() -> Any:
    """The pure path always; the C kernels where the optional distribution is installed."""
    out = [pytest.param("0", id="pure")]
    try:
        import mmeval_coco_native  # noqa: F401

        out.append(pytest.param("1", id="native"))
    except ImportError:
        pass
    return out


PATHS = _paths()


def _metric(**kwargs: Any) -> COCODetection:
    metric = COCODetection(dataset_meta={"classes": CLASSES}, print_results=False, **kwargs)
    metric.keep_curves = True
    return metric


def _one_process(native: str, preds, gts, **kwargs: Any) -> COCODetection:
    os.environ["MMEVAL_COCO_NATIVE"] = native
    try:
        metric = _metric(**kwargs)
        for s in range(0, len(preds), 8):
            metric.add(preds[s : s + 8], gts[s : s + 8])
        metric.compute()
    finally:
        os.environ.pop("MMEVAL_COCO_NATIVE", None)
    return metric


def _reference(preds, gts, metric: str, iou_thrs: Optional[Any] = None) -> np.ndarray:
    ev = cocoeval(coco_json(gts, CLASSES), preds, CLASSES, metric, iou_thrs)
    return np.asarray(ev.eval["precision"][:, :, :, 0, -1])


@pytest.mark.parametrize("native", PATHS)
@pytest.mark.parametrize(
    "kwargs",
    [{"metric": ["bbox", "segm", "proposal"]}, {"metric": "bbox", "iou_thrs": [0.3, 0.5, 0.75, 0.9]}],
    ids=["bbox-segm-proposal", "thresholds"],
)
def test_curves_are_pycocotools_precision(native, kwargs):
    preds, gts = detections(N, C, seed=3, masks="segm" in kwargs["metric"], crowd=0.3)
    metric = _one_process(native, preds, gts, **kwargs)
    curves = metric.pr_curves
    assert curves is not None and list(curves) == list(np.atleast_1d(kwargs["metric"]))
    for name, c in curves.items():
        want = _reference(preds, gts, name, kwargs.get("iou_thrs"))
        assert c.precision.shape == want.shape
        assert np.array_equal(c.precision < 0, want < 0), name  # the class without ground truth: -1 in both
        assert np.abs(c.precision - want).max() <= TOL, name
        assert c.recall.shape == (101,) and c.recall[-1] == 1.0


def test_curves_mean_is_the_reported_map():
    preds, gts = detections(N, C, seed=4)
    metric = _metric()
    metric.add(preds, gts)
    result = metric.compute()
    c = metric.pr_curves["bbox"]
    assert abs(float(c.curve(0.5).mean()) - result["bbox_mAP_50"]) <= TOL
    assert abs(float(c.curve(0.75).mean()) - result["bbox_mAP_75"]) <= TOL
    assert abs(float(c.curve().mean()) - result["bbox_mAP"]) <= TOL


def _ranks_worker(backend: Any, native: str) -> Dict[str, Any]:
    os.environ["MMEVAL_COCO_NATIVE"] = native
    preds, gts = detections(N, C, seed=3, masks=True, crowd=0.3)
    metric = _metric(metric=["bbox", "segm"], dist_backend=backend)
    mine = list(range(backend.rank, N, backend.world_size))
    for s in range(0, len(mine), 5):
        chunk = mine[s : s + 5]
        metric.add([preds[i] for i in chunk], [gts[i] for i in chunk])
    result = metric.compute(size=N)
    curves = metric.pr_curves
    return {"result": result, "curves": None if curves is None else {k: c.precision for k, c in curves.items()}}


@pytest.mark.parametrize("native", PATHS)
@pytest.mark.parametrize("ws", [1, 2])
def test_curves_over_ranks_are_one_process_and_pycocotools(native, ws):
    preds, gts = detections(N, C, seed=3, masks=True, crowd=0.3)
    one = _one_process(native, preds, gts, metric=["bbox", "segm"])
    out = run_ranks(_ranks_worker, ws, native, timeout=120)
    for rank in range(ws):
        status, value = out[rank]
        assert status == "ok", value
        if rank:
            assert value["curves"] is None  # the curves stay on rank 0, as the stats are made there
            continue
        for name in ("bbox", "segm"):
            got = value["curves"][name]
            assert np.array_equal(got, one.pr_curves[name].precision), name  # bit for bit one process
            assert np.abs(got - _reference(preds, gts, name)).max() <= TOL, name


def test_without_keep_curves_nothing_is_kept_and_plot_says_what_to_set():
    preds, gts = detections(12, C, seed=1)
    metric = COCODetection(dataset_meta={"classes": CLASSES}, print_results=False)
    metric.add(preds, gts)
    metric.compute()
    assert metric.pr_curves is None
    with pytest.raises(MetricArgumentError, match="keep_curves = True"):
        metric.plot()


def test_plot_draws_a_curve_per_iou_threshold(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    preds, gts = detections(N, C, seed=3)
    metric = _metric()
    metric.add(preds, gts)
    result = metric.compute()
    fig, ax = metric.plot()
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == [
        f"IoU=0.50 (AP {result['bbox_mAP_50']:.3f})",
        f"IoU=0.75 (AP {result['bbox_mAP_75']:.3f})",
        f"IoU=0.50:0.95 (AP {result['bbox_mAP']:.3f})",
    ]
    x, y = ax.get_lines()[0].get_data()
    assert len(x) >= 101 and float(np.max(y)) <= 1.0
    fig.savefig(tmp_path / "coco.png")
    assert (tmp_path / "coco.png").stat().st_size > 1000
    fig2, ax2 = metric.plot(classes=[0, 1])
    assert "2 of 6 categories" in ax2.get_title()
    with pytest.raises(MetricArgumentError, match="segm"):
        metric.plot("segm")
    import matplotlib.pyplot as plt

    plt.close(fig)
    plt.close(fig2)


def test_the_docs_picture_script_draws_it(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    out = tmp_path / "coco.png"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    script = os.path.join(root, "examples", "plot_coco_curves.py")
    proc = subprocess.run([sys.executable, script, str(out)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert os.path.isfile(os.path.join(root, "docs", "coco-pr-curves.png"))


def _half_keep_worker(backend: Any) -> Any:
    preds, gts = detections(8, C, seed=2)
    metric = COCODetection(dataset_meta={"classes": CLASSES}, print_results=False, dist_backend=backend)
    if backend.rank == 0:
        metric.keep_curves = True  # rank 1 does not: the curves are part of the question
    mine = list(range(backend.rank, 8, backend.world_size))
    metric.add([preds[i] for i in mine], [gts[i] for i in mine])
    try:
        return "ok", metric.compute(size=8)
    except Exception as exc:
        return type(exc).__name__, str(exc)


def test_keep_curves_on_one_rank_only_is_a_mismatch_naming_it():
    out = run_ranks(_half_keep_worker, 2, timeout=120, backend_kwargs={"timeout": 20.0})
    for rank in range(2):
        status, (kind, text) = out[rank]
        assert status == "ok", text
        assert kind == "CollectiveMismatchError" and "keep_curves" in text, (rank, kind, text)
