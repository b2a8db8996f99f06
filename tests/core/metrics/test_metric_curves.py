"""Precision-recall curves and ``plot()`` (issue 35, item 5): AveragePrecision and VOCMeanAP.

The curve of a class against scikit-learn's ``precision_recall_curve``; the area under it is the AP the
metric reports; VOC's kept curve gives its AP again; the curves over real ranks are rank 0's and equal one
process's; ``plot()`` draws one line per class (matplotlib's Agg backend) and, without matplotlib, names
the ``plot`` extra.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest
from hub_backend import run_ranks
from metric_helpers import class_scores

from mmeval.core.errors import MetricArgumentError
from mmeval.metrics.average_precision import AveragePrecision
from mmeval.metrics.curves import MAX_POINTS, pr_curve, thin
from mmeval.metrics.voc_map import VOCMeanAP

N, C = 300, 4


def _data(n: int = N, seed: int = 5):
    scores, labels = class_scores(n, C, seed)
    scores = np.round(scores, 1)  # ties: tied scores enter the ranking together
    return scores, np.eye(C, dtype=np.int64)[labels]


def test_a_class_curve_is_scikit_learns():
    from sklearn.metrics import precision_recall_curve

    scores, onehot = _data()
    for c in range(C):
        recall, precision = pr_curve(scores[:, c], onehot[:, c])
        p_ref, r_ref, _ = precision_recall_curve(onehot[:, c], scores[:, c])
        # scikit-learn: lowest threshold first, a last point (recall 0, precision 1) appended, and it may stop
        # at the first threshold reaching full recall: compare that stretch, highest threshold first
        ref_r, ref_p = r_ref[:-1][::-1], p_ref[:-1][::-1]
        np.testing.assert_allclose(recall[: ref_r.size], ref_r, rtol=0, atol=1e-15)
        np.testing.assert_allclose(precision[: ref_p.size], ref_p, rtol=0, atol=1e-15)
        assert recall[-1] == 1.0 and np.all(np.diff(recall) >= 0)


def test_the_kept_curves_give_the_reported_ap_and_plot(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    scores, onehot = _data()
    metric = AveragePrecision(average=None, dataset_meta={"classes": ["cat", "dog", "eel", "fox"]})
    with pytest.raises(MetricArgumentError, match="keep_curves = True"):
        metric.plot()
    metric.keep_curves = True
    metric.add(scores, onehot)
    result = metric.compute()
    curves = metric.pr_curves
    assert curves is not None and curves.names == ["cat", "dog", "eel", "fox"]
    for c in range(C):
        r, p = curves.recall[c], curves.precision[c]
        area = float(np.sum(np.diff(np.concatenate([[0.0], r])) * p))  # the step area: AP's definition
        assert round(area * 100, 4) == result["AP_classwise"][c]
        assert curves.ap[c] == pytest.approx(area, abs=1e-12)
    fig, ax = metric.plot()
    assert (
        len(ax.get_lines()) == C and ax.get_xlabel() == "recall" and "cat (AP" in ax.get_legend_handles_labels()[1][0]
    )
    fig.savefig(tmp_path / "ap.png")
    assert (tmp_path / "ap.png").stat().st_size > 1000
    _, ax2 = metric.plot(classes=[1])
    assert len(ax2.get_lines()) == 1


def test_a_long_curve_is_thinned_to_its_ends_and_max_points():
    r = np.linspace(0, 1, 10 * MAX_POINTS)
    tr, tp = thin(r, 1 - r)
    assert tr.size <= MAX_POINTS and tr[0] == 0.0 and tr[-1] == 1.0 and np.allclose(tp, 1 - tr)


def test_voc_keeps_its_curves_and_their_ap():
    from test_metric_voc_map import NUM_CLASSES, detections

    preds, gts = detections()
    metric = VOCMeanAP(num_classes=NUM_CLASSES, iou_thrs=(0.5, 0.75))
    metric.keep_curves = True
    metric.add(preds, gts)
    result = metric.compute()
    curves = metric.pr_curves
    assert curves is not None and len(curves.names) == NUM_CLASSES and "IoU 0.5" in curves.title
    assert np.mean(curves.ap) == pytest.approx(result["AP50"], abs=1e-12)
    for r, p in zip(curves.recall, curves.precision):
        assert r.size == p.size and np.all(np.diff(r) >= 0) and np.all((p >= 0) & (p <= 1))


def _ranks_worker(backend: Any) -> Any:
    scores, onehot = _data()
    metric = AveragePrecision(average=None, dist_backend=backend)
    metric.keep_curves = True
    mine = np.arange(backend.rank, N, backend.world_size)
    metric.add(scores[mine], onehot[mine])
    result = metric.compute(size=N)
    curves = metric.pr_curves
    return result, None if curves is None else [
        np.stack([r, p]).tolist() for r, p in zip(curves.recall, curves.precision)
    ]


def test_over_ranks_the_curves_are_rank_0s_and_equal_one_process():
    scores, onehot = _data()
    alone = AveragePrecision(average=None)
    alone.keep_curves = True
    alone.add(scores, onehot)
    want = alone.compute()
    out = run_ranks(_ranks_worker, 2, timeout=120)
    assert out[0][0] == "ok" and out[1][0] == "ok", out
    (result0, curves0), (result1, curves1) = out[0][1], out[1][1]
    assert result0 == result1 == want
    assert curves1 is None  # kept where compute_metric ran
    assert curves0 == [np.stack([r, p]).tolist() for r, p in zip(alone.pr_curves.recall, alone.pr_curves.precision)]


def test_without_matplotlib_plot_names_the_extra():
    code = textwrap.dedent("""
        import sys
        sys.modules["matplotlib"] = None  # not installed, as far as import is concerned
        import numpy as np
        from mmeval.core.errors import MissingExtraError
        from mmeval.metrics.average_precision import AveragePrecision
        m = AveragePrecision()
        m.keep_curves = True
        m.add(np.array([[0.9, 0.1], [0.2, 0.8]]), np.array([[1, 0], [0, 1]]))
        m.compute()
        try:
            m.plot()
        except MissingExtraError as exc:
            print(exc)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert "AveragePrecision.plot()" in out.stdout and "pip install 'mmeval-core[plot]'" in out.stdout, out


def test_the_docs_picture_script_draws_it(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    out = tmp_path / "pr.png"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    proc = subprocess.run(
        [sys.executable, os.path.join(root, "examples", "plot_pr_curves.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and os.path.isfile(os.path.join(root, "docs", "pr-curves.png"))
