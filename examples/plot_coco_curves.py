"""Draw COCODetection's precision-recall curves: the picture docs/coco-pr-curves.png shows.

Run from the repository root, with mmeval-core and its ``plot`` extra (matplotlib)::

    pip install './core[plot]'
    python examples/plot_coco_curves.py            # writes docs/coco-pr-curves.png
    python examples/plot_coco_curves.py out.png    # or elsewhere

The data are synthetic and seeded (the same picture every run): 300 images of boxes of 4 classes found
by a jittery detector whose boxes get looser class by class, with background boxes. Left: every
category, at IoU 0.5, 0.75 and the mean over 0.5:0.95 (pycocotools' AP of each is the mean of its curve);
right: the loosest class alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt
import numpy as np

from mmeval.metrics import COCODetection

CLASSES = ["cat", "dog", "eel", "fox"]


def detector(n: int = 300) -> COCODetection:
    rng = np.random.default_rng(2)
    preds, gts = [], []
    for i in range(n):
        m = int(rng.integers(1, 6))
        xy = rng.uniform(0, 300, (m, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(15, 120, (m, 2))], axis=1)
        labels = rng.integers(0, len(CLASSES), m)
        sizes = boxes[:, 2:] - boxes[:, :2]
        jitter = (0.02 + 0.05 * labels[:, None]) * np.repeat(sizes, 2, axis=1)  # harder classes: looser boxes
        found = boxes + rng.normal(0, 1, (m, 4)) * jitter
        noise = rng.uniform(0, 300, (2, 2))
        false = np.concatenate([noise, noise + rng.uniform(20, 80, (2, 2))], axis=1)
        preds.append(
            {
                "img_id": i,
                "bboxes": np.concatenate([found, false]),
                "scores": np.concatenate([rng.uniform(0.3, 1.0, m), rng.uniform(0.0, 0.7, 2)]),
                "labels": np.concatenate([labels, rng.integers(0, len(CLASSES), 2)]),
            }
        )
        gts.append({"img_id": i, "bboxes": boxes, "labels": labels, "width": 450, "height": 450})
    metric = COCODetection(dataset_meta={"classes": CLASSES}, print_results=False)
    metric.keep_curves = True  # plot() needs the curves of compute()
    metric.add(preds, gts)
    metric.compute()
    return metric


def main(out: Path) -> None:
    metric = detector()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6))
    metric.plot(ax=left)
    metric.plot(ax=right, classes=[CLASSES.index("fox")])
    right.set_title("COCODetection bbox: the class 'fox' alone")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(
        Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "docs" / "coco-pr-curves.png"
    )
