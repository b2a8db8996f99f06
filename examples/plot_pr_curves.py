"""Draw the precision-recall curves of AveragePrecision and VOCMeanAP: the picture docs/pr-curves.png shows.

Run from the repository root, with mmeval-core and its ``plot`` extra (matplotlib)::

    pip install './core[plot]'
    python examples/plot_pr_curves.py            # writes docs/pr-curves.png
    python examples/plot_pr_curves.py out.png    # or elsewhere

The data are synthetic and seeded (the same picture every run): 2,000 samples of a 4-class classifier
whose classes are not equally easy, and 200 images of boxes found by a jittery detector.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt
import numpy as np

from mmeval.metrics import AveragePrecision, VOCMeanAP

CLASSES = ["cat", "dog", "eel", "fox"]


def classifier(n: int = 2000) -> AveragePrecision:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, len(CLASSES), n)
    scores = rng.normal(size=(n, len(CLASSES)))
    scores[np.arange(n), labels] += np.array([2.5, 1.6, 1.0, 0.6])[labels]  # easy to hard
    metric = AveragePrecision(average=None, dataset_meta={"classes": CLASSES})
    metric.keep_curves = True  # plot() needs the curves of compute()
    metric.add(scores, np.eye(len(CLASSES), dtype=np.int64)[labels])
    metric.compute()
    return metric


def detector(n: int = 200) -> VOCMeanAP:
    rng = np.random.default_rng(1)
    preds, gts = [], []
    for _ in range(n):
        m = int(rng.integers(1, 5))
        xy = rng.uniform(0, 200, (m, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(20, 80, (m, 2))], axis=1)
        labels = rng.integers(0, len(CLASSES), m)
        found = boxes + rng.normal(0, 1 + 4 * labels[:, None], (m, 4))  # harder classes: looser boxes
        noise = rng.uniform(0, 200, (2, 2))
        false = np.concatenate([noise, noise + 40], axis=1)
        preds.append(
            {
                "bboxes": np.concatenate([found, false]),
                "scores": np.concatenate([rng.uniform(0.3, 1.0, m), rng.uniform(0.0, 0.6, 2)]),
                "labels": np.concatenate([labels, rng.integers(0, len(CLASSES), 2)]),
            }
        )
        gts.append({"bboxes": boxes, "labels": labels})
    metric = VOCMeanAP(num_classes=len(CLASSES), dataset_meta={"classes": CLASSES})
    metric.keep_curves = True
    metric.add(preds, gts)
    metric.compute()
    return metric


def main(out: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6))
    classifier().plot(ax=left)
    detector().plot(ax=right)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "docs" / "pr-curves.png")
